"""The analytic model of a per-layer mapping (spec 1.3): the fitness of the 001/002/004 GAs and the objective
of the ILPs, vectorized over a population because a GA asks for thousands of mappings per generation.

Cost of a mapping m (one PE id per task):
- task i occupies its PE for ``E_i = time_us[i, kind(m_i)]`` plus the transfers charged to it: with
  ``charge="sender"`` (002 Eq. 7) the producer pays ``T(bytes, kind(m_i), kind(m_l))`` after computing, for every
  edge i -> l with m_l != m_i; with ``charge="receiver"`` (004 L290) the consumer pays it before computing.
  ``dedupe=True`` counts one transfer per (producer, destination PE), the largest of its edges (a tensor read by
  several tasks on one PE crosses once); the receiver side charges it to the first such consumer.
- ``load_p`` = occupancy of PE p per frame; ``period_raw = max_p load_p`` (002 Eq. 8); CPU busy core-us =
  sum_p k_p load_p; ``util_cpu = busy / (N_cores * period)``.
- a CPU cap U_max: ``"stretch"`` throttles the input so that util <= U_max (``period = max(period_raw,
  busy / (U_max N))``, linear, so GA and ILP agree); ``"penalty"`` (002 L241) keeps the period and adds
  ``lambda * max(0, util - U_max)``, lambda = 10 * sum_i min_p E_i.
- energy per frame = sum_p P_busy[p] load_p (+ P_idle[p] (period - load_p) when idle powers are given).
A mapping with a task on a PE that cannot run it gets an infinite period (no error: GAs produce them).
"""
from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Callable, Mapping

import numpy as np

from dse.taskgraph.errors import LayerMapError
from dse.taskgraph.mapping import PeSet
from dse.taskgraph.profile import ProfileTable
from dse.taskgraph.graph import TaskGraph

CAP_MODES = ("stretch", "penalty")
CHARGES = ("sender", "receiver")


@dataclass(frozen=True)
class LinearComm:
    """The default transfer model: ``nbytes / bandwidth + fixed_us`` between any two distinct PEs."""

    bandwidth_gbs: float = 10.0
    fixed_us: float = 0.0

    def __post_init__(self):
        if self.bandwidth_gbs <= 0 or self.fixed_us < 0:
            raise LayerMapError(f"comm model needs bandwidth > 0 and fixed_us >= 0, got {self.bandwidth_gbs} GB/s, "
                                f"{self.fixed_us} us")

    def __call__(self, nbytes, src_kind: str, dst_kind: str):
        return np.asarray(nbytes, dtype=float) / (self.bandwidth_gbs * 1e3) + self.fixed_us


@dataclass(frozen=True)
class Evaluation:
    """Per individual (scalars for one mapping): times in us, energy in J per frame, loads [.., n_pes]."""

    period_raw: np.ndarray
    period: np.ndarray
    util_cpu: np.ndarray
    energy_j: np.ndarray
    penalty: np.ndarray
    loads: np.ndarray

    def __getitem__(self, i) -> Evaluation:
        return Evaluation(*(getattr(self, f)[i] for f in self.__dataclass_fields__))


def _per_pe(values, pes: PeSet, what: str) -> np.ndarray | None:
    """Watts per PE from a sequence (by PE id) or a mapping by PE name or kind."""
    if values is None:
        return None
    if isinstance(values, Mapping):
        out = []
        for p in pes.pes:
            if p.name in values:
                out.append(values[p.name])
            elif p.kind in values:
                out.append(values[p.kind])
            else:
                raise LayerMapError(f"{what}: no value for PE {p.name} ({p.kind}); keys: {', '.join(map(str, values))}")
        arr = np.array(out, dtype=float)
    else:
        arr = np.asarray(values, dtype=float)
        if arr.shape != (len(pes),):
            raise LayerMapError(f"{what}: {arr.size} values for {len(pes)} PEs ({pes.describe()})")
    if (arr < 0).any() or not np.isfinite(arr).all():
        raise LayerMapError(f"{what}: powers must be finite and >= 0, got {arr.tolist()}")
    return arr


def _segments(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Edges grouped by ``keys`` (one task per edge): the stable sort order, each group's first position in it and
    its task; ``np.add.reduceat`` over the sorted rows then sums a group without ``ufunc.at``'s scattered writes."""
    order = np.argsort(keys, kind="stable")
    k = keys[order]
    starts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]]) if len(k) else np.zeros(0, dtype=np.int64)
    return order, starts, k[starts]


