"""The ILP baselines of 002 (Sec. V-A "task clustering", Eqs. 1-8, spec 3.3) and 004 (L272-410, spec 4.2) on an
AnalyticModel's data, minimizing the period.

Both papers solve the same problem as the GA, restricted to "clustered" mappings (each PE runs one connected
group of tasks), so an exact optimum on that subset is the GA's reference. The objective is built from the
model's own arrays (E, C, charge, cores, U_max in ``stretch`` form), so the ILP's Z equals
``model.evaluate(mapping).period``. Transfers are linearized per edge and PE pair (``y >= M_i^j + M_l^k - 1``,
y continuous: a product on the "<=" side of a min objective); dep/Pipe/W are exact AND/OR linearizations,
continuous because they are integral whenever M is.

Variants: ``formulation="kang2020"`` (002 Eq. 4, one cluster per PE, the PE of the first and last task may
hold two) or ``"ha2018"`` (004 c. 5, sum of all cluster starts = max(3, #PE)); ``clusters="exact"`` (the
papers' "= 1": every PE used), ``"at_most"`` ("<= 1") or None (no cluster rule: the unrestricted problem);
``linear=True`` adds "PE id non-decreasing along the task order" (a pipeline with stage order = PE order,
the cut-tuple model of ``chain_dp``); ``timing=True`` adds the one-frame schedule (Eqs. 5-6), which does not
change the objective. PuLP is an optional dependency (extra ``ilp``).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np

from dse.ilp import SOLVERS, check_solver, import_pulp, solve_problem
from dse.taskgraph.errors import LayerMapError
from dse.taskgraph.model import AnalyticModel

FORMULATIONS = ("kang2020", "ha2018")
CLUSTER_MODES = ("exact", "at_most", None)


@dataclass(frozen=True)
class IlpResult:
    """``status``: "optimal", "time limit" (a feasible mapping, gap > 0 possible), "infeasible" or "no solution";
    ``objective`` and ``bound`` in us (the period), ``gap`` = (objective - bound) / objective."""

    status: str
    objective: float
    bound: float
    gap: float
    seconds: float
    solver: str
    mapping: np.ndarray | None
    n_vars: int = 0
    n_constraints: int = 0
    options: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"status": self.status, "objective": self.objective, "bound": self.bound, "gap": self.gap,
                "seconds": self.seconds, "solver": self.solver, "n_vars": self.n_vars,
                "n_constraints": self.n_constraints, "options": self.options,
                "mapping": None if self.mapping is None else self.mapping.tolist()}


def solve_ilp(model: AnalyticModel, *, formulation: str = "kang2020", clusters: str | None = "exact",
              linear: bool = False, timing: bool = False, solver: str = "highs", time_limit: float = 60.0,
              msg: bool = False) -> IlpResult:
    """Minimize the period of ``model`` over clustered mappings (see the module doc); HiGHS by default."""
    with warnings.catch_warnings():   # PuLP 3.x announces its 4.0 API on every variable; 2.8 has no other
        warnings.simplefilter("ignore", DeprecationWarning)
        return _solve(model, formulation, clusters, linear, timing, solver, time_limit, msg)


def _solve(model, formulation, clusters, linear, timing, solver, time_limit, msg) -> IlpResult:
    pulp = import_pulp()
    if formulation not in FORMULATIONS:
        raise LayerMapError(f"unknown ILP formulation {formulation!r}; valid choices: {', '.join(FORMULATIONS)}")
    if clusters not in CLUSTER_MODES:
        raise LayerMapError(f"unknown cluster mode {clusters!r}; valid choices: exact, at_most, None")
    check_solver(solver, time_limit)
    if model.u_max is not None and model.cap_mode != "stretch":
        raise LayerMapError(f"the ILP needs the linear cap mode 'stretch', the model has {model.cap_mode!r}")
    if model.dedupe:
        raise LayerMapError("the ILP charges every edge (dedupe=False); the model has dedupe=True")
    g, E, C, n, P = model.graph, model.E, model.C, model.n, model.P
    ok = np.isfinite(E)
    if not ok.any(axis=1).all():
        t = int(np.flatnonzero(~ok.any(axis=1))[0])
        raise LayerMapError(f"task {t} ({g.names[t]}) runs on no PE of {model.pes.describe()}")

    prob = pulp.LpProblem("layermap", pulp.LpMinimize)
    B, Cn = pulp.LpVariable, pulp.LpContinuous
    M = {(i, j): B(f"M_{i}_{j}", cat=pulp.LpBinary) for i in range(n) for j in range(P) if ok[i, j]}
    m = lambda i, j: M.get((i, j), 0)
    Z = B("Z", lowBound=0)
    prob += Z
    for i in range(n):                                                                   # (1)
        prob += pulp.lpSum(M[i, j] for j in range(P) if ok[i, j]) == 1, f"one_pe_{i}"
    load = {j: [E[i, j] * M[i, j] for i in range(n) if ok[i, j]] for j in range(P)}
    Y = {}
    for e, (s, d) in enumerate(zip(g.src, g.dst)):                                       # y = M_s^j AND M_d^k
        pairs = [(j, k) for j in range(P) for k in range(P) if ok[s, j] and ok[d, k]]
        for j, k in pairs:
            y = Y[e, j, k] = B(f"y_{e}_{j}_{k}", 0, 1, Cn)
            if j != k and C[e, j, k] > 0:
                load[j if model.charge == "sender" else k].append(C[e, j, k] * y)
        for j in range(P):                            # the product's exact linear hull: rows and columns of
            if ok[s, j]:                              # y sum to the sender's and receiver's assignment
                prob += pulp.lpSum(Y[e, j, k] for k in range(P) if (e, j, k) in Y) == M[s, j], f"ys_{e}_{j}"
            if ok[d, j]:
                prob += pulp.lpSum(Y[e, k, j] for k in range(P) if (e, k, j) in Y) == M[d, j], f"yd_{e}_{j}"
    for j in range(P):                                                                   # (7), (8)
        prob += Z >= pulp.lpSum(load[j]), f"ct_{j}"
    if model.u_max is not None and model.n_cores:                                        # stretch cap
        prob += (pulp.lpSum(model.cores[j] * pulp.lpSum(load[j]) for j in range(P) if model.cores[j])
                 <= model.u_max * model.n_cores * Z), "cpu_cap"
    if clusters is not None:
        _cluster_rules(pulp, prob, model, m, formulation, clusters)
    if clusters is not None and not linear:
        _symmetry_rules(pulp, prob, model, m)
    if linear:
        for i in range(n - 1):
            prob += (pulp.lpSum(j * m(i + 1, j) for j in range(P)) >= pulp.lpSum(j * m(i, j) for j in range(P)),
                     f"linear_{i}")
    if timing:
        _timing_rules(pulp, prob, model, M, Y, m)

    solved = solve_problem(prob, solver, time_limit, msg)
    status, bound, seconds, used = solved.status, solved.bound, solved.seconds, solved.solver
    options = {"formulation": formulation, "clusters": clusters, "linear": linear, "timing": timing,
               "time_limit": time_limit}
    size = dict(n_vars=len(prob.variables()), n_constraints=len(prob.constraints), options=options)
    if status in ("infeasible", "no solution"):
        return IlpResult(status, float("inf"), bound, float("nan"), seconds, used, None, **size)
    mapping = np.array([max(range(P), key=lambda j: (pulp.value(m(i, j)) or 0.0)) for i in range(n)],
                       dtype=np.int64)
    obj = float(pulp.value(Z))
    if status == "optimal":
        bound = obj if not np.isfinite(bound) else min(bound, obj)
    gap = max(0.0, (obj - bound) / obj) if obj > 0 and np.isfinite(bound) else float("nan")
    return IlpResult(status, obj, bound, gap, seconds, used, mapping, **size)


def _cluster_rules(pulp, prob, model, m, formulation: str, clusters: str) -> None:
    """002 Eqs. 2-4 / 004 c. 5, 7, 8: a task on PE j with no predecessor on j starts a cluster of j."""
    g, n, P = model.graph, model.n, model.P
    Cn = pulp.LpContinuous
    starts = {}
    for i in range(n):
        preds = g.src[g.in_edges[i]]
        for j in range(P):
            mij = m(i, j)
            if isinstance(mij, int) or i == 0 or not len(preds):
                starts[i, j] = mij                                                       # (3) source: Pipe = M
                continue
            dep = pulp.LpVariable(f"dep_{i}_{j}", 0, 1, Cn)                                # (2) OR of preds
            for k in preds:
                prob += dep >= m(int(k), j)
            prob += dep <= pulp.lpSum(m(int(k), j) for k in preds)
            pipe = starts[i, j] = pulp.LpVariable(f"pipe_{i}_{j}", 0, 1, Cn)              # (3) M AND NOT dep
            prob += pipe <= mij
            prob += pipe <= 1 - dep
            prob += pipe >= mij - dep
    rel = (lambda a, b: a == b) if clusters == "exact" else (lambda a, b: a <= b)
    if formulation == "ha2018":                                                          # 004 c. 5
        prob += rel(pulp.lpSum(starts.values()), max(3, P)), "cluster_starts"
        return
    for j in range(P):                                                                   # (4) with W_j
        w = pulp.LpVariable(f"W_{j}", 0, 1, Cn)
        first, last = m(0, j), m(n - 1, j)
        prob += w <= first
        prob += w <= last
        prob += w >= first + last - 1
        prob += rel(pulp.lpSum(starts[i, j] for i in range(n)) - w, 1), f"one_cluster_{j}"


def identical_pes(model: AnalyticModel) -> list[list[int]]:
    """Groups of PEs that no mapping can tell apart (same task times, cores, power and transfer costs to every
    other PE): relabelling them within a group changes no period."""
    E, C, P = model.E, model.C, model.P
    same = lambda a, b: np.array_equal(a, b, equal_nan=True)
    power = [model.p_busy, model.p_idle]

    def twin(j: int, k: int) -> bool:
        others = [q for q in range(P) if q not in (j, k)]
        return (same(E[:, j], E[:, k]) and model.cores[j] == model.cores[k]
                and all(p is None or p[j] == p[k] for p in power)
                and same(C[:, j, others], C[:, k, others]) and same(C[:, others, j], C[:, others, k])
                and same(C[:, j, k], C[:, k, j]))

    groups: list[list[int]] = []
    for j in range(P):
        for grp in groups:
            if twin(grp[0], j):
                grp.append(j)
                break
        else:
            groups.append([j])
    return [g for g in groups if len(g) > 1]


def _symmetry_rules(pulp, prob, model, m) -> None:
    """Within a group of identical PEs, PE j' may hold task i only if its predecessor j in the group holds an
    earlier task: any mapping can be relabelled to meet this, so the optimum stays, but the solver no longer
    searches every permutation of identical cores (4! on a (1,1,1,1) configuration)."""
    for grp in identical_pes(model):
        for j, k in zip(grp, grp[1:]):
            for i in range(model.n):
                prob += m(i, k) <= pulp.lpSum(m(t, j) for t in range(i)), f"sym_{j}_{k}_{i}"


def _timing_rules(pulp, prob, model, M, Y, m) -> None:
    """002 Eqs. 5-6: a one-frame schedule (start/end per task); no effect on the period."""
    g, E, C, n, P = model.graph, model.E, model.C, model.n, model.P
    fin = np.where(np.isfinite(E), E, 0.0)
    big = float(fin.max(axis=1).sum() + (C.max(axis=(1, 2)).sum() if len(C) else 0.0))
    start = [pulp.LpVariable(f"start_{i}", 0) for i in range(n)]
    end = [pulp.LpVariable(f"end_{i}", 0) for i in range(n)]
    for i in range(n):
        prob += end[i] == start[i] + pulp.lpSum(E[i, j] * M[i, j] for j in range(P) if (i, j) in M)
    succ = set()
    for e, (s, d) in enumerate(zip(g.src, g.dst)):                                       # (5)
        succ.add((int(s), int(d)))
        prob += start[d] >= end[s] + pulp.lpSum(C[e, j, k] * y for (ee, j, k), y in Y.items() if ee == e)
    for i in range(n):                                                                   # (6)
        for l in range(i + 1, n):
            if (i, l) in succ:
                continue
            for p in range(P):
                if (i, p) in M and (l, p) in M:
                    prob += start[l] >= end[i] - big * (2 - M[i, p] - M[l, p])


def chain_dp(model: AnalyticModel) -> tuple[float, np.ndarray]:
    """Exact optimum of a chain (edges i -> i+1 only) as a pipeline: PE ids non-decreasing along the chain,
    each PE one contiguous (possibly empty) range: the cut-tuple model, O(n^2 P^3). The test oracle of
    ``solve_ilp(linear=True, clusters=None)``. No CPU cap (the stretch term couples all ranges)."""
    g, E, C, n, P = model.graph, model.E, model.C, model.n, model.P
    if len(g.src) != n - 1 or not (np.array_equal(g.src, np.arange(n - 1)) and np.array_equal(g.dst, g.src + 1)):
        raise LayerMapError("chain_dp needs a chain: edges exactly i -> i+1")
    if model.u_max is not None:
        raise LayerMapError("chain_dp has no CPU cap; build the model with u_max=None")
    if model.dedupe:
        raise LayerMapError("chain_dp charges every edge; build the model with dedupe=False")
    cum = np.vstack([np.zeros(P), np.cumsum(np.where(np.isfinite(E), E, np.inf), axis=0)])
    sender = model.charge == "sender"
    memo: dict = {}

    def f(s: int, a: int, b: int) -> tuple[float, tuple]:
        """Best period of tasks s.. with the range starting at s on PE b, the previous range on a."""
        key = (s, a, b)
        if key in memo:
            return memo[key]
        base = (C[s - 1, a, b] if s > 0 and not sender else 0.0)
        best = (np.inf, ())
        for e in range(s + 1, n + 1):
            work = cum[e, b] - cum[s, b] + base
            if not np.isfinite(work):
                break
            if e == n:
                best = min(best, (work, ((b, s, e),)))
                continue
            for c in range(b + 1, P):
                rest, plan = f(e, b, c)
                val = max(work + (C[e - 1, b, c] if sender else 0.0), rest)
                if val < best[0]:
                    best = (val, ((b, s, e),) + plan)
        memo[key] = best
        return best

    period, plan = min((f(0, -1, b) for b in range(P)), key=lambda t: t[0])
    mapping = np.zeros(n, dtype=np.int64)
    for pe, s, e in plan:
        mapping[s:e] = pe
    return float(period), mapping


__all__ = ["IlpResult", "solve_ilp", "chain_dp", "identical_pes", "SOLVERS", "FORMULATIONS", "CLUSTER_MODES"]
