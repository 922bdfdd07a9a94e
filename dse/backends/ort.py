"""The ``ort`` backend: measure a configuration for real on this host's CPU (platform ``host-cpu``).

Stages are partitioned from the network (``dse.graph.partition``), optimized once by the ``ort`` engine
builder into the engine cache (when one is given), loaded as ONNX Runtime sessions on the option's core
groups and run through the pipelined runtime with the benchmark's application (pre/post-processing).
What the platform or ONNX Runtime rejects (unknown option, wrong stage count, infeasible cuts, unsupported
precision, a stage model ORT cannot load) is ``refused``; a run that fails (a crash in a thread, the
watchdog) is an ``error``, tried again by the next run.
"""
from __future__ import annotations

import time

from dse.backends.base import RUNS_MODEL, MeasureSettings, warmup_frames, window_frames
from dse.platform.checks import check_cuts, check_layout
from dse.backends.layermap import LayerMapSupport, is_layer_mapping
from dse.core.configuration import Configuration
from dse.core.errors import DseError
from dse.core.measurement import Measurement
from dse.platform import Platform, load_platform


def ort_refusals() -> tuple[type[Exception], ...]:
    """ONNX Runtime's exceptions for a model it will not run (unlike Fail/RuntimeException, which may pass)."""
    from onnxruntime.capi import onnxruntime_pybind11_state as state

    return state.InvalidGraph, state.NotImplemented, state.InvalidArgument, state.InvalidProtobuf


def ort_failures() -> tuple[type[Exception], ...]:
    """ONNX Runtime's exceptions for a failure that may pass (out of memory, a provider failing)."""
    from onnxruntime.capi import onnxruntime_pybind11_state as state

    return state.Fail, state.RuntimeException, state.EPFail


