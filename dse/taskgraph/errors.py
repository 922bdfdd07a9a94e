"""The error of this package: a DseError (the CLI prints its message) that is also a ValueError (bad input)."""
from dse.core.errors import DseError


class LayerMapError(DseError, ValueError):
    """Bad task graph, profile, mapping or evaluator input; the message names the bad value and the valid choices."""
