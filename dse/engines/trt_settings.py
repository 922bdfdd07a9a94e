"""Pure translation of a stage (+ its platform) into TensorRT builder settings, and the text formats around them.

Nothing here imports TensorRT: the settings are a plain dict (what goes into the cache key and the sidecar);
``dse.engines.trt`` turns it into Polygraphy loaders (``loader_args`` is the pure half of that). Two paths by
version (sources in docs/tensorrt.md):

- TensorRT 8.5-10.x, weakly typed: precision builder flags (FP16, INT8 + a calibration cache), ``EXPLICIT_BATCH``
  network flag before 10 (10.0 made explicit batch the only mode);
- TensorRT >= 11, strongly typed (11.0 removed the precision flags and implicit INT8 calibration): no precision
  flags, the ``STRONGLY_TYPED`` network flag, and an ONNX pass (``dse.engines.precision``) that writes the
  precision into the stage model: FP16 tensors, or explicit Q/DQ from the calibration scales;
- below 8.5 (JetPack 4: TensorRT 5-8.2, Python 3.6) nothing is built: use ``dse export trtexec``.

Also here: the INT8 calibration cache (text format ``TRT-<ver>-<Algo>`` header, then ``tensor: hex`` lines,
hex = the big-endian IEEE-754 bits of the float32 scale) split per stage, and the summary of the engine inspector's
per-layer JSON. UNTESTED ON HARDWARE: the settings are unit-tested, no TensorRT ever consumed them here.
"""
from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field

from dse.engines.base import StageBuild
from dse.core.errors import BuildRefused, DseError, choices_error
from dse.platform import toolkit_version_tuple

TRT_PRECISIONS = ("fp32", "fp16", "int8")
# settings that change how or where an engine is built/loaded but not the engine itself: kept out of the key
NON_KEY_SETTINGS = ("dla_core", "timing_cache")


@dataclass(frozen=True)
class TrtPlatform:
    """What the TensorRT builder needs to know about the board (a slice of the platform description)."""

    board_model: str = "jetson-agx-xavier"
    trt_version: str = "8.5.2"
    workspace_bytes: int = 1 << 30
    dla_cores: int = 2
    gpu_fallback: bool = True
    # optional DLA pools, e.g. {"DLA_MANAGED_SRAM": 1 << 20}; absent = TensorRT's defaults
    dla_memory_pools: dict = field(default_factory=dict)

    @classmethod
    def from_platform(cls, platform, **overrides) -> "TrtPlatform":
        """From a ``dse.platform.Platform`` (board model, toolkit 'tensorrt-8.6.1', DLA PEs)."""
        version = ".".join(str(v) for v in parse_version(platform.toolkit_version))
        dla = sum(1 for pe in platform.pes.values() if str(pe.type).lower() == "dla")
        return cls(**{"board_model": platform.board_model, "trt_version": version, "dla_cores": dla, **overrides})


def parse_version(text: str) -> tuple[int, ...]:
    """'8.6.1.6' -> (8, 6, 1, 6), '10.0.0b6' -> (10, 0, 0), 'tensorrt-8.5.2' -> (8, 5, 2)
    (``dse.platform.toolkit_version_tuple``, strict: a text without a version is an error)."""
    version = toolkit_version_tuple(text)
    if version is None:
        raise DseError(f"cannot parse TensorRT version {text!r}; expected e.g. '8.6.1'")
    return version


SUPPORTED_VERSIONS = "8.5 to 10.x (weakly typed) and 11.x (strongly typed)"


def dla_refusal(version: tuple[int, ...], board_model: str) -> str | None:
    """Why TensorRT ``version`` builds no DLA engine for ``board_model``, or None.

    NVIDIA, "Working with DLA" (TensorRT 11.4.1): 10.7 was the last 10.x release with DLA (10.8+ ship for x86/SBSA
    only), DLA was unavailable in 11.0 through 11.3, 11.4.0 had it only on Windows on ARM, and 11.4.1 brought it back
    on Jetson AGX Orin under JetPack >= 7.2.2 (Jetson Thor has no DLA).
    """
    text = ".".join(str(v) for v in version)
    if (10, 8) <= version < (11, 4, 1):
        return (f"TensorRT {text} has no DLA support (10.7 was the last 10.x release with DLA, 11.0-11.3 have none, "
                f"11.4.0 only on Windows on ARM): use JetPack 6.x (TensorRT 10.3) or TensorRT >= 11.4.1 on "
                f"JetPack >= 7.2.2 (Jetson AGX Orin)")
    board = str(board_model).lower()
    if version >= (11, 4, 1) and not ("orin" in board and "agx" in board):
        return f"TensorRT {text} supports the DLA on Jetson AGX Orin only (JetPack >= 7.2.2), not on {board_model}"
    return None


