"""Seed 003's variant times as a ``dse.backends.base.Backend``, so that a measured table
(``dse.systems.taskset.measured``) measures through the one evaluator (cache by configuration hash and measurement
context, failure kinds, crash-safe appends in the store's schema) like every other target.

A variant of a network is a configuration: ``option`` the variant (``rc8``, ``rc4``, ``tc8``, ``tc4``, ``dla1``,
``dla2``, ``cpu2/4/6``), ``precision`` the one it runs in (fp32 on CUDA cores and on the CPU, the table's
``tc_precision`` on Tensor cores, its ``dla_precision`` on the DLAs), batch 1; ``extra`` holds ``mapping=variant1``,
``sm_fraction`` for rc4/tc4 (the SM share the cost model gives them) and ``cpu`` (sim | ort) for the CPU variants.
A dla2 configuration names its split, ``cuts`` = (c,): DLA0 runs layers 0..c, DLA1 the rest, pipelined; the
table's dla2 is the split with the shortest per-job time (one configuration per feasible cut, so the cut the table
reports is a configuration's, not a measured number).

A measurement holds one job: ``stage_ms`` the time of each stage on its unit (one; two for dla2), ``latency_ms_p50``
their sum, ``fps`` one over the longest (a stream of jobs: dla2's cores work at once), and the DLA runs' loadables
and GPU fallback layers. The variant time is the longest stage (``job_ms``). CPU variants with ``cpu: ort`` time an
ONNX Runtime session on this host, so their context names the host's cores and the network's weights; a k above
the host's cores is refused.
"""
from __future__ import annotations

import hashlib
import json
import time
from typing import TYPE_CHECKING, ClassVar


from dse.backends.base import RUNS_MODEL, MeasureSettings
from dse.core.configuration import Configuration
from dse.core.errors import DseError
from dse.core.measurement import Measurement
from dse.platform import Platform
from dse.runtime.task_profile import model_us
from dse.systems.taskset.variants import OPTIONS

if TYPE_CHECKING:
    from dse.backends.sim.cost import CostModel

MAPPING_TAG = "variant1"
GPU_OPTIONS = ("rc8", "rc4", "tc8", "tc4")
PART_OPTIONS = ("rc4", "tc4")      # on ``sm_fraction`` of the SMs


def job_ms(m: Measurement) -> float:
    """A variant's time for one job (ms): its longest stage, what each job holds each unit for."""
    return max(m.stage_ms)


