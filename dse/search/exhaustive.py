"""Exhaustive search: the ground truth on the sim for small networks.

Every feasible cut tuple of every option with at most ``max_cuts`` cuts, at the maximizer's bounds
and the proposed search's stream tuple, while the total stays under ``cap`` tuples; for a larger
network only the 1-cut options (and the single-stage ones). The best is then fine-tuned like the
proposed method's, so both answers are compared after the same fine-tuning.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Mapping, Sequence

from dse.core.configuration import Configuration
from dse.search.finetune import FinetuneResult, finetune
from dse.search.params import search_config
from dse.search.probe import Probe, as_probe, score
from dse.search.settings import SearchSettings
from dse.search.space import Evaluator, SearchSpace
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


@dataclass
class ExhaustiveResult:
    plan_sizes: dict[str, int]
    best_start: Configuration
    tuned: FinetuneResult
    left_out: tuple[str, ...] = ()        # options whose tuples were not swept (too many cuts or over the cap)

    @property
    def fps(self) -> float:
        return self.tuned.fps

    @property
    def coverage(self) -> str:
        """What the sweep covered, in words: a reference is only as exhaustive as this says."""
        swept = ", ".join(sorted(self.plan_sizes))
        text = f"every feasible cut tuple of {swept} ({sum(self.plan_sizes.values())} tuples)"
        return text + (f"; not swept: {', '.join(self.left_out)}" if self.left_out else "")

    def to_dict(self) -> dict:
        return {"tuples": self.plan_sizes, "left_out": list(self.left_out), "coverage": self.coverage,
                "best_start": self.best_start.to_dict(), "fps": self.fps}


def exhaustive_search(space: SearchSpace, evaluator: Evaluator | Probe, base: Configuration, options: Sequence[str],
                      bounds: Mapping[str, int], settings: SearchSettings, *, max_cuts: int = 2,
                      cap: int = 3000) -> ExhaustiveResult:
    probe = as_probe(evaluator)
    plan = plan_tuples(space, options, max_cuts, cap)
    best_cfg, best_fps = None, -1.0
    for option, tuples in plan.items():
        streams = stream_tuple(space.stages(option), bounds["streams"], dla_streams=settings.dla_streams,
                               main_pe=space.main_pe)
        for cuts in tuples:
            cfg = search_config(base, option, cuts, streams, bounds, settings.pipeline_buffers)
            fps = score(probe.measure(cfg, PHASE))
            if fps > best_fps:
                best_cfg, best_fps = cfg, fps
    tuned = finetune(space, probe, best_cfg, settings)
    return ExhaustiveResult({o: len(t) for o, t in plan.items()}, best_cfg, tuned,
                            tuple(o for o in options if o not in plan))
