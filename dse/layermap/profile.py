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
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from dse.layermap.errors import LayerMapError
from dse.layermap.taskgraph import TaskGraph

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


def _versions(*extra: str) -> dict:
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
                   tasks=graph.names, versions=_versions())

    @classmethod
    def from_sim(cls, platform, analysis, graph: TaskGraph, kinds, precision: str = "fp32",
                 batch: int = 1) -> ProfileTable:
        """Times from the sim cost models: GPU/DLA per layer (``dse.backends.sim.cost``; a task with a layer the
        DLA cannot run is inf on ``dla``), CPU groups per layer (``dse.backends.sim.cpu_cost``), summed per
        task; ``npu`` = cpu4 / 6.5 (002 L180). Per-layer times only: the per-inference fixed cost of a
        whole engine (``per_inference_us``) belongs to no task."""
        kinds = tuple(check_kind(k) for k in kinds)
        if not kinds:
            raise LayerMapError(f"no PE kinds to time; valid choices: {KIND_CHOICES}")
        if graph.n_layers != len(analysis.layers):
            raise LayerMapError(f"task graph has {graph.n_layers} layers, the analysis {len(analysis.layers)}")
        task_of = graph.task_of_layer()

        def per_task(per_layer: np.ndarray) -> np.ndarray:
            return np.bincount(task_of, weights=per_layer, minlength=graph.n)

        columns: dict[str, np.ndarray] = {}
        accel = [k for k in kinds if k in ("gpu", "dla")]
        if accel:
            from dse.backends.sim.cost import CostModel
            from dse.backends.sim.layers import frame_of, layer_table

            if platform.cost is None:
                raise LayerMapError(f"platform {platform.name} has no cost section: the sim cannot time "
                                    f"{', '.join(accel)} (see config/platform/xavier-agx-sim.yaml)")
            model = CostModel(platform, layer_table(frame_of(analysis), digest=analysis.digest))
            for kind in accel:
                if kind == "dla" and platform.cost.dla is None:
                    raise LayerMapError(f"platform {platform.name} has no DLA cost parameters; kinds it can time: gpu")
                t = per_task(model.per_layer(kind, precision, batch).t)
                if kind == "dla":
                    unsupported = np.bincount(task_of, weights=(~model.dla_ok).astype(float), minlength=graph.n)
                    t[unsupported > 0] = np.inf
                columns[kind] = t
        cpu_needed = sorted({cpu_cores_of(k) for k in kinds if k.startswith("cpu")} | ({4} if "npu" in kinds else set()))
        if cpu_needed:
            try:
                from dse.backends.sim.cpu_cost import cpu_layer_us
            except ImportError as exc:
                raise LayerMapError(f"CPU kinds need the sim CPU cost model (dse.backends.sim.cpu_cost.cpu_layer_us), "
                                    f"which is not available: {exc}") from None
            for k in cpu_needed:
                columns[f"cpu{k}"] = per_task(np.array([cpu_layer_us(platform, layer, k, precision=precision)
                                                        for layer in analysis.layers], dtype=float))
        table = cls(kinds=tuple(columns), time_us=np.column_stack(list(columns.values())),
                    source=f"sim:{platform.name}", graph_digest=graph.digest, tasks=graph.names, versions=_versions())
        if "npu" in kinds:
            table = npu_from_cpu(table)
        return table.select(kinds)

    @classmethod
    def from_ort(cls, model, graph: TaskGraph, core_counts, repeats: int = 20, warmup: int = 3, seed: int = 0,
                 cores=None, method: str = "model", busy_neighbours: bool = False,
                 fastest: float = 1.0) -> ProfileTable:
        """Real times on this host, with ``intra_op_num_threads=k`` on a thread pinned to k cores (its pool threads
        inherit the mask); median of ``repeats`` runs after ``warmup``, on one seeded random input.

        ``method="model"`` (default): ONNX Runtime's profiler over runs of the whole network, each task the sum of
        its nodes' kernel times (ORT names a fused node after its first one; a node ORT adds, e.g. a layout
        reorder, counts to the next task). Caches hold what a whole-network run leaves there, as in a pipeline.
        ``method="task"``: every task as its own session, run back to back: its weights and tensors stay cached
        between repeats, which makes late, weight-heavy layers look cheaper than in a pipeline (MobileNet v1 on
        two cores: the GA's split measured 11.7 ms per frame against 8.2 ms planned with such a profile), and each
        task pays a session call.

        ``busy_neighbours``: while k cores are profiled, the other given cores run the whole network in a loop, as
        the other PEs of a per-layer mapping do: shared caches and memory bandwidth are then contended as in the
        real run (a profile taken beside idle cores flatters the layers that stream the most weights).

        ``fastest``: the share of the measured runs kept, the fastest by whole-run time (``method="task"``: by
        the task's time), before the median. 1 keeps all. Below 1, the profile describes the host's fast
        state, for hosts that alternate between speeds (one shared with other tenants); compare it with a run's fast
        state too (``RunResult.period_ms_p10``).

        ``model``: the NetworkAnalysis the graph was built from, or its sanitized ModelProto.
        """
        if method not in ("model", "task"):
            raise LayerMapError(f"unknown ORT profiling method {method!r}; valid choices: model, task")
        from dse.runtime.cpu_groups import usable_cores

        onnx_model = model.weighted_model() if hasattr(model, "weighted_model") else model
        core_counts = tuple(int(k) for k in core_counts)
        cores = list(cores) if cores is not None else usable_cores()
        if not core_counts or any(k < 1 or k > len(cores) for k in core_counts):
            raise LayerMapError(f"core counts {list(core_counts)}: each must be in 1..{len(cores)} "
                                f"(usable cores {cores})")
        if repeats < 1 or warmup < 0:
            raise LayerMapError(f"repeats must be >= 1 and warmup >= 0, got {repeats}, {warmup}")
        if not 0 < fastest <= 1:
            raise LayerMapError(f"fastest (the share of runs kept) must be in (0, 1], got {fastest!r}")
        inputs = random_inputs(onnx_model, seed)
        if method == "task":
            target, subject = _profile_on_cores, task_models(onnx_model, graph)
        else:
            target, subject = _profile_model_on_cores, (onnx_model, graph)
        times = np.zeros((graph.n, len(core_counts)))
        for j, k in enumerate(core_counts):
            box: dict = {}
            worker = threading.Thread(target=target, name=f"profile-cpu{k}",
                                      args=(subject, dict(inputs), cores[:k], repeats, warmup, fastest, box),
                                      daemon=True)
            stop = threading.Event()
            neighbours = [threading.Thread(target=_keep_busy, args=(onnx_model, dict(inputs), [c], stop),
                                           name=f"neighbour-{c}", daemon=True)
                          for c in (cores[k:] if busy_neighbours else [])]
            for t in neighbours:
                t.start()
            try:
                worker.start()
                worker.join()
            finally:
                stop.set()
                for t in neighbours:
                    t.join()
            if "error" in box:
                raise box["error"]
            times[:, j] = box["times"]
        return cls(kinds=tuple(f"cpu{k}" for k in core_counts), time_us=times, source=f"ort:{method}",
                   graph_digest=graph.digest, tasks=graph.names, versions=_versions("onnx", "onnxruntime"))


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
    import yaml

    doc = yaml.safe_load(path.read_text()) or {}
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


