"""Knobs of the exploration (the guided search and the thesis' Sec. 3.5 method), built from the Hydra `search` group.

One frozen dataclass so a run records exactly which values it used (``to_dict``) and an unknown key
in a user's override is an error that names the valid keys, not a silently ignored typo.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Mapping

from dse.core.errors import DseError, choices_error
from dse.core.validate import bounded_int, check_keys

INITIAL_MODES = ("random", "balanced", "auto")
# model-guided (dse.search.guided; the default: it beats the thesis' search in BENCHMARKS.md "Guided search": more answers
# within 1 % of the exhaustive reference at a third of the board hours) | the thesis' search (Sec. 3.5)
STRATEGIES = ("guided", "proposed")
# the largest value of every count a user may set (the platform's limits bound the configurations further)
UPPER_BOUNDS = {"top_k": 1000, "min_local_searches": 1000, "max_pre": 256, "max_post": 256, "max_buffers": 4096,
                "max_streams": 64, "dla_streams": 64, "max_tuples": 100_000, "sample_step": 10_000,
                "guided_budget": 100_000, "guided_batch": 64, "guided_repeats": 100}
ZERO_ALLOWED = ("sample_step", "guided_repeats")


@dataclass(frozen=True)
class SearchSettings:
    """Defaults follow the thesis where it gives a value (K=10, L=10, T greedy from high to low)."""

    seed: int = 0
    strategy: str = "guided"
    # candidate cut set: feasible positions at least `sample_step` layers apart (0 = auto, ~n_layers/20)
    sample_step: int = 0
    top_k: int = 10                  # K of Algorithm 2 (1 when re-exploring from a reused tuple)
    t0: float = 0.95                 # first GPU-utilization threshold T
    t_step: float = 0.05             # greedy lowering step of T
    t_min: float = 0.0               # lowest T tried before giving up on reaching L local searches
    min_local_searches: int = 10     # L: local searches a full search must run
    epsilon: float = 0.01            # maximizer: relative FPS gain that counts as an improvement
    degradation: float = 0.01        # fine-tuner: allowed relative FPS loss while removing resources
    max_pre: int = 8
    max_post: int = 8
    max_buffers: int = 32
    max_streams: int = 8
    dla_streams: int = 2             # streams of a single-DLA stage (a PND stage gets twice this)
    dla_ratio: float = 2.8           # DLA/GPU time ratio assumed by the balanced initial tuple
    cpu_ratio: float = 10.0          # CPU/GPU time ratio assumed by the balanced initial tuple
    initial: str = "random"          # random | balanced (needs a GPU per-layer profile) | auto
    max_tuples: int = 2000           # safety budget of configurations one exploration may ask for
    # full search on every option whose global-phase FPS is within this fraction of the best one's (the
    # thesis refines only the best: 0); options a few % apart after the global phase often swap places
    refine_within: float = 0.03
    # cut search: a multi-stage candidate gets at least pre + post + all streams buffers (False: the
    # maximizer's bound everywhere, as in the thesis)
    pipeline_buffers: bool = True
    options: tuple[str, ...] = ()    # mapping options to explore; empty = all of the platform
    # a finished run directory whose per-option best cuts seed this search (K = 1: thesis Tables 3.8/3.9);
    # read by the workflow, never by a strategy
    reuse_from: str | None = None
    # guided strategy: at most this many cut tuples, measured this many per round (a board measures one at a
    # time: with one per round every pick sees every measurement before it, `python -m bench.guided_quality`); the relative noise
    # of one measurement (how far a single FPS may be from the configuration's mean): a number, or "auto"
    # (estimated from fresh re-runs of the maximizer's configuration: a board's noise is rarely known)
    guided_budget: int = 80
    guided_batch: int = 1
    guided_noise: float | str = "auto"
    # guided: the near-best measured tuples are ranked on this many fresh re-runs each, the fine-tuned answers on
    # batches of this many in a race (dse.search.race; 0: on their single search sample, which favours the
    # luckiest one)
    guided_repeats: int = 3
    # guided: a race's batches after its first run only while the search's re-runs cost at most this share of the
    # board time its measurements cost (the report's model, dse.search.board_time): on a host's CPU cores a re-run
    # costs what a measurement does, and races run to their cap at 5-15 % noise (`python -m bench.guided_quality --platform host-cpu`)
    guided_rerun_share: float = 1.0

    def __post_init__(self):
        object.__setattr__(self, "options", tuple(str(o) for o in (self.options or ())))
        if self.reuse_from is not None:
            object.__setattr__(self, "reuse_from", str(self.reuse_from))
            if not (Path(self.reuse_from) / "options").is_dir():
                raise DseError(f"reuse_from={self.reuse_from!r} is not a finished run directory (it has no "
                               f"options/ with per-option results)")
        if self.strategy not in STRATEGIES:
            raise choices_error("search.strategy", self.strategy, STRATEGIES)
        if self.reuse_from is not None and self.strategy != "proposed":
            raise DseError(f"reuse_from re-explores from an earlier run's per-option cuts with the thesis' search; "
                           f"add search.strategy=proposed (search.strategy={self.strategy} cannot reuse them)")
        if self.guided_noise != "auto" and (isinstance(self.guided_noise, (bool, str))
                                            or not 0 < self.guided_noise < 1):
            raise DseError(f"search.guided_noise must be 'auto' or a number in (0, 1), got {self.guided_noise!r}")
        if self.initial not in INITIAL_MODES:
            raise choices_error("search.initial", self.initial, INITIAL_MODES)
        for name, hi in UPPER_BOUNDS.items():
            bounded_int(getattr(self, name), f"search.{name}", 0 if name in ZERO_ALLOWED else 1, hi)
        for name in ("epsilon", "degradation", "t_step", "refine_within"):
            if not 0 <= getattr(self, name) < 1:
                raise DseError(f"search.{name} must be in [0, 1), got {getattr(self, name)}")
        if self.t_step == 0:
            raise DseError("search.t_step must be > 0")
        if not self.t_min <= self.t0:
            raise DseError(f"search.t_min ({self.t_min}) must not exceed search.t0 ({self.t0})")
        share = self.guided_rerun_share
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 <= share < math.inf:
            raise DseError(f"search.guided_rerun_share must be a number >= 0, got {self.guided_rerun_share!r}")
        if self.dla_ratio <= 0 or self.cpu_ratio <= 0:
            raise DseError("search.dla_ratio and search.cpu_ratio must be > 0")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> "SearchSettings":
        """Build from a plain dict or an OmegaConf node; unknown keys are errors."""
        d = dict(d or {})
        valid = {f.name for f in fields(cls)}
        check_keys(d, valid, "search setting")
        if "options" in d and d["options"] is not None:
            d["options"] = tuple(d["options"])
        return cls(**d)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["options"] = list(self.options)
        return d

    def with_(self, **changes) -> "SearchSettings":
        return SearchSettings(**{**asdict(self), **changes})

    def step_for(self, n_layers: int) -> int:
        """The sampling step s: the configured one, or about n_layers/20 (Fig. 3.7 samples 15 layers by 3)."""
        if self.sample_step:
            return self.sample_step
        return max(1, math.ceil(n_layers / 20))
