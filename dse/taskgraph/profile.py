"""Per-task execution times on every PE kind: the one input of every layer-mapping evaluator.

A PE kind is what a time depends on: ``cpu<k>`` (a CPU group of k cores running the task with k threads),
``gpu``, ``npu``, ``dla``. Times come from a file (paper numbers, 004's estimation prototxt fields), from the
sim cost model, or from real ONNX Runtime runs of every task on k pinned cores; corrections (DVFS frequency,
the NPU estimate of 002) are applied at load time and recorded. ``inf`` marks a task a PE kind cannot run.
The table is stored as ``profile.parquet`` (one row per task x kind) tied to its task graph by digest.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from dse.taskgraph.errors import LayerMapError
from dse.taskgraph.graph import TaskGraph

KIND_RE = re.compile(r"^(cpu[1-9][0-9]*|gpu|npu|dla)$")
KIND_CHOICES = "cpu<k> (k >= 1 cores), gpu, npu, dla"
UNITS = {"us": 1.0, "ms": 1000.0}
NPU_SPEEDUP = 6.5   # 002 L180: the HiKey970 NPU is 6.5x faster than the quad-core CPU


def check_kind(kind: str) -> str:
    if not isinstance(kind, str) or not KIND_RE.match(kind):
        raise LayerMapError(f"unknown PE kind {kind!r}; valid choices: {KIND_CHOICES}")
    return kind


def cpu_cores_of(kind: str) -> int:
    """k of ``cpu<k>``, 0 for an accelerator."""
    return int(kind[3:]) if kind.startswith("cpu") else 0


def tool_versions(*extra: str) -> dict:
    import dse

    out = {"dse": dse.__version__, "numpy": np.__version__}
    for name in extra:
        try:
            from importlib.metadata import version

            out[name] = version(name)
        except Exception:   # not installed
            continue
    return out


@dataclass(frozen=True, eq=False)
class ProfileTable:
    """``time_us[task, kind]`` for the tasks of one task graph (inf = the kind cannot run the task)."""

    kinds: tuple[str, ...]
    time_us: np.ndarray
    source: str
    graph_digest: str
    tasks: tuple[str, ...] = ()                   # task names, for readable rows
    corrections: tuple[str, ...] = ()             # what was applied after measuring, in order
    versions: dict = field(default_factory=dict)

    def __post_init__(self):
        kinds = tuple(check_kind(k) for k in self.kinds)
        if len(set(kinds)) != len(kinds):
            raise LayerMapError(f"duplicate PE kinds in {list(kinds)}")
        t = np.array(self.time_us, dtype=np.float64)
        if t.ndim != 2 or t.shape[1] != len(kinds):
            raise LayerMapError(f"time_us must be [n_tasks, {len(kinds)} kinds], got shape {t.shape}")
        t[np.isnan(t)] = np.inf
        if (t < 0).any():
            task, k = map(int, np.argwhere(t < 0)[0])
            raise LayerMapError(f"negative time {t[task, k]} us for task {task} on {kinds[k]}")
        t.setflags(write=False)
        object.__setattr__(self, "kinds", kinds)
        object.__setattr__(self, "time_us", t)
        object.__setattr__(self, "tasks", tuple(self.tasks) or tuple(str(i) for i in range(t.shape[0])))
        object.__setattr__(self, "corrections", tuple(self.corrections))
        if len(self.tasks) != t.shape[0]:
            raise LayerMapError(f"{len(self.tasks)} task names for {t.shape[0]} rows of times")

    @property
    def n_tasks(self) -> int:
        return self.time_us.shape[0]

    def kind_index(self, kind: str) -> int:
        try:
            return self.kinds.index(kind)
        except ValueError:
            raise LayerMapError(f"PE kind {kind!r} is not in the profile; valid choices: "
                                f"{', '.join(self.kinds)}") from None

    def column(self, kind: str) -> np.ndarray:
        return self.time_us[:, self.kind_index(kind)]

    def with_kind(self, kind: str, times, correction: str) -> ProfileTable:
        """A copy with the column ``kind`` added or replaced, recording ``correction``."""
        times = np.asarray(times, dtype=float).reshape(self.n_tasks, 1)
        if kind in self.kinds:
            t = self.time_us.copy()
            t[:, self.kinds.index(kind)] = times[:, 0]
            return replace(self, time_us=t, corrections=self.corrections + (correction,))
        return replace(self, kinds=self.kinds + (kind,), time_us=np.hstack([self.time_us, times]),
                       corrections=self.corrections + (correction,))

    def select(self, kinds) -> ProfileTable:
        """A copy with only ``kinds``, in that order."""
        idx = [self.kind_index(k) for k in kinds]
        return replace(self, kinds=tuple(kinds), time_us=self.time_us[:, idx])

    def check_graph(self, graph: TaskGraph) -> None:
        if self.graph_digest != graph.digest or self.n_tasks != graph.n:
            raise LayerMapError(f"profile of task graph {self.graph_digest} ({self.n_tasks} tasks) does not belong "
                                f"to task graph {graph.digest} ({graph.n} tasks): profile that graph again")

    # -- storage ------------------------------------------------------------------------------------------
    def to_frame(self):
        import pandas as pd

        n, k = self.time_us.shape
        return pd.DataFrame({
            "task": np.repeat(np.arange(n), k), "task_name": np.repeat(np.array(self.tasks, dtype=object), k),
            "kind": np.tile(np.array(self.kinds, dtype=object), n), "time_us": self.time_us.reshape(-1),
            "source": self.source, "graph_digest": self.graph_digest,
            "corrections": json.dumps(list(self.corrections)), "versions": json.dumps(self.versions, sort_keys=True)})

    def write_parquet(self, path: str | Path) -> Path:
        """Atomic: a temp file in the same directory, fsynced, renamed over ``path``."""
        import pyarrow as pa

        from dse.store.parquet import write_atomic

        return write_atomic(pa.Table.from_pandas(self.to_frame(), preserve_index=False), path)

    @classmethod
    def read_parquet(cls, path: str | Path, graph: TaskGraph) -> ProfileTable:
        import pandas as pd

        path = Path(path)
        if not path.is_file():
            raise LayerMapError(f"no profile table at {path}")
        df = pd.read_parquet(path)
        missing = {"task", "task_name", "kind", "time_us", "source", "graph_digest"} - set(df.columns)
        if missing:
            raise LayerMapError(f"{path} is not a profile table: no column(s) {sorted(missing)}")
        kinds = tuple(dict.fromkeys(df["kind"]))
        wide = df.pivot(index="task", columns="kind", values="time_us").reindex(columns=list(kinds))
        names = df.drop_duplicates("task").set_index("task")["task_name"]
        table = cls(kinds=kinds, time_us=wide.to_numpy(), source=str(df["source"].iloc[0]),
                    graph_digest=str(df["graph_digest"].iloc[0]), tasks=tuple(names.loc[wide.index]),
                    corrections=tuple(json.loads(df["corrections"].iloc[0])) if "corrections" in df else (),
                    versions=json.loads(df["versions"].iloc[0]) if "versions" in df else {})
        if list(wide.index) != list(range(graph.n)):
            raise LayerMapError(f"{path}: rows for tasks {list(wide.index)[:5]}..., the task graph has 0..{graph.n - 1}")
        table.check_graph(graph)
        return table

    # -- sources ------------------------------------------------------------------------------------------
    @classmethod
    def from_file(cls, path: str | Path, graph: TaskGraph) -> ProfileTable:
        """CSV or YAML of per-task times (paper numbers). CSV: columns ``task`` (index or name), ``unit`` (us |
        ms) and one column per PE kind. YAML: ``unit: us`` and ``tasks:`` as a mapping task -> {kind: time} or a
        list of rows with a ``task`` key. An empty cell, ``inf`` or ``-`` = unsupported. Every task needs a row."""
        path = Path(path)
        if not path.is_file():
            raise LayerMapError(f"no profile file at {path}")
        suffix = path.suffix.lower()
        if suffix == ".csv":
            rows = _csv_rows(path)
        elif suffix in (".yaml", ".yml"):
            rows = _yaml_rows(path)
        else:
            raise LayerMapError(f"unknown profile file type {path.suffix!r} of {path}; valid choices: .csv, .yaml, .yml")
        kinds: list[str] = []
        for row in rows:
            for key in row:
                if key not in ("task", "unit") and key not in kinds:
                    try:
                        kinds.append(check_kind(str(key)))
                    except LayerMapError:
                        raise LayerMapError(f"{path}: unknown column {key!r}; valid choices: task, unit, "
                                            f"{KIND_CHOICES}") from None
        if not kinds:
            raise LayerMapError(f"{path}: no PE kind columns; valid choices: {KIND_CHOICES}")
        times = np.full((graph.n, len(kinds)), np.nan)
        for row in rows:
            if "task" not in row or row["task"] in (None, ""):
                raise LayerMapError(f"{path}: a row without a task: {row}")
            task = _task_of(row["task"], graph, path)
            if not np.isnan(times[task]).all():
                raise LayerMapError(f"{path}: task {row['task']!r} (task {task}) is given twice")
            unit = str(row.get("unit") or "").strip()
            if unit not in UNITS:
                raise LayerMapError(f"{path}: task {row['task']!r} has unit {unit or None!r}; valid choices: "
                                    f"{', '.join(UNITS)} (a 'unit' column or key)")
            for j, kind in enumerate(kinds):
                times[task, j] = _time(row.get(kind), path, row["task"], kind) * UNITS[unit]
        missing = [graph.names[i] for i in range(graph.n) if np.isnan(times[i]).all()]
        if missing:
            raise LayerMapError(f"{path}: no times for {len(missing)} task(s): {', '.join(missing[:10])}"
                                f"{' ...' if len(missing) > 10 else ''}; valid tasks: 0..{graph.n - 1} or their names")
        return cls(kinds=tuple(kinds), time_us=times, source=f"file:{path.name}", graph_digest=graph.digest,
                   tasks=graph.names, versions=tool_versions())


# -- corrections ------------------------------------------------------------------------------------------
def freq_correct(table: ProfileTable, f_profiled_by_k: dict, f_all_busy: float) -> ProfileTable:
    """DVFS/hot-plug correction (002 L140, 004 L185): a k-core time profiled at f(k) runs at f_all_busy when
    every core is busy, so ``t(k) *= f(k) / f_all_busy``. Accelerator kinds are left alone."""
    f = {int(k): float(v) for k, v in dict(f_profiled_by_k).items()}
    if f_all_busy <= 0 or any(v <= 0 for v in f.values()):
        raise LayerMapError(f"frequencies must be > 0, got f_all_busy={f_all_busy}, f(k)={f}")
    t = table.time_us.copy()
    for j, kind in enumerate(table.kinds):
        k = cpu_cores_of(kind)
        if not k:
            continue
        if k not in f:
            raise LayerMapError(f"no profiled frequency for {kind} (k={k}); given for k = "
                                f"{', '.join(str(x) for x in sorted(f))}")
        t[:, j] *= f[k] / f_all_busy
    note = f"freq: t(k) *= f(k)/{f_all_busy:g} with f = {json.dumps(f, sort_keys=True)}"
    return replace(table, time_us=t, corrections=table.corrections + (note,))


def npu_from_cpu(table: ProfileTable, speedup: float = NPU_SPEEDUP, cpu_kind: str = "cpu4") -> ProfileTable:
    """The NPU estimate of 002 (L180): ``t_npu = t_cpu4 / 6.5``, added as kind ``npu``."""
    if speedup <= 0:
        raise LayerMapError(f"NPU speed-up must be > 0, got {speedup}")
    return table.with_kind("npu", table.column(cpu_kind) / speedup, f"npu = {cpu_kind} / {speedup:g}")


# -- helpers ----------------------------------------------------------------------------------------------
def _csv_rows(path: Path) -> list[dict]:
    import pandas as pd

    df = pd.read_csv(path, dtype=str, keep_default_na=False, skipinitialspace=True)
    df.columns = [str(c).strip() for c in df.columns]
    if "task" not in df.columns:
        raise LayerMapError(f"{path}: no 'task' column; columns: task, unit, {KIND_CHOICES}")
    if "unit" not in df.columns:
        raise LayerMapError(f"{path}: no 'unit' column; valid units: {', '.join(UNITS)}")
    return [{k: (v.strip() if isinstance(v, str) else v) for k, v in row.items()} for row in df.to_dict("records")]


def _yaml_rows(path: Path) -> list[dict]:
    from dse.core.validate import load_yaml

    doc = load_yaml(path, "profile table") or {}
    if not isinstance(doc, dict) or "tasks" not in doc:
        raise LayerMapError(f"{path}: expected a mapping with keys 'unit' and 'tasks'")
    unit = doc.get("unit")
    tasks = doc["tasks"]
    if isinstance(tasks, dict):
        rows = [{"task": key, **(value or {})} for key, value in tasks.items()]
    elif isinstance(tasks, list):
        rows = [dict(r) for r in tasks]
    else:
        raise LayerMapError(f"{path}: 'tasks' must be a mapping task -> times or a list of rows")
    for row in rows:
        row.setdefault("unit", unit)
    return rows


def _task_of(key, graph: TaskGraph, path: Path) -> int:
    try:
        return graph.task_index(key)
    except LayerMapError as exc:
        raise LayerMapError(f"{path}: {exc}") from None


def _time(value, path: Path, task, kind: str) -> float:
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "inf", "-", "nan")):
        return np.inf
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise LayerMapError(f"{path}: task {task!r} {kind}: {value!r} is not a time (a number, or empty/inf/- "
                            f"for unsupported)") from None
    if v < 0:
        raise LayerMapError(f"{path}: task {task!r} {kind}: negative time {v}")
    return v


__all__ = ["ProfileTable", "freq_correct", "npu_from_cpu", "check_kind", "cpu_cores_of",
           "KIND_CHOICES", "UNITS"]
