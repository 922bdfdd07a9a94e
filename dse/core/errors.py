"""One exception type for user-facing errors: the CLI prints its message, not a traceback."""


class DseError(Exception):
    """A bad input or an impossible request, explained in the message (name the bad value and the valid choices)."""


def choices_error(what: str, value, valid) -> DseError:
    """The standard 'unknown X' error, listing the valid choices."""
    valid = sorted(str(v) for v in valid)
    return DseError(f"unknown {what} {value!r}; valid choices: {', '.join(valid)}")


class BuildRefused(DseError):
    """The toolkit rejects a stage (TensorRT cannot parse or place it): a fact about the configuration, so the
    measurement is recorded as refused and cached, unlike a build that failed for a reason that may pass."""
