"""The task model of a pipelined mapping (thesis Ch. 4, l. 1135-1139): an app is a chain of stages, each a
list of tasks with measured execution times at the maximum frequencies. A group of Ch. 5 (dataflow graphs with
DL chains grafted in, l. 1602-1604) is the same object with explicit edges: a DAG of stages, one period.

- CPU stage (pre/post-processing): one task, preemptive, fixed priority per app.
- GPU stage: one task per TensorRT kernel, non-preemptive, FIFO with the kernels of other apps.
- DLA stage: one task (no per-layer DLA profile exists), FIFO.

PE names: ``GPU``, ``DLA0``, ``DLA1``, ``CPU0`` .. ``CPU{n-1}``; a placement maps (app, stage index) to one
(``kind_of`` also knows seed 002's ``NPU``, which only the periodic sim places).
Frequencies enter as per-kind time scales ``{"cpu": fmax/f, "gpu": ..., "dla": ...}`` (>= 1 below fmax).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from dse.core.errors import DseError

KINDS = ("cpu", "gpu", "dla")
PE_KINDS = (*KINDS, "npu")      # kind_of also names the NPU of seed 002's HiKey970 (no Ch. 4 stage kind)


def kind_of(pe: str) -> str:
    """Processor kind of a PE name: ``CPU3`` -> cpu, ``GPU`` -> gpu, ``DLA1`` -> dla, ``NPU`` -> npu."""
    for kind in PE_KINDS:
        if pe.lower().startswith(kind):
            return kind
    raise DseError(f"PE {pe!r} is not a CPU core, the GPU, a DLA core or an NPU (names: CPU<k>, GPU, DLA<k>, NPU)")


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
    """One periodic DNN app under one mapping, or one Ch. 5 group: period = implicit deadline; priority 0 is the
    highest. ``edges`` (stage index pairs) make it a DAG; None is the chain 0 -> 1 -> ... The stages must be
    listed in a topological order (every edge goes from a lower to a higher index), so one pass in index order
    sees every predecessor first."""

    name: str
    period_us: float
    priority: int
    stages: tuple[Stage, ...]
    network: str = ""
    edges: tuple[tuple[int, int], ...] | None = None

    def __post_init__(self):
        if not self.period_us > 0:
            raise DseError(f"app {self.name}: period must be > 0 us, got {self.period_us}")
        check_edges(self.name, [st.label for st in self.stages], self.edges)

    @property
    def preds(self) -> tuple[tuple[int, ...], ...]:
        """Predecessor stage indices of every stage."""
        return preds_of(len(self.stages), self.edges)

    def related(self) -> list[set[int]]:
        """Per stage, the stages ordered with it by precedence (ancestors and descendants): they can never run
        at the same time, so they neither preempt nor block each other (spec 3.6 #5)."""
        preds = self.preds
        anc: list[set[int]] = []
        for i in range(len(self.stages)):
            a: set[int] = set()
            for p in preds[i]:
                a |= anc[p] | {p}
            anc.append(a)
        rel = [set(a) for a in anc]
        for i, a in enumerate(anc):
            for j in a:
                rel[j].add(i)
        return rel


def check_edges(app: str, labels, edges) -> None:
    """Stage-index edges of a DAG app: in range, and forward (the stages listed in a topological order)."""
    n = len(labels)
    for a, b in edges or ():
        if not (0 <= a < n and 0 <= b < n):
            raise DseError(f"app {app}: edge {a}->{b} names a stage outside 0..{n - 1}")
        if a >= b:
            raise DseError(f"app {app}: edge {a}->{b} ({labels[a] or f'stage {a}'} -> {labels[b] or f'stage {b}'}) "
                           f"goes backwards: list the stages in a topological order (a cycle has none)")


def preds_of(n: int, edges) -> tuple[tuple[int, ...], ...]:
    """Predecessors of each of n stages; ``edges`` None is the chain 0 -> 1 -> ..."""
    if edges is None:
        return tuple(() if i == 0 else (i - 1,) for i in range(n))
    out: list[set[int]] = [set() for _ in range(n)]
    for a, b in edges:
        out[b].add(a)
    return tuple(tuple(sorted(x)) for x in out)


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
