"""Moving cut-point tuples over a list of allowed positions (the shared step of Algorithms 2 and 3).

A move gives each cut a direction (-1 left, +1 right, 0 stay). One move steps the moving cuts one
position; when the result is infeasible it steps further in the same direction (infeasible tuples are
skipped, never measured) until it is feasible, leaves the position list, or runs into a neighbouring
cut (then there is no such move).
"""
from __future__ import annotations

from bisect import bisect_left
from typing import Callable, Sequence

Directions = tuple[int, ...]


def _index(positions: Sequence[int], cut: int, direction: int, k: int) -> int:
    """Index of the k-th allowed position from ``cut`` in ``direction`` (cut need not be a position)."""
    i = bisect_left(positions, cut)
    on_grid = i < len(positions) and positions[i] == cut
    if direction > 0:
        return i + k if on_grid else i + k - 1
    return i - k


def move(cuts: Sequence[int], directions: Directions, positions: Sequence[int],
         feasibility: Callable[[tuple[int, ...]], str | None]) -> tuple[int, ...] | None:
    """The nearest feasible tuple reached by moving ``cuts`` along ``directions``, or None."""
    if not any(directions):
        return None
    for k in range(1, len(positions) + 1):
        new = []
        for c, d in zip(cuts, directions):
            if d == 0:
                new.append(c)
                continue
            j = _index(positions, c, d, k)
            if j < 0 or j >= len(positions):
                return None
            new.append(positions[j])
        if any(a >= b for a, b in zip(new, new[1:])):
            return None
        t = tuple(new)
        if feasibility(t) is None:
            return t
    return None


def single(n_cuts: int, i: int, direction: int) -> Directions:
    return tuple(direction if j == i else 0 for j in range(n_cuts))
