"""Task profiling mode (thesis Ch. 4 Step 1, l. 1196; Ch. 5 l. 1820): N runs of one pipeline mapping with one
frame in flight, reported per task as the real-time analysis needs it.

One frame in flight means the stages run one after the other, so no DES is needed: each task's time is drawn
``runs`` times from the task-time model (``tasktime.TailModel``) around its noise-free base time at the
configuration's clocks (with the memory-bound fraction of ``dvfs.memory_bound``). The chain of tasks:

- pre and post: one CPU task each;
- a GPU stage: one task per kernel (a layer with non-zero GPU time; fused layers report 0, like TensorRT's
  IProfiler) plus one pseudo-kernel for the stage's enqueue/sync (``per_inference_us`` + ``boundary_us``);
- a DLA stage: ONE task, timed around the whole DLA task, so it includes its GPU-side reformats (no per-layer
  DLA profile exists). A DLA stage with GPU fallback is refused: the analysis assumes one task per DLA stage.

WCET rules: ``max6sigma`` = max(max observed, mean + 6 std) (Ch. 4), ``6sigma`` = mean + 6 std (Ch. 5);
ACET = mean (energy), BCET = min (jitter).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from dse.platform.checks import dla_limit_reason
from dse.backends.sim.noise import noise_rng
from dse.backends.sim.power import freq_factor
from dse.backends.sim.tasktime import TailModel, dvfs_scale
from dse.platform.modes import clock_setting
from dse.core.configuration import Configuration
from dse.core.errors import DseError, choices_error
from dse.rt.model import Stage, Task

WCET_RULES = ("max6sigma", "6sigma")
FREQ_KEYS = ("gpu_mhz", "dla_mhz", "cpu_mhz")


@dataclass(frozen=True)
class StageProfile:
    """One stage of the chain. ``base_us``: each task's noise-free time at the maximum clocks (what the periodic
    DES draws around); ``kernel_layers``: a GPU kernel's layer index (None for the enqueue/sync pseudo-kernel)."""

    kind: str                                # "cpu" | "gpu" | "dla"
    label: str
    layers: tuple[int, int] | None
    tasks: list[Task]
    base_us: list[float] = field(default_factory=list)
    kernel_layers: list[int | None] = field(default_factory=list)
    pe: str = ""                             # the PE of the mapping option (GPU, DLA0, ...); "" for pre/post

    def to_stage(self) -> Stage:
        return Stage(self.kind, tuple(self.tasks), self.label)

    wcet_us = property(lambda self: self.to_stage().wcet_us)
    acet_us = property(lambda self: self.to_stage().acet_us)


@dataclass
class TaskProfile:
    """Per-task statistics of one mapping at the configuration's clocks, and per processor kind the busy time
    (ACET-based) and the dynamic energy of one frame (GPU: occupancy-weighted; DLA and CPU: busy time)."""

    config: Configuration
    stages: list[StageProfile]
    runs: int
    wcet_rule: str
    freqs_mhz: dict[str, float | None]
    latency_us: float                        # sum of the ACETs: the one-frame latency
    busy_us: dict[str, float]                # kind -> us per frame
    energy_j: dict[str, float]               # kind -> dynamic J per frame

    def to_stage_models(self) -> tuple[Stage, ...]:
        return tuple(s.to_stage() for s in self.stages)

    @property
    def n_tasks(self) -> int:
        return sum(len(s.tasks) for s in self.stages)

    def records(self) -> list[dict]:
        """One row per task for ``tasks.parquet`` (the caller adds the mapping id)."""
        rows = []
        for i, s in enumerate(self.stages):
            layers = s.kernel_layers or [None] * len(s.tasks)
            for k, (t, base, layer) in enumerate(zip(s.tasks, s.base_us, layers)):
                rows.append({"stage": i, "kind": s.kind, "pe": s.pe, "label": s.label, "kernel": k,
                             "layer": -1 if layer is None else int(layer), "base_us": float(base),
                             "wcet_us": t.wcet_us, "acet_us": t.acet_us, "bcet_us": t.bcet_us, "runs": self.runs})
        return rows


@dataclass
class _Chain:
    """A stage being built: per task the base time at fmax, the time at the clocks, the share of that time
    spent on the GPU (a DLA task's reformats) and the GPU occupancy there."""

    kind: str
    label: str
    layers: tuple[int, int] | None = None
    pe: str = ""
    base: list[float] = field(default_factory=list)
    now: list[float] = field(default_factory=list)
    gpu_share: list[float] = field(default_factory=list)
    occ: list[float] = field(default_factory=list)
    kernel_layers: list[int | None] = field(default_factory=list)


