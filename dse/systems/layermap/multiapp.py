"""The multi-application GA of seed 002 (Kang et al. 2020) Sec. VI-B, spec seeds-001-004 section 3.5: several DNN
apps, each mapped layer by layer onto the same PEs, periodic (period = implicit deadline) with fixed priorities.

- Chromosome: every app's per-task PE ids, concatenated (gene = PE id 0..P-1 of the PeSet all apps share). Each
  app's part starts as in the single-app GA (``ga._toolbox``: random or clustered); uniform crossover and that
  GA's mutation act on the whole chromosome (gene flip probability 2 / genes).
- Objectives, all minimized, under SPEA2 (``run_moea``): per app the response-time bound of the schedule-based
  analysis (``dse.rt.schedule_based``), and the total energy per second, i.e. the average power in W: each PE's
  busy power x its utilization sum_a load_a / period_a plus its idle power x the rest. (Summing each app's
  ``evaluate().energy_j / period`` would be the same without idle powers, but counts a PE's idle time once per
  app, over that app's own pipelined period.)
- Penalty (002 L306: a large one where an app's response exceeds its period, "so that it cannot be selected"):
  a mapping with k unschedulable apps (a slack below 0 or the bound above the period) gets k x ``penalty`` x
  the app's period on every app's term and k x ``penalty`` x the board's full-load power on the energy term, so
  every schedulable mapping dominates it. The seed names only the late app's term; on it alone a late mapping
  stays non-dominated through its other terms, and on the virtual S9 such mappings filled SPEA2's archive: at
  twice the seed's periods the GA kept 1 schedulable solution where a hill climb from it found schedulable ones
  of 10 % less power.
- CPU groups are preemptive, GPU/NPU/DLA not (Eq. (10) vs (11)).

``min_response_alone`` gives the reference of the relative response times (002 Fig. 11): an app's fastest
response alone, a one-objective ``run_ga`` over the analysis' alone response with the single-app GA's operators,
started from the one-PE mappings too. Pipelined (the default reading) that is the single-app period
(``run_layer_ga``'s objective without its local search); one frame at a time it is the ASAP makespan
(``AnalyticModel.latency``), which ``run_layer_ga`` does not minimize.
"""
from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING

import numpy as np

from dse.rt.schedule_based import MultiAppProblem
from dse.search.ga_common import GASettings, min_types, run_ga, run_moea
from dse.systems.layermap.ga import _toolbox, preset
from dse.taskgraph.errors import LayerMapError
from dse.taskgraph.mapping import PeSet, encode_ids
from dse.taskgraph.model import AnalyticModel

if TYPE_CHECKING:
    import pandas as pd

#: objective of a mapping with a task on a PE that cannot run it (us or W): finite, so SPEA2's distances stay finite
UNMAPPABLE = 1e12


@dataclass(frozen=True)
class App:
    """One application: its model (on the PeSet every app shares), period in us and priority (lower = higher)."""

    name: str
    model: AnalyticModel
    period_us: float
    priority: int


@dataclass(frozen=True)
class JointEvaluation:
    """[pop, n_apps] response-time bounds (inf where a task sits on a PE that cannot run it) and schedulability,
    [pop] average power in W, and the [pop, n_apps + 1] penalized objectives the GA minimizes."""

    response_us: np.ndarray
    schedulable: np.ndarray
    power_w: np.ndarray
    objectives: np.ndarray


def preemptive_of(pes: PeSet) -> tuple[bool, ...]:
    """CPU groups are preemptive; GPU, NPU and DLA run a kernel to its end (002 Eq. (11))."""
    return tuple(k.startswith("cpu") for k in pes.kinds)