class VariantBackend:
    """Measures the variants of one network (an analysed benchmark) on one platform, as ``spec`` (a
    ``dse.systems.taskset.measured.MeasureSpec``) sets them: the sim cost model, or ONNX Runtime for the CPU."""

    name: ClassVar[str] = "taskset-variants"
    engine_cache = None      # the variants are costed or run in a session: no engines

    def __init__(self, spec, platform: Platform, analysis, settings: MeasureSettings):
        self.validate(platform, settings)
        self.spec, self.platform, self.analysis, self.settings = spec, platform, analysis, settings
        self.capabilities = frozenset({RUNS_MODEL}) if spec.cpu == "ort" else frozenset()
        self._costs: dict[float | None, CostModel] = {}   # by SM share (None: all SMs)

    @classmethod
    def validate(cls, platform: Platform, settings: MeasureSettings) -> None:
        if settings.input_size is None:
            raise DseError("a variant configuration names the network's input size: set input_size")

    @property
    def context(self) -> str:
        """Digest of what a variant time depends on besides its configuration: the platform definition, the seed
        and, for ONNX Runtime, the runs per time, this host's cores and the weights."""
        parts = {"platform": self.platform.raw, "measure": {"cpu": self.spec.cpu, "seed": int(self.spec.seed)}}
        if self.spec.cpu == "ort":
            import socket

            from dse.platform.cpu_groups import usable_cores

            parts["measure"]["repeats"] = int(self.spec.repeats)
            parts["host"] = {"name": socket.gethostname(), "cores": usable_cores()}
            parts["weights"] = self.analysis.weights_id
        text = json.dumps(parts, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def _config(self, option: str, precision: str, cuts=(), **extra) -> Configuration:
        return Configuration(benchmark=self.settings.benchmark, platform=self.platform.name, option=option,
                             cuts=tuple(cuts), streams=(1,) * (len(cuts) + 1), precision=precision, batch=1,
                             input_size=int(self.settings.input_size), model_digest=self.analysis.digest,
                             extra=(("mapping", MAPPING_TAG), *((k, str(v)) for k, v in extra.items())))

    def configurations(self) -> list[Configuration]:
        """Every variant of the network on this platform, dla2 once per feasible split."""
        spec, n = self.spec, len(self.analysis.layers)
        part = {"sm_fraction": float(spec.sm_fraction)}
        out = [self._config("rc8", "fp32"), self._config("rc4", "fp32", **part),
               self._config("tc8", spec.tc_precision), self._config("tc4", spec.tc_precision, **part)]
        if self.platform.cost.dla is not None:
            out.append(self._config("dla1", spec.dla_precision))
            out += [self._config("dla2", spec.dla_precision, (c,)) for c in self.analysis.feasible_cuts
                    if 0 <= c < n - 1]
        out += [self._config(f"cpu{k}", "fp32", cpu=spec.cpu) for k in spec.cpu_cores]
        return out

    def _cost(self, sm_fraction: float | None) -> CostModel:
        from dse.backends.sim.cost import CostModel
        from dse.graph.layers import frame_of, layer_table

        if sm_fraction not in self._costs:
            table = layer_table(frame_of(self.analysis), digest=self.analysis.digest)
            self._costs[sm_fraction] = (CostModel(self.platform, table) if sm_fraction is None
                                        else CostModel(self.platform, table, sm_fraction=sm_fraction))
        return self._costs[sm_fraction]

    def check(self, config: Configuration) -> str | None:
        extra = dict(config.extra)
        if extra.get("mapping") != MAPPING_TAG or config.option not in OPTIONS:
            return (f"configuration {config.hash} (option {config.option!r}, extra mapping={extra.get('mapping')!r}) "
                    f"is no taskset variant (options {', '.join(OPTIONS)}, mapping={MAPPING_TAG})")
        if (config.platform, config.benchmark, config.model_digest) != (
                self.platform.name, self.settings.benchmark, self.analysis.digest):
            return (f"configuration {config.hash} is for {config.benchmark} ({config.model_digest[:12]}) on "
                    f"{config.platform}; this backend holds {self.settings.benchmark} "
                    f"({self.analysis.digest[:12]}) on {self.platform.name}")
        if config.input_size != self.settings.input_size:
            return f"a variant is costed at the analysed input size {self.settings.input_size}, not {config.input_size}"
        if config.option in PART_OPTIONS:
            try:
                if not 0 < float(extra.get("sm_fraction", "")) < 1:
                    raise ValueError
            except ValueError:
                return f"{config.option} needs an sm_fraction in (0, 1), got {extra.get('sm_fraction')!r}"
        if config.option.startswith("dla"):
            if self.platform.cost.dla is None:
                return f"platform {self.platform.name} has no DLA"
            if config.option == "dla2" and (len(config.cuts) != 1
                                            or config.cuts[0] not in self.analysis.feasible_cuts
                                            or not 0 <= config.cuts[0] < len(self.analysis.layers) - 1):
                return f"dla2 needs one feasible cut (DLA0 -> DLA1), got {list(config.cuts)}"
        if config.option.startswith("cpu"):
            if extra.get("cpu") not in ("sim", "ort"):
                return f"CPU variant source {extra.get('cpu')!r}; valid choices: sim, ort"
            if extra["cpu"] == "ort":
                from dse.platform.cpu_groups import usable_cores

                k, cores = int(config.option[3:]), len(usable_cores())
                if k > cores:
                    return f"{config.option} needs {k} cores; this host has {cores}"
        return None

    def measure(self, config: Configuration, *, repeat: int = 0) -> Measurement:
        """One job's stage times (and for the DLA variants, loadables and fallback layers)."""
        t0 = time.perf_counter()
        reason = self.check(config)
        if reason:
            return Measurement.refused(config, reason, backend=self.name)
        option, precision, extra = config.option, config.precision, dict(config.extra)
        n, whole = len(self.analysis.layers), self._cost(None)
        dla = []
        if option in GPU_OPTIONS:
            cost = self._cost(float(extra["sm_fraction"])) if option in PART_OPTIONS else whole
            us = [cost.gpu_stage(0, n - 1, precision, 1).total_us]
        elif option.startswith("dla"):
            bounds = [(0, n - 1)] if option == "dla1" else [(0, config.cuts[0]), (config.cuts[0] + 1, n - 1)]
            dla = [whole.dla_stage(a, b, precision, 1) for a, b in bounds]
            us = [s.total_us for s in dla]
        elif extra["cpu"] == "sim":
            from dse.backends.sim.cpu_cost import layer_times_us

            us = [float(layer_times_us(self.platform, self.analysis, option, "fp32").sum())]
        else:
            us = [model_us(self.analysis.weighted_model(), int(option[3:]), self.spec.repeats,
                             seed=self.spec.seed)]
        stage_ms = [u / 1e3 for u in us]
        m = Measurement(config=config, fps=1e3 / max(stage_ms), latency_ms_p50=sum(stage_ms), stage_ms=stage_ms,
                        backend=self.name)
        if dla:
            m.dla_loadables = sum(s.loadables for s in dla)
            m.fallback_layers = sum(s.fallback_layers for s in dla)
            m.fallback_reasons = whole.fallback_reasons([i for s in dla for i in s.fallback_ids])
        m.measure_s = time.perf_counter() - t0
        return m


__all__ = ["MAPPING_TAG", "VariantBackend", "job_ms"]
