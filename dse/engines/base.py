"""What every engine builder (sim, ort, trt) agrees on: the description of one stage and the build call."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from dse.core.errors import DseError, choices_error

if TYPE_CHECKING:  # keep `import dse.engines.base` light (no onnx import)
    import onnx

    from dse.engines.cache import EngineArtifact, EngineCache

PE_TYPES = ("GPU", "DLA", "CPU")


@dataclass(frozen=True)
class StageBuild:
    """One pipeline stage to build: its layer range, the PE it runs on and how.

    ``pe`` names the concrete PE ("GPU", "DLA0", "DLA1", "DLA" for either core / PND, "CPU0-1" for a
    core group); ``pe_type`` is its kind ("GPU" | "DLA" | "CPU"), which is what an engine is built for.
    """

    index: int
    first_layer: int
    last_layer: int
    pe: str
    pe_type: str
    precision: str
    batch: int
    input_tensors: tuple[str, ...] = ()
    output_tensors: tuple[str, ...] = ()

    def __post_init__(self):
        if self.pe_type not in PE_TYPES:
            raise choices_error("PE type", self.pe_type, PE_TYPES)
        if self.first_layer < 0 or self.last_layer < self.first_layer:
            raise DseError(f"stage {self.index}: empty or negative layer range {self.first_layer}..{self.last_layer}")
        if self.batch < 1:
            raise DseError(f"stage {self.index}: batch must be >= 1, got {self.batch}")
        object.__setattr__(self, "input_tensors", tuple(self.input_tensors))
        object.__setattr__(self, "output_tensors", tuple(self.output_tensors))

    @property
    def n_layers(self) -> int:
        return self.last_layer - self.first_layer + 1

    @property
    def dla_core(self) -> int | None:
        """The DLA core named by ``pe`` ("DLA1" -> 1); None for "DLA" (either core) or a non-DLA PE."""
        if self.pe_type != "DLA":
            return None
        suffix = self.pe[3:]
        return int(suffix) if suffix.isdigit() else None

    @property
    def cpu_cores(self) -> tuple[int, ...]:
        """The cores of a CPU group ("CPU0-3" -> (0, 1, 2, 3), "CPU2" -> (2,), "CPU0,2" -> (0, 2))."""
        if self.pe_type != "CPU":
            return ()
        spec = self.pe[3:]
        if not spec:
            raise DseError(f"CPU PE {self.pe!r} names no cores; expected e.g. 'CPU0-1' or 'CPU2'")
        cores: list[int] = []
        try:
            for part in spec.split(","):
                lo, _, hi = part.partition("-")
                cores.extend(range(int(lo), int(hi or lo) + 1))
        except ValueError as exc:
            raise DseError(f"bad CPU core group {self.pe!r}; expected e.g. 'CPU0-1', 'CPU2' or 'CPU0,2'") from exc
        if not cores:
            raise DseError(f"CPU core group {self.pe!r} is empty")
        return tuple(cores)


@runtime_checkable
class EngineBuilder(Protocol):
    """Builds (or reuses from the cache) the engine of one stage for one backend.

    ``model`` is the stage's ONNX (a ModelProto, its serialized bytes, or a path to a .onnx file);
    the builder derives its settings from ``stage`` (+ its platform), keys the cache with
    ``EngineCache.make_key(onnx bytes, settings, toolkit version, board model)`` and returns the artifact.
    """

    backend: str

    def build(self, stage: StageBuild, model: "onnx.ModelProto | bytes | str | Path",
              cache: "EngineCache") -> "EngineArtifact": ...


def model_bytes(model) -> bytes:
    """The serialized ONNX of a ModelProto, bytes, or a path: what the cache key hashes."""
    if isinstance(model, (bytes, bytearray)):
        return bytes(model)
    if isinstance(model, (str, Path)):
        return Path(model).read_bytes()
    if hasattr(model, "SerializeToString"):
        return model.SerializeToString(deterministic=True)
    raise DseError(f"expected an ONNX model (ModelProto, bytes or path), got {type(model).__name__}")
