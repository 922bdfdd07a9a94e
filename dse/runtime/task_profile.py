"""Per-task times of a task graph on this host's CPU core groups, measured with ONNX Runtime on pinned threads (the
``cpu<k>`` columns of a ``ProfileTable``)."""
from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import numpy as np

from dse.taskgraph.errors import LayerMapError
from dse.taskgraph.graph import TaskGraph
from dse.taskgraph.profile import ProfileTable, tool_versions


def profile_from_ort(model, graph: TaskGraph, core_counts, repeats: int = 20, warmup: int = 3, seed: int = 0,
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
    from dse.platform.cpu_groups import usable_cores

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
    return ProfileTable(kinds=tuple(f"cpu{k}" for k in core_counts), time_us=times, source=f"ort:{method}",
               graph_digest=graph.digest, tasks=graph.names, versions=tool_versions("onnx", "onnxruntime"))


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


def timed_runs(session, feed: dict, repeats: int, warmup: int, names=None) -> tuple[np.ndarray, list]:
    """Wall times (us) of ``repeats`` runs of an ONNX Runtime session after ``warmup`` untimed ones, and the last
    run's outputs: the one timing loop of every per-session ORT time (a task of ``method="task"``, a whole
    network of ``model_us``)."""
    for _ in range(warmup):
        session.run(names, feed)
    samples = np.empty(repeats)
    result: list = []
    for i in range(repeats):
        t0 = time.perf_counter()
        result = session.run(names, feed)
        samples[i] = (time.perf_counter() - t0) * 1e6
    return samples, result


def model_us(model, k: int, repeats: int, warmup: int = 3, seed: int = 0) -> float:
    """Median wall time (us) of the whole network in an ONNX Runtime session with ``k`` intra-op threads, run
    from a thread pinned to ``k`` of this host's cores (its pool inherits the mask)."""
    import onnxruntime as ort

    from dse.platform.cpu_groups import usable_cores
    from dse.runtime.engine import run_pinned
    from dse.runtime.ort_engine import make_session_options

    feed_values = random_inputs(model, seed)

    def timed() -> float:
        session = ort.InferenceSession(model.SerializeToString(), make_session_options(k),
                                       providers=["CPUExecutionProvider"])
        feed = {i.name: feed_values[i.name] for i in session.get_inputs()}
        return float(np.median(timed_runs(session, feed, repeats, warmup)[0]))

    return run_pinned(usable_cores()[:k], timed, f"model-cpu{k}")


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
            samples, result = timed_runs(session, feed, repeats, warmup, names)
            values.update(zip(names, result))
            times.append(float(np.median(_kept(samples, fastest))))
        box["times"] = np.array(times)
    except BaseException as exc:   # re-raised on the caller's thread
        box["error"] = exc
