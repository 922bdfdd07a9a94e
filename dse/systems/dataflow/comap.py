"""Co-mapping DL stages and dataflow tasks under group deadlines (thesis Ch. 5, 5.4.2, l. 1688-1784).

A group is a DAG: its dataflow graphs with each DL app's chain (pre -> stages -> post, one of its step-1 Pareto
candidates) grafted behind a graph task (l. 1680). Every group has one period (its implicit deadline) and one CPU
priority; GPU and DLAs are FIFO. A solution picks a candidate per DL app and a PE per dataflow task:

- DL stages -> PEs (5.4.2.1, l. 1726): per PE type with several PEs (CPU cores, DLAs), the DL tasks of that type
  sorted by decreasing WCET, assigned round robin from the longest. Round robin can put both DLA stages of one
  app on one DLA; a swap with another app's stage on the other DLA repairs it (spec 3.6 #7).
- Dataflow tasks -> PEs: Algorithm 7 (l. 1730-1753, greedy by utilization) in Heuristic+GA, genes in Entire-GA.
- Fitness (eq. 5.5): (max_pe U(pe), max_i R(G_i)/p_i) from the CPA of every group (``dse.rt.cpa``: eqs. 5.3,
  5.4, longest path); an unschedulable solution or one over the DLA engine limit is worse than every feasible
  one (the thesis: "the worst"); among themselves infeasible solutions rank by lateness (max R/p), so a GA at a
  tight deadline is led towards feasibility instead of drifting. The GA keeps the least max U among the feasible
  ones; max R/p breaks ties (with equal periods it ranks like max R).

Methods: ``heuristic-ga`` (genes = one candidate per DL app), ``entire-ga`` (plus one PE per dataflow task,
seeded with Heuristic+GA's best, from a looser deadline if it finds none at this one, l. 1722), ``baseline`` (the
two-phase flow of l. 1814: Ch. 4's GA maps the DL apps alone with Algorithm 5, then a GA maps the dataflow
tasks onto that, minimizing the dataflow applications' WCRT as Jeong et al. [79] do, blind to the grafted DL
chains' deadlines). The GA is Ch. 4's (``dse.systems.multi.combine.evolve``).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from dse.systems.dataflow.graphs import DataflowGraph, DataflowTask
from dse.core.errors import DseError
from dse.rt.cpa import CpaProblem
from dse.rt.model import App, Stage, Task, preds_of

INF = float("inf")
INFEASIBLE = 1e3        # added to an infeasible solution's lateness: above any feasible fitness (max U <= ~1e2)
METHODS = ("heuristic-ga", "entire-ga", "baseline")


@dataclass(frozen=True)
class Candidates:
    """One network's step-1 Pareto candidates: stage chains at fmax, DLA stage counts, labels ('A 29'), and the
    noise-free task times the deployment draws around."""

    chains: list[tuple[Stage, ...]]
    n_dla: list[int]
    labels: list[str]
    bases: list = field(default_factory=list)     # per candidate its PeriodicStage chain (deployment)


@dataclass(frozen=True)
class Group:
    name: str
    priority: int                          # 0 highest
    graphs: tuple[DataflowGraph, ...]
    dl: tuple[str, ...]                    # DL app names
    graft: str | None = None               # task of the graphs the DL pre-processing follows ("graph/task" or "task")


def graft_index(group: str, graphs: Sequence[DataflowGraph], graft: str) -> int:
    """Position, among the group's graph tasks in order, of the one the DL pre-processing follows (``task`` or
    ``graph/task``); an unknown or ambiguous name is refused."""
    names = [(g.name, t.name) for g in graphs for t in g.tasks]
    hits = [i for i, (gname, t) in enumerate(names) if graft in (t, f"{gname}/{t}")]
    if len(hits) != 1:
        raise DseError(f"dataflow group {group}: graft task {graft!r} " +
                       (f"is not a task of its graphs; tasks: {', '.join(t for _, t in names)}" if not hits
                        else "is ambiguous: name it graph/task"))
    return hits[0]


@dataclass
class Problem:
    groups: list[Group]
    networks: dict[str, str]               # DL app -> network
    candidates: dict[str, Candidates]      # network -> its candidates
    cpu_cores: list[int]
    n_dla_cores: int = 2
    dla_limit: int | None = 4

    def __post_init__(self):
        self.df: list[tuple[int, int, DataflowTask]] = []     # (group, stage index in the group, task)
        self.layout: list[dict] = []                          # per group: graph stage offsets, edges, graft index
        for gi, g in enumerate(self.groups):
            labels, edges, tasks = [], [], []
            for graph in g.graphs:
                off = len(tasks)
                prefix = f"{graph.name}/" if len(g.graphs) > 1 else ""
                labels += [prefix + t.name for t in graph.tasks]
                tasks += list(graph.tasks)
                edges += [(off + a, off + b) for a, b in graph.edge_indices()]
            graft = None if g.graft is None else graft_index(g.name, g.graphs, g.graft)
            for a in g.dl:
                if a not in self.networks:
                    raise DseError(f"group {g.name}: DL app {a!r} has no network; apps: {sorted(self.networks)}")
            self.df += [(gi, i, t) for i, t in enumerate(tasks)]
            self.layout.append({"labels": labels, "edges": edges, "graft": graft,
                                "preds": preds_of(len(labels), edges)})
        # the PEs each dataflow task may use (its Entire-GA gene values)
        self.df_pes = [[*(f"CPU{c}" for c in self.cpu_cores if "cpu" in t.wcet_us), *(["GPU"] if "gpu" in t.wcet_us
                                                                                      else [])]
                       for _, _, t in self.df]
        for (gi, _, t), pes in zip(self.df, self.df_pes):
            if not pes:
                raise DseError(f"group {self.groups[gi].name}: task {t.name} may run on {list(t.wcet_us)}, none of "
                               f"which this board offers (cpu, gpu)")

    @property
    def apps(self) -> list[str]:
        return [a for g in self.groups for a in g.dl]

    def sizes(self) -> list[int]:
        return [len(self.candidates[self.networks[a]].chains) for a in self.apps]

    def chains_of(self, genes: Sequence[int]) -> dict[str, tuple[Stage, ...]]:
        return {a: self.candidates[self.networks[a]].chains[g] for a, g in zip(self.apps, genes)}

    def dla_reason(self, genes: Sequence[int]) -> str | None:
        n = sum(self.candidates[self.networks[a]].n_dla[g] for a, g in zip(self.apps, genes))
        if self.dla_limit is not None and n > self.dla_limit:
            return f"{n} DLA stages > the engine limit {self.dla_limit}"
        return None


@dataclass
class Evaluation:
    feasible: bool
    max_u: float
    max_ratio: float                       # max over groups of WCRT / period
    util: dict[str, float]
    wcrt_us: dict[str, float]
    dl_genes: tuple[int, ...]
    df_pes: tuple[str, ...]
    placement: dict[tuple[str, int], str] = field(default_factory=dict)
    reason: str = ""
    ratios: dict[str, float] = field(default_factory=dict)   # per group WCRT / period
    dl_placement: dict[tuple[str, int], str] = field(default_factory=dict)   # (DL app, stage) -> PE
    df_ratios: dict[str, float] = field(default_factory=dict)   # per group its dataflow tasks' WCRT / period

    @property
    def value(self) -> float:
        """The GA's scalar: least max U among the feasible, max R/p breaking ties; an infeasible solution is worse
        than every feasible one and ranked by how late its latest group is (constraint domination)."""
        return self.max_u + 1e-3 * self.max_ratio if self.feasible else INFEASIBLE + self.max_ratio

    def cases(self) -> list[float]:
        """Lexicase cases: max U, max R/p, and each group's R/p (infeasible: all shifted by INFEASIBLE)."""
        if not self.feasible:
            return [INFEASIBLE + self.max_ratio] * 2 + [INFEASIBLE + r for r in self.ratios.values()]
        return [self.max_u, self.max_ratio, *self.ratios.values()]


