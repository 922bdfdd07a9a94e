"""Ranking near-equal configurations on fresh re-runs, with more re-runs only where the ranking is still in doubt.

The guided search answers the best of its fine-tuner's starts and tuned configurations on fresh re-runs,
``guided_repeats`` (3) of them each. At 3 % noise per run, three re-runs put the standard error of the difference
of two means at 2.4 %, so the pick among configurations 1-4 % apart is often wrong: in 8 of 36 guided searches on
the virtual Xavier at 3 % noise, a configuration the final ranking re-ran was at least 1 % faster (true FPS) than
the answer (session 40). The ranking therefore runs as a race: after each batch of ``repeats`` re-runs, two
configurations whose means lie within ``RACE_Z`` standard errors of their difference, and whose order changes what
the means decide (the leader; for the guided search's contenders, its two finalists), get another batch (run
round-robin, so a drift of the board's speed falls on all alike); a pair further apart, or one whose order changes
nothing (two near-equal tuples that both go on), is settled. It stops when every pair is settled, when ``RACE_Z``
standard errors are below the resolution (``RACE_RESOLUTION``; at 1 % noise three re-runs already are: no extra
batch), or after ``RACE_ROUNDS`` batches.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Collection, Sequence

from dse.configuration import Configuration
from dse.search.probe import Probe

RACE_Z = 2.0              # two configurations this many standard errors of their difference apart are settled
RACE_RESOLUTION = 0.02    # ... and the race stops once RACE_Z standard errors are below this (relative FPS)
RACE_ROUNDS = 4           # at most this many batches of re-runs per configuration


def race(probe: Probe, configs: Sequence[Configuration], phase: str, repeats: int, noise: float,
         first: int = 1, resolution: float = RACE_RESOLUTION,
         pick: Callable[[list[float]], Collection[int]] | None = None) -> list[list[float]]:
    """Each configuration's re-run FPS (consecutive repeat indices from ``first``, ``repeats`` per batch, run
    round-robin, at most ``RACE_ROUNDS`` batches). ``noise``: the relative noise of one run; ``resolution``: the
    relative difference the race must resolve before it stops; ``pick``: what the means decide (the indices it takes
    from them; by default the leader). Two configurations whose means lie within ``RACE_Z`` standard errors of their
    difference, and where the order of the two changes the pick, get another batch; the rest are settled. Rank on
    the means."""
    runs: list[list[float]] = [[] for _ in configs]
    _batch(probe, configs, runs, range(len(configs)), phase, repeats, first)
    if repeats < 1 or noise <= 0:
        return runs
    pick = pick or (lambda means: {max(range(len(means)), key=means.__getitem__)})
    for _ in range(1, RACE_ROUNDS):
        means = [sum(r) / len(r) for r in runs]
        doubt: set[int] = set()
        for i, j in itertools.combinations(range(len(configs)), 2):
            d = RACE_Z * noise * math.sqrt(1 / len(runs[i]) + 1 / len(runs[j]))
            if d <= resolution or abs(means[i] - means[j]) > d * max(means[i], means[j]):
                continue
            if _order_matters(pick, means, i, j):
                doubt.update((i, j))
        if not doubt:
            break
        _batch(probe, configs, runs, sorted(doubt), phase, repeats, first)
    return runs


def _batch(probe: Probe, configs: Sequence[Configuration], runs: list[list[float]], which: Sequence[int], phase: str,
           repeats: int, first: int) -> None:
    """``repeats`` more re-runs of each configuration in ``which`` (into ``runs``), round-robin: one run of each
    before the next of any, so a drift of the board's speed during the batch (a shared host's other tenants, a
    Jetson warming up) falls on all of them alike instead of on whichever ran last (session 53: on the 2-core VM one
    configuration ran 81-109 FPS within a race). Each configuration's repeat indices stay consecutive from
    ``first``, even after a batch it sat out."""
    for _ in range(repeats):
        for i in which:
            k = first + len(runs[i])
            runs[i].extend(probe.remeasure(configs[i], phase, range(k, k + 1)))


def _order_matters(pick: Callable[[list[float]], Collection[int]], means: list[float], i: int, j: int) -> bool:
    """Whether ``pick`` takes other configurations with ``i`` just above ``j`` than with ``j`` just above ``i`` (both at
    their mid-point, so a tie is a pair in doubt too)."""
    mid = (means[i] + means[j]) / 2
    eps = 1e-9 * max(abs(mid), 1.0)
    ahead, behind = list(means), list(means)
    ahead[i], ahead[j] = mid + eps, mid - eps
    behind[i], behind[j] = mid - eps, mid + eps
    return set(pick(ahead)) != set(pick(behind))
