"""The task model of a pipelined mapping (thesis Ch. 4, l. 1135-1139): an app is a chain of stages, each a
list of tasks with measured execution times at the maximum frequencies.

- CPU stage (pre/post-processing): one task, preemptive, fixed priority per app.
- GPU stage: one task per TensorRT kernel, non-preemptive, FIFO with the kernels of other apps.
- DLA stage: one task (no per-layer DLA profile exists), FIFO.

PE names: ``GPU``, ``DLA0``, ``DLA1``, ``CPU0`` .. ``CPU{n-1}``; a placement maps (app, stage index) to one.
Frequencies enter as per-kind time scales ``{"cpu": fmax/f, "gpu": ..., "dla": ...}`` (>= 1 below fmax).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from dse.errors import DseError

KINDS = ("cpu", "gpu", "dla")


def kind_of(pe: str) -> str:
    """Processor kind of a PE name: ``CPU3`` -> cpu, ``GPU`` -> gpu, ``DLA1`` -> dla."""
    for kind in KINDS:
        if pe.lower().startswith(kind):
            return kind
    raise DseError(f"PE {pe!r} is not a CPU core, the GPU or a DLA core (names: CPU<k>, GPU, DLA<k>)")


@dataclass(frozen=True)
class Task:
    """Execution times at the maximum frequency, in us: worst case (analysis), mean (energy), best (jitter)."""

    wcet_us: float
    acet_us: float
    bcet_us: float


@dataclass(frozen=True)
class Stage:
    kind: str                      # "cpu" | "gpu" | "dla"
    tasks: tuple[Task, ...]
    label: str = ""

    def __post_init__(self):
        if self.kind not in KINDS:
            raise DseError(f"stage kind {self.kind!r} is not one of {list(KINDS)}")
        if not self.tasks:
            raise DseError(f"stage {self.label or self.kind} has no tasks")

    @property
    def wcet_us(self) -> float:
        return float(sum(t.wcet_us for t in self.tasks))

    @property
    def acet_us(self) -> float:
        return float(sum(t.acet_us for t in self.tasks))

    @property
    def bcet_us(self) -> float:
        return float(sum(t.bcet_us for t in self.tasks))


@dataclass(frozen=True)
class App:
    """One periodic DNN app under one mapping: period = implicit deadline; priority 0 is the highest."""

    name: str
    period_us: float
    priority: int
    stages: tuple[Stage, ...]
    network: str = ""

    def __post_init__(self):
        if self.period_us <= 0:
            raise DseError(f"app {self.name}: period must be > 0 us, got {self.period_us}")


# (app name, stage index) -> PE name
Placement = Mapping[tuple[str, int], str]


@dataclass
class CpaResult:
    """Response-time analysis of one scenario: per-stage worst-case response, per-app end-to-end WCRT."""

    schedulable: bool
    wcrt_us: dict[str, float] = field(default_factory=dict)
    stage_r_us: dict[tuple[str, int], float] = field(default_factory=dict)
    jitter_us: dict[tuple[str, int], float] = field(default_factory=dict)
    reason: str = ""
