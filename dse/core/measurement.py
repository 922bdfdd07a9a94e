"""The result of measuring one configuration, the same for every backend (sim, ort, trt)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from dse.core.configuration import Configuration

STATUSES = ("ok", "refused", "error")


@dataclass
class Measurement:
    """What a board (real or virtual) reports for one configuration.

    ``status``: ``ok``; ``refused`` (the SDK or the board's rules reject the configuration: cached like any
    answer); ``error`` (a build or run failed for a reason that may pass: recorded, never replayed from the
    cache, so the next run tries again). A refused or errored configuration scores 0 and the search goes on.
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
    power_w: float | None = None              # None: not measured (e.g. no power rails on host-cpu)
    energy_j_per_frame: float | None = None
    stage_ms: list[float] = field(default_factory=list)
    dla_loadables: int = 0
    fallback_layers: int = 0
    fallback_reasons: dict[str, int] | None = None   # failed DLA rule (op/feature) -> fallback layers; None: unknown
    engine_keys: list[str] = field(default_factory=list)
    build_s: float = 0.0
    measure_s: float = 0.0
    backend: str = ""

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"measurement status {self.status!r} is not one of {STATUSES}")

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def replayable(self) -> bool:
        """Whether a stored copy may answer for a new measurement (an error may pass: measure again)."""
        return self.status != "error"

    def to_dict(self) -> dict:
        d = asdict(self)
        d["config"] = self.config.to_dict()
        d["config_hash"] = self.config.hash
        return d

    @classmethod
    def refused(cls, config: Configuration, reason: str, backend: str = "") -> "Measurement":
        return cls(config=config, status="refused", reason=reason, backend=backend)

    @classmethod
    def error(cls, config: Configuration, reason: str, backend: str = "") -> "Measurement":
        return cls(config=config, status="error", reason=reason, backend=backend)
