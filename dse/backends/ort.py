"""The ``ort`` backend: measure a configuration for real on this host's CPU (platform ``host-cpu``).

Stages are partitioned from the network (``dse.graph.partition``), optimized once by the ``ort`` engine
builder into the engine cache (when one is given), loaded as ONNX Runtime sessions on the option's core
groups and run through the pipelined runtime with the benchmark's application (pre/post-processing).
Everything a board cannot do (unknown option, wrong stage count, infeasible cuts, unsupported precision, a
crash in a thread) comes back as a failed Measurement with the reason: the search goes on.
"""
from __future__ import annotations

import time
from typing import Any

from dse.backends.checks import check_cuts, check_layout
from dse.configuration import Configuration
from dse.errors import DseError
from dse.measurement import Measurement
from dse.runtime.cpu_groups import HostCpuPlatform, host_platform


def _load_host_platform(platform) -> HostCpuPlatform:
    if isinstance(platform, HostCpuPlatform):
        return platform
    if isinstance(platform, str):
        from dse.config import config_dir

        import yaml

        path = config_dir() / "platform" / f"{platform}.yaml"
        if not path.is_file():
            from dse.errors import choices_error

            raise choices_error("platform", platform, sorted(p.stem for p in path.parent.glob("*.yaml")))
        with open(path) as fh:
            return host_platform(yaml.safe_load(fh))
    return host_platform(platform)


