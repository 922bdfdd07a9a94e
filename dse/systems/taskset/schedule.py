"""The cyclic-executive schedule of one task set in one frame (seed 003 Sec. 6.1, spec 5.4): each task gets one
enabled option and one placement of it on the units; every unit's summed time must fit the frame.

``schedule`` solves the paper's 0/1 program (minimize the cumulative utilization sum U*B) with PuLP + HiGHS.
``decide`` answers only "schedulable?" (all the campaign needs; the paper: "we are not interested in finding an
optimal solution, but only in proving or disproving the task set schedulability") and tries two cheap exact
arguments before the ILP: a weighted-area bound that no schedule can beat (infeasible) and a few greedy packings
(a found packing is a schedule). The ILP then runs as a feasibility problem (it stops at its first solution)."""
from __future__ import annotations

import itertools
import warnings
from dataclasses import dataclass, field

import numpy as np

from dse.ilp import check_solver
from dse.systems.taskset.errors import TasksetError
from dse.systems.taskset.units import unit_model
from dse.systems.taskset.variants import OPTIONS

EPS = 1e-9
PRICED_GREEDIES = 4   # greedy packings priced by the tightest weight vectors of the bound


@dataclass(frozen=True)
class Schedule:
    """``feasible`` None = undecided (the ILP hit its time limit without a schedule or a proof); ``decided_by``:
    "bound", "greedy" or "ilp"; ``assignment``: per task (option, units), when a schedule was found."""

    feasible: bool | None
    decided_by: str
    status: str
    seconds: float = 0.0
    assignment: list[tuple[str, tuple[str, ...]]] | None = None
    loads_ms: dict[str, float] = field(default_factory=dict)
    utilization_ms: float = float("nan")   # the paper's objective sum U*B (each task's time counted once)


