"""What every genetic algorithm of the comparison shares: settings, DEAP types, cut repair.

DEAP does selection, crossover and the generational loop (``algorithms.eaSimple``); this module only
registers the fitness/individual types once and turns wished-for cut positions into a feasible tuple.
"""
from __future__ import annotations

import random
from bisect import bisect_left
from dataclasses import asdict, dataclass
from typing import Mapping, Sequence

from deap import base, creator

from dse.errors import DseError
from dse.search.space import SearchSpace


@dataclass(frozen=True)
class GASettings:
    """Population, generations and DEAP's crossover/mutation probabilities (small defaults: tests)."""

    population: int = 16
    generations: int = 10
    cxpb: float = 0.6
    mutpb: float = 0.3
    tournament: int = 3
    seed: int = 0

    def __post_init__(self):
        if self.population < 2 or self.generations < 0:
            raise DseError(f"GA needs population >= 2 and generations >= 0, got {self.population}/{self.generations}")
        if not (0 <= self.cxpb <= 1 and 0 <= self.mutpb <= 1):
            raise DseError(f"GA probabilities must be in [0, 1], got cxpb={self.cxpb} mutpb={self.mutpb}")

    @classmethod
    def from_dict(cls, d: Mapping | None, **defaults) -> "GASettings":
        d = {**defaults, **dict(d or {})}
        valid = set(cls.__dataclass_fields__)
        bad = [k for k in d if k not in valid]
        if bad:
            raise DseError(f"unknown GA setting(s) {bad}; valid: {', '.join(sorted(valid))}")
        return cls(**d)

    def to_dict(self) -> dict:
        return asdict(self)


def deap_types():
    """``creator.FitnessMax`` and ``creator.Individual`` (a list), created once per process."""
    if not hasattr(creator, "DseFitnessMax"):
        creator.create("DseFitnessMax", base.Fitness, weights=(1.0,))
    if not hasattr(creator, "DseIndividual"):
        creator.create("DseIndividual", list, fitness=creator.DseFitnessMax)
    return creator.DseFitnessMax, creator.DseIndividual


def repair_cuts(space: SearchSpace, wanted: Sequence[int], n: int, budget: int = 400) -> tuple[int, ...] | None:
    """The feasible ``n``-cut tuple closest to ``wanted`` (depth-first over nearby feasible positions).

    Each cut tries the feasible positions nearest its wish, in order of distance; the search stops after
    ``budget`` feasibility checks. None when no feasible tuple was found (sparse feasibility)."""
    if n == 0:
        return ()
    pos = space.feasible_cuts
    if len(pos) < n:
        return None
    wanted = sorted(int(w) for w in wanted)[:n]
    while len(wanted) < n:
        wanted.append(wanted[-1] if wanted else pos[0])
    checks = [0]

    def near(target: int, lo: int) -> list[int]:
        i = bisect_left(pos, target)
        left, right, out = i - 1, i, []
        while len(out) < 6 and (left >= 0 or right < len(pos)):
            cand = []
            if right < len(pos):
                cand.append(pos[right])
            if left >= 0:
                cand.append(pos[left])
            cand.sort(key=lambda c: abs(c - target))
            out.extend(c for c in cand if c > lo)
            left, right = left - 1, right + 1
        return out

    def dfs(prefix: tuple[int, ...]) -> tuple[int, ...] | None:
        k = len(prefix)
        if k == n:
            checks[0] += 1
            return prefix if space.feasibility(prefix) is None else None
        for c in near(wanted[k], prefix[-1] if prefix else -1):
            if checks[0] >= budget:
                return None
            found = dfs(prefix + (c,))
            if found is not None:
                return found
        return None

    return dfs(())


def ga_rng(settings: GASettings, salt: str) -> random.Random:
    return random.Random(f"{settings.seed}:{salt}")
