"""Task-graph discrete-event simulation of a per-layer mapping (spec 1.4, the semantics of 004's SchedSimulator):
the pipelined schedule behind the analytic period, for Gantt charts and for checking the period.

K frames enter at once. Task (k, i) becomes runnable when every predecessor of frame k has finished (its
occupancy includes the charged transfers, as in ``AnalyticModel``) and, when i has consumers on other PEs,
frame k-B of i has been consumed by all of them (B buffers per cross-PE tensor, double buffering by default,
002 L350, 004 L111). Each PE runs one task at a time and picks the runnable one with the smallest
(frame, task index): a non-preemptive ``dse.des.PriorityServer`` keyed by (frame, task), served once every
task finishing at an instant has offered its successors. Throughput (002 Eq. 9) over frames w..K:
period = (finish_K - finish_w) / (K - w).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dse.des import EventQueue, PriorityServer, Span
from dse.taskgraph.errors import LayerMapError
from dse.taskgraph.model import AnalyticModel


@dataclass
class TaskGraphRun:
    period_us: float
    frame_start: np.ndarray      # [K] start of each frame's first task
    frame_finish: np.ndarray     # [K] end of each frame's last task
    warmup: int
    trace: list[Span] = field(default_factory=list)   # lane: the PE, label: the task's name

    @property
    def fps(self) -> float:
        return 1e6 / self.period_us if self.period_us > 0 else float("inf")

    @property
    def latency_us(self) -> np.ndarray:
        return self.frame_finish - self.frame_start


def simulate(model: AnalyticModel, m, frames: int = 128, warmup: int | None = None, buffers: int = 2,
             trace: bool = False) -> TaskGraphRun:
    """Simulate ``frames`` frames of mapping ``m``; ``warmup`` frames (default K/4) are left out of the period."""
    m = model.check_maps(m)
    if m.ndim != 1:
        raise LayerMapError("simulate takes one mapping")
    K = int(frames)
    w = max(1, K // 4) if warmup is None else int(warmup)
    if not (1 <= w < K):
        raise LayerMapError(f"need 1 <= warmup < frames, got warmup={w}, frames={K}")
    if buffers < 1:
        raise LayerMapError(f"buffers must be >= 1, got {buffers}")
    occ = model.occupancy(m)
    if not np.isfinite(occ).all():
        bad = int(np.flatnonzero(~np.isfinite(occ))[0])
        raise LayerMapError(f"task {bad} cannot run on PE {int(m[bad])} ({model.pes[int(m[bad])].name})")
    g, n, P, B = model.graph, model.n, model.P, int(buffers)
    succs = [g.dst[g.out_edges[i]].tolist() for i in range(n)]
    cross_preds = [[int(j) for j in g.src[g.in_edges[i]] if m[j] != m[i]] for i in range(n)]
    n_cross = np.array([sum(m[l] != m[i] for l in succs[i]) for i in range(n)])
    remaining = np.tile(np.array([len(g.in_edges[i]) for i in range(n)]), (K, 1))
    consumed = np.zeros((K, n), dtype=np.int64)
    queued = np.zeros((K, n), dtype=bool)
    start = np.full((K, n), np.nan)
    finish = np.full((K, n), np.nan)
    servers = [PriorityServer() for _ in range(P)]
    server_of = [servers[p] for p in m.tolist()]     # task -> its PE's server
    events = EventQueue()
    push = events.push
    out_trace: list[Span] = []

    def offer(k: int, i: int) -> None:
        if queued[k, i] or remaining[k, i] > 0:
            return
        if n_cross[i] and k >= B and consumed[k - B, i] < n_cross[i]:
            return
        queued[k, i] = True
        server_of[i].wait((k, i), (k, i))

    def dispatch(t: float) -> None:
        for p, server in enumerate(servers):
            if server.current is not None:     # busy: spares the call, this loop runs at every instant
                continue
            job = server.start_next()
            if job is not None:
                k, i = job
                start[k, i] = t
                push(t + occ[i], p, job)
                if trace:
                    out_trace.append(Span(model.pes[p].name, k, t, t + occ[i], g.names[i], i))

    for k in range(K):
        for i in range(n):
            offer(k, i)
    dispatch(0.0)
    while events.heap:
        due = events.pop_due()
        t = due[0][0]
        for _, _, p, (k, i) in due:
            servers[p].release()
            finish[k, i] = t
            for l in succs[i]:
                remaining[k, l] -= 1
                offer(k, l)
            for j in cross_preds[i]:
                consumed[k, j] += 1
                if consumed[k, j] == n_cross[j] and k + B < K:
                    offer(k + B, j)
        dispatch(t)
    if np.isnan(finish).any():   # cannot happen with forward edges; guards the semantics
        raise LayerMapError("task-graph simulation deadlocked")
    ff = finish.max(axis=1)
    period = float((ff[K - 1] - ff[w - 1]) / (K - w))
    return TaskGraphRun(period, start.min(axis=1), ff, w, out_trace)


__all__ = ["TaskGraphRun", "simulate"]