# ---- DL stages -> PEs ----------------------------------------------------------------------------------------
def place_dl(chains: Mapping[str, Sequence[Stage]], cpu_cores: Sequence[int], n_dla: int = 2) -> dict:
    """5.4.2.1: per PE type, DL tasks by decreasing WCET, round robin from the longest; GPU stages on the GPU."""
    placement: dict[tuple[str, int], str] = {}
    for kind, pes in (("cpu", [f"CPU{c}" for c in cpu_cores]), ("dla", [f"DLA{k}" for k in range(n_dla)])):
        tasks = [(a, k) for a, ch in chains.items() for k, st in enumerate(ch) if st.kind == kind]
        tasks.sort(key=lambda ak: -chains[ak[0]][ak[1]].wcet_us)      # stable: ties keep the app order
        for i, key in enumerate(tasks):
            placement[key] = pes[i % len(pes)]
    for a, ch in chains.items():
        for k, st in enumerate(ch):
            if st.kind == "gpu":
                placement[a, k] = "GPU"
    _repair_dla(chains, placement)
    return placement


def _repair_dla(chains, placement) -> None:
    """An app's DLA stages on one DLA core would serialize: swap one with another app's stage on a free core."""
    for a, ch in chains.items():
        mine = [k for k, st in enumerate(ch) if st.kind == "dla"]
        for i, k in enumerate(mine):
            used = {placement[a, j] for j in mine[:i]}
            if placement[a, k] not in used:
                continue
            free = [(b, j) for (b, j), pe in placement.items()
                    if b != a and pe.startswith("DLA") and pe not in used
                    and placement[a, k] not in {placement[b, x] for x, s in enumerate(chains[b]) if s.kind == "dla"
                                                and x != j}]
            if free:
                b, j = min(free, key=lambda bj: abs(chains[bj[0]][bj[1]].wcet_us - ch[k].wcet_us))
                placement[a, k], placement[b, j] = placement[b, j], placement[a, k]
            else:
                pes = sorted({pe for pe in placement.values() if pe.startswith("DLA")} | {"DLA0", "DLA1"})
                placement[a, k] = next((pe for pe in pes if pe not in used), placement[a, k])


