"""The clocked board as a ``dse.backends.base.Backend``, so that the pareto target measures through the one
evaluator (cache by configuration hash and measurement context, failure kinds, crash-safe appends in the store's
schema) like every other target.

A configuration of this board is a per-layer mapping plus clocks, canonical so that equal ones share a hash:
``option`` = ``cores+GPU``; ``extra`` holds ``mapping=cores1``, ``core_map`` (one core id per task, as
``dse.taskgraph.mapping.encode_ids`` writes PE ids; tasks on the GPU's host core run on the GPU), ``task_graph``
(the digest the ids refer to), ``gpu_mhz`` (``dse.platform.modes.clock_extra``'s key and rule) and
``<cluster>_mhz`` per CPU cluster; a clock at the top of its table is left out.

Noise: the i-th point of a re-measured batch draws its runs one after the other from ``default_rng([seed, i])``
(``configuration(..., stream=i)``), and run ``repeat`` = r is the r-th run of that stream. A stream of its own per
run, seeded as ``dse.backends.sim.noise.noise_rng`` seeds them, would draw other numbers than the reference fronts
(``tests/golden/pareto``, BENCHMARKS.md). A configuration keeps the stream of its first ask.
"""
from __future__ import annotations

import hashlib
import json
from typing import ClassVar

import numpy as np

from dse.backends.base import MeasureSettings
from dse.core.configuration import Configuration
from dse.core.errors import DseError, choices_error
from dse.core.measurement import Measurement
from dse.platform import Platform
from dse.platform.cpu_groups import core_group_name
from dse.platform.modes import clock_extra, clock_setting, power_mode
from dse.systems.pareto.board import ClockedBoard, ClockedParams, Clocks, clocks
from dse.taskgraph.mapping import decode_ids, encode_ids

MAPPING_TAG = "cores1"
OPTION = "cores+GPU"


def measurement_context(platform: dict, settings: dict) -> str:
    """Digest of the platform and pareto config parts, made as ``dse.workflow.plan.measurement_context`` makes it
    (a system may not import the workflow). Every setting counts: a point's noise stream is its position in its
    batch, which any setting of the search may move."""
    text = json.dumps({"platform": platform, "measure": settings}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class ClockedBackend:
    """Measures (mapping, clocks) configurations on one network's ``ClockedBoard``, with the platform's noise."""

    name: ClassVar[str] = "clocked-sim"
    capabilities: ClassVar[frozenset[str]] = frozenset()
    engine_cache = None      # the clocked board builds no engines

    def __init__(self, board: ClockedBoard, settings: MeasureSettings):
        self.validate(board.platform, settings)
        self.board, self.platform, self.settings = board, board.platform, settings
        self._streams: dict[str, int] = {}

    @classmethod
    def validate(cls, platform: Platform, settings: MeasureSettings) -> None:
        ClockedParams.of(platform)
        if settings.precision != "fp32":
            raise choices_error(f"precision of the clocked board {platform.name} (seed 001 runs fp32)",
                                settings.precision, ["fp32"])
        if settings.input_size is None:
            raise DseError("the clocked board's configurations name the network's input size: set input_size")

    def configuration(self, mapping, clk: Clocks, stream: int) -> Configuration:
        """The configuration of a mapping (core id per task) at ``clk``; its measurements draw from noise
        ``stream`` unless an earlier ask gave it one."""
        b = self.board
        extra = {"mapping": MAPPING_TAG, "core_map": encode_ids(b._check(mapping)), "task_graph": b.graph.digest,
                 **clock_extra(self.platform, power_mode(self.platform, None).name, {"gpu": clk.gpu_mhz}),
                 **{f"{name}_mhz": format(f, ".10g") for (name, f), c in zip(clk.cpu_mhz, b.clusters)
                    if f != c.max_freq_mhz}}
        config = Configuration(benchmark=self.settings.benchmark, platform=self.platform.name, option=OPTION,
                               precision=self.settings.precision, batch=1, input_size=int(self.settings.input_size),
                               model_digest=b.model_digest, extra=tuple(extra.items()))
        self._streams.setdefault(config.hash, int(stream))
        return config

    def decode(self, config: Configuration) -> tuple[np.ndarray, Clocks]:
        """The mapping and clocks of ``config``; a DseError names what does not fit this board and network."""
        extra = dict(config.extra)
        if config.option != OPTION or extra.get("mapping") != MAPPING_TAG:
            raise DseError(f"configuration {config.hash} (option {config.option!r}, extra mapping="
                           f"{extra.get('mapping')!r}) is no clocked-board mapping (option {OPTION}, mapping="
                           f"{MAPPING_TAG})")
        if config.platform != self.platform.name:
            raise DseError(f"configuration {config.hash} is for platform {config.platform}, not {self.platform.name}")
        if config.precision != "fp32":
            raise choices_error(f"precision of the clocked board {self.platform.name}", config.precision, ["fp32"])
        if extra.get("task_graph") != self.board.graph.digest:
            raise DseError(f"configuration {config.hash} maps task graph {extra.get('task_graph')}; this network's "
                           f"is {self.board.graph.digest}")
        mapping = self.board._check(np.array(decode_ids(extra.get("core_map", "")), dtype=np.int64))
        cpu = {}
        for c in self.board.clusters:
            key = f"{c.name}_mhz"
            if key in extra:
                try:
                    cpu[c.name] = float(extra[key])
                except ValueError:
                    raise DseError(f"{key} must be a number of MHz, got {extra[key]!r}") from None
        return mapping, clocks(self.platform, cpu, clock_setting(self.platform, extra).of("gpu"))

    def check(self, config: Configuration) -> str | None:
        try:
            self.decode(config)
        except DseError as exc:
            return str(exc)
        return None

    def measure(self, config: Configuration, *, repeat: int = 0) -> Measurement:
        """Run ``repeat`` of the configuration's noise stream: fps, J/frame and rail power; per-core and GPU busy
        shares as ``util`` (the period is 1 / fps)."""
        try:
            mapping, clk = self.decode(config)
        except DseError as exc:
            return Measurement.refused(config, str(exc), backend=self.name)
        if config.hash not in self._streams:
            raise KeyError(f"configuration {config.hash} has no noise stream: make it with configuration()")
        rng = np.random.default_rng([self.settings.seed, self._streams[config.hash]])
        for _ in range(repeat):       # the runs before this one advance the stream
            self.board.measure(mapping, clk, rng)
        r = self.board.measure(mapping, clk, rng)
        shares = np.minimum(1.0, r["core_busy_us"] / r["period_us"])
        util = {core_group_name((k,)): float(s) for k, s in enumerate(shares)}
        util["GPU"] = min(1.0, r["gpu_busy_us"] / r["period_us"])
        return Measurement(config=config, fps=r["fps"], util=util, cpu_util=float(shares.mean()),
                           power_w=r["power_w"], energy_j_per_frame=r["energy_j"], backend=self.name)


__all__ = ["MAPPING_TAG", "OPTION", "ClockedBackend", "measurement_context"]