class Scheduler:
    """One frame, one unit model, one solver setting; reused for every set of a campaign."""

    def __init__(self, frame_ms: float, units: str = "physical", solver: str = "highs", time_limit: float = 20.0):
        if not frame_ms or frame_ms <= 0:
            raise TasksetError(f"frame must be > 0 ms, got {frame_ms}")
        check_solver(solver, time_limit)
        self.frame, self.solver, self.time_limit = float(frame_ms), solver, float(time_limit)
        self.units, placements = unit_model(units)
        self.place_option = np.array([j for j, _ in placements])
        self.place_mask = np.array([m for _, m in placements])          # (placements, units)
        self.place_size = self.place_mask.sum(axis=1)
        self.family_weights = _family_weights(self.units)

    # ---- columns: (task, placement) pairs with a finite time ----------------------------------------------
    def columns(self, times: np.ndarray, enabled) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(task index, placement index, time ms) of every way each task can run under ``enabled`` options."""
        times = np.asarray(times, dtype=float)
        if times.ndim != 2 or times.shape[1] != len(OPTIONS):
            raise TasksetError(f"times must be (tasks, {len(OPTIONS)}) in the order {', '.join(OPTIONS)}")
        on = np.array([o in enabled for o in OPTIONS])
        t_of = times[:, self.place_option]                                 # (tasks, placements)
        ok = np.isfinite(t_of) & on[self.place_option][None, :]
        task, place = np.nonzero(ok)
        return task, place, t_of[task, place]

    # ---- exact shortcuts -----------------------------------------------------------------------------------
    def _some_task_never_fits(self, n: int, task, t) -> bool:
        """A task without an enabled variant that fits the frame: no schedule at all."""
        fits = np.zeros(n, bool)
        fits[task[t <= self.frame + EPS]] = True
        return not fits.all()

    def _weighted_work(self, n: int, task, place, t):
        """For each weight vector w of the grid (unit weights >= 0, equal within a unit family: the DLAs, the
        GPU halves, the CPU pairs): every column's weighted work t_c * w(units of c), and by LP duality the
        argument "every schedule puts sum_i min_c t_c * w(c) of weighted work on units that hold at most
        frame * sum(w)". w = 1 is the plain area bound; the grid approaches the LP relaxation's dual.
        Returns (column costs (columns, grid), the tightness per grid vector: needed work / capacity)."""
        masks = self.place_mask[place].astype(float)                        # (columns, units)
        reach = self.place_mask[np.unique(place)].any(axis=0)
        weights = self.family_weights[:, reach]                             # (grid, reachable units)
        weights = weights[weights.sum(axis=1) > 0]
        cost = t[:, None] * (masks[:, reach] @ weights.T)                   # (columns, grid)
        best = np.full((n, len(weights)), np.inf)
        np.minimum.at(best, task, cost)
        return cost, best.sum(axis=0) / (self.frame * weights.sum(axis=1))

    def _greedy(self, n: int, task, place, t, prices: np.ndarray):
        """Greedy packings, largest task first: best fit by resulting unit load, then one per price vector
        (the cheapest column at those unit prices that still fits); the first that fits every task wins."""
        by_task = [np.flatnonzero(task == i) for i in range(n)]
        for price in [None, *prices.T]:
            work = t * self.place_size[place] if price is None else price
            size = np.full(n, np.inf)
            np.minimum.at(size, task, work)
            loads = np.zeros(len(self.units))
            chosen = []
            for i in np.argsort(-size, kind="stable"):
                cols = by_task[i]
                touched = self.place_mask[place[cols]]
                peak = np.where(touched, loads[None, :] + touched * t[cols, None], 0).max(axis=1)
                fit = peak <= self.frame + EPS
                if not fit.any():
                    break
                key = (peak, work[cols]) if price is None else (work[cols], peak)
                order = np.lexsort((key[1], key[0]))
                c = cols[order[fit[order]][0]]
                loads += self.place_mask[place[c]] * t[c]
                chosen.append((i, c))
            else:
                return dict(chosen)
        return None

    # ---- answers --------------------------------------------------------------------------------------------
    def decide(self, times: np.ndarray, enabled) -> Schedule:
        """Schedulable or not, as cheaply as can be proven."""
        n = len(times)
        task, place, t = self.columns(times, enabled)
        if n == 0:
            return Schedule(True, "bound", "empty", assignment=[])
        if self._some_task_never_fits(n, task, t):
            return Schedule(False, "bound", "infeasible")
        cost, tightness = self._weighted_work(n, task, place, t)
        if (tightness > 1 + 1e-9).any():
            return Schedule(False, "bound", "infeasible")
        chosen = self._greedy(n, task, place, t, cost[:, np.argsort(-tightness)[:PRICED_GREEDIES]])
        if chosen is not None:
            return self._result(True, "greedy", "feasible", 0.0, [chosen[i] for i in range(n)], place, t)
        return self._ilp(n, task, place, t, objective=False)

    def schedule(self, times: np.ndarray, enabled) -> Schedule:
        """The paper's program: a schedule minimizing the cumulative utilization, or infeasible."""
        n = len(times)
        task, place, t = self.columns(times, enabled)
        if self._some_task_never_fits(n, task, t):
            return Schedule(False, "bound", "infeasible")
        return self._ilp(n, task, place, t, objective=True)

    def _ilp(self, n: int, task, place, t, objective: bool) -> Schedule:
        with warnings.catch_warnings():   # PuLP 3.x announces its 4.0 API on every variable
            warnings.simplefilter("ignore", DeprecationWarning)
            return self._build_and_solve(n, task, place, t, objective)

    def _build_and_solve(self, n: int, task, place, t, objective: bool) -> Schedule:
        from dse.ilp import import_pulp, solve_problem

        pulp = import_pulp()
        prob = pulp.LpProblem("taskset", pulp.LpMinimize)
        x = [pulp.LpVariable(f"x_{k}", cat=pulp.LpBinary) for k in range(len(t))]
        expr = pulp.LpAffineExpression   # from (variable, coefficient) pairs: much faster than lpSum of products
        prob += expr([(x[k], float(t[k])) for k in range(len(t))])
        for i in range(n):
            prob += expr([(x[k], 1.0) for k in np.flatnonzero(task == i)]) == 1, f"one_{i}"
        for u in range(len(self.units)):
            ks = np.flatnonzero(self.place_mask[place, u])
            if len(ks):
                prob += expr([(x[k], float(t[k])) for k in ks]) <= self.frame, f"unit_{self.units[u]}"
        # feasibility only: any solution ends the search (a gap of 100 % accepts the first incumbent)
        solved = solve_problem(prob, self.solver, self.time_limit, gap_rel=1e-7 if objective else 1.0)
        if solved.status == "infeasible":
            return Schedule(False, "ilp", "infeasible", solved.seconds)
        if solved.status == "no solution":
            return Schedule(None, "ilp", "time limit", solved.seconds)
        picked = {}
        for k in range(len(t)):
            if (x[k].value() or 0) > 0.5:
                picked[int(task[k])] = k
        status = solved.status if objective else "feasible"
        return self._result(True, "ilp", status, solved.seconds, [picked[i] for i in range(n)], place, t)

    def _result(self, feasible, by, status, seconds, cols, place, t) -> Schedule:
        loads = np.zeros(len(self.units))
        assignment = []
        for c in cols:
            mask = self.place_mask[place[c]]
            loads += mask * t[c]
            assignment.append((OPTIONS[self.place_option[place[c]]], tuple(np.array(self.units)[mask])))
        if (loads > self.frame + 1e-6).any():   # never report a schedule that does not fit
            raise AssertionError(f"internal: a {by} schedule overloads a unit ({loads.max():.3f} > {self.frame})")
        return Schedule(feasible, by, status, seconds, assignment,
                        {u: float(v) for u, v in zip(self.units, loads)}, float(sum(t[c] for c in cols)))


def _family_weights(units: tuple[str, ...], steps: int = 10) -> np.ndarray:
    """Weight vectors over the units, equal within a family (units named by the same letter), from a grid with
    the largest family weight 1: (grid points, units)."""
    families = sorted({u[0] for u in units})
    grid = np.linspace(0.0, 1.0, steps + 1)
    rows = [w for w in itertools.product(grid, repeat=len(families)) if max(w) == 1.0]
    fam = np.array([[u[0] == f for f in families] for u in units], dtype=float)    # (units, families)
    return np.array(rows) @ fam.T