def build_settings(stage: StageBuild, platform: TrtPlatform, *, input_shapes: dict[str, list[int]] | None = None,
                   calibration_lines: list[str] | None = None, timing_cache: str | None = None) -> dict:
    """The builder settings of one stage as a plain, JSON-able dict (pure: the same inputs give the same dict).

    - explicit batch, static shapes (``input_shapes``: the stage inputs with the batch baked in);
    - ``network_flags``: ``EXPLICIT_BATCH`` before TensorRT 10 (where it became the only mode), ``STRONGLY_TYPED``
      from 11;
    - ``memory_pools``: ``set_memory_pool_limit`` pools (workspace; DLA pools on DLA stages);
    - weakly typed precision flags: fp16 -> FP16; int8 -> INT8 + FP16 (layers without an INT8 kernel run in FP16
      instead of FP32, and on the DLA they stay on the DLA instead of falling back), with the stage's calibration
      lines; TF32 always, TensorRT's own default (Polygraphy's CreateConfig clears it unless asked);
    - strongly typed: no precision flags, ``onnx_pass`` names the precision pass ("fp16" | "qdq", the latter from
      the calibration lines) that writes the precision into the stage model;
    - DLA stages: ``default_device_type`` DLA, ``dla_core`` (build-time only: the engine loads on any core, so
      it is not in the cache key), ``GPU_FALLBACK`` when the platform allows it; refused where the TensorRT
      version has no DLA (``dla_refusal``);
    - ``profiling_verbosity`` DETAILED so the engine inspector reports every layer and its device.
    """
    if stage.precision not in TRT_PRECISIONS:
        raise choices_error("TensorRT precision", stage.precision, TRT_PRECISIONS)
    if stage.pe_type == "CPU":
        raise DseError(f"stage {stage.index} runs on {stage.pe} (a CPU core group): TensorRT builds GPU/DLA stages only;"
                       " use the 'ort' engine builder for CPU stages")
    version = parse_version(platform.trt_version)
    if version < (8, 5):
        raise BuildRefused(f"TensorRT {platform.trt_version} (JetPack 4.x) is not supported: engines are built by the "
                       f"orchestrator, which needs Python >= 3.11, and JetPack 4's TensorRT bindings are for "
                       f"Python 3.6; build the stages on the board with the commands of "
                       f"`dse export trtexec best.yaml`. Supported: TensorRT {SUPPORTED_VERSIONS}")
    if platform.workspace_bytes <= 0:
        raise DseError(f"workspace must be positive, got {platform.workspace_bytes} bytes")
    strong = version >= (11,)

    flags: set[str] = set()
    if not strong:
        flags.add("TF32")
        if stage.precision in ("fp16", "int8"):
            flags.add("FP16")
        if stage.precision == "int8":
            flags.add("INT8")

    dla = stage.pe_type == "DLA"
    memory_pools = {"WORKSPACE": int(platform.workspace_bytes)}
    if dla:
        if stage.precision == "fp32":
            raise BuildRefused(f"stage {stage.index} on {stage.pe}: the DLA runs fp16 or int8 only, not fp32")
        reason = dla_refusal(version, platform.board_model)
        if reason:
            raise BuildRefused(f"stage {stage.index} on {stage.pe}: {reason}")
        core = stage.dla_core if stage.dla_core is not None else 0
        if not 0 <= core < platform.dla_cores:
            raise BuildRefused(f"stage {stage.index}: DLA core {core} does not exist on {platform.board_model} "
                           f"(valid: 0..{platform.dla_cores - 1})")
        if platform.gpu_fallback:
            flags.add("GPU_FALLBACK")
        for pool, size in sorted(platform.dla_memory_pools.items()):
            if pool not in ("DLA_MANAGED_SRAM", "DLA_LOCAL_DRAM", "DLA_GLOBAL_DRAM"):
                raise choices_error("DLA memory pool", pool, ("DLA_MANAGED_SRAM", "DLA_LOCAL_DRAM", "DLA_GLOBAL_DRAM"))
            if size < 4096 or size & (size - 1):
                raise DseError(f"DLA memory pool {pool} must be a power of 2 >= 4 KiB, got {size}")
            memory_pools[pool] = int(size)
    else:
        core = None

    if stage.precision == "int8" and not calibration_lines:
        raise DseError(f"stage {stage.index} is int8 but has no calibration cache lines; "
                       "run `dse calibrate` (or give the network's calibration cache) first")

    if strong:
        network_flags = ["STRONGLY_TYPED"]
    else:
        network_flags = ["EXPLICIT_BATCH"] if version < (10,) else []
    return {
        "backend": "trt",
        "trt_version": ".".join(str(v) for v in version),
        "board_model": platform.board_model,
        "network_flags": network_flags,
        "builder_flags": sorted(flags),
        "onnx_pass": {"fp16": "fp16", "int8": "qdq"}.get(stage.precision) if strong else None,
        "default_device_type": "DLA" if dla else "GPU",
        "dla_core": core,
        "memory_pools": memory_pools,
        "profiling_verbosity": "DETAILED",
        "precision": stage.precision,
        "batch": stage.batch,
        "input_shapes": {k: [int(d) for d in v] for k, v in sorted((input_shapes or {}).items())},
        "calibration_cache": list(calibration_lines) if stage.precision == "int8" else None,
        "timing_cache": timing_cache,
    }


