"""Schedule-based schedulability analysis of several per-layer-mapped DNN apps sharing PEs (seed 002, Kang et
al. 2020, Sec. VI-A, Eqs. (10)/(11), after [18]; spec seeds-001-004 section 3.5 for the choices the paper leaves
open).

Model: an app is a DAG of tasks in topological order, each mapped to one PE id and holding it ``time_us[i]`` per
iteration (compute + the transfers charged to it); apps are periodic (period = implicit deadline) with distinct
fixed priorities (lower number = higher priority). ``preemptive[pe]`` is True for CPU PEs, False for GPU/NPU.

- ASAP = the one-iteration list schedule of the app alone (``dse.taskgraph.model.AnalyticModel.latency``):
  tasks in index order, a task starts once its PE is free and all its predecessors have finished.
- ALAP = latest starts from the deadline (the period) backwards, keeping the ASAP per-PE order: a task finishes
  before its successors start and before the next task of the same app on its PE starts.
- MAI_i = ALAP_i - ASAP_i (mobility, paper [33]).
- dbf_pe(A, t) = ceil(t / P_A) * C_{A,pe}, C_{A,pe} = sum of A's task times on pe: a request bound, since the
  relative offsets of the apps are unknown (L283).
- Slack (LHS of Eq. (10) on a preemptive PE, Eq. (11) on a non-preemptive one):
  ``MAI_i - sum_{hp} dbf_{M(T_i)}(hp, P_i) [- max C_lp over lower-priority tasks on M(T_i)]``.
  Footnote 5's iterative MAI update is omitted, as in the paper.
- Response time R_a, three readings:
  - "pipelined" (the default, the seed's): the app runs software-pipelined, as its single-app half does (002
    L210-234: throughput = 1 / the longest PE cluster; L249: "average inference time" = its reciprocal). Each
    task i runs iteration n - d_i in period n, with d_i = max over predecessors j of d_j + [PE_j != PE_i], so
    every cross-PE input was made a period earlier and each (app, PE) stage is an independent periodic task:
    all its tasks are ready at its release, run back to back, deadline = period (002 L121). ASAP/ALAP are
    offsets within that stage, so MAI_i = P_a - C_{a,pe}; R_a = max over the app's PEs of the fixed-priority
    response time R = C_{a,pe} + B_pe + sum_h ceil(R / P_h) C_{h,pe} (B_pe: the longest lower-priority task,
    once, on a non-preemptive PE: the stage's own next task is ready whenever its PE frees). ``alone_us`` =
    max_pe C_{a,pe}, the single-app period; the seed's 10.3 / 13.7 / 16.9 ms minima match those periods on
    the virtual S9, not its one-frame latencies (BENCHMARKS "002 Sec. VI"). Latency is (max d + 1) periods.
  - "per-task" (spec 3.5): one frame at a time; the forward list schedule where each task's start is delayed by
    its I_i (the two subtracted terms above); pessimistic, since a chain of n tasks on a PE pays its
    interference n times. ``alone_us`` = the ASAP makespan.
  - "window": one frame at a time; the makespan alone plus, per PE, what else can run there while one job is in
    flight, charged once (``_window_response``).
  An app is schedulable iff every slack is >= 0 and R_a <= P_a (relative tolerance 1e-9 of the period).

A multi-objective GA calls this ~1e5 times with the DAGs, periods, priorities and PE kinds fixed and only the
mapping changing, so `MultiAppProblem` precomputes what does not depend on the mapping (successor lists,
priority sets, the ceil(P_a / P_h) job counts) and its `analyse` is plain Python over tasks;
`analyse_population` is the same computation looped over tasks and vectorized over a population.
"""
from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dse.core.errors import DseError

_EPS = 1e-9     # ceil guard: a float ratio such as 2.0000000001 must not count one job more
_TOL = 1e-9     # schedulability tolerance, relative to the app's period


