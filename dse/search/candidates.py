"""The candidate cut set of the global search (thesis Fig. 3.7 a).

Feasible single-cut positions sampled regularly, at least ``step`` layers apart, plus the initial
tuple's cuts so the global search can start from (and come back to) them.
"""
from __future__ import annotations

from typing import Iterable, Sequence


def candidate_cuts(feasible: Sequence[int], step: int, include: Iterable[int] = ()) -> list[int]:
    positions = sorted(set(int(c) for c in feasible))
    sampled: list[int] = []
    for c in positions:
        if not sampled or c - sampled[-1] >= step:
            sampled.append(c)
    return sorted(set(sampled) | {int(c) for c in include})