# Polygraphy's CreateConfig takes these builder flags as keyword arguments
_CONFIG_FLAGS = {"TF32": "tf32", "FP16": "fp16", "INT8": "int8", "GPU_FALLBACK": "allow_gpu_fallback"}


def loader_args(settings: dict) -> dict:
    """Keyword arguments of Polygraphy's loaders for ``settings`` (pure; TensorRT enums given by member name).

    ``{"network": NetworkFromOnnxBytes, "config": CreateConfig, "engine": EngineBytesFromNetwork}``; the
    ``memory_pool_limits`` keys (``trt.MemoryPoolType``) and ``profiling_verbosity`` (``trt.ProfilingVerbosity``)
    are names that ``dse.engines.trt.make_loaders`` resolves. ``EXPLICIT_BATCH`` needs no argument: Polygraphy's
    network loaders set it themselves before TensorRT 10.
    """
    unknown = sorted(set(settings["builder_flags"]) - set(_CONFIG_FLAGS))
    if unknown:
        raise DseError(f"builder flags {unknown} have no Polygraphy CreateConfig argument; "
                       f"known: {sorted(_CONFIG_FLAGS)}")
    config = {arg: flag in settings["builder_flags"] for flag, arg in _CONFIG_FLAGS.items()}
    config.update(use_dla=settings["default_device_type"] == "DLA",
                  memory_pool_limits=dict(settings["memory_pools"]),
                  profiling_verbosity=settings["profiling_verbosity"],
                  load_timing_cache=settings.get("timing_cache"))
    return {
        "network": {"strongly_typed": "STRONGLY_TYPED" in settings["network_flags"]},
        "config": config,
        "engine": {"save_timing_cache": settings.get("timing_cache")},
    }


def key_settings(settings: dict) -> dict:
    """The part of the settings that defines the engine (what the cache key hashes)."""
    return {k: v for k, v in settings.items() if k not in NON_KEY_SETTINGS}


# --- INT8 calibration cache -----------------------------------------------------------------------------

_HEADER = re.compile(r"^TRT-\d+-(\w+)$")
# the algorithm named in a cache header -> the TensorRT calibrator class that reads it (TensorRT ignores a cache
# whose header names another algorithm, and the stage would then need calibration data it does not have)
CALIBRATOR_CLASSES = {
    "EntropyCalibration2": "IInt8EntropyCalibrator2",
    "EntropyCalibration": "IInt8EntropyCalibrator",
    "MinMaxCalibration": "IInt8MinMaxCalibrator",
    "LegacyCalibration": "IInt8LegacyCalibrator",
}


@dataclass(frozen=True)
class CalibrationCache:
    """A parsed TensorRT calibration cache: header line and ordered (tensor, hex) entries."""

    header: str
    entries: tuple[tuple[str, str], ...]

    def scales(self) -> dict[str, float]:
        """tensor -> float32 scale decoded from the hex bits."""
        return {name: hex_to_float(h) for name, h in self.entries}

    def lines(self) -> list[str]:
        return [self.header] + [f"{name}: {h}" for name, h in self.entries]

    def text(self) -> str:
        return "\n".join(self.lines()) + "\n"

    @property
    def calibrator_class(self) -> str:
        """The ``tensorrt`` calibrator class whose algorithm wrote this cache ('IInt8EntropyCalibrator2', ...)."""
        algo = _HEADER.match(self.header).group(1)
        if algo not in CALIBRATOR_CLASSES:
            raise choices_error("calibration algorithm in the cache header", algo, tuple(CALIBRATOR_CLASSES))
        return CALIBRATOR_CLASSES[algo]


def hex_to_float(h: str) -> float:
    return struct.unpack(">f", bytes.fromhex(h.rjust(8, "0")))[0]