class OrtBackend:
    """Real pipelined runs with ONNX Runtime on CPU core groups. ``source``: the network's NetworkAnalysis."""

    name = "ort"
    capabilities = frozenset({RUNS_MODEL})

    def __init__(self, platform, source, settings: MeasureSettings | None = None, *, engine_cache=None,
                 timeout_s: float = 600.0, keep_outputs: bool = False):
        self.platform: Platform = load_platform(platform)
        self.settings = settings or MeasureSettings(precision="fp32", sample_size=200)
        self.validate(self.platform, self.settings)
        self.analysis = source
        s = self.settings
        self.warmup = max(2, min(20, s.sample_size // 10)) if s.warmup is None else int(s.warmup)
        self.engine_cache = engine_cache
        self.timeout_s = float(timeout_s)
        self.keep_outputs = keep_outputs
        self.last_run = None  # the RunResult of the last measure (outputs/results when kept), for tests and tools
        self.layermap = LayerMapSupport(self.platform, source)

    @classmethod
    def sets_clocks(cls, platform: Platform) -> bool:
        return False  # ONNX Runtime on this host: the OS governs the clocks

    @classmethod
    def validate(cls, platform: Platform, settings: MeasureSettings) -> None:
        others = sorted({p.type for p in platform.pes.values()} - {"cpu"})
        if others:
            raise DseError(f"the 'ort' backend runs CPU core groups; platform {platform.name} has "
                           f"{', '.join(others)} PEs")
        precisions = sorted(platform.precisions_of("cpu"))
        if settings.precision not in precisions:
            raise DseError(f"platform {platform.name} runs precision(s) {', '.join(precisions)}, not "
                           f"{settings.precision} (set precision={precisions[0]})")

    def check(self, config: Configuration) -> str | None:
        """Why this configuration cannot run here, or None."""
        p = self.platform
        reason = self.layermap.check(config) if is_layer_mapping(config) else check_layout(config, p)
        if reason:
            return reason
        precisions = sorted(p.precisions_of("cpu"))
        if config.precision not in precisions:
            return (f"platform {p.name} runs precision(s) {', '.join(precisions)}, not {config.precision} "
                    f"(set precision=fp32)")
        shape = next(iter(self.analysis.inputs.values()), [])
        if shape and shape[0] != config.batch:
            return f"the analysed network has batch {shape[0]}; configuration asks for batch {config.batch}"
        if self.settings.input_size and config.input_size != self.settings.input_size:
            return (f"the analysed network has input size {self.settings.input_size}; configuration asks for "
                    f"{config.input_size}")
        return check_cuts(config, self.analysis)

    def engines(self, config: Configuration) -> tuple[list, list[str], float]:
        """(per stage: list of OrtStageEngine (two for PND), engine keys, build seconds)."""
        from dse.graph.partition import partition
        from dse.runtime.ort_engine import OrtStageEngine

        option = self.platform.option(config.option)
        start = time.perf_counter()
        stages = partition(self.analysis, tuple(config.cuts))
        keys: list[str] = []
        out = []
        for st, spec in zip(stages, option.stages):
            groups = [pe.cores for pe in self.platform.stage_pes(spec)]
            model = st.model if self.engine_cache is None else self._cached(st, spec.pes[0], config, keys)
            out.append([OrtStageEngine(model, g) for g in groups])
        return out, keys, time.perf_counter() - start

    def _cached(self, stage, pe: str, config: Configuration, keys: list[str]):
        from dse.engines.base import StageBuild
        from dse.engines.ort import OrtEngineBuilder

        spec = StageBuild(index=stage.index, first_layer=stage.first_layer, last_layer=stage.last_layer,
                          pe=pe, pe_type="CPU", precision=config.precision, batch=config.batch,
                          input_tensors=tuple(stage.inputs), output_tensors=tuple(stage.outputs))
        artifact = OrtEngineBuilder(self.platform.board_model).build(spec, stage.model, self.engine_cache)
        keys.append(artifact.key)
        return artifact.path

    def application_for(self, config: Configuration):
        from dse.apps import create_application

        return create_application(self.settings.application, self.settings.app_options(config),
                                  self.analysis.inputs, self.analysis.outputs)

    def measure(self, config: Configuration, *, repeat: int = 0) -> Measurement:
        # ``repeat``: a re-run of the same configuration; every real run is a fresh sample anyway
        from dse.runtime.pipeline import Pipeline, StagePlan

        reason = self.check(config)
        if reason:
            return Measurement.refused(config, reason, backend=self.name)
        if is_layer_mapping(config):
            return self._measure_layer_mapping(config)
        app = self.application_for(config)
        try:
            stage_engines, keys, build_s = self.engines(config)
        except ort_refusals() as exc:  # ONNX Runtime will not run a stage model: a fact about the configuration
            return Measurement.refused(config, f"ONNX Runtime refused a stage: {type(exc).__name__}: {exc}",
                                       self.name)
        except ort_failures() as exc:
            return Measurement.error(config, f"building the stages failed: {type(exc).__name__}: {exc}", self.name)
        plans = [StagePlan(engines=e, streams=s, name=f"stage{i}")
                 for i, (e, s) in enumerate(zip(stage_engines, config.streams))]
        pipe = Pipeline(plans, lambda fid, slot: app.frame_inputs(fid), app.postprocess,
                        frames=window_frames(self.settings.sample_size, config),
                        warmup=warmup_frames(self.warmup, config), pre_threads=config.pre_threads,
                        post_threads=config.post_threads, buffers=config.buffers, images_per_job=config.batch,
                        keep_outputs=self.keep_outputs, keep_results=self.keep_outputs, timeout_s=self.timeout_s)
        t1 = time.perf_counter()
        res = pipe.run()
        for engines in stage_engines:
            for e in engines:
                e.close()
        self.last_run = res
        return self._to_measurement(config, res, keys, build_s, time.perf_counter() - t1)

    def _to_measurement(self, config: Configuration, res, keys: list[str], build_s: float,
                        measure_s: float) -> Measurement:
        """A RunResult (of the pipeline or the task-graph runtime) as a Measurement."""
        if not res.ok:
            m = Measurement.error(config, f"run failed: {res.error}", backend=self.name)
            m.build_s, m.measure_s, m.engine_keys = build_s, measure_s, keys
            return m
        return Measurement(config=config, fps=res.fps, latency_ms_p50=res.latency_ms_p50,
                           latency_ms_p99=res.latency_ms_p99, util=dict(res.util), cpu_util=res.cpu_util,
                           stage_ms=list(res.stage_ms), engine_keys=keys, build_s=build_s,
                           measure_s=measure_s, backend=self.name)

    def _measure_layer_mapping(self, config: Configuration) -> Measurement:
        """A per-layer mapping (checked): the task ids expanded to layers, maximal same-PE runs as segments
        (``partition_segments``), one ORT session per segment on its PE's core group (PE p = CPU group p of the
        CPU configuration over the platform's cores), run by ``TaskGraphRuntime``; stage_ms is per segment."""
        from dse.runtime.taskgraph import TaskGraphRuntime, partition_segments

        mapping, pes, graph = self.layermap.resolve(config)
        groups = [pe.core_ids for pe in pes.pes]     # PE p = CPU group p (host-cpu has no accelerators)
        app = self.application_for(config)
        t0 = time.perf_counter()
        try:
            segments = partition_segments(self.analysis, graph.expand(mapping.array).tolist())
            runtime = TaskGraphRuntime(
                segments, groups, lambda fid, slot: app.frame_inputs(fid), app.postprocess,
                frames=window_frames(self.settings.sample_size, config), warmup=warmup_frames(self.warmup, config),
                buffers=config.buffers,
                pre_threads=config.pre_threads, post_threads=config.post_threads, images_per_job=config.batch,
                keep_outputs=self.keep_outputs, keep_results=self.keep_outputs, timeout_s=self.timeout_s)
        except ort_refusals() as exc:
            return Measurement.refused(config, f"ONNX Runtime refused a segment: {type(exc).__name__}: {exc}",
                                       self.name)
        except ort_failures() as exc:
            return Measurement.error(config, f"building the segments failed: {type(exc).__name__}: {exc}",
                                     self.name)
        build_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        try:
            res = runtime.run()
        finally:
            runtime.close()
        self.last_run = res
        return self._to_measurement(config, res, [], build_s, time.perf_counter() - t1)