def _jobs(interval_us: float, period_us: float) -> int:
    """ceil(interval / period), guarded against float noise; 0 for an empty interval."""
    return max(0, math.ceil(interval_us / period_us - _EPS))


def _as_index(x, what: str) -> int:
    """An integer (numpy ints too) or a DseError naming the value: a float PE id would index silently wrong."""
    try:
        return operator.index(x)
    except TypeError:
        raise DseError(f"{what} must be an integer, got {x!r}") from None


@dataclass(frozen=True)
class MappedApp:
    """One periodic app under one mapping: per task (topological order) its PE id, its PE occupancy per
    iteration in us and its predecessors (indices < i). Priority: lower number = higher priority."""

    name: str
    period_us: float
    priority: int
    pe: tuple[int, ...]
    time_us: tuple[float, ...]
    preds: tuple[tuple[int, ...], ...]

    def __post_init__(self):
        put = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731
        if not isinstance(self.name, str) or not self.name:
            raise DseError(f"app name must be a non-empty string, got {self.name!r}")
        try:
            period = float(self.period_us)
        except (TypeError, ValueError):
            raise DseError(f"app {self.name}: period must be a number, got {self.period_us!r}") from None
        if not (period > 0 and math.isfinite(period)):
            raise DseError(f"app {self.name}: period must be finite and > 0 us, got {self.period_us}")
        put("period_us", period)
        put("priority", _as_index(self.priority, f"app {self.name}: priority"))
        pe = tuple(_as_index(p, f"app {self.name}: PE id") for p in self.pe)
        try:
            times = tuple(float(t) for t in self.time_us)
        except (TypeError, ValueError):
            raise DseError(f"app {self.name}: task times must be numbers, got {self.time_us!r}") from None
        preds = tuple(tuple(_as_index(p, f"app {self.name}: predecessor") for p in ps) for ps in self.preds)
        n = len(pe)
        if not n:
            raise DseError(f"app {self.name} has no tasks")
        if not (len(times) == len(preds) == n):
            raise DseError(f"app {self.name}: pe, time_us and preds must have one entry per task, got lengths "
                           f"{n}, {len(times)}, {len(preds)}")
        for i in range(n):
            if pe[i] < 0:
                raise DseError(f"app {self.name} task {i}: PE id {pe[i]} must be >= 0")
            if not (times[i] >= 0 and math.isfinite(times[i])):
                raise DseError(f"app {self.name} task {i}: time {times[i]} us must be finite and >= 0")
            for p in preds[i]:
                if not 0 <= p < i:
                    raise DseError(f"app {self.name} task {i}: predecessor {p} is not an earlier task (index < {i}; "
                                   f"tasks must be listed in topological order)")
        put("pe", pe)
        put("time_us", times)
        put("preds", preds)

    @property
    def n(self) -> int:
        return len(self.pe)


def _succs(preds: Sequence[Sequence[int]]) -> list[list[int]]:
    """Successor lists: the backward (ALAP) pass needs them, the DAG is given by predecessors."""
    out: list[list[int]] = [[] for _ in preds]
    for i, ps in enumerate(preds):
        for p in ps:
            out[p].append(i)
    return out


def _forward(pe, t, preds, n_pe: int, delay=None) -> tuple[list[float], float]:
    """List schedule in index order (starts, makespan); ``delay[i]`` is added to task i's earliest start."""
    free = [0.0] * n_pe
    start = [0.0] * len(pe)
    finish = [0.0] * len(pe)
    for i, p in enumerate(pe):
        s = free[p]
        for q in preds[i]:
            if finish[q] > s:
                s = finish[q]
        if delay is not None:
            s += delay[i]
        start[i] = s
        finish[i] = free[p] = s + t[i]
    return start, max(finish)