class _EdgeGroups:
    """The mapping-independent grouping of a graph's edges that ``task_costs_population`` charges by: per sender,
    per receiver, and for ``dedupe`` the edges of producers with several consumers (the only ones it changes),
    each with the index of its producer among those."""

    def __init__(self, g: TaskGraph):
        self.sender, self.receiver = _segments(g.src), _segments(g.dst)
        self.multi = np.flatnonzero((np.bincount(g.src, minlength=g.n) > 1)[g.src])
        fans, self.fan_group = np.unique(g.src[self.multi], return_inverse=True)
        self.n_fans = len(fans)


def _segment_sum(values: np.ndarray, seg, n: int) -> np.ndarray:
    """[n, pop]: the rows of ``values`` [n_edges, pop] summed per group of ``seg`` (`_segments`) into its task."""
    order, starts, tasks = seg
    out = np.zeros((n, values.shape[1]))
    if len(starts):
        out[tasks] = np.add.reduceat(values[order], starts, axis=0)
    return out


class AnalyticModel:
    """Period, CPU utilization, energy and latency of per-layer mappings of one task graph on one PE set."""

    def __init__(self, graph: TaskGraph, profile: ProfileTable, pes: PeSet,
                 comm: Callable[..., float] | None = None, *, bandwidth_gbs: float = 10.0, fixed_us: float = 0.0,
                 p_busy=None, p_idle=None, u_max: float | None = None, cap_mode: str = "stretch",
                 charge: str = "sender", dedupe: bool = False):
        profile.check_graph(graph)
        if cap_mode not in CAP_MODES:
            raise LayerMapError(f"unknown cap mode {cap_mode!r}; valid choices: {', '.join(CAP_MODES)}")
        if charge not in CHARGES:
            raise LayerMapError(f"unknown comm charge {charge!r}; valid choices: {', '.join(CHARGES)}")
        if u_max is not None and not (0.0 < float(u_max) <= 1.0):
            raise LayerMapError(f"u_max {u_max} is outside (0, 1]")
        self.graph, self.profile, self.pes = graph, profile, pes
        self.comm = comm if comm is not None else LinearComm(bandwidth_gbs, fixed_us)
        self.u_max = None if u_max is None else float(u_max)
        self.cap_mode, self.charge, self.dedupe = cap_mode, charge, bool(dedupe)
        self.n, self.P = graph.n, len(pes)
        self.E = np.ascontiguousarray(profile.time_us[:, [profile.kind_index(k) for k in pes.kinds]])   # [n, P]
        self.cores = pes.cores                                                      # [P], 0 = not a CPU group
        self.n_cores = float(self.cores.sum())
        self.C = self._comm_matrix()                                                # [n_edges, P, P]
        self._groups = _EdgeGroups(graph)
        best = self.E.min(axis=1)
        self.lam = 10.0 * float(best[np.isfinite(best)].sum())
        self.p_busy = _per_pe(p_busy, pes, "p_busy")
        self.p_idle = _per_pe(p_idle, pes, "p_idle")
        if self.p_idle is not None and self.p_busy is None:
            raise LayerMapError("p_idle needs p_busy too (the energy of busy time)")


    def _comm_matrix(self) -> np.ndarray:
        g, kinds = self.graph, self.pes.kinds
        C = np.zeros((len(g.src), self.P, self.P))
        cache: dict[tuple[str, str], np.ndarray] = {}
        for a in range(self.P):
            for b in range(self.P):
                if a == b or not len(g.src):
                    continue
                key = (kinds[a], kinds[b])
                if key not in cache:
                    cost = np.asarray(self.comm(g.nbytes, *key), dtype=float)
                    if cost.shape != g.nbytes.shape:   # a scalar-only callable
                        cost = np.array([float(self.comm(float(x), *key)) for x in g.nbytes])
                    if not np.isfinite(cost).all() or (cost < 0).any():
                        raise LayerMapError(f"comm model gave {cost.min()}..{cost.max()} us for {key[0]} -> {key[1]}: "
                                            f"transfer times must be finite and >= 0")
                    cache[key] = cost
                C[:, a, b] = cache[key]
        return C

    # -- checks -----------------------------------------------------------------------------------------------
    def check_maps(self, maps) -> np.ndarray:
        """One mapping [n] or a population [pop, n] of integer PE ids in range, as an array (else an error)."""
        M = np.asarray(maps)
        if M.ndim not in (1, 2) or M.shape[-1] != self.n:
            raise LayerMapError(f"mappings must be [n_tasks={self.n}] or [pop, {self.n}], got shape {M.shape}")
        if not np.issubdtype(M.dtype, np.integer):
            raise LayerMapError(f"PE ids must be integers, got {M.dtype}")
        if M.size and (M.min() < 0 or M.max() >= self.P):
            bad = int(M[(M < 0) | (M >= self.P)][0])
            raise LayerMapError(f"PE id {bad} out of range; valid choices: 0..{self.P - 1} ({self.pes.describe()})")
        return M

    # -- population evaluation --------------------------------------------------------------------------------
    def loads(self, maps) -> np.ndarray:
        """[pop, P] occupancy per PE and frame (us); [P] for one mapping: the task costs summed per PE."""
        M = self.check_maps(maps)
        single = M.ndim == 1
        M = np.atleast_2d(M)
        exec_us, comm = self.task_costs_population(M)
        pop, P = M.shape[0], self.P
        flat = (M + (np.arange(pop) * P)[:, None]).ravel()
        loads = np.bincount(flat, (exec_us + comm).ravel(), minlength=pop * P).reshape(pop, P)
        return loads[0] if single else loads

    def task_costs_population(self, maps) -> tuple[np.ndarray, np.ndarray]:
        """(compute us, charged transfer us) per individual and task, [pop, n] each: the per-task occupancies a
        multi-app schedulability analysis needs for a whole GA population; row k = ``task_costs(maps[k])``.

        No loop over individuals: the work is laid out [edge, individual] and edges are summed per charged task
        with ``reduceat`` over precomputed groups; ``dedupe`` groups only the edges of producers with several
        consumers (one consumer: one transfer per destination anyway)."""
        M = self.check_maps(maps)
        if M.ndim != 2:
            raise LayerMapError(f"task_costs_population takes a population [pop, {self.n}], got shape {M.shape}")
        g, n, P, pop = self.graph, self.n, self.P, M.shape[0]
        MT = np.ascontiguousarray(M.T)                                             # [n, pop]
        exec_us = self.E.ravel()[(np.arange(n) * P)[:, None] + MT]
        if not len(g.src) or not pop:
            return exec_us.T, np.zeros((pop, n))
        md = MT[g.dst]
        c = self.C.ravel()[(np.arange(len(g.src)) * (P * P))[:, None] + MT[g.src] * P + md]    # [n_edges, pop]
        G = self._groups
        if self.dedupe and len(G.multi):
            # a fan-out's transfers grouped by (producer, destination PE): the group's largest on its first edge
            # (its first consumer), 0 on the others
            k, size = len(G.multi), G.n_fans * P * pop
            cm = c[G.multi].ravel()
            group = (((G.fan_group * P)[:, None] + md[G.multi]) * pop + np.arange(pop)).ravel()    # [k * pop]
            edge = np.repeat(np.arange(k), pop)
            gmax, first = np.zeros(size), np.full(size, k)
            np.maximum.at(gmax, group, cm)
            np.minimum.at(first, group, edge)
            c[G.multi] = np.where(first[group] == edge, gmax[group], 0.0).reshape(k, pop)
        comm = _segment_sum(c, G.sender if self.charge == "sender" else G.receiver, n)
        return exec_us.T, comm.T

    def summarize(self, loads) -> Evaluation:
        """Period, utilization, penalty and energy from loads [pop, P] (or [P])."""
        L = np.asarray(loads, dtype=float)
        single = L.ndim == 1
        L = np.atleast_2d(L)
        with np.errstate(invalid="ignore", divide="ignore"):
            period_raw = L.max(axis=1)
            busy = L @ self.cores
            period = period_raw.copy()
            if self.u_max is not None and self.cap_mode == "stretch" and self.n_cores:
                period = np.maximum(period_raw, busy / (self.u_max * self.n_cores))
            util = busy / (self.n_cores * period) if self.n_cores else np.zeros_like(period)
            penalty = np.zeros_like(period)
            if self.u_max is not None and self.cap_mode == "penalty":
                penalty = self.lam * np.maximum(0.0, util - self.u_max)
            if self.p_busy is None:
                energy = np.full_like(period, np.nan)
            else:
                energy = L @ self.p_busy
                if self.p_idle is not None:
                    energy = energy + (period[:, None] - L) @ self.p_idle
                energy = energy * 1e-6
        ev = Evaluation(period_raw, period, util, energy, penalty, L)
        return ev[0] if single else ev

    def evaluate(self, maps) -> Evaluation:
        """One mapping [n_tasks] (scalar fields) or a population [pop, n_tasks] (arrays), no loop over individuals."""
        return self.summarize(self.loads(maps))

    # -- one mapping ------------------------------------------------------------------------------------------
    def task_costs(self, m) -> tuple[np.ndarray, np.ndarray]:
        """(compute us, charged transfer us) per task of one mapping; their sum per PE is ``loads(m)``."""
        m = self.check_maps(m)
        if m.ndim != 1:
            raise LayerMapError("task_costs takes one mapping")
        exec_us, comm = self.task_costs_population(m[None, :])
        return exec_us[0], comm[0]

    def occupancy(self, m) -> np.ndarray:
        """Per task: the time it holds its PE per frame (compute + charged transfers)."""
        exec_us, comm = self.task_costs(m)
        return exec_us + comm

    def latency(self, m) -> float:
        """Makespan of one frame: list scheduling in topological order, one task at a time per PE, a task
        starting when its predecessors' occupancy (compute + charged transfers) has ended."""
        m = self.check_maps(m)
        occ = self.occupancy(m)
        g = self.graph
        finish = np.zeros(self.n)
        free = np.zeros(self.P)
        for i in range(self.n):
            preds = g.src[g.in_edges[i]]
            start = max(free[m[i]], finish[preds].max() if len(preds) else 0.0)
            finish[i] = free[m[i]] = start + occ[i]
        return float(finish.max()) if self.n else 0.0