class OrtBackend:
    """Real pipelined runs with ONNX Runtime on CPU core groups. ``source``: the network's NetworkAnalysis.

    Constructed like ``SimBackend(platform, source, **benchmark settings)``; extra keywords: ``application``
    (registry name), ``model`` (zoo name or cfg path, for YOLO anchors), ``image_dir``, ``timeout_s``.
    """

    name = "ort"

    def __init__(self, platform, source, *, preprocess: str = "resize", sample_size: int = 200,
                 warmup: int | None = None, seed: int = 0, input_size: int | None = None,
                 engine_cache=None, benchmark: str = "", application: str = "yolo", model: str | None = None,
                 image_dir: str | None = None, timeout_s: float = 600.0, keep_outputs: bool = False):
        self.platform = _load_host_platform(platform)
        self.analysis = source
        self.preprocess = preprocess
        self.sample_size = int(sample_size)
        self.warmup = max(2, min(20, self.sample_size // 10)) if warmup is None else int(warmup)
        self.seed = int(seed)
        self.input_size = input_size
        self.engine_cache = engine_cache
        self.benchmark = benchmark
        self.application = application
        self.model = model
        self.image_dir = image_dir
        self.timeout_s = float(timeout_s)
        self.keep_outputs = keep_outputs
        self.last_run = None  # the RunResult of the last measure (outputs/results when kept), for tests and tools

    @classmethod
    def from_config(cls, cfg, analysis=None, **kwargs) -> "OrtBackend":
        """From a composed Hydra config (``dse.config.compose_config``)."""
        b = cfg.benchmark
        if analysis is None:
            from dse.network import load_analysis

            analysis = load_analysis(cfg)
        model = str(b.model)
        return cls(cfg.platform, analysis, preprocess=str(b.preprocess), sample_size=int(b.sample_size),
                   warmup=int(b.warmup) if b.get("warmup") is not None else None, seed=int(cfg.seed),
                   input_size=int(b.input_size), benchmark=str(b.name), application=str(b.application),
                   model=model if not model.endswith(".onnx") else None, image_dir=b.get("image_dir"), **kwargs)

    # --- checks ------------------------------------------------------------------------------------------
    def check(self, config: Configuration) -> str | None:
        """Why this configuration cannot run here, or None."""
        p = self.platform
        reason = check_layout(config, p.options, p.name)
        if reason:
            return reason
        if config.precision not in p.precisions:
            return (f"platform {p.name} runs precision(s) {', '.join(p.precisions)}, not {config.precision} "
                    f"(set precision=fp32)")
        if max(config.streams) > p.max_streams_per_stage:
            return f"at most {p.max_streams_per_stage} streams per stage on {p.name}, got {list(config.streams)}"
        shape = next(iter(self.analysis.inputs.values()), [])
        if shape and shape[0] != config.batch:
            return f"the analysed network has batch {shape[0]}; configuration asks for batch {config.batch}"
        if self.input_size and config.input_size != self.input_size:
            return f"the analysed network has input size {self.input_size}; configuration asks for {config.input_size}"
        return check_cuts(config, self.analysis)

    # --- run -------------------------------------------------------------------------------------------------
    def engines(self, config: Configuration) -> tuple[list, list[str], float]:
        """(per stage: list of OrtStageEngine (two for PND), engine keys, build seconds)."""
        from dse.graph.partition import partition
        from dse.runtime.ort_engine import OrtStageEngine

        option = self.platform.option(config.option)
        start = time.perf_counter()
        stages = partition(self.analysis, tuple(config.cuts))
        keys: list[str] = []
        out = []
        for st, groups in zip(stages, option.stages):
            model: Any = st.model
            if self.engine_cache is not None:
                model = self._cached(st, groups[0], config, keys)
            out.append([OrtStageEngine(model, g) for g in groups])
        return out, keys, time.perf_counter() - start

    def _cached(self, stage, cores, config: Configuration, keys: list[str]):
        from dse.engines.base import StageBuild
        from dse.engines.ort import OrtEngineBuilder
        from dse.runtime.ort_engine import core_group_name

        spec = StageBuild(index=stage.index, first_layer=stage.first_layer, last_layer=stage.last_layer,
                         pe=core_group_name(cores), pe_type="CPU", precision=config.precision, batch=config.batch,
                         input_tensors=tuple(stage.inputs), output_tensors=tuple(stage.outputs))
        artifact = OrtEngineBuilder(self.platform.board_model).build(spec, stage.model, self.engine_cache)
        keys.append(artifact.key)
        return artifact.path

    def application_for(self, config: Configuration):
        from dse.apps import create_application

        options = {"input_size": config.input_size, "batch": config.batch, "seed": self.seed,
                   "image_dir": self.image_dir}
        if self.application == "yolo":
            options["preprocess"] = self.preprocess
            if self.model and not str(self.model).endswith(".onnx"):
                options["cfg"] = str(self.model)
        return create_application(self.application, options, self.analysis.inputs, self.analysis.outputs)

    def measure(self, config: Configuration, repeat: int = 0) -> Measurement:
        # ``repeat``: a re-run of the same configuration; every real run is a fresh sample anyway
        from dse.runtime.pipeline import Pipeline, StagePlan

        reason = self.check(config)
        if reason:
            return Measurement.failed(config, reason, backend=self.name)
        try:
            app = self.application_for(config)
            stage_engines, keys, build_s = self.engines(config)
        except DseError as exc:
            return Measurement.failed(config, str(exc), backend=self.name)
        except Exception as exc:  # ORT refusing a stage model is a result, not a crash
            return Measurement.failed(config, f"building the stages failed: {type(exc).__name__}: {exc}",
                                      backend=self.name)
        plans = [StagePlan(engines=e, streams=s, name=f"stage{i}")
                 for i, (e, s) in enumerate(zip(stage_engines, config.streams))]
        pipe = Pipeline(plans, lambda fid, slot: app.preprocess(fid), app.postprocess, frames=self.sample_size,
                        warmup=self.warmup, pre_threads=config.pre_threads, post_threads=config.post_threads,
                        buffers=config.buffers, images_per_job=config.batch, keep_outputs=self.keep_outputs,
                        keep_results=self.keep_outputs, timeout_s=self.timeout_s)
        t1 = time.perf_counter()
        res = pipe.run()
        for engines in stage_engines:
            for e in engines:
                e.close()
        self.last_run = res
        measure_s = time.perf_counter() - t1
        if not res.ok:
            m = Measurement.failed(config, f"run failed: {res.error}", backend=self.name)
            m.build_s, m.measure_s, m.engine_keys = build_s, measure_s, keys
            return m
        return Measurement(config=config, fps=res.fps, latency_ms_p50=res.latency_ms_p50,
                           latency_ms_p99=res.latency_ms_p99, util=dict(res.util), cpu_util=res.cpu_util,
                           stage_ms=list(res.stage_ms), engine_keys=keys, build_s=build_s,
                           measure_s=measure_s, backend=self.name)
