"""Pipeline cut-point explorer for one mapping option (thesis Sec. 3.5.1), global-only or full.

Global-only (used to pick the mapping option): Algorithm 2 at T0 without local search. Full: Algorithm
2 with Algorithm 3, rerun with T lowered greedily (T0, T0 - step, ...) until at least L local searches
ran in one run or T passes T_min; reruns are cheap because measurements are memoized. A single-stage
option (E) has no cuts to search: its configuration at the maximizer's bounds is measured once.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from dse.core.configuration import Configuration
from dse.core.errors import choices_error
from dse.core.measurement import Measurement
from dse.search.candidates import candidate_cuts
from dse.search.global_search import TopEntry, global_search
from dse.search.initial import initial_tuple
from dse.search.params import check_bounds, search_config
from dse.search.study import Measurer, Study, StudyView, TracePoint, as_study, score
from dse.search.settings import SearchSettings
from dse.search.space import SearchSpace
from dse.search.streams import stream_tuple

MODES = ("global", "full")


@dataclass
class OptionResult:
    """What exploring one mapping option found and what it cost."""

    option: str
    mode: str
    best_config: Configuration
    best: Measurement
    top_k: list[TopEntry] = field(default_factory=list)
    tuples: list[tuple[int, ...]] = field(default_factory=list)  # unique cut tuples this exploration measured
    configs: int = 0                 # unique configurations it asked for (cut tuples x stream tuples)
    local_searches: int = 0          # in the final run (the one whose T is reported)
    threshold: float = 0.0           # T used by the final run
    thresholds: list[float] = field(default_factory=list)
    initial: tuple[int, ...] = ()
    initial_how: str = ""
    candidates: list[int] = field(default_factory=list)
    trajectory: list[TracePoint] = field(default_factory=list)

    @property
    def fps(self) -> float:
        return score(self.best)

    @property
    def tuples_measured(self) -> int:
        return len(self.tuples)

    def to_dict(self) -> dict:
        return {
            "option": self.option, "mode": self.mode, "fps": self.fps,
            "best_config": self.best_config.to_dict(), "best_hash": self.best_config.hash,
            "top_k": [{"cuts": list(e.cuts), "fps": e.fps, "util": e.util} for e in self.top_k],
            "tuples": [list(t) for t in self.tuples], "tuples_measured": self.tuples_measured,
            "configs": self.configs, "local_searches": self.local_searches, "threshold": self.threshold,
            "thresholds": list(self.thresholds), "initial": list(self.initial), "initial_how": self.initial_how,
            "candidates": list(self.candidates),
            "trajectory": [{**tp._asdict(), "cuts": list(tp.cuts), "streams": list(tp.streams)}
                           for tp in self.trajectory],
        }


def _thresholds(settings: SearchSettings) -> list[float]:
    """T0, T0 - step, ... down to T_min (computed from the step count, so no float drift or -0.0)."""
    n = int(math.floor((settings.t0 - settings.t_min) / settings.t_step + 1e-9))
    return [round(settings.t0 - i * settings.t_step, 6) + 0.0 for i in range(n + 1)]


def explore_option(space: SearchSpace, evaluator: Measurer | Study, option: str, bounds: Mapping[str, int],
                   search_cfg: SearchSettings, mode: str = "global", initial: Sequence[int] | None = None, *,
                   base: Configuration) -> OptionResult:
    """Explore the cut points of ``option``; ``initial`` reuses a tuple from an earlier run (then K = 1)."""
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
        return OptionResult(option, mode, cfg, m, configs=len(tracker.seen), threshold=settings.t0,
                            thresholds=[settings.t0], initial_how="none", trajectory=tracker.trajectory)

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
    return OptionResult(
        option=option, mode=mode, best_config=best_cfg, best=best_m, top_k=outcome.extra["top_k"],
        tuples=sorted(t for t in tracker.tuples if t), configs=len(tracker.seen),
        local_searches=len(local_starts), threshold=used, thresholds=tried, initial=init,
        initial_how=how, candidates=cands, trajectory=tracker.trajectory)