def algorithm7(problem: Problem, util: dict[str, float], period_us: float) -> list[str]:
    """MapModelTasks (l. 1730-1753): dataflow tasks by decreasing largest WCET; each to the least-utilized PE of
    the type whose worst PE utilization after adding it is the lowest. ``util`` is updated in place."""
    order = sorted(range(len(problem.df)), key=lambda i: -max(problem.df[i][2].wcet_us.values()))
    out: list[str] = [""] * len(problem.df)
    for i in order:
        t = problem.df[i][2]
        best = None
        for kind in t.wcet_us:
            pes = [pe for pe in problem.df_pes[i] if pe.lower().startswith(kind)]
            pe = min(pes, key=lambda q: util.get(q, 0.0))
            add = t.wcet_us[kind] / period_us
            value = max(util.get(q, 0.0) + (add if q == pe else 0.0) for q in pes)
            if best is None or value < best[0]:
                best = (value, pe, add)
        out[i] = best[1]
        util[best[1]] = util.get(best[1], 0.0) + best[2]
    return out


# ---- evaluation -------------------------------------------------------------------------------------------------
def utilization(apps: Sequence[App], placement) -> dict[str, float]:
    """U(pe) = sum of WCET / period over the stages on pe (l. 1612)."""
    u: dict[str, float] = {}
    for app in apps:
        for k, st in enumerate(app.stages):
            pe = placement[app.name, k]
            u[pe] = u.get(pe, 0.0) + st.wcet_us / app.period_us
    return u


def build_apps(problem: Problem, period_us: float, chains: Mapping[str, Sequence[Stage]], df_pes: Sequence[str],
               dl_placement: Mapping) -> tuple[list[App], dict]:
    """Every group as one DAG app (dataflow tasks first, then each grafted DL chain) and its placement."""
    apps, placement = [], {}
    df_of = {}
    for (gi, i, t), pe in zip(problem.df, df_pes):
        df_of[gi, i] = (t, pe)
    for gi, g in enumerate(problem.groups):
        lay = problem.layout[gi]
        stages, edges = [], list(lay["edges"])
        for i, label in enumerate(lay["labels"]):
            t, pe = df_of[gi, i]
            kind = pe.lower().rstrip("0123456789")
            stages.append(Stage(kind, (Task(t.wcet_us[kind], t.acet_us[kind], t.bcet_us[kind]),), label))
            placement[g.name, i] = pe
        for a in g.dl:
            start = len(stages)
            for k, st in enumerate(chains[a]):
                stages.append(Stage(st.kind, st.tasks, f"{a}:{st.label or st.kind}"))
                placement[g.name, start + k] = dl_placement[a, k]
                if k:
                    edges.append((start + k - 1, start + k))
            if lay["graft"] is not None:
                edges.append((lay["graft"], start))
        apps.append(App(g.name, period_us, g.priority, tuple(stages), edges=tuple(edges)))
    return apps, placement