def _occupancy(model: AnalyticModel, maps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[pop, n] time each task holds its PE (compute + charged transfers), 0 on the rows with a task on a PE that
    cannot run it (the analysis takes finite times only), and those rows' mask."""
    exec_us, comm = model.task_costs_population(maps)
    times = exec_us + comm
    bad = ~np.isfinite(times).all(axis=1)
    times[bad] = 0.0
    return times, bad


def task_preds(model: AnalyticModel) -> list[tuple[int, ...]]:
    """Per task its predecessors as plain ints: the DAG the schedule-based analysis and its check both read."""
    return [tuple(int(p) for p in model.graph.preds(i)) for i in range(model.n)]


class JointProblem:
    """The joint chromosome of several apps and its vectorized evaluation (per app ``task_costs_population``, then
    one ``MultiAppProblem.analyse_population``)."""

    def __init__(self, apps: Sequence[App], *, penalty: float = 10.0, response: str = "pipelined"):
        apps = [a if isinstance(a, App) else App(*a) for a in apps]
        if not apps:
            raise LayerMapError("the multi-app GA needs at least one app")
        pes = apps[0].model.pes
        for a in apps[1:]:
            if a.model.pes != pes:
                raise LayerMapError(f"app {a.name} is modelled on PEs {a.model.pes.describe()}, app {apps[0].name} "
                                    f"on {pes.describe()}: every app must share one PeSet")
        first = apps[0].model
        if first.p_busy is None:
            raise LayerMapError(f"app {apps[0].name}: the energy objective needs a model with p_busy (per-PE power)")
        for a in apps[1:]:
            same = [np.array_equal(x, y) if x is not None and y is not None else x is y
                    for x, y in ((a.model.p_busy, first.p_busy), (a.model.p_idle, first.p_idle))]
            if not all(same):
                raise LayerMapError(f"app {a.name} has PE powers {a.model.p_busy}/{a.model.p_idle}, app "
                                    f"{apps[0].name} {first.p_busy}/{first.p_idle}: one board has one set")
        if not (math.isfinite(penalty) and penalty > 0):
            raise LayerMapError(f"the unschedulable penalty must be a finite factor > 0 of the period, got {penalty}")
        self.apps, self.pes, self.penalty = tuple(apps), pes, float(penalty)
        self.P = len(pes)
        self.sizes = tuple(a.model.n for a in apps)
        self.bounds = np.cumsum((0,) + self.sizes)
        self.n_genes = int(self.bounds[-1])
        self.periods = np.array([float(a.period_us) for a in apps])
        self.problem = MultiAppProblem([a.name for a in apps], list(self.periods), [a.priority for a in apps],
                                       [task_preds(a.model) for a in apps], preemptive_of(pes), response)
        self.p_busy = first.p_busy
        self.p_idle = np.zeros(self.P) if first.p_idle is None else first.p_idle
        self.full_power = float(np.maximum(self.p_busy, self.p_idle).sum())    # every PE busy: the most power

    def split(self, genes) -> list[np.ndarray]:
        """Per app its [pop, n_a] (or [n_a]) part of joint chromosomes [pop, n_genes] (or [n_genes])."""
        G = np.asarray(genes)
        if G.shape[-1] != self.n_genes or G.ndim not in (1, 2):
            raise LayerMapError(f"joint chromosomes must be [{self.n_genes}] or [pop, {self.n_genes}] "
                                f"(apps of {', '.join(map(str, self.sizes))} tasks), got shape {G.shape}")
        return [G[..., lo:hi] for lo, hi in zip(self.bounds[:-1], self.bounds[1:])]

    def evaluate(self, genes) -> JointEvaluation:
        """Responses, schedulability, power and objectives of a population of joint chromosomes [pop, n_genes]."""
        parts = self.split(np.atleast_2d(genes))
        times, bad = zip(*(_occupancy(a.model, m) for a, m in zip(self.apps, parts)))
        res = self.problem.analyse_population(parts, times)
        pop = parts[0].shape[0]
        unmappable = np.any(bad, axis=0)
        util = np.zeros((pop, self.P))
        for m, t, period in zip(parts, times, self.periods):
            flat = (m + (np.arange(pop) * self.P)[:, None]).ravel()
            util += np.bincount(flat, t.ravel(), minlength=pop * self.P).reshape(pop, self.P) / period
        busy = np.clip(util, 0.0, 1.0)
        power = busy @ self.p_busy + (1.0 - busy) @ self.p_idle
        response = np.where(unmappable[:, None], np.inf, res.response_us)
        ok = res.app_schedulable & ~unmappable[:, None]
        late = (~ok).sum(axis=1)[:, None] * self.penalty
        obj = np.column_stack([res.response_us + late * self.periods, power + late[:, 0] * self.full_power])
        obj[unmappable] = UNMAPPABLE
        power[unmappable] = np.inf
        return JointEvaluation(response, ok, power, obj)


@dataclass(frozen=True)
class Solution:
    """One Pareto solution: per app its mapping (PE ids), response-time bound (us), response relative to the app's
    fastest alone and schedulability; the average power (W) and the objective values the GA minimized."""

    mappings: tuple[tuple[int, ...], ...]
    response_us: tuple[float, ...]
    relative: tuple[float, ...]
    schedulable: tuple[bool, ...]
    power_w: float
    objectives: tuple[float, ...]


@dataclass(frozen=True)
class MultiAppResult:
    """The Pareto set of one multi-app GA run: its schedulable members (all of the archive, flagged, where none is
    schedulable), lexicographic in the objectives; evaluations, generations, seconds and the run's history (the
    archive size per generation; with one app the 2-D hypervolume)."""

    apps: tuple[str, ...]
    periods_us: tuple[float, ...]
    priorities: tuple[int, ...]
    alone_us: tuple[float, ...]
    solutions: tuple[Solution, ...]
    archive: int
    evaluations: int
    generations: int
    seconds: float
    history: tuple[float, ...]

    def to_frame(self) -> pd.DataFrame:
        """One row per Pareto solution: ``solution``, per app ``<app>_response_us``, ``<app>_relative``,
        ``<app>_mapping`` (``encode_ids``) and ``<app>_schedulable``, then ``power_w`` and ``schedulable``."""
        import pandas as pd

        rows = []
        for k, s in enumerate(self.solutions):
            row: dict = {"solution": k}
            for a, name in enumerate(self.apps):
                row.update({f"{name}_response_us": s.response_us[a], f"{name}_relative": s.relative[a],
                            f"{name}_mapping": encode_ids(s.mappings[a]), f"{name}_schedulable": s.schedulable[a]})
            rows.append({**row, "power_w": s.power_w, "schedulable": all(s.schedulable)})
        columns = ["solution"] + [f"{n}_{c}" for n in self.apps for c in ("response_us", "relative", "mapping",
                                                                          "schedulable")] + ["power_w", "schedulable"]
        return pd.DataFrame(rows, columns=columns)

    def min_relative(self) -> dict[str, float]:
        """Per app the smallest relative response time over the Pareto set (002 Fig. 11: 1 / 1 / 1.43)."""
        return {n: min((s.relative[a] for s in self.solutions), default=math.nan) for a, n in enumerate(self.apps)}


def _settings(population: int, generations: int, seed: int, preset_name: str, overrides: dict):
    p = preset(preset_name, population=population, generations=generations, **overrides)
    return p, GASettings(population=p.population, generations=p.generations, cxpb=p.cxpb, mutpb=p.mutpb,
                         tournament=p.tournament, stall=p.stall, seed=seed)


def run_multiapp_ga(apps: Sequence[App], alone_us: Sequence[float], *, population: int = 100,
                    generations: int = 100, seed: int = 0, penalty: float = 10.0, budget: int | None = None,
                    seeds: Sequence[Sequence[Sequence[int]]] = (), preset_name: str = "kang2020",
                    response: str = "pipelined", **overrides) -> MultiAppResult:
    """SPEA2 over the joint chromosome of ``apps`` (``App`` or (name, model, period_us, priority)); ``alone_us``:
    per app its fastest response alone (``min_response_alone``), the reference of the relative response times.
    ``seeds``: solutions (per app a mapping) placed in the first population before the generated ones, e.g. every
    app on its fastest mapping alone: the GA seldom assembles a whole app on one PE from mixed mappings. The
    preset gives the crossover/mutation rates and the clustered share (``overrides`` replace its fields).
    ``response``: the analysis' response bound (``dse.rt.schedule_based.RESPONSES``)."""
    joint = JointProblem(apps, penalty=penalty, response=response)
    alone = tuple(float(x) for x in alone_us)
    if len(alone) != len(joint.apps) or not all(math.isfinite(x) and x > 0 for x in alone):
        raise LayerMapError(f"alone_us needs one finite response > 0 us per app ({len(joint.apps)}), got {alone}")
    p, ga = _settings(population, generations, seed, preset_name, overrides)
    _, individual = min_types(len(joint.apps) + 1)
    starts = []
    for s in list(seeds)[:population]:
        maps = [[int(g) for g in m] for m in s]
        if [len(m) for m in maps] != list(joint.sizes) or not all(0 <= g < joint.P for m in maps for g in m):
            raise LayerMapError(f"a seed needs per app one PE id in 0..{joint.P - 1} per task (apps of "
                                f"{', '.join(map(str, joint.sizes))} tasks), got {maps}")
        starts.append([g for m in maps for g in m])
    tb = _toolbox(SimpleNamespace(n=joint.n_genes, P=joint.P), p, individual)   # mate, mutate, select
    parts = [_toolbox(a.model, p, list) for a in joint.apps]                     # each app's initial genes
    tb.register("individual", lambda: individual(g for part in parts for g in part.individual()))

    def first_population(n):
        return [individual(s) for s in starts] + [tb.individual() for _ in range(n - len(starts))]

    tb.register("population", first_population)
    tb.register("evaluate_batch", lambda inds: [tuple(r) for r in joint.evaluate(np.array(inds)).objectives.tolist()])
    t0 = time.perf_counter()
    log: dict = {}
    front, history = run_moea(tb, ga, "layermap-multiapp", "spea2", budget=budget, log=log)
    genes = np.array([list(ind) for ind in front], dtype=np.int64)
    ev = joint.evaluate(genes)
    keep = ev.schedulable.all(axis=1)
    if not keep.any():
        keep[:] = True
    solutions = []
    for k in np.flatnonzero(keep):
        solutions.append(Solution(tuple(tuple(int(g) for g in m) for m in joint.split(genes[k])),
                                  tuple(float(r) for r in ev.response_us[k]),
                                  tuple(float(r) / a for r, a in zip(ev.response_us[k], alone)),
                                  tuple(bool(x) for x in ev.schedulable[k]), float(ev.power_w[k]),
                                  tuple(float(x) for x in ev.objectives[k])))
    return MultiAppResult(tuple(a.name for a in joint.apps), tuple(float(x) for x in joint.periods),
                          tuple(a.priority for a in joint.apps), alone, tuple(solutions), len(front),
                          log["evaluations"], log["generations"], time.perf_counter() - t0,
                          tuple(float(h) for h in history))


@dataclass(frozen=True)
class Alone:
    """An app's fastest response alone (us, of its best mapping found, in the analysis' reading) and that
    mapping."""

    response_us: float
    mapping: tuple[int, ...]
    evaluations: int
    generations: int
    seconds: float


def min_response_alone(model: AnalyticModel, *, population: int = 100, generations: int = 100, seed: int = 0,
                       preset_name: str = "kang2020", response: str = "pipelined", **overrides) -> Alone:
    """The fastest response of one app alone on its PEs: ``run_ga`` (the single-app GA's operators, stall rule and
    restarts; no local search, that one lowers the period) over the alone response time, evaluated for the whole
    population at once by the schedule-based analysis of the app by itself. The first population holds the P
    one-PE mappings besides the GA's own: a single move off a one-PE mapping adds transfers and seldom pays, so a
    GA that starts without them may never reach one (MobileNet v2 stayed 30 % above all-GPU)."""
    p, ga = _settings(population, generations, seed, preset_name, overrides)
    # the period moves only the ALAP side of the analysis, never the alone response
    problem = MultiAppProblem(["alone"], [1.0], [0], [task_preds(model)], preemptive_of(model.pes), response)

    def batch(inds):
        maps = np.array(inds, dtype=np.int64)
        times, bad = _occupancy(model, maps)
        alone = problem.analyse_population([maps], [times]).alone_us[:, 0]
        return [(float(x),) for x in np.where(bad, UNMAPPABLE, alone)]

    _, individual = min_types(1)
    tb = _toolbox(model, p, individual)
    generated = tb.individual

    def first_population(n):
        one_pe = [individual([pe] * model.n) for pe in range(model.P)][:n]
        return one_pe + [generated() for _ in range(n - len(one_pe))]

    tb.register("population", first_population)
    tb.register("evaluate_batch", batch)
    t0 = time.perf_counter()
    best, evaluations, gens = None, 0, 0
    for r in range(max(1, p.restarts)):
        log: dict = {}
        hof, _ = run_ga(tb, ga, "layermap-alone" + (f"-r{r}" if r else ""), log=log)
        evaluations, gens = evaluations + log["evaluations"], gens + log["generations"]
        if best is None or hof[0].fitness.values[0] < best.fitness.values[0]:
            best = hof[0]
    return Alone(float(best.fitness.values[0]), tuple(int(g) for g in best), evaluations, gens,
                 time.perf_counter() - t0)


__all__ = ["App", "JointProblem", "JointEvaluation", "Solution", "MultiAppResult", "Alone", "UNMAPPABLE",
           "preemptive_of", "run_multiapp_ga", "min_response_alone"]