def _backward(pe, t, succs, n_pe: int, deadline: float) -> list[float]:
    """Latest starts: finish by the deadline, before every successor and before the next task on the PE."""
    nxt = [deadline] * n_pe
    late = [0.0] * len(pe)
    for i in range(len(pe) - 1, -1, -1):
        p = pe[i]
        lf = nxt[p]
        for s in succs[i]:
            if late[s] < lf:
                lf = late[s]
        late[i] = nxt[p] = lf - t[i]
    return late


def _app_pass(pe, t, preds, succs, n_pe: int, deadline: float, inter):
    """`_forward` alone and delayed by ``inter[pe]`` in one loop, then `_backward` with the MAI and slack: the
    per-app hot path of `MultiAppProblem.analyse`. Returns (asap, mai, delay, slack, alone, response)."""
    n = len(pe)
    free0, free1 = [0.0] * n_pe, [0.0] * n_pe
    start, f0, f1 = [0.0] * n, [0.0] * n, [0.0] * n
    delay = [inter[p] for p in pe]
    for i, p in enumerate(pe):
        s0, s1 = free0[p], free1[p]
        for q in preds[i]:
            if f0[q] > s0:
                s0 = f0[q]
            if f1[q] > s1:
                s1 = f1[q]
        start[i] = s0
        f0[i] = free0[p] = s0 + t[i]
        f1[i] = free1[p] = s1 + delay[i] + t[i]
    late = _backward(pe, t, succs, n_pe, deadline)
    mai = [lt - st for lt, st in zip(late, start)]
    slack = [m - d for m, d in zip(mai, delay)]
    return start, mai, delay, slack, max(f0), max(f1)


def _pop_pass(preds, succs, n_pe: int, flat, t, delay, deadline: float):
    """`_app_pass` over a population, vectorized over individuals: ``flat``, ``t``, ``delay`` are [n, pop] with
    ``flat`` = PE id + n_pe * individual (an index into per-(individual, PE) state). Returns (asap, alap) [n, pop]
    and the alone / delayed makespans [pop]."""
    n, pop = t.shape
    free0, free1 = np.zeros(pop * n_pe), np.zeros(pop * n_pe)
    start, f0, f1 = np.empty((n, pop)), np.empty((n, pop)), np.empty((n, pop))
    for i in range(n):
        idx = flat[i]
        s0, s1 = free0[idx], free1[idx]
        for q in preds[i]:
            np.maximum(s0, f0[q], out=s0)
            np.maximum(s1, f1[q], out=s1)
        start[i] = s0
        np.add(s0, t[i], out=f0[i])
        free0[idx] = f0[i]
        s1 += delay[i]
        np.add(s1, t[i], out=f1[i])
        free1[idx] = f1[i]
    late, nxt = np.empty((n, pop)), np.full(pop * n_pe, float(deadline))
    for i in range(n - 1, -1, -1):
        idx = flat[i]
        lf = nxt[idx]
        for q in succs[i]:
            np.minimum(lf, late[q], out=lf)
        np.subtract(lf, t[i], out=late[i])
        nxt[idx] = late[i]
    return start, late, f0.max(axis=0), f1.max(axis=0)


def asap(app: MappedApp) -> np.ndarray:
    """Start offsets of the app alone: the list schedule the single-app model uses (its makespan = latency)."""
    return np.array(_forward(app.pe, app.time_us, app.preds, max(app.pe) + 1)[0])


def alap(app: MappedApp) -> np.ndarray:
    """Latest start offsets that still meet the deadline (= period) with the ASAP per-PE order kept."""
    return np.array(_backward(app.pe, app.time_us, _succs(app.preds), max(app.pe) + 1, app.period_us))


def mobility(app: MappedApp) -> np.ndarray:
    """MAI per task: how long it can be delayed (by other apps) before the app misses its deadline."""
    return alap(app) - asap(app)