def evaluate(problem: Problem, fps: float, dl_genes: Sequence[int], df_pes: Sequence[str] | None = None, *,
             dl_placement: Mapping | None = None, dl_only: bool = False) -> Evaluation:
    """One solution at the common deadline 1/fps. ``df_pes`` None: Algorithm 7 maps the dataflow tasks;
    ``dl_placement`` None: 5.4.2.1; ``dl_only``: the DL apps alone (the Baseline's first phase)."""
    period = 1e6 / fps
    genes = tuple(int(g) for g in dl_genes)
    reason = problem.dla_reason(genes)
    if reason:
        names = problem.apps if dl_only else [g.name for g in problem.groups]
        return Evaluation(False, INF, INF, {}, {}, genes, tuple(df_pes or ()), reason=reason,
                          ratios={n: INF for n in names})
    chains = problem.chains_of(genes)
    dl_place = dict(dl_placement) if dl_placement is not None else \
        place_dl(chains, problem.cpu_cores, problem.n_dla_cores)
    if dl_only:
        apps = [App(a, period, g.priority, tuple(chains[a])) for g in problem.groups for a in g.dl]
        placement = dl_place
        pes: tuple[str, ...] = ()
    else:
        if df_pes is None:
            dl_apps = [App(a, period, 0, tuple(chains[a])) for a in problem.apps]
            df_pes = algorithm7(problem, utilization(dl_apps, dl_place), period)
        pes = tuple(df_pes)
        apps, placement = build_apps(problem, period, chains, pes, dl_place)
    res = CpaProblem(apps, placement).analyse()
    util = utilization(apps, placement)
    ratios = {a.name: res.wcrt_us[a.name] / period for a in apps}
    df_ratios = {} if dl_only else {g.name: dataflow_wcrt(problem, gi, res.stage_r_us) / period
                                    for gi, g in enumerate(problem.groups)}
    return Evaluation(res.schedulable, max(util.values()), max(ratios.values()), util, res.wcrt_us, genes, pes,
                      placement, res.reason, ratios=ratios, dl_placement=dl_place, df_ratios=df_ratios)


def dataflow_wcrt(problem: Problem, gi: int, stage_r_us: Mapping[tuple[str, int], float]) -> float:
    """Longest path of the group's dataflow tasks alone (its grafted DL chains left out): the response time of its
    dataflow applications, the objective of Jeong et al. [79] (l. 1577). 0 for a group without dataflow tasks."""
    name = problem.groups[gi].name
    end: list[float] = []
    for i, preds in enumerate(problem.layout[gi]["preds"]):   # graph tasks come in topological order (graphs.py)
        end.append(stage_r_us[name, i] + max((end[p] for p in preds), default=0.0))
    return max(end, default=0.0)


# ---- methods ----------------------------------------------------------------------------------------------------
@dataclass
class Outcome:
    method: str
    fps: float
    best: Evaluation
    time_s: float                           # the method's own search
    evaluations: int
    generations: int
    history: list[float]
    seed_time_s: float = 0.0                # Entire-GA: the Heuristic+GA runs that seeded it
    seeded_from_fps: float | None = None
    phases: dict = field(default_factory=dict)


def _ga(sizes, fitness, ga: Mapping, salt: str, seeds=(), by_dataflow_wcrt: bool = False):
    """Ch. 4's step-2 GA over ``fitness(genes) -> Evaluation``: least max U among the feasible (eq. 5.5), or,
    ``by_dataflow_wcrt``, least dataflow-application WCRT / period whatever the DL chains do ([79])."""
    from dse.systems.multi.combine import evolve

    def ev(genes):
        e = fitness(genes)
        if not by_dataflow_wcrt:
            return e.value, e.cases()
        worst = min(max(e.df_ratios.values(), default=INFEASIBLE), INFEASIBLE)   # none: over the DLA limit
        return worst + 1e-3 * e.max_u, [worst, *(min(r, INFEASIBLE) for r in e.df_ratios.values())]
    return evolve(sizes, ev, maximize=False, ga=ga, salt=salt, seeds=seeds)


def heuristic_ga(problem: Problem, fps: float, ga: Mapping, salt: str = "") -> Outcome:
    t0 = time.perf_counter()
    out = _ga(problem.sizes(), lambda g: evaluate(problem, fps, g), ga, f"h:{fps}:{salt}")
    best = evaluate(problem, fps, out.genes)
    return Outcome("heuristic-ga", fps, best, time.perf_counter() - t0, out.evaluations, out.generations,
                   out.history, phases={"population": [list(g) for g in out.population]})


