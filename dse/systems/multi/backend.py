"""Step 1's board measurements as a ``dse.backends.base.Backend``: the sim board's task profiling mode
(``dse.backends.sim.profile``) behind the one evaluator, so that every candidate mapping of a network is a row of
``<case>/cache/step1-<net>.parquet`` in the store's schema, queryable with every other target's rows.

A candidate is its pipeline configuration (``dse.systems.multi.pareto.config_of``: one frame in flight). Its
measurement holds what the schema has fields for: ``latency_ms_p50`` the frame's chain time (the sum of its tasks'
ACETs, pre- and post-processing included), ``fps`` one over it (with one frame in flight the period is the chain),
``stage_ms`` the ACET of each pipeline stage, ``energy_j_per_frame`` the dynamic energy of one frame (GPU, DLAs and
CPU) and ``power_w`` that energy over the chain time (a profile has no static part: the power fit models it), and
the plan's DLA loadables and fallback. A candidate whose DLA stage falls back to the GPU is ``refused`` with the
reason: the analysis assumes one task per DLA stage.

The per-task tables (WCET/ACET/BCET per kernel) and the per-processor busy times and energies the objectives read
have no field in the schema: ``take_profile(config)`` hands over the ``TaskProfile`` itself, kept in memory per
configuration hash from the measurement that took it, so that a job reads the profile of what it measured without
profiling it again. Where the store answered instead, ``take_profile`` profiles: the profile is deterministic (its
noise is seeded by the seed, the configuration hash and the run index) and cheap (one draw of runs x tasks, no
simulation).

The runs and the WCET rule are measurement settings, so they are part of the measurement context: a candidate's
short profile (the objectives) and its long one (a front member's WCETs) share a configuration hash and a file.

The deploy job's periodic runs go the same way (``dse.backends.sim.deployment``), each run a row of
``<case>/cache/deploy-<fsm>-<method>.parquet``.
"""
from __future__ import annotations

import hashlib
import json
import time
from typing import TYPE_CHECKING, ClassVar

from dse.backends.base import MeasureSettings
from dse.core.configuration import Configuration
from dse.core.measurement import Measurement
from dse.platform import Platform

if TYPE_CHECKING:
    from dse.backends.sim.profile import TaskProfile


class TaskProfileBackend:
    """Profiles one network's candidate mappings on a ``SimBackend`` with ``runs`` runs per task and a WCET rule."""

    name: ClassVar[str] = "sim-profile"
    capabilities: ClassVar[frozenset[str]] = frozenset()
    engine_cache = None      # profiling costs stages, it builds no engines

    def __init__(self, board, runs: int, wcet_rule: str):
        self.validate(board.platform, board.settings)
        self.board, self.platform, self.settings = board, board.platform, board.settings
        self.runs, self.wcet_rule = int(runs), str(wcet_rule)
        self._kept: dict[tuple[str, int], tuple[Measurement, TaskProfile | None]] = {}

    @classmethod
    def validate(cls, platform: Platform, settings: MeasureSettings) -> None:
        from dse.backends.sim import SimBackend

        SimBackend.validate(platform, settings)

    @property
    def context(self) -> str:
        """Digest of what a profile depends on besides its configuration: the case's platform (its pre/post costs
        and task-time model included), the measure settings (the seed, the pre-processing), the runs and the rule."""
        text = json.dumps({"platform": self.platform.raw, "measure": self.settings.to_dict(),
                           "profile": {"runs": self.runs, "wcet_rule": self.wcet_rule}}, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def _plan(self, config: Configuration):
        reason = self.board.check(config)
        if reason is not None:
            return None, reason
        planned = self.board.plan(config)
        if planned.fallback_layers:
            return planned, f"{planned.fallback_layers} DLA layer(s) fall back to the GPU"
        return planned, None

    def check(self, config: Configuration) -> str | None:
        return self._plan(config)[1]

    def _run(self, config: Configuration, repeat: int) -> tuple[Measurement, TaskProfile | None]:
        t0 = time.perf_counter()
        planned, reason = self._plan(config)
        prof = None
        if reason:
            m = Measurement.refused(config, reason, backend=self.name)
        else:
            prof = self.board.profile_tasks(config, runs=self.runs, wcet_rule=self.wcet_rule, repeat=repeat)
            chain_us = float(prof.latency_us)
            energy = float(sum(prof.energy_j.values()))
            m = Measurement(config=config, fps=1e6 / chain_us, latency_ms_p50=chain_us / 1e3,
                            stage_ms=[s.acet_us / 1e3 for s in prof.stages if s.kind != "cpu"],   # pre, post: CPU
                            power_w=energy * 1e6 / chain_us, energy_j_per_frame=energy, backend=self.name)
        if planned is not None:
            m.dla_loadables, m.fallback_layers = planned.loadables, planned.fallback_layers
            m.fallback_reasons = dict(planned.fallback_reasons)
        m.measure_s = time.perf_counter() - t0
        return m, prof

    def take_profile(self, config: Configuration, repeat: int = 0) -> tuple[str | None, TaskProfile | None]:
        """(why the board refuses ``config``, None) or (None, its ``TaskProfile``): the profile a measurement
        took, handed over and forgotten (a search holds thousands), else profiled now. The measurement stays
        for ``measure``."""
        key = (config.hash, int(repeat))
        kept = self._kept.get(key)
        if kept is None or (kept[0].ok and kept[1] is None):
            kept = self._run(config, repeat)
        self._kept[key] = (kept[0], None)
        m, prof = kept
        return (None if m.ok else m.reason), prof

    def measure(self, config: Configuration, *, repeat: int = 0) -> Measurement:
        key = (config.hash, int(repeat))
        if key not in self._kept:
            self._kept[key] = self._run(config, repeat)
        return self._kept[key][0]


__all__ = ["TaskProfileBackend"]