class Incremental:
    """Local-search evaluation (004 ``calc_delta``, L225): moving task i changes only the loads of its old and
    new PE and the transfer terms of its edges, O(deg(i)); with ``dedupe`` the transfer groups of i and of its
    predecessors are recomputed. ``move`` applies a tentative change, then ``commit`` or ``undo``."""

    def __init__(self, model: AnalyticModel, m):
        m = model.check_maps(m)
        if m.ndim != 1:
            raise LayerMapError("Incremental takes one mapping")
        self.model = model
        self.m = m.astype(np.int64).copy()
        self.loads = model.loads(self.m).astype(float)
        self._pending: tuple[int, int, np.ndarray] | None = None

    @property
    def evaluation(self) -> Evaluation:
        return self.model.summarize(self.loads)

    @property
    def period(self) -> float:
        return float(self.evaluation.period)

    def _edge_terms(self, edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        g, m = self.model.graph, self.m
        ms, md = m[g.src[edges]], m[g.dst[edges]]
        return (ms if self.model.charge == "sender" else md), self.model.C[edges, ms, md]

    def _group_terms(self, producers) -> tuple[np.ndarray, np.ndarray]:
        g, m, C = self.model.graph, self.m, self.model.C
        pes, costs = [], []
        for j in producers:
            edges = g.out_edges[j]
            md = m[g.dst[edges]]
            c = C[edges, m[j], md]
            for q in np.unique(md):
                if q != m[j]:
                    pes.append(m[j] if self.model.charge == "sender" else q)
                    costs.append(c[md == q].max())
        return np.array(pes, dtype=np.int64), np.array(costs, dtype=float)

    def move(self, task: int, new_pe: int) -> float:
        """Tentatively put ``task`` on ``new_pe``; returns the new period."""
        if self._pending is not None:
            raise LayerMapError("commit() or undo() the pending move first")
        model, g = self.model, self.model.graph
        if not (0 <= task < model.n) or not (0 <= new_pe < model.P):
            raise LayerMapError(f"move({task}, {new_pe}): task in 0..{model.n - 1}, PE in 0..{model.P - 1}")
        old = int(self.m[task])
        self._pending = (task, old, self.loads.copy())
        if model.dedupe:
            touched = np.unique(np.concatenate([[task], g.src[g.in_edges[task]]]))
            terms = lambda: self._group_terms(touched)
        else:
            edges = np.concatenate([g.in_edges[task], g.out_edges[task]])
            terms = lambda: self._edge_terms(edges)
        pe, cost = terms()
        np.subtract.at(self.loads, pe, cost)
        self.loads[old] -= model.E[task, old]
        self.m[task] = new_pe
        self.loads[new_pe] += model.E[task, new_pe]
        pe, cost = terms()
        np.add.at(self.loads, pe, cost)
        if not np.isfinite(model.E[task, old]):   # inf - inf: leaving an unsupported PE, recount
            self.loads = model.loads(self.m).astype(float)
        return self.period

    def commit(self) -> None:
        self._pending = None

    def undo(self) -> None:
        if self._pending is None:
            raise LayerMapError("no pending move to undo")
        task, old, loads = self._pending
        self.m[task] = old
        self.loads = loads
        self._pending = None


__all__ = ["AnalyticModel", "Evaluation", "Incremental", "LinearComm", "CAP_MODES", "CHARGES"]
