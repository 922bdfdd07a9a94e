"""The error of this package: a DseError (the CLI prints its message) that is also a ValueError (bad input)."""
from dse.core.errors import DseError


class TasksetError(DseError, ValueError):
    """Bad variant table, scenario, threshold or unit model; the message names the bad value and the valid choices."""
