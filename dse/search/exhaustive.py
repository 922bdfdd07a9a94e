"""Exhaustive search: the ground truth on the sim for small networks.

Every feasible cut tuple of every option with at most ``max_cuts`` cuts, at the maximizer's bounds
and the proposed search's stream tuple, while the total stays under ``cap`` tuples; for a larger
network only the 1-cut options (and the single-stage ones). The best is then fine-tuned like the
proposed method's, so both answers are compared after the same fine-tuning.
"""
from __future__ import annotations

import itertools
from typing import Mapping, Sequence

from dse.core.configuration import Configuration
from dse.search.finetune import finetune
from dse.search.params import search_config
from dse.search.study import Measurer, Study, as_study, score
from dse.search.result import StrategyResult
from dse.search.settings import SearchSettings
from dse.search.space import SearchSpace
from dse.search.streams import stream_tuple

PHASE = "exhaustive"


def feasible_tuples(space: SearchSpace, n: int, limit: int | None = None) -> list[tuple[int, ...]]:
    """All feasible ordered ``n``-cut tuples (stops once more than ``limit`` were found)."""
    out = []
    for t in itertools.combinations(space.feasible_cuts, n):
        if space.feasibility(t) is None:
            out.append(t)
            if limit is not None and len(out) > limit:
                break
    return out


def plan_tuples(space: SearchSpace, options: Sequence[str], max_cuts: int = 2,
                cap: int = 3000) -> dict[str, list[tuple[int, ...]]]:
    """Option -> the tuples to measure; options above ``max_cuts`` cuts are left out, and 2-cut options
    too when all tuples together would pass ``cap``."""
    by_n: dict[int, list[tuple[int, ...]]] = {}
    plan: dict[str, list[tuple[int, ...]]] = {}
    for n in sorted({space.n_cuts(o) for o in options}):
        if n <= max_cuts:
            by_n[n] = feasible_tuples(space, n, limit=cap)
    for n in sorted(by_n, reverse=True):
        total = sum(len(by_n[k]) * sum(1 for o in options if space.n_cuts(o) == k) for k in by_n)
        if total <= cap or n <= 1:
            break
        del by_n[n]
    for o in options:
        if space.n_cuts(o) in by_n:
            plan[o] = by_n[space.n_cuts(o)]
    return plan


def coverage(plan_sizes: Mapping[str, int], left_out: Sequence[str] = ()) -> str:
    """What the sweep covered, in words: a reference is only as exhaustive as this says."""
    swept = ", ".join(sorted(plan_sizes))
    text = f"every feasible cut tuple of {swept} ({sum(plan_sizes.values())} tuples)"
    return text + (f"; not swept: {', '.join(left_out)}" if left_out else "")


def exhaustive_search(space: SearchSpace, evaluator: Measurer | Study, base: Configuration, options: Sequence[str],
                      bounds: Mapping[str, int], settings: SearchSettings, *, max_cuts: int = 2,
                      cap: int = 3000) -> StrategyResult:
    """The best swept tuple, fine-tuned. ``extra``: tuples swept per option (``tuples``), the options not swept
    (too many cuts or over the cap: ``left_out``), ``coverage`` in words and the best swept configuration
    (``best_start``)."""
    study = as_study(evaluator)
    mark = study.measured
    plan = plan_tuples(space, options, max_cuts, cap)
    best_cfg, best_fps = None, -1.0
    for option, tuples in plan.items():
        streams = stream_tuple(space.stages(option), bounds["streams"], dla_streams=settings.dla_streams,
                               main_pe=space.main_pe)
        for cuts in tuples:
            cfg = search_config(base, option, cuts, streams, bounds, settings.pipeline_buffers)
            fps = score(study.measure(cfg, PHASE))
            if fps > best_fps:
                best_cfg, best_fps = cfg, fps
    tuned = finetune(space, study, best_cfg, settings)
    sizes = {o: len(t) for o, t in plan.items()}
    left_out = [o for o in options if o not in plan]
    return StrategyResult(tuned.config, tuned.measurement, study.asked_since(mark),
                          {"tuples": sizes, "left_out": left_out, "coverage": coverage(sizes, left_out),
                           "best_start": best_cfg.to_dict()})
