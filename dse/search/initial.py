"""The initial cut-point tuple of Algorithm 2 (thesis Sec. 3.5.1).

Three sources: a seeded random ordered feasible tuple (what the thesis used on Xavier, where DLAs
cannot be profiled per layer), a tuple that balances stage times from a GPU per-layer profile
(non-GPU stages assumed ``dla_ratio``/``cpu_ratio`` times slower, a PND stage twice as fast as one
DLA), or a tuple reused from an earlier exploration with other fixed parameters.
"""
from __future__ import annotations

import itertools
import random
from bisect import bisect_left
from typing import Sequence

from dse.core.errors import DseError
from dse.search.settings import SearchSettings
from dse.search.space import SearchSpace, stage_width

_RANDOM_TRIES = 2000
_SCAN_LIMIT = 200_000


def option_rng(seed: int, option: str, salt: str = "initial") -> random.Random:
    """A generator that depends only on (seed, option): reproducible and independent per option."""
    return random.Random(f"{seed}:{option}:{salt}")


def random_tuple(space: SearchSpace, option: str, rng: random.Random) -> tuple[int, ...]:
    n = space.n_cuts(option)
    if n == 0:
        return ()
    positions = space.feasible_cuts
    if len(positions) < n:
        raise DseError(f"option {option!r} needs {n} cut(s) but the network has only "
                       f"{len(positions)} feasible cut position(s)")
    for _ in range(_RANDOM_TRIES):
        t = tuple(sorted(rng.sample(positions, n)))
        if space.feasibility(t) is None:
            return t
    # sparse feasibility (long skip connections): scan systematically from a random rotation
    start = rng.randrange(len(positions))
    rotated = positions[start:] + positions[:start]
    for combo in itertools.islice(itertools.combinations(rotated, n), _SCAN_LIMIT):
        t = tuple(sorted(combo))
        if space.feasibility(t) is None:
            return t
    raise DseError(f"no feasible cut-point tuple with {n} cut(s) found for option {option!r}")


def stage_slowdown(stage_type: str, main_pe: str, dla_ratio: float, cpu_ratio: float) -> float:
    if stage_type == main_pe:
        return 1.0
    if stage_type in ("DLA", "PND"):
        return dla_ratio / stage_width(stage_type)
    return cpu_ratio


def balanced_tuple(space: SearchSpace, option: str, profile: Sequence[float], *, dla_ratio: float,
                   cpu_ratio: float = 10.0) -> tuple[int, ...] | None:
    """Cuts that give every PE the same estimated busy time; None if no feasible tuple is near."""
    types = space.stages(option)
    n = len(types) - 1
    if n == 0:
        return ()
    if len(profile) != space.n_layers:
        raise DseError(f"GPU layer profile has {len(profile)} entries for a network of {space.n_layers} layers")
    n_main = sum(1 for t in types if t == space.main_pe)
    # stages on the main PE share it, so each gets 1/n_main of its speed
    speeds = [(1.0 / n_main) if t == space.main_pe
              else 1.0 / stage_slowdown(t, space.main_pe, dla_ratio, cpu_ratio) for t in types]
    total_speed = sum(speeds)
    cumulative = list(itertools.accumulate(float(x) for x in profile))
    total = cumulative[-1]
    targets, acc = [], 0.0
    for s in speeds[:-1]:
        acc += s / total_speed
        i = bisect_left(cumulative, acc * total)
        targets.append(min(i, space.n_layers - 2))
    return nearest_feasible(space, targets)


def nearest_feasible(space: SearchSpace, targets: Sequence[int], width: int = 8) -> tuple[int, ...] | None:
    """The feasible tuple closest (sum of distances) to ``targets`` among nearby positions."""
    positions = space.feasible_cuts
    near = [sorted(positions, key=lambda p: (abs(p - t), p))[:width] for t in targets]
    for combo in sorted(itertools.product(*near), key=lambda c: (sum(abs(a - b) for a, b in zip(c, targets)), c)):
        if space.feasibility(combo) is None:
            return tuple(combo)
    return None


def initial_tuple(space: SearchSpace, option: str, settings: SearchSettings,
                  reuse: Sequence[int] | None = None) -> tuple[tuple[int, ...], str]:
    """(tuple, how): how is "reused", "balanced" or "random"."""
    n = space.n_cuts(option)
    if reuse is not None:
        t = tuple(int(c) for c in reuse)
        if len(t) != n:
            raise DseError(f"reused cut tuple {list(t)} has {len(t)} cut(s); option {option!r} needs {n}")
        why = space.feasibility(t)
        if why is not None:
            raise DseError(f"reused cut tuple {list(t)} is infeasible for this network: {why}")
        return t, "reused"
    if settings.initial in ("balanced", "auto") and space.gpu_layer_profile is not None:
        t = balanced_tuple(space, option, space.gpu_layer_profile(), dla_ratio=settings.dla_ratio,
                           cpu_ratio=settings.cpu_ratio)
        if t is not None:
            return t, "balanced"
    elif settings.initial == "balanced":
        raise DseError("search.initial=balanced needs a GPU per-layer profile, which this backend does not "
                       "offer; valid choices here: auto, random")
    return random_tuple(space, option, option_rng(settings.seed, option)), "random"
