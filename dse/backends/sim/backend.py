"""SimBackend: measure a Configuration on a virtual board (cost model -> DES -> power -> noise).

It refuses exactly what a real board or TensorRT would refuse (unknown option, stage/stream mismatch,
infeasible cuts, FP32 on a DLA, too many DLA engines or loadables per core, DLA batch limit): a ``refused``
Measurement with the reason instead of a number. It exposes what a board exposes: a per-layer GPU profile
(like TensorRT's IProfiler), one time per DLA stage, utilizations, power; and, being a simulation, the schedule
of a measurement (``TRACE``) and interleaved stages.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from dse.backends.base import GPU_LAYER_PROFILE, INTERLEAVED, TRACE, MeasureSettings, warmup_frames, window_frames
from dse.platform.checks import check_cuts, check_layout, check_stages, dla_limit_reason
from dse.backends.layermap import LayerMapSupport, is_layer_mapping
from dse.backends.sim.cost import CostModel, StageCost
from dse.backends.sim.des import PipelineRun, SimInput, StageRuntime, simulate
from dse.graph.layers import LayerTable, frame_of, layer_table
from dse.backends.sim.noise import factor, noise_rng
from dse.backends.sim.power import board_power_w
from dse.backends.sim.tasktime import time_scale
from dse.core.configuration import Configuration
from dse.platform.modes import ClockSetting, clock_setting
from dse.core.errors import DseError
from dse.core.measurement import Measurement
from dse.platform import Platform, load_platform


@dataclass
class Planned:
    """A configuration turned into stage costs and the DES input (everything but the simulation)."""

    stages: list[StageCost]
    runtimes: list[StageRuntime]
    pre_us: float
    post_us: float
    loadables: int
    fallback_layers: int
    extra_engines: list[StageCost] = field(default_factory=list)   # e.g. the DLA engine of an interleaved stage
    dla_engines: int = 0                                           # engines deserialized on the DLAs
    dla_loadables_per_core: dict[int, int] = field(default_factory=dict)
    fallback_reasons: dict[str, int] = field(default_factory=dict)   # failed DLA rule -> fallback layers
    clocks: ClockSetting | None = None                               # the power mode and clocks it runs at


class SimBackend:
    """Virtual board for one network. ``source``: a NetworkAnalysis, a layer DataFrame or a LayerTable."""

    name = "sim"
    capabilities = frozenset({GPU_LAYER_PROFILE, TRACE, INTERLEAVED})

    def __init__(self, platform, source, settings: MeasureSettings | None = None, *, engine_cache=None):
        self.platform: Platform = load_platform(platform)
        self.settings = settings or MeasureSettings()
        self.platform.require_model(self.name, layer_mapping=True)   # pipeline configurations: refused in check
        self.analysis = None
        if isinstance(source, LayerTable):
            self.table = source
        elif hasattr(source, "layers") and hasattr(source, "to_frame"):
            self.analysis = source
            self.table = layer_table(frame_of(source), digest=getattr(source, "digest", None))
        else:
            self.table = layer_table(source)
        self.input_size = int(self.settings.input_size or self._guess_input_size())
        self.engine_cache = engine_cache
        self._models: dict[int, CostModel] = {}
        self.layermap = LayerMapSupport(self.platform, self.analysis)
        _check_multi_app_sections(self.platform)

    @classmethod
    def sets_clocks(cls, platform: Platform) -> bool:
        return True  # the virtual boards model every power mode and clock level

    @classmethod
    def validate(cls, platform: Platform, settings: MeasureSettings) -> None:
        platform.require_model(cls.name)

    # ---- setup -----------------------------------------------------------------------------------
    def _guess_input_size(self) -> int:
        if self.analysis is not None and getattr(self.analysis, "inputs", None):
            shape = next(iter(self.analysis.inputs.values()))
            if len(shape) == 4 and shape[-1]:
                return int(shape[-1])
        side = math.sqrt(max(self.table.input_bytes, 1.0) / 12.0)  # 3 channels of fp32
        return int(round(side)) or 416

    def cost_model(self, input_size: int | None = None) -> CostModel:
        size = int(input_size or self.input_size)
        model = self._models.get(size)
        if model is None:
            model = CostModel(self.platform, self.table, scale=(size / self.input_size) ** 2)
            self._models[size] = model
        return model

    # ---- what a board exposes ----------------------------------------------------------------------
    def gpu_layer_profile(self, precision: str, batch: int = 1, input_size: int | None = None) -> list[float]:
        """Per-layer GPU time in ms (fused layers report 0), like TensorRT's IProfiler. No DLA equivalent."""
        return (self.cost_model(input_size).gpu_layer_profile_us(precision, batch) / 1000.0).tolist()

    # ---- planning ---------------------------------------------------------------------------------------
    def check(self, config: Configuration) -> str | None:
        p = self.platform
        if is_layer_mapping(config):
            if config.input_size != self.input_size:
                return (f"a per-layer mapping is timed at the analysed input size {self.input_size}; configuration "
                        f"asks for {config.input_size}")
            return self.layermap.check(config)
        if p.purpose == "layer-mapping":
            return p.pipeline_refusal(self.name)
        reason = check_layout(config, p) or _clock_refusal(p, config)
        if reason:
            return reason
        n = self.table.n
        if config.cuts and (config.cuts[0] < 0 or config.cuts[-1] > n - 2):
            return f"cuts {list(config.cuts)} out of range: a cut is a layer index in 0..{n - 2}"
        reason = check_cuts(config, self.analysis)
        if reason:
            return reason
        if (config.model_digest and self.analysis is not None and getattr(self.analysis, "digest", "")
                and config.model_digest != self.analysis.digest and config.model_digest != self.table.digest):
            return f"configuration is for model {config.model_digest[:12]}, this backend holds {self.table.digest[:12]}"
        return check_stages(config, p)

    def plan(self, config: Configuration) -> Planned:
        """Stage costs and the runtime layout of a (checked) configuration."""
        p = self.platform
        option = p.options[config.option]
        cm = self.cost_model(config.input_size)
        bounds = [-1, *config.cuts, self.table.n - 1]
        clocks = _clocks(p, config)
        gpu_f, dla_f = time_scale(p, clocks, "gpu"), time_scale(p, clocks, "dla")
        stages, runtimes = [], []
        loadables = fallback = engines = 0
        per_core: dict[int, int] = {}   # DLA core -> loadables deserialized on it
        fallback_ids: list[int] = []
        extra: list[StageCost] = []
        dla_names = [d.name for d in p.dla_pes()]
        for k, spec in enumerate(option.stages):
            sc = cm.stage(bounds[k] + 1, bounds[k + 1], spec.pe_type, config.precision, config.batch)
            stages.append(sc)
            phases = _scaled(sc, gpu_f, dla_f)
            s = config.streams[k]
            if spec.interleaved:  # stream i runs the whole stage on PE i mod (1 + #DLA): GPU, DLA0, DLA1, GPU, ...
                dsc = cm.stage(bounds[k] + 1, bounds[k + 1], "dla", config.precision, config.batch)
                dphases = _scaled(dsc, gpu_f, dla_f)
                n_pe = len(spec.pes)
                cores = [None if i % n_pe == 0 else i % n_pe - 1 for i in range(s)]
                runtimes.append(StageRuntime(phases=phases, stream_cores=cores, label=spec.label(),
                                             stream_phases=[phases if c is None else dphases for c in cores]))
                used = {c for c in cores if c is not None}
                if used:
                    loadables += dsc.loadables * len(used)
                    fallback += dsc.fallback_layers
                    fallback_ids += dsc.fallback_ids
                    extra.append(dsc)
                    engines += len(used)
                    for c in used:
                        per_core[c] = per_core.get(c, 0) + dsc.loadables
                continue
            if spec.pe_type == "gpu":
                cores = [None] * s
            elif spec.pnd:
                cores = [dla_names.index(spec.pes[i % len(spec.pes)]) for i in range(s)]  # streams alternate over the cores
            else:
                cores = [dla_names.index(spec.pes[0])] * s
            runtimes.append(StageRuntime(phases=phases, stream_cores=cores, label=spec.label()))
            if spec.pe_type == "dla":
                loadables += sc.loadables * len(spec.pes)
                fallback += sc.fallback_layers
                fallback_ids += sc.fallback_ids
                engines += len(set(cores))
                for c in set(cores):
                    per_core[c] = per_core.get(c, 0) + sc.loadables
        size = config.input_size
        pre = p.prepost.pre_us(size, config.batch, self.settings.preprocess)
        boxes = int(self.table.boxes * (size / self.input_size) ** 2)
        post = p.prepost.post_us(boxes, config.batch)
        cpu_f = time_scale(p, clocks, "cpu")
        for rt, sc in zip(runtimes, stages):      # each stage thread's CPU work per execution (enqueue, submission)
            rt.cpu_us = p.stage_thread_us.us(sc.kernels, sc.loadables) * cpu_f
        return Planned(stages, runtimes, pre * cpu_f, post * cpu_f, loadables, fallback, extra,
                       dla_engines=engines, dla_loadables_per_core=per_core,
                       fallback_reasons=cm.fallback_reasons(fallback_ids), clocks=clocks)

    def profile_tasks(self, config: Configuration, runs: int = 300, wcet_rule: str = "max6sigma",
                      *, repeat: int = 0):
        """Per-task WCET/ACET/BCET of a one-frame-in-flight pipeline mapping over ``runs`` runs (thesis Ch. 4/5
        Step 1): a ``dse.backends.sim.profile.TaskProfile``. Refusals are DseErrors."""
        from dse.backends.sim.profile import profile_tasks

        return profile_tasks(self, config, runs, wcet_rule, repeat)

    # ---- measuring --------------------------------------------------------------------------------------------
    def sim_input(self, config: Configuration, planned: Planned, trace: bool = False,
                  frames: int | None = None, repeat: int = 0) -> SimInput:
        """One buffer is the plain application (Base(G): one frame at a time, end to end) whatever the platform's
        ``buffer_scope``; JEDI itself with one slot per interface would overlap the next pre-processing with the
        last post-processing, which the thesis' sequential baseline (6.3 + 8.1 + 2.2 ms = 59.5 FPS) does not."""
        p = self.platform
        buffers_total = max(1, math.ceil(window_frames(self.settings.sample_size, config) / config.batch))
        n = frames or min(buffers_total, p.max_sim_frames)
        warm = warmup_frames(self.settings.warmup if self.settings.warmup is not None else p.warmup_frames, config)
        rng_seed = int(noise_rng(self.settings.seed, config.hash, repeat).integers(0, 2**31 - 1))
        scope = p.buffer_scope if config.buffers > 1 else "pipeline"
        cooldown = 0
        if p.full_window:       # as many frames as the pipeline holds, admitted past the measured ones
            cooldown = config.buffers * (len(planned.runtimes) + 1 if scope == "interface" else 1) + config.pre_threads
        return SimInput(pre_us=planned.pre_us, post_us=planned.post_us, pre_threads=config.pre_threads,
                        post_threads=config.post_threads, buffers=config.buffers,
                        cpu_cores=planned.clocks.mode.cpu_online,
                        cpu_contention=p.cpu_contention, stage_thread_cpu=p.stage_thread_cpu,
                        stages=planned.runtimes, n_dla=len(p.dla_pes()),
                        frames=n, warmup=warm, task_sigma=p.task_sigma, seed=rng_seed, trace=trace,
                        buffer_scope=scope, cooldown=cooldown)

    def measure(self, config: Configuration, *, repeat: int = 0) -> Measurement:
        """One measurement; ``repeat`` > 0 re-runs the configuration with independent noise."""
        return self.measure_with_trace(config, repeat=repeat)[0]

    def measure_with_trace(self, config: Configuration, *, trace: bool = False,
                           repeat: int = 0) -> tuple[Measurement, PipelineRun | None]:
        t0 = time.perf_counter()
        reason = self.check(config)
        if reason:
            return Measurement.refused(config, reason, backend=self.name), None
        if is_layer_mapping(config):
            m = self._measure_layer_mapping(config, repeat)
            m.measure_s = time.perf_counter() - t0
            return m, None
        planned = self.plan(config)
        reason = dla_limit_reason(self.platform, planned.dla_engines, planned.dla_loadables_per_core,
                                  planned.fallback_layers)
        if reason:
            m = Measurement.refused(config, reason, backend=self.name)
            m.dla_loadables, m.fallback_layers = planned.loadables, planned.fallback_layers
            m.fallback_reasons = dict(planned.fallback_reasons)
            return m, None
        engine_keys, build_s = self._engines(config, planned)
        res = simulate(self.sim_input(config, planned, trace=trace, repeat=repeat))
        m = self._to_measurement(config, planned, res, repeat)
        m.engine_keys, m.build_s = engine_keys, build_s
        m.measure_s = time.perf_counter() - t0
        return m, res

    def _to_measurement(self, config: Configuration, planned: Planned, res: PipelineRun,
                        repeat: int = 0) -> Measurement:
        """stage_ms is each stage's time for one frame alone (like Fig. 3.12, hand-over waits apart), the rest comes
        from the DES."""
        p = self.platform
        rng = noise_rng(self.settings.seed, config.hash, repeat)
        rng.integers(0, 2**31 - 1)  # the DES seed drawn in sim_input
        sigma = p.noise_sigma
        fps = res.buffers_per_s * config.batch * factor(rng, sigma)
        lat_noise = factor(rng, sigma)
        p50 = float(np.percentile(res.latencies_us, 50)) / 1000.0 * lat_noise
        p99 = float(np.percentile(res.latencies_us, 99)) / 1000.0 * lat_noise
        util = {p.main_pe: round(res.gpu_busy, 4)}
        for d, busy in zip(p.dla_pes(), res.dla_busy):
            util[d.name] = round(busy, 4)
        cpu_util = min(1.0, res.cpu_busy_cores / p.cpu_cores)
        util["CPU"] = round(cpu_util, 4)
        clocks = planned.clocks
        load = {p.main_pe: res.gpu_load * clocks.mode.gpu_units}   # a mode's gated TPCs draw nothing
        for d, busy in zip(p.dla_pes(), res.dla_busy):
            load[d.name] = busy
        pe_freqs = {p.main_pe: clocks.of("gpu")}
        for d in p.dla_pes():
            pe_freqs[d.name] = clocks.of("dla")
        power = board_power_w(p, load, res.cpu_busy_cores, pe_freqs, clocks.of("cpu")) * factor(rng, sigma / 2)
        return Measurement(
            config=config, status="ok", reason="", fps=round(fps, 3), latency_ms_p50=round(p50, 4),
            latency_ms_p99=round(p99, 4), util=util, cpu_util=round(cpu_util, 4), power_w=round(power, 3),
            energy_j_per_frame=round(power / fps, 6) if fps > 0 else 0.0,
            stage_ms=[round(sum(ph[1] for ph in rt.phases if ph[0] != "host") / 1000.0 * lat_noise, 4)
                      for rt in planned.runtimes],
            dla_loadables=planned.loadables, fallback_layers=planned.fallback_layers,
            fallback_reasons=dict(planned.fallback_reasons), backend=self.name)

    def _measure_layer_mapping(self, config: Configuration, repeat: int) -> Measurement:
        """A (checked) per-layer mapping: a sim profile of the PE kinds it uses (``tasks.profile_from_sim``), the
        analytic model (period with the util cap, one-frame latency, loads) and the task-graph DES for the
        period; the platform's noise on fps, latency and power. Pre/post-processing and buffers are not
        modelled (only the B = 2 slots per cross-PE tensor); stage_ms is per segment (maximal same-PE task run)."""
        from dse.backends.sim.tasks import analytic_model, profile_from_sim
        from dse.taskgraph.mapping import validate
        from dse.taskgraph.simulate import simulate as simulate_tasks

        p = self.platform
        mapping, pes, graph = self.layermap.resolve(config)
        m = mapping.array
        used = list(dict.fromkeys(pes.kinds[i] for i in sorted(set(m.tolist()))))
        try:
            profile = profile_from_sim(p, self.analysis, graph, used, config.precision, config.batch)
            for kind in dict.fromkeys(pes.kinds):
                if kind not in used:
                    profile = profile.with_kind(kind, np.full(graph.n, np.inf), f"{kind}: no task mapped")
            validate(mapping, graph, profile, pes)
        except DseError as exc:
            return Measurement.refused(config, str(exc), backend=self.name)
        model = analytic_model(p, graph, profile, pes, u_max=mapping.util_cap)
        ev = model.evaluate(m)
        period = simulate_tasks(model, m).period_us * float(ev.period / ev.period_raw)   # the cap throttles input
        rng = noise_rng(self.settings.seed, config.hash, repeat)
        sigma = p.noise_sigma
        fps = 1e6 / period * config.batch * factor(rng, sigma)
        latency_ms = model.latency(m) / 1000.0 * factor(rng, sigma)
        busy = np.asarray(ev.loads) / float(ev.period)
        util = {pe.name: round(float(b), 4) for pe, b in zip(pes.pes, busy)}
        cpu_busy_cores = float((pes.cores * busy).sum())
        power = None
        if p.power is not None:
            freqs = _clocks(p, config).freqs()
            power = board_power_w(p, util, cpu_busy_cores, freqs, freqs["CPU"]) * factor(rng, sigma / 2)
        occ = model.occupancy(m)
        runs = np.flatnonzero(np.diff(m)) + 1
        stage_ms = [round(float(seg.sum()) / 1000.0, 4) for seg in np.split(occ, runs)]
        return Measurement(config=config, fps=round(fps, 3), latency_ms_p50=round(latency_ms, 4),
                           latency_ms_p99=round(latency_ms, 4), util=util, cpu_util=round(float(ev.util_cpu), 4),
                           power_w=None if power is None else round(power, 3),
                           energy_j_per_frame=None if power is None else round(power / fps, 6),
                           stage_ms=stage_ms, backend=self.name)

    def _engines(self, config: Configuration, planned: Planned) -> tuple[list[str], float]:
        """Sim engines (stage cost summaries) through the engine cache; for each new one, the seconds a real
        board would spend building it (``Platform.board_costs``)."""
        if self.engine_cache is None:
            return [], 0.0
        from dse.engines.sim import build_stage_engine

        keys, build_s = [], 0.0
        for sc in [*planned.stages, *planned.extra_engines]:
            art = build_stage_engine(self.engine_cache, self.platform, self.table.digest, sc, config)
            keys.append(art.key)
            if art.built:
                build_s += self.platform.board_costs.build_s(sc.pe_type)
        return keys, build_s


def _check_multi_app_sections(p: Platform) -> None:
    """Parse the optional multi-app sections (tasks, dvfs, contention, power.rails) once, so a bad profile
    fails when the board is built rather than in the middle of a DES."""
    from dse.backends.sim.periodic import accelerator_contention
    from dse.backends.sim.power import rails_of
    from dse.backends.sim.tasktime import TailModel, memory_bound

    TailModel.of(p)
    memory_bound(p)
    accelerator_contention(p)
    if p.power is not None:
        rails_of(p)


def _scaled(sc: StageCost, gpu_f: float, dla_f: float) -> list[tuple[str, float, float]]:
    """DES phases of a stage at the configured clocks (a host wait does not scale with a PE clock)."""
    scale = {"gpu": gpu_f, "dla": dla_f, "host": 1.0}
    return [(ph.resource, ph.us * scale[ph.resource], ph.occupancy) for ph in sc.phases]


def _clocks(p: Platform, config: Configuration) -> ClockSetting:
    """The power mode and clocks of ``config.extra`` (checked by ``check``)."""
    return clock_setting(p, dict(config.extra))


def _clock_refusal(p: Platform, config: Configuration) -> str | None:
    try:
        _clocks(p, config)
    except DseError as exc:
        return str(exc)
    return None
