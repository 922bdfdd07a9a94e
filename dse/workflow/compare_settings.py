"""The settings of rule `comparison` (the ``compare`` config group): which methods, their GA sizes, the repeats.

Apart from ``dse.workflow.compare`` so that planning a run, which validates them, imports nothing else of it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from omegaconf import OmegaConf

from dse.core.errors import choices_error
from dse.core.validate import check_keys
from dse.search.ga_common import GASettings

METHODS = ("Base(G)", "Base(D)", "Interleaved", "Interleaved+tuned", "Profiled", "Comprehensive GA",
           "Fine-tuning GA", "Exhaustive", "Random", "Optuna TPE", "Optuna random", "Proposed", "Guided")
SLUG = {"Base(G)": "base-g", "Base(D)": "base-d", "Interleaved": "interleaved", "Interleaved+tuned": "interleaved-tuned",
        "Profiled": "profiled", "Comprehensive GA": "comprehensive-ga", "Fine-tuning GA": "finetune-ga",
        "Exhaustive": "exhaustive", "Random": "random",
        "Optuna TPE": "optuna-tpe", "Optuna random": "optuna-random", "Proposed": "proposed",
        "Guided": "guided"}
OPTUNA_SAMPLERS = {"Optuna TPE": "tpe", "Optuna random": "random"}
# the two search.strategy values: the run's own is read from its phases, the other one runs in this job
RUN_STRATEGIES = {"Proposed": "proposed", "Guided": "guided"}


@dataclass
class CompareSettings:
    methods: tuple[str, ...] = METHODS
    # the measuring GAs run until converged (no better FPS for `stall` generations), capped by `generations`
    ga: GASettings = field(default_factory=lambda: GASettings(population=32, generations=100, stall=15))
    finetune_ga: GASettings = field(default_factory=lambda: GASettings(population=16, generations=40, stall=8))
    profiled_ga: GASettings = field(default_factory=lambda: GASettings(population=60, generations=60))
    target: float = 0.98     # "points to target": distinct points until FPS >= target x the best method's
    repeats: int = 5         # each method's answer re-run this often (fresh noise): the thesis' final 5 runs
    exhaustive_cap: int = 3000
    exhaustive_max_cuts: int = 2

    def to_dict(self) -> dict:
        return {"methods": list(self.methods), "ga": self.ga.to_dict(), "finetune_ga": self.finetune_ga.to_dict(),
                "profiled_ga": self.profiled_ga.to_dict(), "target": self.target, "repeats": self.repeats,
                "exhaustive_cap": self.exhaustive_cap, "exhaustive_max_cuts": self.exhaustive_max_cuts}

    @classmethod
    def from_dict(cls, node, seed: int = 0) -> "CompareSettings":
        d = OmegaConf.to_container(node, resolve=True) if node is not None and not isinstance(node, dict) else dict(node or {})
        check_keys(d, cls.__dataclass_fields__, "compare setting")
        out = cls()
        by_slug = {v: k for k, v in SLUG.items()}
        methods = tuple(by_slug.get(str(m), str(m)) for m in (d.get("methods") or out.methods))
        for m in methods:
            if m not in METHODS:
                raise choices_error("comparison method", m, METHODS)
        return cls(methods=methods,
                   ga=GASettings.from_dict(d.get("ga"), **{**out.ga.to_dict(), "seed": seed}),
                   finetune_ga=GASettings.from_dict(d.get("finetune_ga"), **{**out.finetune_ga.to_dict(), "seed": seed}),
                   profiled_ga=GASettings.from_dict(d.get("profiled_ga"), **{**out.profiled_ga.to_dict(), "seed": seed}),
                   exhaustive_cap=int(d.get("exhaustive_cap", out.exhaustive_cap)),
                   target=float(d.get("target", out.target)), repeats=int(d.get("repeats", out.repeats)),
                   exhaustive_max_cuts=int(d.get("exhaustive_max_cuts", out.exhaustive_max_cuts)))
