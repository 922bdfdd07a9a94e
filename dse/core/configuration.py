"""The configuration of one pipelined run, shared by every backend and every search strategy.

Its canonical JSON (sorted keys, tuples as lists) has a stable hash: the key of the measurement cache,
so the same configuration is never measured twice.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, replace

PRECISIONS = ("fp32", "fp16", "int8")
# how a frame is brought to the network's input size (a benchmark setting every backend honours)
PREPROCESS = ("resize", "letterbox")


@dataclass(frozen=True)
class Configuration:
    """What the runtime (and the sim, with the same semantics) executes.

    - ``option``: mapping option name of the platform (``E``, ``A``, ``PND-A``, ``1-1`` ...).
    - ``cuts``: last layer index of every stage but the last (empty for one stage).
    - ``streams``: execution contexts per stage (for a PND stage: the total over both PEs).
    - ``buffers``: frames in flight at once between pre- and post-processing.
    """

    benchmark: str
    platform: str
    option: str = "E"
    cuts: tuple[int, ...] = ()
    streams: tuple[int, ...] = (1,)
    buffers: int = 1
    pre_threads: int = 1
    post_threads: int = 1
    precision: str = "int8"
    batch: int = 1
    input_size: int = 416
    model_digest: str = ""
    extra: tuple[tuple[str, str], ...] = field(default=())

    def __post_init__(self):
        object.__setattr__(self, "cuts", tuple(int(c) for c in self.cuts))
        object.__setattr__(self, "streams", tuple(int(s) for s in self.streams))
        object.__setattr__(self, "extra", tuple(sorted((str(k), str(v)) for k, v in dict(self.extra).items())))

    @property
    def n_stages(self) -> int:
        return len(self.cuts) + 1

    def validate(self) -> None:
        """Schema checks that do not need the platform or the network (those live with the backend)."""
        from dse.core.errors import DseError, choices_error

        if self.precision not in PRECISIONS:
            raise choices_error("precision", self.precision, PRECISIONS)
        if list(self.cuts) != sorted(set(self.cuts)):
            raise DseError(f"cuts must be strictly increasing, got {list(self.cuts)}")
        if len(self.streams) != self.n_stages:
            raise DseError(
                f"streams {list(self.streams)} has {len(self.streams)} entries but the cuts {list(self.cuts)} "
                f"make {self.n_stages} stage(s)")
        for name in ("buffers", "pre_threads", "post_threads", "batch", "input_size"):
            if getattr(self, name) < 1:
                raise DseError(f"{name} must be >= 1, got {getattr(self, name)}")
        if any(s < 1 for s in self.streams):
            raise DseError(f"every stage needs at least one stream, got {list(self.streams)}")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["cuts"] = list(self.cuts)
        d["streams"] = list(self.streams)
        d["extra"] = dict(self.extra)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Configuration":
        """From ``to_dict()`` output (or a hand-written best.yaml): a malformed field is a DseError naming it."""
        from dse.core.errors import DseError

        d = dict(d)
        known = set(cls.__dataclass_fields__)
        ints = ("buffers", "pre_threads", "post_threads", "batch", "input_size")
        try:
            d["cuts"] = tuple(int(c) for c in (d.get("cuts") or ()))
            d["streams"] = tuple(int(s) for s in (d.get("streams") or (1,)))
            d["extra"] = tuple(dict(d.get("extra") or {}).items())
            for name in ints:
                if name in d:
                    d[name] = int(d[name])
            return cls(**{k: v for k, v in d.items() if k in known})
        except (TypeError, ValueError) as exc:
            fields = {k: d.get(k) for k in ("cuts", "streams", *ints) if k in d}
            raise DseError(f"malformed configuration fields {fields}: {exc}") from None

    def canonical_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @property
    def hash(self) -> str:
        return hashlib.sha256(self.canonical_json().encode()).hexdigest()[:16]

    def with_(self, **changes) -> "Configuration":
        return replace(self, **changes)