def float_to_hex(x: float) -> str:
    return struct.pack(">f", x).hex()


def parse_calibration_cache(text: str) -> CalibrationCache:
    """Parse the text cache that TensorRT's calibrators write (``write_calibration_cache``)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines or not _HEADER.match(lines[0]):
        first = lines[0] if lines else "<empty>"
        raise DseError(f"not a TensorRT calibration cache: first line {first!r}, expected e.g. 'TRT-8601-EntropyCalibration2'")
    entries = []
    for n, line in enumerate(lines[1:], start=2):
        name, sep, h = line.rpartition(":")
        h = h.strip()
        if not sep or not name or not re.fullmatch(r"[0-9a-fA-F]{1,8}", h):
            raise DseError(f"calibration cache line {n} is not 'tensor: hexfloat': {line!r}")
        entries.append((name.strip(), h.lower()))
    return CalibrationCache(header=lines[0], entries=tuple(entries))


def split_calibration_cache(cache: CalibrationCache | str, stage_tensors: list[set[str]] | list[list[str]]) -> list[CalibrationCache]:
    """One cache per stage with the lines of the tensors that stage reads or produces (its inputs included).

    Entries TensorRT names after its own layers (``(Unnamed Layer* 12) [Constant]_output``) refer to the whole
    network's layer numbering, which a stage network does not share: they are dropped, and TensorRT recomputes
    what it needs for them (constants) at build time.
    """
    if isinstance(cache, str):
        cache = parse_calibration_cache(cache)
    out = []
    for tensors in stage_tensors:
        keep = set(tensors)
        out.append(CalibrationCache(cache.header, tuple((n, h) for n, h in cache.entries if n in keep)))
    return out


# --- engine inspector report --------------------------------------------------------------------------

def summarize_inspector(info: dict | str, dla_stage: bool, stage_layer_names: list[str] | None = None) -> dict:
    """Per-layer device report from ``IEngineInspector.get_engine_information(LayerInformationFormat.JSON)``.

    A DLA subgraph appears as one engine layer (name ``{ForeignNode[first...last]}``, type ``ForeignNode`` or
    ``DLA``): each is one DLA *loadable*. On a GPU stage a ForeignNode is a Myelin subgraph, not a DLA, so
    ``dla_stage`` decides. Reformat layers (copies at GPU<->DLA boundaries) are counted apart from the
    fallback (GPU) layers. Works with DETAILED (dict layers) and LAYER_NAMES_ONLY (string layers) verbosity.
    With ``stage_layer_names`` (the stage's ONNX node names in layer order) it also counts the ONNX layers
    inside the loadables (``dla_onnx_layers``) from the ``first...last`` range in each loadable's name.
    """
    import json

    if isinstance(info, str):
        info = json.loads(info)
    layers = info.get("Layers", [])
    loadables, fallback, reformats, dla_runs = [], [], [], 0
    previous_dla = False
    for layer in layers:
        if isinstance(layer, str):
            name, ltype = layer, ""
        else:
            name, ltype = str(layer.get("Name", "")), str(layer.get("LayerType", ""))
        is_foreign = "ForeignNode" in name or ltype.lower() in ("foreignnode", "dla")
        is_reformat = ltype.lower() == "reformat" or name.lower().startswith("reformat") or "reformatted" in name.lower()
        if dla_stage and is_foreign and not is_reformat and ltype.lower() != "myelin":
            loadables.append(name)
            if not previous_dla:
                dla_runs += 1
            previous_dla = True
            continue
        previous_dla = False
        (reformats if is_reformat else fallback).append(name)
    dla_onnx_layers = None
    if stage_layer_names is not None:
        position = {n: i for i, n in enumerate(stage_layer_names)}
        dla_onnx_layers = 0
        for name in loadables:
            rng = foreign_node_range(name)
            if rng and rng[0] in position and rng[1] in position:
                dla_onnx_layers += position[rng[1]] - position[rng[0]] + 1
    return {
        "engine_layers": len(layers),
        "dla_onnx_layers": dla_onnx_layers,
        "dla_loadables": len(loadables),
        "dla_runs": dla_runs,
        "dla_layer_names": loadables,
        "fallback_layers": len(fallback),
        "fallback_layer_names": fallback,
        "reformat_layers": len(reformats),
    }


def foreign_node_range(name: str) -> tuple[str, str] | None:
    """'{ForeignNode[conv1...relu5]}' -> ('conv1', 'relu5'): the first/last ONNX layer of a DLA loadable."""
    m = re.search(r"ForeignNode\[(.*)\]", name)
    if not m:
        return None
    body = m.group(1)
    first, sep, last = body.partition("...")
    return (first, last if sep else first)
