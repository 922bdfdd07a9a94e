"""The `trt` engine builder: one TensorRT engine per GPU/DLA stage, cached by content.

The settings come from the pure ``dse.engines.trt_settings.build_settings`` (unit-tested without TensorRT);
this module only applies them to a real builder. TensorRT is imported lazily, inside the build.

UNTESTED ON HARDWARE: no machine in this workplace has TensorRT or a Jetson. ``apply_settings`` and
``build_engine`` are written against the documented TensorRT Python API for 8.5, 8.6 and 10.x
(``set_memory_pool_limit``, ``build_serialized_network``, ``IEngineInspector`` with
``LayerInformationFormat.JSON``, ``EXPLICIT_BATCH`` only before 10) and have never run.
"""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from dse.engines.base import StageBuild, model_bytes
from dse.engines.cache import EngineArtifact, EngineCache, atomic_write_bytes
from dse.engines.trt_settings import (
    CalibrationCache,
    TrtPlatform,
    build_settings,
    key_settings,
    split_calibration_cache,
    summarize_inspector,
)
from dse.errors import DseError


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


def apply_settings(trt, builder, network, settings: dict):
    """A configured ``IBuilderConfig`` for ``settings`` (untested on hardware, see the module docstring)."""
    config = builder.create_builder_config()
    for pool, size in settings["memory_pools"].items():
        config.set_memory_pool_limit(getattr(trt.MemoryPoolType, pool), int(size))
    for flag in settings["builder_flags"]:
        config.set_flag(getattr(trt.BuilderFlag, flag))
    config.profiling_verbosity = getattr(trt.ProfilingVerbosity, settings["profiling_verbosity"])
    if settings["default_device_type"] == "DLA":
        config.default_device_type = trt.DeviceType.DLA
        config.DLA_core = int(settings["dla_core"] or 0)
    dynamic = {name: shape for name, shape in settings["input_shapes"].items() if any(d < 0 for d in shape)}
    if dynamic:
        raise DseError(f"stage inputs with dynamic dimensions {dynamic}: partition with fixed --input-shape first")
    if settings.get("calibration_cache"):
        config.int8_calibrator = _cache_calibrator(trt, settings["calibration_cache"], settings["batch"])
    return config


def _cache_calibrator(trt, lines: list[str], batch: int):
    """An entropy calibrator that never sees data: TensorRT reads the scales from the stage's cache lines."""
    payload = ("\n".join(lines) + "\n").encode()

    class CacheCalibrator(trt.IInt8EntropyCalibrator2):
        def __init__(self):
            trt.IInt8EntropyCalibrator2.__init__(self)

        def get_batch_size(self):
            return batch

        def get_batch(self, names):
            return None

        def read_calibration_cache(self):
            return payload

        def write_calibration_cache(self, cache):
            return None

    return CacheCalibrator()


def build_engine(onnx_bytes: bytes, settings: dict, out: Path, stage_layer_names: list[str] | None = None) -> dict:
    """Parse, configure, build and serialize one engine to ``out``; return the inspector's device summary.

    Untested on hardware (see the module docstring).
    """
    try:
        import tensorrt as trt
    except ImportError as exc:
        raise DseError("the 'trt' engine builder needs TensorRT (pip install 'dse[jetson]' on the board, "
                       "or JetPack's python3-libnvinfer); use the 'sim' or 'ort' builders here") from exc

    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    net_flags = 0
    for name in settings["network_flags"]:
        net_flags |= 1 << int(getattr(trt.NetworkDefinitionCreationFlag, name))
    network = builder.create_network(net_flags)
    parser = trt.OnnxParser(network, logger)
    if not parser.parse(onnx_bytes):
        errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise DseError(f"TensorRT could not parse the stage ONNX: {errors}")
    config = apply_settings(trt, builder, network, settings)
    timing_cache = settings.get("timing_cache")
    if timing_cache:
        _load_timing_cache(config, Path(timing_cache))
    serialized = builder.build_serialized_network(network, config)
    if serialized is None:
        raise DseError(f"TensorRT failed to build the {settings['default_device_type']} engine (see its log above)")
    data = bytes(serialized)
    out.write_bytes(data)
    if timing_cache:
        _merge_timing_cache(config, Path(timing_cache))

    runtime = trt.Runtime(logger)
    if settings["default_device_type"] == "DLA":
        runtime.DLA_core = int(settings["dla_core"] or 0)
    engine = runtime.deserialize_cuda_engine(data)
    inspector = engine.create_engine_inspector()
    info = inspector.get_engine_information(trt.LayerInformationFormat.JSON)
    summary = summarize_inspector(json.loads(info), settings["default_device_type"] == "DLA", stage_layer_names)
    summary["engine_bytes"] = len(data)
    return summary


def _load_timing_cache(config, path: Path) -> None:
    data = path.read_bytes() if path.exists() else b""
    config.set_timing_cache(config.create_timing_cache(data), ignore_mismatch=False)


def _merge_timing_cache(config, path: Path) -> None:
    """Fold this build's timings into the shared cache file (under a lock: several jobs build at once)."""
    from filelock import FileLock

    with FileLock(str(path) + ".lock"):
        ours = config.get_timing_cache()
        if path.exists():
            theirs = config.create_timing_cache(path.read_bytes())
            theirs.combine(ours, ignore_mismatch=False)
            ours = theirs
        atomic_write_bytes(path, bytes(ours.serialize()))
