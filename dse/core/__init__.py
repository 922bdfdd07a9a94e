"""The vocabulary every layer shares: errors, one configuration and its hash, one measurement."""