def profile_tasks(backend, config: Configuration, runs: int = 300, wcet_rule: str = "max6sigma",
                  repeat: int = 0) -> TaskProfile:
    """Profile ``config`` (one frame in flight: buffers 1, one stream per stage) on a ``SimBackend``."""

    p, pm = backend.platform, backend.platform.power
    planned = _checked_plan(backend, config, runs, wcet_rule)
    setting = clock_setting(p, dict(config.extra))
    clocks = {k: setting.of(k) for k in ("gpu", "dla", "cpu")}
    scale = {k: dvfs_scale(p, k, f) for k, f in clocks.items()}
    chain = [_Chain("cpu", "pre", base=[planned.pre_us], now=[planned.pre_us * scale["cpu"]], gpu_share=[0.0],
                    occ=[0.0])]
    g = p.cost.gpu
    pl = backend.cost_model(config.input_size).per_layer("gpu", config.precision, config.batch)
    for spec, sc in zip(p.options[config.option].stages, planned.stages):
        st = _Chain(spec.pe_type, f"{spec.label()}[{sc.first}-{sc.last}]", (sc.first, sc.last), spec.pes[0])
        if spec.pe_type == "gpu":          # one task per kernel + the enqueue/sync pseudo-kernel
            idx = [i for i in range(sc.first, sc.last + 1) if pl.t[i] > 0]
            st.base = [float(pl.t[i]) for i in idx] + [g.per_inference_us + (p.cost.boundary_us if sc.first else 0.0)]
            st.now = [b * scale["gpu"] for b in st.base]
            st.gpu_share = [1.0] * len(st.base)
            st.occ = [float(pl.occ_t[i] / pl.t[i]) for i in idx] + [g.min_occupancy]
            st.kernel_layers = [*idx, None]
        else:                              # one task around the DLA run, GPU-side reformats included
            gpu_now, dla_now = sc.gpu_us * scale["gpu"], sc.dla_us * scale["dla"]
            st.base, st.now, st.gpu_share = [sc.total_us], [gpu_now + dla_now], [gpu_now / (gpu_now + dla_now)]
            st.occ = [sum(ph.us * ph.occupancy for ph in sc.phases if ph.resource == "gpu") / sc.gpu_us
                      if sc.gpu_us > 0 else 0.0]
        chain.append(st)
    chain.append(_Chain("cpu", "post", base=[planned.post_us], now=[planned.post_us * scale["cpu"]],
                        gpu_share=[0.0], occ=[0.0]))

    now = np.array([t for st in chain for t in st.now])
    samples = TailModel.of(p).draw(now, noise_rng(backend.settings.seed, config.hash, repeat), size=(runs, len(now)))
    mean, std = samples.mean(axis=0), samples.std(axis=0, ddof=1)
    wcet = mean + 6.0 * std
    if wcet_rule == "max6sigma":
        wcet = np.maximum(wcet, samples.max(axis=0))
    bcet = samples.min(axis=0)

    stages, j = [], 0
    busy = {"cpu": 0.0, "gpu": 0.0, "dla": 0.0}
    gpu_occ_us = dla_j = 0.0
    for st in chain:
        n = len(st.now)
        for k in range(n):
            acet, share = float(mean[j + k]), st.gpu_share[k]
            if st.kind == "cpu":
                busy["cpu"] += acet
                continue
            busy["gpu"] += acet * share
            gpu_occ_us += acet * share * st.occ[k]
            if st.kind == "dla":
                busy["dla"] += acet * (1.0 - share)
                dla_j += acet * (1.0 - share) * 1e-6 * pm.pe_dynamic_w.get(st.pe, 0.0) \
                    * freq_factor(p, st.pe, clocks["dla"]) ** pm.exponent_of(st.pe)
        tasks = [Task(float(wcet[j + k]), float(mean[j + k]), float(bcet[j + k])) for k in range(n)]
        stages.append(StageProfile(st.kind, st.label, st.layers, tasks, [float(b) for b in st.base],
                                   list(st.kernel_layers), st.pe))
        j += n
    cpu_f = (clocks["cpu"] / max(p.cpu_freq_mhz)) if (clocks["cpu"] and p.cpu_freq_mhz) else 1.0
    gpu_f = freq_factor(p, p.main_pe, clocks["gpu"])
    energy = {"cpu": pm.cpu_core_w * cpu_f ** pm.freq_exponent * busy["cpu"] * 1e-6,
              "gpu": pm.pe_dynamic_w.get(p.main_pe, 0.0) * gpu_f ** pm.exponent_of(p.main_pe) * gpu_occ_us * 1e-6,
              "dla": dla_j}
    return TaskProfile(config=config, stages=stages, runs=int(runs), wcet_rule=wcet_rule, freqs_mhz=clocks,
                       latency_us=float(mean.sum()), busy_us=busy, energy_j=energy)


def _checked_plan(backend, config: Configuration, runs: int, wcet_rule: str):
    """The plan at the maximum clocks of a configuration the task model can describe, else a DseError."""
    from dse.backends.layermap import is_layer_mapping

    p = backend.platform
    if wcet_rule not in WCET_RULES:
        raise choices_error("wcet_rule", wcet_rule, WCET_RULES)
    if runs < 2:
        raise DseError(f"task profiling needs at least 2 runs (a standard deviation), got {runs}")
    if is_layer_mapping(config):
        raise DseError("task profiling takes a pipeline configuration, not a per-layer mapping")
    if config.buffers != 1 or any(s != 1 for s in config.streams):
        raise DseError(f"task profiling needs one frame in flight (buffers 1, one stream per stage); got buffers "
                       f"{config.buffers}, streams {list(config.streams)}")
    option = p.options.get(config.option)
    if option is not None and any(s.interleaved or s.pnd or s.pe_type not in ("gpu", "dla") for s in option.stages):
        raise DseError(f"task profiling needs stages on one GPU or DLA each; option {config.option} is "
                       f"{option.describe()}")
    reason = backend.check(config)
    if reason:
        raise DseError(f"cannot profile {config.option} {list(config.cuts)}: {reason}")
    planned = backend.plan(replace(config, extra=tuple((k, v) for k, v in config.extra if k not in FREQ_KEYS)))
    if planned.fallback_layers:
        raise DseError(f"option {config.option} cuts {list(config.cuts)}: {planned.fallback_layers} layer(s) of a "
                       f"DLA stage fall back to the GPU; the task model needs one task per DLA stage")
    reason = dla_limit_reason(p, planned.dla_engines, planned.dla_loadables_per_core, planned.fallback_layers)
    if reason:
        raise DseError(reason)
    return planned
