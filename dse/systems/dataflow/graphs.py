"""Dataflow task graphs of thesis Ch. 5: the non-DNN half of each group (spec ../shared/specs/thesis-ch4-ch5.md, 3).

A graph is a homogeneous SDF graph (every rate 1), i.e. a DAG of tasks fired once per period of its group. Each
task lists the processor kinds it may run on ("cpu": any CPU core, "gpu") with a WCET per kind (Table 5.4,
l. 1794-1800, gives the kinds of the motivational example); ACET and BCET default to fixed shares of the WCET.
Tasks are kept in a deterministic topological order, so positions can index arrays and every edge goes forward.

- ``load_graph``: a YAML file / dict / shipped name (``config/dataflow/graphs/``), every bad value refused by name.
- ``motivational_graph``: the 8-task image pipeline (spec 3.4) with modelled WCETs; ``GRAFT_TASK`` feeds the
  detector's pre-processing (spec 3.6.1: ``cvt_NV12_BGR-1``, not the thesis' ``cvtBGRtoNV12-1``).
- ``random_graph``: the random graphs of 5.5.4 (l. 1844-1856): 10 tasks, half GPU-only, WCETs CPU U[100, 500] us,
  GPU U[10, 100] us, scaled by 16/#graphs. SDF3 is not available, so a seeded layered DAG stands in (spec 3.5).
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType

from dse.core.errors import DseError, choices_error

PROCESSOR_KINDS = ("cpu", "gpu")
GRAPH_KEYS = ("name", "acet_share", "bcet_share", "tasks", "edges")
TASK_KEYS = ("wcet_us", "acet_us", "bcet_us")
ACET_SHARE = 0.8   # ACET = share * WCET where none is given (not published; a typical mean/WCET ratio)
BCET_SHARE = 0.6
GRAFT_TASK = "cvt_NV12_BGR-1"
MOTIVATIONAL_FILE = "image-processing"


def _graphs_dir() -> Path:
    """config/dataflow/graphs of the checkout in use (the same config/ the Hydra groups come from)."""
    from dse.config import config_dir

    return config_dir() / "dataflow" / "graphs"


def _time(value, what: str) -> float:
    if not isinstance(value, numbers.Real) or isinstance(value, bool) or not math.isfinite(float(value)):
        raise DseError(f"{what} must be a finite number of microseconds, got {value!r}")
    if value <= 0:
        raise DseError(f"{what} must be > 0 us, got {value!r}")
    return float(value)


def _times(d, task: str, key: str, allowed) -> dict[str, float]:
    if not isinstance(d, dict):
        raise DseError(f"task {task!r}: {key} must map processor kinds ({', '.join(PROCESSOR_KINDS)}) to "
                       f"microseconds, got {d!r}")
    out = {}
    for kind, v in d.items():
        if kind not in PROCESSOR_KINDS:
            raise DseError(f"task {task!r}: {key}: " + str(choices_error("processor kind", kind, PROCESSOR_KINDS)))
        if kind not in allowed:
            raise DseError(f"task {task!r}: {key} gives {kind!r}, but the task may run only on "
                           f"{', '.join(allowed)} (the keys of wcet_us)")
        out[kind] = _time(v, f"task {task!r}: {key}.{kind}")
    return out


def _normalise(task: str, wcet, acet, bcet, acet_share: float, bcet_share: float):
    """Checked (wcet, acet, bcet) dicts over the same kinds, in PROCESSOR_KINDS order; missing ACETs are
    ``acet_share`` * WCET, missing BCETs min(``bcet_share`` * WCET, ACET)."""
    if not wcet:
        raise DseError(f"task {task!r} has no allowed processor: give wcet_us with at least one of "
                       f"{', '.join(PROCESSOR_KINDS)}")
    wcet = _times(wcet, task, "wcet_us", PROCESSOR_KINDS)
    wcet = {k: wcet[k] for k in PROCESSOR_KINDS if k in wcet}
    acet = _times({} if acet is None else acet, task, "acet_us", tuple(wcet))
    bcet = _times({} if bcet is None else bcet, task, "bcet_us", tuple(wcet))
    for k, w in wcet.items():
        acet.setdefault(k, acet_share * w)
        bcet.setdefault(k, min(bcet_share * w, acet[k]))
        if acet[k] > w:
            raise DseError(f"task {task!r}: acet_us.{k} = {acet[k]:g} exceeds wcet_us.{k} = {w:g}")
        if bcet[k] > acet[k]:
            raise DseError(f"task {task!r}: bcet_us.{k} = {bcet[k]:g} exceeds acet_us.{k} = {acet[k]:g}")
    return wcet, {k: acet[k] for k in wcet}, {k: bcet[k] for k in wcet}


@dataclass(frozen=True)
class DataflowTask:
    """One task: the keys of ``wcet_us`` are the processor kinds it may run on (its mapping genes)."""
    name: str
    wcet_us: dict[str, float]
    acet_us: dict[str, float] | None = None   # None or missing kinds: ACET_SHARE * WCET
    bcet_us: dict[str, float] | None = None   # None or missing kinds: min(BCET_SHARE * WCET, ACET)

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise DseError(f"a dataflow task needs a non-empty name, got {self.name!r}")
        wcet, acet, bcet = _normalise(self.name, self.wcet_us, self.acet_us, self.bcet_us, ACET_SHARE, BCET_SHARE)
        object.__setattr__(self, "wcet_us", wcet)
        object.__setattr__(self, "acet_us", acet)
        object.__setattr__(self, "bcet_us", bcet)

    def __hash__(self):
        return hash((self.name, tuple(self.wcet_us.items()), tuple(self.acet_us.items()),
                     tuple(self.bcet_us.items())))

    @property
    def processors(self) -> tuple[str, ...]:
        """The kinds this task may be mapped to, in PROCESSOR_KINDS order."""
        return tuple(self.wcet_us)

    def scaled(self, factor: float) -> "DataflowTask":
        return DataflowTask(self.name, {k: v * factor for k, v in self.wcet_us.items()},
                            {k: v * factor for k, v in self.acet_us.items()},
                            {k: v * factor for k, v in self.bcet_us.items()})


@dataclass(frozen=True)
class DataflowGraph:
    """A DAG of tasks. Construction checks it and reorders ``tasks`` topologically (ties: the order given), so
    positions are stable and every edge (i, j) has i < j; ``edges`` are sorted by those positions."""
    name: str
    tasks: tuple[DataflowTask, ...]
    edges: tuple[tuple[str, str], ...] = field(default=())

    def __post_init__(self):
        import networkx as nx

        g = self.name
        if not isinstance(g, str) or not g:
            raise DseError(f"a dataflow graph needs a non-empty name, got {g!r}")
        tasks = tuple(self.tasks or ())
        if not tasks:
            raise DseError(f"graph {g!r} has no tasks")
        order = {}
        for t in tasks:
            if not isinstance(t, DataflowTask):
                raise DseError(f"graph {g!r}: tasks must be DataflowTask objects, got {t!r}")
            if t.name in order:
                raise DseError(f"graph {g!r}: task {t.name!r} is listed twice")
            order[t.name] = len(order)
        edges, seen = [], set()
        for e in self.edges or ():
            if isinstance(e, str) or not isinstance(e, (list, tuple)) or len(e) != 2:
                raise DseError(f"graph {g!r}: edge {e!r} must be a pair [source task, destination task]")
            u, v = (str(x) for x in e)
            for x in (u, v):
                if x not in order:
                    raise DseError(f"graph {g!r}: edge {u!r} -> {v!r}: " + str(choices_error("task", x, order)))
            if u == v:
                raise DseError(f"graph {g!r}: edge {u!r} -> {v!r} is a self-loop (a task cannot feed itself)")
            if (u, v) in seen:
                raise DseError(f"graph {g!r}: edge {u!r} -> {v!r} is listed twice")
            seen.add((u, v))
            edges.append((u, v))
        dg = nx.DiGraph()
        dg.add_nodes_from(order)
        dg.add_edges_from(edges)
        try:
            cycle = nx.find_cycle(dg)
        except nx.NetworkXNoCycle:
            cycle = None
        if cycle:
            path = " -> ".join([u for u, _ in cycle] + [cycle[0][0]])
            raise DseError(f"graph {g!r} has a cycle: {path} (a dataflow graph must be acyclic)")
        topo = list(nx.lexicographical_topological_sort(dg, key=order.__getitem__))
        by_name = {t.name: t for t in tasks}
        pos = {n: i for i, n in enumerate(topo)}
        object.__setattr__(self, "tasks", tuple(by_name[n] for n in topo))
        object.__setattr__(self, "edges", tuple(sorted(edges, key=lambda e: (pos[e[0]], pos[e[1]]))))
        object.__setattr__(self, "_index", pos)

    def __hash__(self):
        return hash((self.name, self.tasks, self.edges))

    @property
    def index(self) -> MappingProxyType:
        """Task name -> position in ``tasks`` (read-only)."""
        return MappingProxyType(self._index)

    def task(self, name: str) -> DataflowTask:
        if name not in self.index:
            raise DseError(f"graph {self.name!r}: " + str(choices_error("task", name, self.index)))
        return self.tasks[self.index[name]]

    def edge_indices(self) -> tuple[tuple[int, int], ...]:
        """Edges as (i, j) positions, i < j: what array-based analyses (CPA, the DES) iterate over."""
        return tuple((self.index[u], self.index[v]) for u, v in self.edges)

    @property
    def sources(self) -> tuple[str, ...]:
        """Tasks with no predecessor (released by the period), in topological order."""
        fed = {v for _, v in self.edges}
        return tuple(t.name for t in self.tasks if t.name not in fed)

    @property
    def sinks(self) -> tuple[str, ...]:
        """Tasks with no successor (their finish ends a path of the response time), in topological order."""
        feeding = {u for u, _ in self.edges}
        return tuple(t.name for t in self.tasks if t.name not in feeding)

    def to_networkx(self):
        """A networkx DiGraph; node attributes wcet_us/acet_us/bcet_us/index, graph attribute name."""
        import networkx as nx

        dg = nx.DiGraph(name=self.name)
        for i, t in enumerate(self.tasks):
            dg.add_node(t.name, index=i, wcet_us=dict(t.wcet_us), acet_us=dict(t.acet_us), bcet_us=dict(t.bcet_us))
        dg.add_edges_from(self.edges)
        return dg

    def scaled(self, factor: float) -> "DataflowGraph":
        """Every WCET/ACET/BCET times ``factor`` (the thesis scales random graphs by 16/#graphs)."""
        factor = _time(factor, f"graph {self.name!r}: scale factor")
        return DataflowGraph(self.name, tuple(t.scaled(factor) for t in self.tasks), self.edges)

    def renamed(self, name: str) -> "DataflowGraph":
        """The same graph under another name (the k-th copy of the motivational example, say)."""
        return replace(self, name=name)

    def total_wcet_us(self, kind: str) -> float:
        """Sum of the WCETs on ``kind`` over the tasks that may run there (a load bound, not a mapping)."""
        if kind not in PROCESSOR_KINDS:
            raise choices_error("processor kind", kind, PROCESSOR_KINDS)
        return sum(t.wcet_us[kind] for t in self.tasks if kind in t.wcet_us)


def _share(d: dict, key: str, default: float, g: str) -> float:
    v = d.get(key, default)
    if not isinstance(v, numbers.Real) or isinstance(v, bool) or not 0 < v <= 1:
        raise DseError(f"graph {g!r}: {key} must be a number in (0, 1], got {v!r}")
    return float(v)


def graph_from_dict(d: dict, where: str = "dataflow graph") -> DataflowGraph:
    """The dict form of ``load_graph`` (``where`` names the source in errors)."""
    if not isinstance(d, dict):
        raise DseError(f"{where} must be a mapping with keys {', '.join(GRAPH_KEYS)}, got {type(d).__name__}")
    g = d.get("name")
    if not isinstance(g, str) or not g:
        raise DseError(f"{where} needs a non-empty name (e.g. name: ImageProcessing), got {g!r}")
    for k in d:
        if k not in GRAPH_KEYS:
            raise DseError(f"graph {g!r}: " + str(choices_error("graph key", k, GRAPH_KEYS)))
    acet_share = _share(d, "acet_share", ACET_SHARE, g)
    bcet_share = _share(d, "bcet_share", BCET_SHARE, g)
    if bcet_share > acet_share:
        raise DseError(f"graph {g!r}: bcet_share {bcet_share:g} exceeds acet_share {acet_share:g}")
    specs = d.get("tasks")
    if not specs:
        raise DseError(f"graph {g!r} has no tasks (tasks: maps task names to {{wcet_us: {{cpu: .., gpu: ..}}}})")
    if not isinstance(specs, dict):
        raise DseError(f"graph {g!r}: tasks must map task names to settings, got {type(specs).__name__}")
    tasks = []
    for name, spec in specs.items():
        name = str(name)
        spec = {} if spec is None else spec
        if not isinstance(spec, dict):
            raise DseError(f"graph {g!r}: task {name!r} must be a mapping with keys {', '.join(TASK_KEYS)}, "
                           f"got {spec!r}")
        for k in spec:
            if k not in TASK_KEYS:
                raise DseError(f"graph {g!r}: task {name!r}: " + str(choices_error("task key", k, TASK_KEYS)))
        try:
            times = _normalise(name, spec.get("wcet_us"), spec.get("acet_us"), spec.get("bcet_us"),
                               acet_share, bcet_share)
            tasks.append(DataflowTask(name, *times))
        except DseError as e:
            raise DseError(f"graph {g!r}: {e}") from None
    edges = d.get("edges") or []
    if not isinstance(edges, (list, tuple)):
        raise DseError(f"graph {g!r}: edges must be a list of [source, destination] pairs, got {edges!r}")
    return DataflowGraph(g, tuple(tasks), tuple(tuple(e) if isinstance(e, list) else e for e in edges))


def graph_names() -> list[str]:
    """The shipped graphs (config/dataflow/graphs/*.yaml), by name."""
    return sorted(p.stem for p in _graphs_dir().glob("*.yaml"))


def load_graph(spec: dict | str | Path | DataflowGraph) -> DataflowGraph:
    """A graph from a dict, a YAML path, or the name of a file in config/dataflow/graphs (e.g. "image-processing")."""
    if isinstance(spec, DataflowGraph):
        return spec
    if isinstance(spec, dict):
        return graph_from_dict(spec)
    path, d = _graph_yaml(spec)
    return graph_from_dict(d, where=f"dataflow graph {str(path)!r}")


def graph_spec(spec: str | Path) -> dict:
    """The YAML mapping of a shipped graph (by name) or a graph file, unparsed: what a run stores of the graphs it
    used (``load_graph`` reads it back)."""
    return _graph_yaml(spec)[1]


def _graph_yaml(spec) -> tuple[Path, dict]:
    if not isinstance(spec, (str, Path)):
        raise DseError(f"a dataflow graph is a dict, a YAML path or a shipped name, got {type(spec).__name__}")
    path = Path(spec)
    if path.suffix not in (".yaml", ".yml"):
        shipped = graph_names()
        if str(spec) not in shipped:
            raise choices_error("dataflow graph", str(spec), shipped)
        path = _graphs_dir() / f"{spec}.yaml"
    from dse.core.validate import load_yaml

    return path, load_yaml(path, "dataflow graph")


def motivational_graph(name: str = "ImageProcessing") -> DataflowGraph:
    """The thesis' image pipeline (Fig. 5.1, Table 5.4) with the modelled WCETs of
    config/dataflow/graphs/image-processing.yaml; ``name`` tells the four copies apart."""
    g = load_graph(MOTIVATIONAL_FILE)
    if GRAFT_TASK not in g.index:
        raise DseError(f"{MOTIVATIONAL_FILE}.yaml lacks the graft task {GRAFT_TASK!r} the detector hangs from")
    return g if name == g.name else g.renamed(name)


def _range(r, what: str) -> tuple[float, float]:
    try:
        lo, hi = (float(x) for x in r)
    except (TypeError, ValueError):
        raise DseError(f"{what} must be a (low, high) pair of microseconds, got {r!r}") from None
    if not (0 < lo <= hi) or not math.isfinite(hi):
        raise DseError(f"{what} must satisfy 0 < low <= high, got {r!r}")
    return lo, hi


def random_graph(name: str, seed, n_tasks: int = 10, *, cpu_us=(100, 500), gpu_us=(10, 100),
                 gpu_only_share: float = 0.5, scale: float = 1.0) -> DataflowGraph:
    """A random graph of 5.5.4 (l. 1844-1856) in place of SDF3's: a seeded layered DAG, weakly connected,
    in-degree 1-2 below the first layer; round(n * gpu_only_share) tasks GPU-only, the others CPU or GPU
    (spec 3.6.6). WCETs: whole microseconds uniform in the ranges, then times ``scale`` (16/#graphs in the
    thesis), so ``random_graph(.., scale=s) == random_graph(..).scaled(s)``. Tasks are named t0, t1, ..."""
    import numpy as np

    if isinstance(n_tasks, bool) or not isinstance(n_tasks, numbers.Integral) or n_tasks < 1:
        raise DseError(f"random graph {name!r}: n_tasks must be an integer >= 1, got {n_tasks!r}")
    n = int(n_tasks)
    cpu_lo, cpu_hi = _range(cpu_us, f"random graph {name!r}: cpu_us")
    gpu_lo, gpu_hi = _range(gpu_us, f"random graph {name!r}: gpu_us")
    if not isinstance(gpu_only_share, numbers.Real) or isinstance(gpu_only_share, bool) \
            or not 0 <= gpu_only_share <= 1:
        raise DseError(f"random graph {name!r}: gpu_only_share must be in [0, 1], got {gpu_only_share!r}")
    scale = _time(scale, f"random graph {name!r}: scale")
    try:
        rng = np.random.default_rng(seed)
    except (TypeError, ValueError):
        raise DseError(f"random graph {name!r}: seed must be a non-negative integer, got {seed!r}") from None

    # Layer widths: at most ~sqrt(n) wide (10 tasks: 1-3 per layer, ~5 layers); layer 1 at least as wide as
    # layer 0, so each source can own a child and neighbouring sources can be joined through layer 1.
    max_w = max(1, round(math.sqrt(n)))
    widths = []
    if n == 1:
        widths = [1]
    else:
        w0 = int(rng.integers(1, min(max_w, n // 2) + 1))
        w1 = int(rng.integers(w0, min(max_w, n - w0) + 1))
        widths = [w0, w1]
        while sum(widths) < n:
            widths.append(int(rng.integers(1, min(max_w, n - sum(widths)) + 1)))
    layers, k = [], 0
    for w in widths:
        layers.append(list(range(k, k + w)))
        k += w
    edges = set()
    for li in range(1, len(layers)):
        prev, cur = layers[li - 1], layers[li]
        earlier = [u for lay in layers[:li] for u in lay]
        # primary parents: spread over the previous layer first, so few of its tasks are left childless
        perm = [int(x) for x in rng.permutation(prev)]
        primary = {v: perm[i] if i < len(perm) else int(rng.choice(prev)) for i, v in enumerate(cur)}
        if li == 1:                          # join the sources: v_k gets s_k and s_(k-1) (w1 >= w0)
            primary = {v: prev[i] if i < len(prev) else primary[v] for i, v in enumerate(cur)}
        for i, v in enumerate(cur):
            edges.add((primary[v], v))
            if li == 1 and 1 <= i < len(prev):
                edges.add((prev[i - 1], v))
            elif rng.random() < 0.5:         # in-degree 2: a second parent from any earlier layer
                others = [u for u in earlier if u != primary[v]]
                if others:
                    edges.add((int(rng.choice(others)), v))
    n_gpu_only = int(math.floor(n * gpu_only_share + 0.5))
    gpu_only = {int(x) for x in rng.choice(n, size=n_gpu_only, replace=False)}
    cpu = rng.integers(int(math.ceil(cpu_lo)), int(math.floor(cpu_hi)) + 1, size=n) if math.ceil(cpu_lo) <= cpu_hi \
        else np.full(n, cpu_lo)
    gpu = rng.integers(int(math.ceil(gpu_lo)), int(math.floor(gpu_hi)) + 1, size=n) if math.ceil(gpu_lo) <= gpu_hi \
        else np.full(n, gpu_lo)
    tasks = []
    for i in range(n):
        wcet = {"gpu": float(gpu[i])} if i in gpu_only else {"cpu": float(cpu[i]), "gpu": float(gpu[i])}
        tasks.append(DataflowTask(f"t{i}", wcet))
    g = DataflowGraph(name, tuple(tasks), tuple((f"t{u}", f"t{v}") for u, v in sorted(edges)))
    return g if scale == 1.0 else g.scaled(scale)
