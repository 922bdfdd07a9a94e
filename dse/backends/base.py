"""What every backend is: the ``Backend`` protocol, its declared capabilities, and the measurement settings
each one receives, built once from the config.

A backend measures a ``Configuration`` on a ``Platform`` and answers with a ``Measurement`` whose status says
what happened: ``ok``; ``refused`` (the SDK or the board's rules reject the configuration: a fact about the
configuration, cached); ``error`` (a build or run failed for a reason that may pass: recorded, retried next
run). A backend raises ``DseError`` for infrastructure trouble it cannot classify (the evaluator records an
error); any other exception is a bug and ends the job.

Optional abilities are declared in ``capabilities``, never discovered by ``hasattr``:
- ``GPU_LAYER_PROFILE``: ``gpu_layer_profile(precision, batch) -> list[float]`` (ms per layer, like
  TensorRT's IProfiler; a board gives no per-layer DLA profile);
- ``TRACE``: ``measure_with_trace(config, *, trace, repeat) -> (Measurement, trace | None)`` (a schedule to draw);
- ``INTERLEAVED``: runs a stage whose frames alternate over the GPU and the DLAs (the Interleaved baseline);
- ``RUNS_MODEL``: executes the network with its weights (``NetworkAnalysis.weighted_model``), so its
  measurements depend on the weights and the measurement context names them (a virtual board costs shapes).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Mapping, Protocol

from dse.core.configuration import PREPROCESS, Configuration
from dse.core.errors import DseError, choices_error
from dse.core.validate import check_keys
from dse.core.measurement import Measurement
from dse.platform import Platform

if TYPE_CHECKING:
    from dse.engines.cache import EngineCache

GPU_LAYER_PROFILE = "gpu_layer_profile"
TRACE = "trace"
INTERLEAVED = "interleaved"
RUNS_MODEL = "runs_model"
CAPABILITIES = (GPU_LAYER_PROFILE, TRACE, INTERLEAVED, RUNS_MODEL)


@dataclass(frozen=True)
class MeasureSettings:
    """How a run is measured, the same for every backend: the benchmark's application and its pre-processing,
    images, frames per measurement and warm-up, the seed, and the analysed network's input size."""

    benchmark: str = ""
    precision: str = "int8"
    batch: int = 1
    input_size: int | None = None        # of the analysed network (None: the backend reads it off the network)
    preprocess: str = "resize"
    application: str = "yolo"
    model: str | None = None             # zoo name or Darknet .cfg (YOLO anchors); None for an .onnx model
    image_dir: str | None = None         # JPEG/PNG frames; None = seeded synthetic frames
    calibration_cache: str | None = None # TensorRT INT8 calibration cache of the network (the trt backend)
    sample_size: int = 5000              # frames per measurement, after warm-up
    warmup: int | None = None            # None = the backend's default
    seed: int = 0
    reuse_inputs: bool = False           # feed each image's pre-processed tensors again (time the network alone)

    def __post_init__(self):
        if self.preprocess not in PREPROCESS:
            raise choices_error("benchmark.preprocess", self.preprocess, PREPROCESS)
        if self.sample_size < 1:
            raise DseError(f"benchmark.sample_size must be >= 1, got {self.sample_size}")
        if self.warmup is not None and self.warmup < 0:
            raise DseError(f"benchmark.warmup must be >= 0, got {self.warmup}")
        if self.image_dir is not None and not Path(self.image_dir).is_dir():
            raise DseError(f"benchmark.image_dir {self.image_dir!r} is not a directory")
        if self.calibration_cache is not None and not Path(self.calibration_cache).is_file():
            raise DseError(f"benchmark.calibration_cache {self.calibration_cache!r}: no such file")

    @classmethod
    def from_config(cls, cfg) -> "MeasureSettings":
        """From a composed config (``dse.config.compose_config``)."""
        b = cfg.benchmark
        model = str(b.model)
        warmup = b.get("warmup")
        return cls(benchmark=str(b.name), precision=str(cfg.precision), batch=int(cfg.batch),
                   input_size=int(b.input_size), preprocess=str(b.preprocess), application=str(b.application),
                   model=None if model.endswith(".onnx") else model,
                   image_dir=None if b.get("image_dir") is None else str(b.image_dir),
                   calibration_cache=None if b.get("calibration_cache") is None else str(b.calibration_cache),
                   sample_size=int(b.sample_size), warmup=None if warmup is None else int(warmup),
                   seed=int(cfg.seed))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "MeasureSettings":
        check_keys(d, {f.name for f in fields(cls)}, "measure setting")
        return cls(**dict(d))

    def to_dict(self) -> dict:
        return asdict(self)

    def app_options(self, config: Configuration) -> dict:
        """The application's options for one configuration (``dse.apps``)."""
        options: dict[str, Any] = {"input_size": config.input_size, "batch": config.batch, "seed": self.seed,
                                   "image_dir": self.image_dir, "reuse_inputs": self.reuse_inputs}
        if self.application == "yolo":
            options["preprocess"] = self.preprocess
            if self.model:
                options["cfg"] = self.model
        return options


def in_flight(config) -> int:
    """Frames a pipelined configuration holds at once (an upper bound): its buffers and every stream's."""
    return config.buffers + sum(config.streams)


def window_frames(sample_size: int, config) -> int:
    """Frames one measurement times: the sample size, but at least twice what the pipeline holds at once, so a
    tiny sample times the steady state, not the filling pipeline (tiny-chain, option A, cuts 4, streams 2,3,
    buffers 8, warm-up 0 on the virtual Xavier: 1 frame 170 FPS, 5 frames 274, 10 or more 320;
    `dse measure benchmark=tiny-chain benchmark.sample_size=N benchmark.warmup=0 --option A --cuts 4 --streams 2,3
    --buffers 8 --pre 2 --post 2`)."""
    return max(sample_size, 2 * in_flight(config) * config.batch)


def warmup_frames(warmup: int, config) -> int:
    """Frames run before the window: the asked warm-up, but at least twice what the pipeline holds, so the window
    starts with every buffer and stream busy."""
    return max(warmup, 2 * config.buffers, 2 * sum(config.streams))


class Backend(Protocol):
    """Measures configurations of one network on one platform."""

    name: ClassVar[str]
    capabilities: ClassVar[frozenset[str]]
    platform: Platform
    settings: MeasureSettings
    engine_cache: "EngineCache | None"     # its built/reused counts are Table 3.7's engines built

    @classmethod
    def validate(cls, platform: Platform, settings: MeasureSettings) -> None:
        """Raise ``DseError`` if this backend cannot measure on ``platform`` with ``settings`` at all (called
        when the workflow is planned, before any job runs, and by the constructor)."""

    @classmethod
    def sets_clocks(cls, platform: Platform) -> bool:
        """Whether this backend applies a configuration's power mode and clocks on ``platform`` (the clock phase
        needs it; ``dse.platform.modes``)."""

    def check(self, config: Configuration) -> str | None:
        """Why the SDK or the board would refuse ``config``, or None."""

    def measure(self, config: Configuration, *, repeat: int = 0) -> Measurement:
        """One measurement; ``repeat`` > 0 asks for an independent re-run of the same configuration."""


def supports(backend: Backend, capability: str) -> bool:
    if capability not in CAPABILITIES:
        raise choices_error("backend capability", capability, CAPABILITIES)
    return capability in backend.capabilities
