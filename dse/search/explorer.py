"""Pipeline cut-point explorer for one mapping option (thesis Sec. 3.5.1), global-only or full.

Global-only (used to pick the mapping option): Algorithm 2 at T0 without local search. Full: Algorithm
2 with Algorithm 3, rerun with T lowered greedily (T0, T0 - step, ...) until at least L local searches
ran in one run or T passes T_min; reruns are cheap because measurements are memoized. A single-stage
option (E) has no cuts to search: its configuration at the maximizer's bounds is measured once.
"""
from __future__ import annotations

import math
from typing import Mapping, Sequence

from dse.core.configuration import Configuration
from dse.core.errors import choices_error
from dse.search.candidates import candidate_cuts
from dse.search.global_search import global_search
from dse.search.initial import initial_tuple
from dse.search.params import check_bounds, search_config
from dse.search.result import StrategyResult
from dse.search.study import Measurer, Study, StudyView, as_study, score
from dse.search.settings import SearchSettings
from dse.search.space import SearchSpace
from dse.search.streams import stream_tuple

MODES = ("global", "full")


def _thresholds(settings: SearchSettings) -> list[float]:
    """T0, T0 - step, ... down to T_min (computed from the step count, so no float drift or -0.0)."""
    n = int(math.floor((settings.t0 - settings.t_min) / settings.t_step + 1e-9))
    return [round(settings.t0 - i * settings.t_step, 6) + 0.0 for i in range(n + 1)]


def explore_option(space: SearchSpace, evaluator: Measurer | Study, option: str, bounds: Mapping[str, int],
                   search_cfg: SearchSettings, mode: str = "global", initial: Sequence[int] | None = None, *,
                   base: Configuration) -> StrategyResult:
    """Explore the cut points of ``option``; ``initial`` reuses a tuple from an earlier run (then K = 1). The
    answer's ``extra`` is its ``option_record``."""
    if mode not in MODES:
        raise choices_error("explorer mode", mode, MODES)
    settings = search_cfg
    bounds = check_bounds(bounds)
    types = space.stages(option)
    tracker = StudyView(as_study(evaluator), "option-search" if mode == "global" else "full-search",
                      settings.max_tuples)
    streams = stream_tuple(types, bounds["streams"], dla_streams=settings.dla_streams, main_pe=space.main_pe)

    if len(types) == 1:  # nothing to cut: measure the option at the bounds
        cfg = search_config(base, option, (), streams, bounds, settings.pipeline_buffers)
        m = tracker.measure(cfg, "single")
        return StrategyResult(cfg, m, tracker.asked, option_record(
            option, mode, configs=len(tracker.seen), threshold=settings.t0, thresholds=[settings.t0],
            initial_how="none", trajectory=tracker.trajectory))

    init, how = initial_tuple(space, option, settings, reuse=initial)
    top_k = 1 if initial is not None else settings.top_k
    cands = candidate_cuts(space.feasible_cuts, settings.step_for(space.n_layers), include=init)

    best_cfg, best_m, outcome, used = None, None, None, settings.t0
    tried: list[float] = []
    for t in (_thresholds(settings) if mode == "full" else [settings.t0]):
        tried.append(t)
        outcome = global_search(space, tracker, base, option, streams, bounds, cands, init,
                                threshold=t, top_k=top_k, full=(mode == "full"),
                                pipeline_buffers=settings.pipeline_buffers)
        used = t
        if best_m is None or outcome.fps > score(best_m):
            best_cfg, best_m = outcome.config, outcome.measurement
        local_starts = outcome.extra["local_starts"]
        if mode == "global" or len(local_starts) >= settings.min_local_searches or tracker.exhausted:
            break
    return StrategyResult(best_cfg, best_m, tracker.asked, option_record(
        option, mode, top_k=outcome.extra["top_k"], tuples=sorted(t for t in tracker.tuples if t),
        configs=len(tracker.seen), local_searches=len(local_starts), threshold=used, thresholds=tried,
        initial=init, initial_how=how, candidates=cands, trajectory=tracker.trajectory))


def option_record(option: str, mode: str, *, top_k=(), tuples=(), configs: int = 0, local_searches: int = 0,
                  threshold: float = 0.0, thresholds=(), initial=(), initial_how: str = "", candidates=(),
                  trajectory=()) -> dict:
    """What exploring one option found and what it cost: the ``extra`` of its result."""
    return {"option": option, "mode": mode, "top_k": list(top_k), "tuples": list(tuples),
            "tuples_measured": len(tuples), "configs": configs, "local_searches": local_searches,
            "threshold": threshold, "thresholds": list(thresholds), "initial": tuple(initial),
            "initial_how": initial_how, "candidates": list(candidates), "trajectory": list(trajectory)}