def demand_bound(app: MappedApp, pe: int, interval_us: float) -> float:
    """dbf_pe(app, t): the most PE time the app can request in any window of length t (offsets unknown)."""
    pe = _as_index(pe, "PE id")
    interval = float(interval_us)
    if not (interval >= 0 and math.isfinite(interval)):
        raise DseError(f"demand bound interval must be finite and >= 0 us, got {interval_us}")
    c = sum(t for p, t in zip(app.pe, app.time_us) if p == pe)     # task order, as `analyse` sums
    return _jobs(interval, app.period_us) * c


@dataclass(frozen=True)
class AppAnalysis:
    """One app's result; per-task tuples are in task order. ``interference_us`` = the I_i subtracted from the
    MAI (higher-priority demand + blocking on a non-preemptive PE), ``slack_us`` = MAI - I (Eq. (10)/(11))."""

    name: str
    period_us: float
    priority: int
    asap_us: tuple[float, ...]
    mai_us: tuple[float, ...]
    interference_us: tuple[float, ...]
    slack_us: tuple[float, ...]
    response_us: float
    alone_us: float
    schedulable: bool

    def to_dict(self) -> dict:
        """Plain lists, floats and bools: JSON-ready for reports and caches."""
        return {"name": self.name, "period_us": self.period_us, "priority": self.priority,
                "asap_us": list(self.asap_us), "mai_us": list(self.mai_us),
                "interference_us": list(self.interference_us), "slack_us": list(self.slack_us),
                "response_us": self.response_us, "alone_us": self.alone_us, "schedulable": self.schedulable}


@dataclass(frozen=True)
class MultiAppAnalysis:
    """All apps' results in input order; schedulable iff every app is."""

    apps: tuple[AppAnalysis, ...]

    @property
    def schedulable(self) -> bool:
        return all(a.schedulable for a in self.apps)

    @property
    def response_us(self) -> tuple[float, ...]:
        return tuple(a.response_us for a in self.apps)

    def app(self, name: str) -> AppAnalysis:
        for a in self.apps:
            if a.name == name:
                return a
        raise DseError(f"unknown app {name!r}; valid choices: {', '.join(a.name for a in self.apps)}")

    def to_dict(self) -> dict:
        """JSON-ready: the overall verdict and each app's `AppAnalysis.to_dict`."""
        return {"schedulable": self.schedulable, "apps": [a.to_dict() for a in self.apps]}


@dataclass(frozen=True)
class PopulationAnalysis:
    """`MultiAppProblem.analyse_population` output: [pop, n_apps] arrays (apps in input order) and per app the
    [pop, n_tasks] slacks."""

    response_us: np.ndarray
    alone_us: np.ndarray
    min_slack_us: np.ndarray
    app_schedulable: np.ndarray
    slack_us: tuple[np.ndarray, ...]

    @property
    def schedulable(self) -> np.ndarray:
        return self.app_schedulable.all(axis=1)


RESPONSES = ("pipelined", "per-task", "window")


def _entries(preds, pe: np.ndarray, n_pe: int) -> np.ndarray:
    """[pop, n_pe]: per PE the tasks of one app that can find a lower-priority task running there when they become
    ready: its sources and the tasks with a predecessor on another PE. A task whose predecessors all ran on its own
    PE becomes ready as that PE frees from the app's own task, and wins it (a higher priority than any waiting
    lower one)."""
    pop, n = pe.shape
    entry = np.zeros((pop, n), dtype=bool)
    for i, ps in enumerate(preds):
        entry[:, i] = True if not ps else np.any(pe[:, list(ps)] != pe[:, [i]], axis=1)
    return np.bincount((pe + (np.arange(pop) * n_pe)[:, None]).ravel(), entry.ravel().astype(float),
                       minlength=pop * n_pe).reshape(pop, n_pe)