def task_models(model, graph: TaskGraph) -> list:
    """One ONNX model per task (``onnx.utils.Extractor`` between the tensors it reads from other tasks or the
    network inputs and the ones it hands on or the network outputs)."""
    import onnx

    from dse.graph.tensors import node_reads

    nodes = list(model.graph.node)
    if len(nodes) != graph.n_layers:
        raise LayerMapError(f"the model has {len(nodes)} nodes, the task graph {graph.n_layers} layers: profile the "
                            f"sanitized model the task graph was built from")
    initializers = {t.name for t in model.graph.initializer}
    net_outputs = {vi.name for vi in model.graph.output}
    task_of = graph.task_of_layer()
    readers: dict[str, set[int]] = {}
    for i, node in enumerate(nodes):
        for name in node_reads(node):
            if name and name not in initializers:
                readers.setdefault(name, set()).add(int(task_of[i]))
    extractor = onnx.utils.Extractor(model)
    out = []
    for t, layers in enumerate(graph.layers):
        produced = [o for i in layers for o in nodes[i].output if o]
        reads = [r for i in layers for r in node_reads(nodes[i]) if r and r not in initializers and r not in produced]
        outputs = [o for o in produced if o in net_outputs or readers.get(o, set()) - {t}]
        sub = extractor.extract_model(list(dict.fromkeys(reads)), outputs)
        if len(sub.graph.node) != len(layers):
            raise LayerMapError(f"task {t} ({graph.names[t]}): extraction kept {len(sub.graph.node)} nodes, "
                                f"expected {len(layers)}")
        out.append(sub)
    return out


def random_inputs(model, seed: int) -> dict:
    """Seeded uniform [0, 1) feeds for every non-initializer input of an ONNX model (dynamic dims = 1)."""
    from onnx.helper import tensor_dtype_to_np_dtype

    rng = np.random.default_rng(seed)
    initializers = {t.name for t in model.graph.initializer}
    feeds = {}
    for vi in model.graph.input:
        if vi.name in initializers:
            continue
        tt = vi.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else 1 for d in tt.shape.dim]
        feeds[vi.name] = rng.random(shape).astype(tensor_dtype_to_np_dtype(tt.elem_type))
    return feeds


