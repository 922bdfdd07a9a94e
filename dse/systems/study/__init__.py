"""Design studies: grids of explorations run as one workflow and merged into one table."""
