"""The `trt` engine builder: one TensorRT engine per GPU/DLA stage, cached by content, built with Polygraphy.

The settings come from the pure ``dse.engines.trt_settings.build_settings``; this module turns them into
Polygraphy's TensorRT loaders (``NetworkFromOnnxBytes`` -> ``CreateConfig`` -> ``EngineBytesFromNetwork``, with
Polygraphy's ``Calibrator`` reading the stage's calibration cache on TensorRT 8.5-10.x) and keeps only what
Polygraphy lacks: the settings dict of the cache key, the per-stage split of the calibration cache, the precision
passes of strongly typed TensorRT (>= 11, ``dse.engines.precision``) and the DLA summary of the engine inspector.
Polygraphy imports TensorRT lazily, so the loaders are constructed (and unit-tested) without it; TensorRT itself
is imported inside ``build_engine`` only.

UNTESTED ON HARDWARE: no machine in this workplace has TensorRT or a Jetson. The build is written against
Polygraphy's documented loaders and the TensorRT Python API for 8.5 to 11.x (docs/tensorrt.md) and has never run.
"""
from __future__ import annotations

import json
import tempfile
from dataclasses import replace
from pathlib import Path

from dse.engines.base import StageBuild, model_bytes
from dse.engines.cache import EngineArtifact, EngineCache
from dse.engines.trt_settings import (
    CalibrationCache,
    TrtPlatform,
    build_settings,
    key_settings,
    loader_args,
    parse_calibration_cache,
    split_calibration_cache,
    summarize_inspector,
)
from dse.core.errors import BuildRefused, DseError


def stage_io(model) -> tuple[dict[str, list[int]], set[str], list[str]]:
    """(input shapes, tensors the stage reads or produces, node names in order) of a stage ONNX model."""
    import onnx

    if not isinstance(model, onnx.ModelProto):
        model = onnx.load_from_string(model_bytes(model))
    initializers = {t.name for t in model.graph.initializer}
    shapes = {}
    for vi in model.graph.input:
        if vi.name in initializers:
            continue
        dims = vi.type.tensor_type.shape.dim
        shapes[vi.name] = [d.dim_value if d.HasField("dim_value") else -1 for d in dims]
    tensors = set(shapes)
    names = []
    for node in model.graph.node:
        tensors.update(o for o in node.output if o)
        names.append(node.name)
    return shapes, tensors, names


def _installed_trt_version() -> str | None:
    try:
        import tensorrt as trt  # noqa: F401
    except ImportError:
        return None
    return trt.__version__


class TrtEngineBuilder:
    """Builds GPU and DLA stage engines; int8 stages read their lines of the network's calibration cache."""

    backend = "trt"

    def __init__(self, platform: TrtPlatform, calibration: CalibrationCache | None = None,
                 timing_cache: str | Path | None = None):
        self.platform = platform
        self.calibration = calibration
        self.timing_cache = str(timing_cache) if timing_cache else None

    def settings_for(self, stage: StageBuild, model) -> dict:
        shapes, tensors, _ = stage_io(model)
        lines = None
        if stage.precision == "int8" and self.calibration is not None:
            lines = split_calibration_cache(self.calibration, [tensors])[0].lines()
        version = _installed_trt_version() or self.platform.trt_version
        platform = replace(self.platform, trt_version=version)
        return build_settings(stage, platform, input_shapes=shapes, calibration_lines=lines,
                              timing_cache=self.timing_cache)

    def build(self, stage: StageBuild, model, cache: EngineCache) -> EngineArtifact:
        data = model_bytes(model)
        settings = self.settings_for(stage, data)
        key = EngineCache.make_key(data, key_settings(settings), settings["trt_version"], self.platform.board_model)
        _, _, names = stage_io(data)

        def build(tmp: Path) -> dict:
            return build_engine(data, settings, tmp, stage_layer_names=names)

        return cache.get_or_build(key, "engine", stage.pe_type, build, settings=settings)


def stage_onnx(onnx_bytes: bytes, settings: dict) -> bytes:
    """The ONNX that TensorRT parses: the stage itself, or (strongly typed) the stage with its precision written in."""
    dynamic = {name: shape for name, shape in settings["input_shapes"].items() if any(d < 0 for d in shape)}
    if dynamic:
        raise DseError(f"stage inputs with dynamic dimensions {dynamic}: partition with fixed --input-shape first")
    if not settings.get("onnx_pass"):
        return onnx_bytes
    import onnx

    from dse.engines.precision import insert_qdq, to_fp16

    model = onnx.load_from_string(onnx_bytes)
    if settings["onnx_pass"] == "fp16":
        model = to_fp16(model)
    elif settings["onnx_pass"] == "qdq":
        model = insert_qdq(model, parse_calibration_cache("\n".join(settings["calibration_cache"])).scales())
    else:
        raise DseError(f"unknown ONNX precision pass {settings['onnx_pass']!r}; known: fp16, qdq")
    return model.SerializeToString(deterministic=True)