def _keep_busy(model, values: dict, cores, stop: threading.Event) -> None:
    """Runs the whole network on ``cores`` (one intra-op thread each) until ``stop``: a busy neighbour PE."""
    import onnxruntime as ort

    from dse.runtime.engine import pin_current_thread
    from dse.runtime.ort_engine import make_session_options

    pin_current_thread(cores)
    session = ort.InferenceSession(model.SerializeToString(), make_session_options(len(cores)),
                                   providers=["CPUExecutionProvider"])
    feed = {i.name: values[i.name] for i in session.get_inputs()}
    while not stop.is_set():
        session.run(None, feed)


def _kept(samples: np.ndarray, fastest: float, key: np.ndarray | None = None) -> np.ndarray:
    """The ``fastest`` share of ``samples`` (rows), ranked by ``key`` (default: the samples), at least one."""
    order = np.argsort(samples if key is None else key, kind="stable")
    return samples[order[:max(1, int(np.ceil(fastest * len(order))))]]


def _profile_model_on_cores(subject, values: dict, cores, repeats: int, warmup: int, fastest: float,
                            box: dict) -> None:
    """Runs on its own thread: pin it, run the whole network ``warmup + repeats`` times under ORT's profiler and
    sum each measured run's node kernel times per task (median over the ``fastest`` share of the runs)."""
    try:
        import tempfile

        import onnxruntime as ort

        from dse.runtime.engine import pin_current_thread
        from dse.runtime.ort_engine import make_session_options

        model, graph = subject
        pin_current_thread(cores)
        task_of = graph.task_of_layer()
        task_by_node = {node.name: int(task_of[i]) for i, node in enumerate(model.graph.node)}
        with tempfile.TemporaryDirectory(prefix="dse-ort-profile-") as tmp:
            options = make_session_options(len(cores))
            options.enable_profiling = True
            options.profile_file_prefix = str(Path(tmp) / "profile")
            session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
            feed = {i.name: values[i.name] for i in session.get_inputs()}
            for _ in range(warmup + repeats):
                session.run(None, feed)
            events = json.loads(Path(session.end_profiling()).read_text())
        runs = sorted((e["ts"], e["ts"] + e["dur"]) for e in events if e.get("name") == "model_run")[warmup:]
        kernels = sorted((e["ts"], e["name"][:-len("_kernel_time")], e["dur"]) for e in events
                         if e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time"))
        per_run = np.zeros((len(runs), graph.n))
        r, pending = 0, 0.0
        for ts, name, dur in kernels:
            while r < len(runs) and ts > runs[r][1]:
                r, pending = r + 1, 0.0
            if r == len(runs):
                break
            if ts < runs[r][0]:
                continue                      # a warm-up run
            if name in task_by_node:
                per_run[r, task_by_node[name]] += dur + pending
                pending = 0.0
            else:
                pending += dur                # a node ORT added: counted to the next task
        if not runs or not per_run.any():
            raise LayerMapError("ONNX Runtime's profile has no node times for this model")
        box["times"] = np.median(_kept(per_run, fastest, per_run.sum(axis=1)), axis=0)
    except BaseException as exc:   # re-raised on the caller's thread
        box["error"] = exc


def _profile_on_cores(models, values: dict, cores, repeats: int, warmup: int, fastest: float, box: dict) -> None:
    """Runs on its own thread: pin it, then time every task in topological order (filling ``values``)."""
    try:
        import onnxruntime as ort

        from dse.runtime.engine import pin_current_thread
        from dse.runtime.ort_engine import make_session_options

        pin_current_thread(cores)
        times = []
        for sub in models:
            session = ort.InferenceSession(sub.SerializeToString(), make_session_options(len(cores)),
                                           providers=["CPUExecutionProvider"])
            feed = {i.name: values[i.name] for i in session.get_inputs()}
            names = [o.name for o in session.get_outputs()]
            for _ in range(warmup):
                session.run(names, feed)
            samples = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                result = session.run(names, feed)
                samples.append((time.perf_counter() - t0) * 1e6)
            values.update(zip(names, result))
            times.append(float(np.median(_kept(np.array(samples), fastest))))
        box["times"] = np.array(times)
    except BaseException as exc:   # re-raised on the caller's thread
        box["error"] = exc


__all__ = ["ProfileTable", "freq_correct", "npu_from_cpu", "task_models", "check_kind", "cpu_cores_of",
           "KIND_CHOICES", "UNITS"]
