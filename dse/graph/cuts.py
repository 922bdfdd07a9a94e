"""Cut-tuple arithmetic that needs no ONNX: validation, stages, and counting feasible tuples by DP.

A cut position c (0..N-2) means "stage boundary after layer c". A tuple (c1 < c2 < ...) is feasible
when every position is individually feasible and, for consecutive cuts, c_{j+1} >= reach[c_j], where
reach[c] is the smallest position the next cut may take: c+1, or the highest consumer index of any
tensor crossing c (that consumer must sit in the very next stage). A tensor crossing two cuts always
violates the first of them, so checking consecutive pairs is exact.
"""
from __future__ import annotations

import operator
from bisect import bisect_left
from collections.abc import Iterable, Sequence

from dse.core.errors import DseError


def validate_cuts(cuts: Iterable[int] | int, n_layers: int) -> tuple[int, ...]:
    """The cut tuple as ints, or a DseError naming the bad position and the valid range."""
    if not hasattr(cuts, "__iter__"):
        cuts = (cuts,)
    try:
        values = tuple(operator.index(c) for c in cuts)
    except TypeError:
        raise DseError(f"cut positions must be integers, got {cuts!r}") from None
    last = n_layers - 2
    for c in values:
        if not 0 <= c <= last:
            if last < 0:
                raise DseError(f"cut position {c} out of range: a network of {n_layers} layer(s) cannot be cut")
            raise DseError(f"cut position {c} out of range: valid positions are 0..{last} "
                           f"(a cut after layer c; the network has {n_layers} layers)")
    for a, b in zip(values, values[1:]):
        if b <= a:
            raise DseError(f"cut positions must be strictly increasing, got {list(values)}")
    return values


def stage_of(cuts: Sequence[int], n_layers: int) -> list[int]:
    """Stage index of every layer: the number of cuts strictly before it."""
    return [bisect_left(cuts, i) for i in range(n_layers)]


def count_tuples(feasible: Sequence[bool], reach: Sequence[int], k: int) -> int:
    """Number of feasible k-cut tuples in O(k*P) (P = number of positions), without enumerating them.

    g[c] = number of ways to complete a tuple whose latest cut is c with the remaining cuts;
    one step adds a cut: g'[c] = sum of g[c'] over feasible c' >= reach[c] (a suffix sum).
    """
    k = operator.index(k)
    if k < 0:
        raise DseError(f"number of cuts must be >= 0, got {k}")
    if k == 0:
        return 1
    positions = len(feasible)
    ways = [1 if f else 0 for f in feasible]
    for _ in range(k - 1):
        suffix = [0] * (positions + 1)
        for c in range(positions - 1, -1, -1):
            suffix[c] = suffix[c + 1] + ways[c]
        ways = [suffix[min(positions, reach[c])] if feasible[c] else 0 for c in range(positions)]
    return sum(ways)