def entire_ga(problem: Problem, fps: float, ga: Mapping, salt: str = "", loose_fps: float = 10.0) -> Outcome:
    """Genes = candidates + one PE per dataflow task, seeded with Heuristic+GA's final population (l. 1722)."""
    t0 = time.perf_counter()
    seeded_from = fps
    h = heuristic_ga(problem, fps, ga, salt)
    if not h.best.feasible and loose_fps < fps:
        seeded_from = loose_fps
        h = heuristic_ga(problem, loose_fps, ga, salt)
    seed_time = time.perf_counter() - t0
    n_dl = len(problem.apps)
    seeds = []
    for g in h.phases["population"]:
        e = evaluate(problem, seeded_from, g)
        seeds.append(tuple(g) + tuple(problem.df_pes[i].index(pe) for i, pe in enumerate(e.df_pes)))
    sizes = problem.sizes() + [len(p) for p in problem.df_pes]

    def fitness(genes):
        return evaluate(problem, fps, genes[:n_dl], [problem.df_pes[i][v] for i, v in enumerate(genes[n_dl:])])
    t1 = time.perf_counter()
    out = _ga(sizes, fitness, ga, f"e:{fps}:{salt}", seeds=seeds)
    best = fitness(out.genes)
    return Outcome("entire-ga", fps, best, time.perf_counter() - t1, out.evaluations, out.generations, out.history,
                   seed_time_s=seed_time, seeded_from_fps=seeded_from)


def baseline(problem: Problem, fps: float, ga: Mapping, salt: str = "") -> Outcome:
    """Two phases (l. 1814, spec 3.3): the DL apps alone with Ch. 4's GA and Algorithm 5 (least max U of the DL
    tasks), then Jeong et al.'s GA [79] maps the dataflow tasks onto that fixed DL mapping, "aiming to reduce the
    worst-case response time for each dataflow application" (l. 1577): the grafted DL chains' response is not its
    objective, only their interference. The result is judged like the other methods' (eq. 5.5, deadlines)."""
    from dse.systems.multi.placement import map_stages

    t0 = time.perf_counter()
    everyone = [problem.apps]

    def alg5(genes):
        return map_stages(problem.chains_of(genes), everyone, problem.cpu_cores, problem.n_dla_cores)

    p1 = _ga(problem.sizes(), lambda g: evaluate(problem, fps, g, dl_placement=alg5(g), dl_only=True), ga,
             f"b1:{fps}:{salt}")
    dl = p1.genes
    place = alg5(dl)

    def phase2(genes):
        return evaluate(problem, fps, dl, [problem.df_pes[i][v] for i, v in enumerate(genes)], dl_placement=place)
    p2 = _ga([len(p) for p in problem.df_pes], phase2, ga, f"b2:{fps}:{salt}", by_dataflow_wcrt=True)
    best = evaluate(problem, fps, dl, [problem.df_pes[i][v] for i, v in enumerate(p2.genes)], dl_placement=place)
    return Outcome("baseline", fps, best, time.perf_counter() - t0, p1.evaluations + p2.evaluations,
                   p1.generations + p2.generations, p2.history,
                   phases={"dl_only_max_u": float(evaluate(problem, fps, dl, dl_placement=place, dl_only=True).max_u)})


def run_method(problem: Problem, method: str, fps: float, ga: Mapping, salt: str = "",
               loose_fps: float = 10.0) -> Outcome:
    if method == "heuristic-ga":
        return heuristic_ga(problem, fps, ga, salt)
    if method == "entire-ga":
        return entire_ga(problem, fps, ga, salt, loose_fps)
    if method == "baseline":
        return baseline(problem, fps, ga, salt)
    raise DseError(f"unknown co-mapping method {method!r}; valid choices: {', '.join(METHODS)}")


def outcome_dict(problem: Problem, out: Outcome) -> dict:
    """The JSON of one (method, deadline, seed) job."""
    b = out.best
    dl = {a: {"candidate": g, "label": problem.candidates[problem.networks[a]].labels[g]}
          for a, g in zip(problem.apps, b.dl_genes)}
    df = {f"{problem.groups[gi].name}/{problem.layout[gi]['labels'][i]}": pe
          for (gi, i, _), pe in zip(problem.df, b.df_pes)}
    finite = (lambda v: round(float(v), 6) if math.isfinite(v) else None)
    return {"method": out.method, "fps": out.fps, "feasible": b.feasible, "max_u": finite(b.max_u),
            "max_wcrt_ratio": finite(b.max_ratio), "reason": b.reason,
            "wcrt_ms": {k: round(v / 1e3, 4) for k, v in b.wcrt_us.items()},
            "util": {k: round(v, 5) for k, v in sorted(b.util.items())}, "dl": dl, "dataflow": df,
            "dl_placement": [[a, k, pe] for (a, k), pe in b.dl_placement.items()],
            "time_s": round(out.time_s, 4), "seed_time_s": round(out.seed_time_s, 4),
            "seeded_from_fps": out.seeded_from_fps, "evaluations": out.evaluations, "generations": out.generations,
            "history": [finite(h) for h in out.history], "phases": {k: v for k, v in out.phases.items()
                                                                  if k != "population"}}