def _window_response(alone: np.ndarray, hp_loads, entries: np.ndarray, blocking: np.ndarray,
                     period: float) -> np.ndarray:
    """[pop] response bound of one app: its makespan alone plus everything else that can run on its PEs while one
    of its jobs is in flight, charged once per PE (not once per task): per higher-priority app h its work there in
    a window of R, (ceil(R / P_h) + 1) x C_h,pe (the +1: a job of h carried in), and on a non-preemptive PE one
    lower-priority task per entry task. Along any chain of the job each unit of that time delays it at most once,
    so R = alone + sum_pe I_pe(R), the least fixed point from R = alone (capped at 10 periods: unschedulable)."""
    cap = 10.0 * period
    block = (entries * blocking).sum(axis=1)
    r = alone.copy()
    for _ in range(1000):
        inter = block.copy()
        for load, p_h in hp_loads:
            inter += (np.maximum(0.0, np.ceil(r / p_h - _EPS)) + 1.0) * load.sum(axis=1)
        new = np.minimum(alone + inter, cap)
        if np.array_equal(new, r):
            break
        r = new
    return r


def _stage_response(own: np.ndarray, blocking: np.ndarray, hp_loads, period: float) -> np.ndarray:
    """[pop] "pipelined" response of one app from its per-PE stage loads ``own`` [pop, P], the blocking on each
    PE and the higher-priority apps' (load [pop, P], period): per PE with a stage the least fixed point of
    R = C + B + sum_h ceil(R / P_h) C_h from R = C + B + sum_h C_h, capped at 10 periods; the max over PEs.
    Where the PE's utilization U = C / P + sum_h C_h / P_h exceeds 1 no R <= P exists (R <= P needs
    C <= R (1 - U_h)), and the iteration would creep to the cap one job at a time: such a PE answers 10 P x U
    at once, unschedulable and still ranked by its overload for the GA."""
    cap = 10.0 * period
    base = own + blocking
    util = own / period + sum((load / p_h for load, p_h in hp_loads), np.zeros_like(own))
    over = util > 1.0 + _TOL
    r = base + sum((load for load, _ in hp_loads), np.zeros_like(own))
    for _ in range(1000):
        new = base.copy()
        for load, p_h in hp_loads:
            new += np.maximum(1.0, np.ceil(r / p_h - _EPS)) * load
        new = np.where(over, r, np.minimum(new, cap))
        if np.array_equal(new, r):
            break
        r = new
    r = np.where(over, cap * util, r)
    return np.where(own > 0, r, 0.0).max(axis=1)


def _stage_offsets(pe, t, n_pe: int, period: float) -> tuple[list[float], list[float]]:
    """ASAP and ALAP offsets of each task within its (app, PE) stage: after / before the app's other tasks on
    its PE in task order, the stage released at 0 with deadline ``period``."""
    before, after = [0.0] * n_pe, [0.0] * n_pe
    asap_ = [0.0] * len(pe)
    for i, p in enumerate(pe):
        asap_[i] = before[p]
        before[p] += t[i]
    alap_ = [0.0] * len(pe)
    for i in range(len(pe) - 1, -1, -1):
        p = pe[i]
        after[p] += t[i]
        alap_[i] = period - after[p]
    return asap_, alap_


