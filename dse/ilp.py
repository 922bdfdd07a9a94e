"""PuLP plumbing shared by the project's ILPs (layer mapping, task-set schedules): HiGHS by default, CBC as the
fallback, a time limit, and an honest status (a run stopped by its limit is "time limit", never "optimal").
PuLP and highspy are optional dependencies (extra ``ilp``)."""
from __future__ import annotations

import re
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

from dse.core.errors import DseError
from dse.core.validate import bounded_seconds

SOLVERS = ("highs", "cbc")
MAX_TIME_LIMIT_S = 86400.0   # a day per solve: past it an ILP on these sizes is not going to finish
GAP_REL = 1e-7   # "optimal" means optimal: the solvers' default 1e-4 would let a GA beat the ILP by noise


class IlpError(DseError, ValueError):
    """No ILP solver, or a bad solver setting; the message names the value and the valid choices."""


@dataclass(frozen=True)
class Solved:
    """``status``: "optimal", "time limit" (a solution, gap > 0 possible), "infeasible" or "no solution";
    ``bound``: the solver's best bound on the objective (-inf when it has none)."""

    status: str
    bound: float
    seconds: float
    solver: str


def import_pulp():
    """The ``pulp`` module, or an error naming the extra to install."""
    try:
        import pulp
    except ImportError:
        raise IlpError("the ILPs need PuLP: pip install 'dse[ilp]' (pulp, highspy)") from None
    return pulp


def check_solver(name: str, time_limit: float) -> None:
    if name not in SOLVERS:
        raise IlpError(f"unknown ILP solver {name!r}; valid choices: {', '.join(SOLVERS)}")
    bounded_seconds(time_limit, "the ILP time limit", MAX_TIME_LIMIT_S, IlpError)


def solve_problem(prob, solver: str = "highs", time_limit: float = 60.0, msg: bool = False,
                  gap_rel: float = GAP_REL) -> Solved:
    """Solve a built ``pulp.LpProblem`` in place (its variables then hold the solution)."""
    pulp = import_pulp()
    check_solver(solver, time_limit)
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # PuLP 3.x announces its 4.0 API on every call
        log = str(Path(tmp) / "cbc.log")
        used, s = _solver(pulp, solver, time_limit, msg, log, gap_rel)
        t0 = time.perf_counter()
        code = prob.solve(s)
        seconds = time.perf_counter() - t0
        cbc_log = Path(log).read_text(errors="replace") if used == "cbc" and Path(log).exists() else ""
    status, bound = _outcome(pulp, prob, code, used, cbc_log)
    return Solved(status, bound, seconds, used)


def _solver(pulp, name: str, time_limit: float, msg: bool, log: str, gap_rel: float):
    """The PuLP solver for ``name``; HiGHS falls back to CBC when highspy is missing."""
    if name == "highs":
        s = pulp.HiGHS(msg=msg, timeLimit=time_limit, gapRel=gap_rel)
        if s.available():
            return "highs", s
    s = pulp.PULP_CBC_CMD(msg=msg, timeLimit=time_limit, logPath=log, gapRel=gap_rel)
    if not s.available():
        raise IlpError("no ILP solver available: install highspy (pip install 'dse[ilp]') or PuLP's CBC")
    return "cbc", s


def _outcome(pulp, prob, code: int, used: str, cbc_log: str) -> tuple[str, float]:
    """(status, best bound): a run stopped by the time limit is "time limit" even when PuLP says "Optimal"."""
    if used == "highs":
        import highspy

        h = prob.solverModel
        ms = h.getModelStatus()
        info = h.getInfo()
        bound = float(info.mip_dual_bound) if abs(info.mip_dual_bound) < float("inf") else float("-inf")
        has_sol = info.primal_solution_status == 2
        if ms == highspy.HighsModelStatus.kOptimal:
            return "optimal", bound
        if ms == highspy.HighsModelStatus.kInfeasible:
            return "infeasible", bound
        return ("time limit" if has_sol else "no solution"), bound
    stopped = re.search(r"Result - Stopped on time", cbc_log) is not None
    found = re.search(r"best possible\s+(-?[\d.eE+-]+)", cbc_log)
    lower = re.search(r"Lower bound:\s+(-?[\d.eE+-]+)", cbc_log)
    bound = float(found.group(1)) if found else float(lower.group(1)) if lower else float("-inf")
    if prob.status == pulp.LpStatusInfeasible:
        return "infeasible", bound
    if prob.sol_status in (pulp.LpSolutionIntegerFeasible,) or (stopped and prob.status == pulp.LpStatusOptimal):
        return "time limit", bound
    if prob.status == pulp.LpStatusOptimal:
        return "optimal", bound
    return "no solution", bound
