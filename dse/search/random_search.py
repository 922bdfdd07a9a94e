"""Random search with a given budget (the proposed run's number of measured configurations).

Each sample: a random mapping option, a seeded random feasible cut tuple, random threads, buffers and
streams within the maximizer's bounds. Budget = distinct configurations asked for.
"""
from __future__ import annotations

import random
from typing import Mapping, Sequence

from dse.core.configuration import Configuration
from dse.core.errors import DseError
from dse.core.measurement import Measurement
from dse.search.ga_common import stream_cap
from dse.search.initial import random_tuple
from dse.search.params import make_config
from dse.search.study import Measurer, Study, as_study, score
from dse.search.result import StrategyResult
from dse.search.settings import SearchSettings
from dse.search.space import SearchSpace, stage_width

PHASE = "random"


def random_search(space: SearchSpace, evaluator: Measurer | Study, base: Configuration, options: Sequence[str],
                  bounds: Mapping[str, int], settings: SearchSettings, budget: int, seed: int = 0) -> StrategyResult:
    """``extra``: the budget."""
    if budget < 1:
        raise DseError(f"random search needs a budget >= 1, got {budget}")
    study = as_study(evaluator)
    mark = study.measured
    rng = random.Random(f"{seed}:random-search")
    options = [o for o in options if len(space.feasible_cuts) >= space.n_cuts(o)]
    asked: set[str] = set()
    best: Measurement | None = None
    tries = 0
    while len(asked) < budget and tries < 50 * budget:
        tries += 1
        option = rng.choice(options)
        types = space.stages(option)
        cuts = random_tuple(space, option, rng)
        streams = [rng.randint(stage_width(t), stream_cap(t, bounds, settings, space.main_pe)) for t in types]
        cfg = make_config(base, option, cuts, streams, pre=rng.randint(1, bounds["pre"]),
                          post=rng.randint(1, bounds["post"]), buffers=rng.randint(1, bounds["buffers"]))
        if cfg.hash in asked:
            continue
        asked.add(cfg.hash)
        m = study.measure(cfg, PHASE)
        if best is None or score(m) > score(best):
            best = m
    return StrategyResult(best.config, best, study.asked_since(mark), {"budget": budget})
