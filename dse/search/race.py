"""Ranking near-equal configurations on fresh re-runs, with more re-runs only where the ranking is still in doubt.

The guided search answers the best of its fine-tuner's starts and tuned configurations on fresh re-runs,
``guided_repeats`` (3) of them each. At 3 % noise per run, three re-runs put the standard error of the difference
of two means at 2.4 %, so the pick among configurations 1-4 % apart is often wrong: in 8 of 36 guided searches on
the virtual Xavier at 3 % noise, a configuration the final ranking re-ran was at least 1 % faster (true FPS) than
the answer (session 40). The ranking therefore runs as a race: after each batch of ``repeats`` re-runs, a
configuration whose mean is more than ``RACE_Z`` standard errors of the difference under the leader's drops out,
and the rest get another batch. It stops when one is left, when ``RACE_Z`` standard errors are below
``RACE_RESOLUTION`` for every one left (at 1 % noise three re-runs already are: no extra batch), or after
``RACE_ROUNDS`` batches.
"""
from __future__ import annotations

import math
from typing import Sequence

from dse.configuration import Configuration
from dse.search.probe import Probe

RACE_Z = 2.0              # a configuration this many standard errors of the difference under the leader drops out
RACE_RESOLUTION = 0.02    # ... and the race stops once RACE_Z standard errors are below this (relative FPS)
RACE_ROUNDS = 4           # at most this many batches of re-runs per configuration


def race(probe: Probe, configs: Sequence[Configuration], phase: str, repeats: int, noise: float,
         first: int = 1, resolution: float = RACE_RESOLUTION) -> list[list[float]]:
    """Each configuration's re-run FPS (consecutive repeat indices from ``first``, ``repeats`` per batch, at most
    ``RACE_ROUNDS`` batches). ``noise``: the relative noise of one run; ``resolution``: the relative difference the
    race must resolve before it stops. Rank on the means: more re-runs went to the configurations near the
    leader."""
    runs = [probe.remeasure(c, phase, range(first, first + repeats)) for c in configs]
    if repeats < 1 or noise <= 0:
        return runs
    for batch in range(1, RACE_ROUNDS):
        means = [sum(r) / len(r) for r in runs]
        lead = max(range(len(configs)), key=lambda i: means[i])

        def doubt(i: int) -> float:       # RACE_Z standard errors of the relative difference to the leader
            return RACE_Z * noise * math.sqrt(1 / len(runs[i]) + 1 / len(runs[lead]))

        alive = [i for i in range(len(configs)) if i != lead and means[i] >= means[lead] * (1 - doubt(i))]
        if not alive or all(doubt(i) <= resolution for i in alive):
            break
        start = first + batch * repeats
        for i in (lead, *alive):
            runs[i] = runs[i] + probe.remeasure(configs[i], phase, range(start, start + repeats))
    return runs
