"""The result of measuring one configuration, the same for every backend (sim, ort, trt)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from dse.configuration import Configuration


@dataclass
class Measurement:
    """What a board (real or virtual) reports for one configuration.

    A failed build or run is a Measurement too (status="failed", reason says why, fps=0): the search goes on.
    ``util`` maps PE name (GPU, DLA0, DLA1, CPU, or a CPU core group) to a fraction in [0, 1].
    """

    config: Configuration
    status: str = "ok"
    reason: str = ""
    fps: float = 0.0
    latency_ms_p50: float = 0.0
    latency_ms_p99: float = 0.0
    util: dict[str, float] = field(default_factory=dict)
    cpu_util: float = 0.0
    power_w: float = 0.0
    energy_j_per_frame: float = 0.0
    stage_ms: list[float] = field(default_factory=list)
    dla_loadables: int = 0
    fallback_layers: int = 0
    engine_keys: list[str] = field(default_factory=list)
    build_s: float = 0.0
    measure_s: float = 0.0
    backend: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def gpu_util(self) -> float:
        return float(self.util.get("GPU", 0.0))

    def to_dict(self) -> dict:
        d = asdict(self)
        d["config"] = self.config.to_dict()
        d["config_hash"] = self.config.hash
        return d

    @classmethod
    def failed(cls, config: Configuration, reason: str, backend: str = "") -> "Measurement":
        return cls(config=config, status="failed", reason=reason, backend=backend)