class MultiAppProblem:
    """The mapping-independent part of the analysis (DAGs, periods, priorities, PE preemptability), prepared once;
    `analyse` / `analyse_population` then take only the mapping: per app the PE ids and times of its tasks."""

    def __init__(self, names: Sequence[str], periods_us: Sequence[float], priorities: Sequence[int],
                 preds: Sequence[Sequence[Sequence[int]]], preemptive: Sequence[bool], response: str = "pipelined"):
        if not (len(names) == len(periods_us) == len(priorities) == len(preds)):
            raise DseError(f"names, periods_us, priorities and preds must have one entry per app, got lengths "
                           f"{len(names)}, {len(periods_us)}, {len(priorities)}, {len(preds)}")
        if not names:
            raise DseError("the analysis needs at least one app")
        # validate each app's structure through MappedApp (PE 0, zero times as placeholders)
        self._setup([MappedApp(nm, per, pr, (0,) * len(ps), (0.0,) * len(ps), ps)
                     for nm, per, pr, ps in zip(names, periods_us, priorities, preds)], preemptive, response)

    def _setup(self, shells: list[MappedApp], preemptive: Sequence[bool], response: str = "pipelined"):
        """Everything that does not depend on the mapping, from validated apps. ``response``: the reading of an
        app's response time, one of ``RESPONSES`` (module docstring)."""
        if response not in RESPONSES:
            raise DseError(f"unknown response bound {response!r}; valid choices: {', '.join(RESPONSES)}")
        self.response = response
        if len({a.name for a in shells}) != len(shells):
            raise DseError(f"app names must be unique, got {[a.name for a in shells]}")
        prios = [a.priority for a in shells]
        for k, p in enumerate(prios):
            if prios.index(p) != k:
                raise DseError(f"apps {shells[prios.index(p)].name} and {shells[k].name} share priority {p}; "
                               f"priorities must be distinct")
        if not len(preemptive):
            raise DseError("preemptive must give one flag per PE id, got none")
        self.names = tuple(a.name for a in shells)
        self.periods = tuple(a.period_us for a in shells)
        self.priorities = tuple(prios)
        self.preds = tuple(a.preds for a in shells)
        self.n = tuple(a.n for a in shells)
        self.succs = tuple(_succs(a.preds) for a in shells)
        self.preemptive = tuple(bool(x) for x in preemptive)
        self.n_pe = len(self.preemptive)
        A = len(shells)
        # higher-priority apps with their job counts ceil(P_a / P_h); lower-priority apps
        self.hp = tuple(tuple((h, _jobs(self.periods[a], self.periods[h])) for h in range(A)
                              if prios[h] < prios[a]) for a in range(A))
        self.lp = tuple(tuple(h for h in range(A) if prios[h] > prios[a]) for a in range(A))
        self._np_pes = tuple(p for p in range(self.n_pe) if not self.preemptive[p])

    @classmethod
    def from_apps(cls, apps: Sequence[MappedApp], preemptive: Sequence[bool],
                  response: str = "pipelined") -> MultiAppProblem:
        """The structure of ``apps`` (their own pe/time are not kept: pass them to `analyse`)."""
        apps = list(apps)
        if not apps:
            raise DseError("the analysis needs at least one app")
        for a in apps:
            if not isinstance(a, MappedApp):
                raise DseError(f"apps must be MappedApp objects, got {type(a).__name__}")
        self = cls.__new__(cls)
        self._setup(apps, preemptive, response)     # already validated by MappedApp
        return self

    # -- checks -----------------------------------------------------------------------------------------------
    def _check(self, a: int, pe, t) -> tuple[list, list]:
        """App ``a``'s mapping as plain lists (fast to index), PE ids in range and times finite and >= 0."""
        name, n = self.names[a], self.n[a]
        if isinstance(pe, np.ndarray):
            if pe.size and not np.issubdtype(pe.dtype, np.integer):
                raise DseError(f"app {name}: PE ids must be integers, got {pe.dtype}")
            pe = pe.tolist()
        elif any(type(p) is not int for p in pe):
            pe = [_as_index(p, f"app {name}: PE id") for p in pe]
        else:
            pe = list(pe)
        t = t.tolist() if isinstance(t, np.ndarray) else list(t)
        if len(pe) != n or len(t) != n:
            raise DseError(f"app {name}: {n} tasks, got {len(pe)} PE ids and {len(t)} times")
        if min(pe) < 0 or max(pe) >= self.n_pe:
            i = next(i for i, p in enumerate(pe) if not 0 <= p < self.n_pe)
            raise DseError(f"app {name} task {i}: PE id {pe[i]} out of range; valid choices: 0..{self.n_pe - 1}")
        if not (min(t) >= 0 and math.isfinite(sum(t))):
            i = next(i for i, x in enumerate(t) if not (x >= 0 and math.isfinite(x)))
            raise DseError(f"app {name} task {i}: time {t[i]} us must be finite and >= 0")
        return pe, t

    # -- one mapping ------------------------------------------------------------------------------------------
    def analyse(self, pes: Sequence[Sequence[int]], times: Sequence[Sequence[float]]) -> MultiAppAnalysis:
        """Eqs. (10)/(11) and the response-time bounds for one mapping (per app: PE id and time per task)."""
        A, P = len(self.names), self.n_pe
        if len(pes) != A or len(times) != A:
            raise DseError(f"{A} apps, got {len(pes)} PE lists and {len(times)} time lists")
        pes, times = zip(*(self._check(a, pes[a], times[a]) for a in range(A)))
        load = [[0.0] * P for _ in range(A)]
        tmax = [[0.0] * P for _ in range(A)]
        for a in range(A):
            ld, tm = load[a], tmax[a]
            for p, x in zip(pes[a], times[a]):
                ld[p] += x
                if x > tm[p]:
                    tm[p] = x
        out = []
        for a in range(A):
            pe, t = pes[a], times[a]
            inter = [0.0] * P                    # I per PE: hp demand over P_a (+ blocking if non-preemptive)
            for h, k in self.hp[a]:
                lh = load[h]
                for p in range(P):
                    inter[p] += k * lh[p]
            for p in self._np_pes:
                inter[p] += max((tmax[lo][p] for lo in self.lp[a]), default=0.0)
            period = self.periods[a]
            if self.response == "pipelined":
                start, late = _stage_offsets(pe, t, P, period)
                mai = [lt - st for lt, st in zip(late, start)]
                delay = [inter[p] for p in pe]
                slack = [m - d for m, d in zip(mai, delay)]
                alone = max(load[a])
                response = float(self._pipelined(a, [np.array([load[h]]) for h in range(A)],
                                                 [np.array([tmax[h]]) for h in range(A)])[0])
            else:
                start, mai, delay, slack, alone, response = _app_pass(pe, t, self.preds[a], self.succs[a], P,
                                                                      period, inter)
            if self.response == "window":
                response = float(self._window(a, np.array([alone]), np.array([pe]),
                                              [np.array([load[h]]) for h in range(A)],
                                              [np.array([tmax[h]]) for h in range(A)])[0])
            tol = _TOL * period
            ok = min(slack) >= -tol and response <= period + tol
            out.append(AppAnalysis(self.names[a], period, self.priorities[a], tuple(start), tuple(mai),
                                   tuple(delay), tuple(slack), response, alone, ok))
        return MultiAppAnalysis(tuple(out))

    def _blocking(self, a: int, tmax) -> np.ndarray:
        """[pop, P] the longest task of a lower-priority app on each non-preemptive PE (0 elsewhere)."""
        blocking = np.zeros_like(tmax[a])
        if self.lp[a]:
            for p in self._np_pes:
                blocking[:, p] = np.max([tmax[lo][:, p] for lo in self.lp[a]], axis=0)
        return blocking

    def _pipelined(self, a: int, load, tmax) -> np.ndarray:
        """App ``a``'s "pipelined" response [pop] from every app's per-PE load and longest task [pop, P]."""
        return _stage_response(load[a], self._blocking(a, tmax), [(load[h], self.periods[h]) for h, _ in self.hp[a]],
                               self.periods[a])

    def _window(self, a: int, alone, pe, load, tmax) -> np.ndarray:
        """App ``a``'s "window" response bound [pop] from its makespans alone and every app's per-PE load and
        longest task [pop, P]."""
        hp_loads = [(load[h], self.periods[h]) for h, _ in self.hp[a]]
        return _window_response(np.asarray(alone, dtype=float), hp_loads, _entries(self.preds[a], pe, self.n_pe),
                                self._blocking(a, tmax), self.periods[a])

    # -- a population -----------------------------------------------------------------------------------------
    def analyse_population(self, pes: Sequence[np.ndarray], times: Sequence[np.ndarray]) -> PopulationAnalysis:
        """`analyse` for a population at once: per app PE ids [pop, n_a] (integers) and times [pop, n_a]."""
        A, P = len(self.names), self.n_pe
        if len(pes) != A or len(times) != A:
            raise DseError(f"{A} apps, got {len(pes)} PE arrays and {len(times)} time arrays")
        pes = [np.asarray(x) for x in pes]
        times = [np.asarray(x, dtype=float) for x in times]
        pop = pes[0].shape[0] if pes[0].ndim == 2 else -1
        for a in range(A):
            name, n, pe, t = self.names[a], self.n[a], pes[a], times[a]
            if pe.shape != (pop, n) or t.shape != (pop, n):
                raise DseError(f"app {name}: PE ids and times must be [pop, {n}] with one pop for all apps, got "
                               f"{pe.shape} and {t.shape}")
            if not np.issubdtype(pe.dtype, np.integer):
                raise DseError(f"app {name}: PE ids must be integers, got {pe.dtype}")
            bad = (pe < 0) | (pe >= P)
            if bad.any():
                raise DseError(f"app {name}: PE id {int(pe[bad][0])} out of range; valid choices: 0..{P - 1}")
            bad = ~(np.isfinite(t) & (t >= 0))
            if bad.any():
                raise DseError(f"app {name}: time {float(t[bad][0])} us must be finite and >= 0")
        rows = np.arange(pop)
        offset = (rows * P)[:, None]
        flats = [np.ascontiguousarray((pe + offset).T) for pe in pes]           # [n, pop]
        load = [np.bincount(f.ravel(), t.T.ravel(), minlength=pop * P).reshape(pop, P)
                for f, t in zip(flats, times)]
        tmax = [np.column_stack([np.where(pe == p, t, 0.0).max(axis=1) for p in range(P)])
                for pe, t in zip(pes, times)]
        resp, alone, min_slack, ok, slacks = (np.zeros((pop, A)), np.zeros((pop, A)), np.zeros((pop, A)),
                                              np.zeros((pop, A), dtype=bool), [])
        for a in range(A):
            period = self.periods[a]
            inter = np.zeros((pop, P))
            for h, k in self.hp[a]:
                inter += k * load[h]
            if self.lp[a]:
                for p in self._np_pes:
                    inter[:, p] += np.max([tmax[lo][:, p] for lo in self.lp[a]], axis=0)
            delay = inter.ravel()[flats[a]]                                        # [n, pop]
            if self.response == "pipelined":
                own = load[a].ravel()[flats[a]]                                    # [n, pop] C_{a, PE of task}
                start, late = np.zeros_like(own), period - own                     # MAI = P - C
                alone[:, a] = load[a].max(axis=1)
                resp[:, a] = self._pipelined(a, load, tmax)
            else:
                start, late, alone[:, a], resp[:, a] = _pop_pass(self.preds[a], self.succs[a], P, flats[a],
                                                                 np.ascontiguousarray(times[a].T), delay, period)
            if self.response == "window":
                resp[:, a] = self._window(a, alone[:, a], pes[a], load, tmax)
            slack = np.ascontiguousarray((late - start - delay).T)                 # [pop, n]
            tol = _TOL * period
            min_slack[:, a] = slack.min(axis=1)
            ok[:, a] = (min_slack[:, a] >= -tol) & (resp[:, a] <= period + tol)
            slacks.append(slack)
        return PopulationAnalysis(resp, alone, min_slack, ok, tuple(slacks))


def analyse(apps: Sequence[MappedApp], preemptive: Sequence[bool], response: str = "pipelined") -> MultiAppAnalysis:
    """One-shot analysis; a GA should build a `MultiAppProblem` once and call its `analyse` per mapping."""
    return MultiAppProblem.from_apps(apps, preemptive, response).analyse([a.pe for a in apps],
                                                                         [a.time_us for a in apps])