def make_loaders(onnx_bytes: bytes, settings: dict, trt, calibrator=None):
    """Polygraphy's engine-bytes loader for ``settings`` (network from ONNX -> builder config -> serialized engine).

    ``trt`` resolves the enum names of ``loader_args`` (``trt.MemoryPoolType``, ``trt.ProfilingVerbosity``).
    Polygraphy's ``CreateConfig(use_dla=True)`` builds on DLA core 0; ``PostprocessConfig`` sets the stage's core
    (the engine then loads on either core). Note: without GPU fallback Polygraphy also sets ``DIRECT_IO`` before
    TensorRT 11 (no reformat at the stage I/O, as reformats run on the GPU).
    """
    from polygraphy.backend.trt import CreateConfig, EngineBytesFromNetwork, NetworkFromOnnxBytes, PostprocessConfig

    args = loader_args(settings)
    config_args = dict(args["config"])
    config_args["memory_pool_limits"] = {getattr(trt.MemoryPoolType, pool): size
                                         for pool, size in config_args["memory_pool_limits"].items()}
    config_args["profiling_verbosity"] = getattr(trt.ProfilingVerbosity, config_args["profiling_verbosity"])
    network = NetworkFromOnnxBytes(onnx_bytes, **args["network"])
    config = CreateConfig(calibrator=calibrator, **config_args)
    core = settings["dla_core"]
    if config_args["use_dla"] and core:
        config = PostprocessConfig(config, lambda builder, net, cfg: setattr(cfg, "DLA_core", int(core)))
    return EngineBytesFromNetwork(network, config=config, **args["engine"])


def _calibrator(trt, settings: dict, workdir: Path):
    """Polygraphy's ``Calibrator`` over the stage's cache lines and no data: TensorRT reads every scale from the cache.

    Weakly typed builds only (TensorRT >= 11 has no calibrators; its INT8 stages carry Q/DQ instead). The cache goes
    through a file because Polygraphy sizes a file-like cache with ``fileno()``, which in-memory buffers lack. With
    no data to fall back on, a cache TensorRT rejects (another algorithm or version) fails the build loudly.
    """
    lines = settings.get("calibration_cache")
    if not lines or settings.get("onnx_pass"):
        return None
    from polygraphy.backend.trt import Calibrator

    cache = parse_calibration_cache("\n".join(lines))
    path = workdir / "calibration.cache"
    path.write_text(cache.text())
    return Calibrator([], cache=str(path), BaseClass=getattr(trt, cache.calibrator_class))


def _import_tensorrt():
    try:
        import tensorrt as trt
    except ImportError as exc:
        raise DseError("the 'trt' engine builder needs TensorRT (pip install 'dse[jetson]' on the board, "
                       "or JetPack's python3-libnvinfer); use the 'sim' or 'ort' builders here") from exc
    return trt


def build_engine(onnx_bytes: bytes, settings: dict, out: Path, stage_layer_names: list[str] | None = None) -> dict:
    """Build and serialize one engine to ``out``; return the inspector's device summary (untested on hardware)."""
    trt = _import_tensorrt()
    from polygraphy.backend.trt import EngineFromBytes
    from polygraphy.exception import PolygraphyException
    from polygraphy.logger import G_LOGGER

    from polygraphy.backend.trt import NetworkFromOnnxBytes

    dla = settings["default_device_type"] == "DLA"
    parsed = stage_onnx(onnx_bytes, settings)
    with tempfile.TemporaryDirectory(prefix="dse-trt-") as tmp, G_LOGGER.verbosity(G_LOGGER.WARNING):
        try:  # a stage TensorRT cannot parse is refused (a fact about it); a failed build may pass (memory)
            NetworkFromOnnxBytes(parsed, **loader_args(settings)["network"])()
        except PolygraphyException as exc:
            raise BuildRefused(f"TensorRT cannot parse the stage: {exc}") from exc
        try:
            build = make_loaders(parsed, settings, trt, _calibrator(trt, settings, Path(tmp)))
            data = bytes(build())
        except PolygraphyException as exc:  # Polygraphy reports builder failures this way
            raise DseError(f"TensorRT could not build the {settings['default_device_type']} engine: {exc}") from exc
    out.write_bytes(data)

    runtime = trt.Runtime(trt.Logger(trt.Logger.WARNING))
    if dla:
        runtime.DLA_core = int(settings["dla_core"] or 0)
    engine = EngineFromBytes(data, runtime=runtime)()
    # Polygraphy's inspection prints engines for people; the DLA loadable/fallback counts are ours
    info = engine.create_engine_inspector().get_engine_information(trt.LayerInformationFormat.JSON)
    summary = summarize_inspector(json.loads(info), dla, stage_layer_names)
    summary["engine_bytes"] = len(data)
    return summary
