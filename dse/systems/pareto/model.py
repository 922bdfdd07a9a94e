"""Seed 001's analytical throughput and energy model (Eqs. 1-13, primes restored as in the spec, section 2.2),
vectorized over a population of genomes, with every parameter profiled on the board as the paper does (L127-158).

Genome = [core of each task (0..n_cores-1)] + [frequency level of each CPU cluster] + [GPU frequency level]
(the spec's conflict-free encoding of L92: cores of one cluster share a clock, L75). Tasks on the GPU's host core
run on the GPU (001 L73).

- tau_cpu_i (Eqs. 3, 5): sum of the profiled times tau(F_k, cpu_i, f) of its tasks; tau'_cpu_i (Eqs. 4, 6) of
  the host core: the time it spends on each task offloaded to the GPU at (f_cpu, f_gpu), profiled per task.
- tau^com (Eq. 7): tau_w(f) U + tau_r(f) V over every channel of the core's tasks (``comm="all_channels"``, as
  written) or only over channels to other cores (``"cross_core_only"``). For tasks on the GPU the profiled
  offload time already holds their token traffic (it overlaps the kernels), so they add none.
- The host core also pays a per-image cost of driving the GPU at all (input, output, synchronization), measured
  on the board; Eq. 4 has no such term, which misses small networks by up to 80 % here.
- tau (Eq. 2) = the busiest core; phi1 = 1 / tau.
- phi2 (Eqs. 8-13) = per core P_idle(f) T + (P(f, A) - P_idle(f)) tau_i, plus the GPU's
  P_idle(f_g) T + (P(f_g, A) - P_idle(f_g)) tau_gpu, with T = sum of the core times (Eq. 12, ``idle_time="sum"``)
  or the period (``"period"``). P(f, A): the average power of the PE with every task on it, measured on the board.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dse.systems.pareto.board import ClockedBoard, Clocks
from dse.core.errors import DseError, choices_error

COMM_MODES = ("all_channels", "cross_core_only")
IDLE_TIMES = ("sum", "period")


@dataclass(frozen=True)
class Objectives:
    """Per genome: phi1 (images/s), phi2 (J/image), tau (us)."""

    fps: np.ndarray
    energy_j: np.ndarray
    period_us: np.ndarray


class TangModel:
    """Eqs. 1-13 of seed 001 on one network and clocked board (parameters profiled once, in the constructor)."""

    def __init__(self, board: ClockedBoard, comm: str = "all_channels", idle_time: str = "sum"):
        if comm not in COMM_MODES:
            raise choices_error("comm mode of the seed-001 model", comm, COMM_MODES)
        if idle_time not in IDLE_TIMES:
            raise choices_error("idle-time reading of Eq. 12", idle_time, IDLE_TIMES)
        self.board, self.comm, self.idle_time = board, comm, idle_time
        b = board
        self.n, self.cores = b.n_tasks, b.n_cores
        self.levels = [np.array(c.freq_mhz, dtype=float) for c in b.clusters]
        self.gpu_levels = np.array(b.gpu_levels)
        self.host_cluster = int(b.core_cluster[b.gpu_core])
        # Eq. 5 per cluster x level x task (compute only) and Eq. 7's per-task token time per level
        self.cpu_tau = [np.stack([b.cpu_us_fmax[k] * c.max_freq_mhz / f for f in c.freq_mhz])
                        for k, c in enumerate(b.clusters)]                       # [levels, n]
        self.token_tau = [np.stack([b.token_us(f) for f in c.freq_mhz]) for c in b.clusters]   # [levels, n]
        hl = self.levels[self.host_cluster]
        # Eq. 6: host-core time per offloaded task at every (host level, GPU level); GPU busy time (Eq. 13)
        self.off_tau = np.zeros((len(hl), len(self.gpu_levels), self.n))
        self.gpu_tau = np.zeros_like(self.off_tau)
        for i, fc in enumerate(hl):
            for j, fg in enumerate(self.gpu_levels):
                t, _, _ = b.gpu_task_parts(fc, fg)
                self.gpu_tau[i, j] = t
                self.off_tau[i, j] = b.offload_us(t, fc)
        # the host core's per-image cost of driving the GPU at all (not in Eq. 4: measured as the TensorRT run's
        # time minus its tasks' offload times; without it the model misses small networks by up to 80 %)
        self.frame_tau = np.array([b.host_frame_us(f) for f in hl])
        # powers: P_idle per core (its cluster's idle power shared), P(f, A) - P_idle = the busy core term
        self.core_idle_w = np.array([b.params.cpu_power[b.clusters[k].core_type]["idle_w"]
                                     / len(b.clusters[k].cores) for k in b.core_cluster])
        self.core_busy_w = [np.array([b.core_busy_w(k, f) for f in c.freq_mhz]) for k, c in enumerate(b.clusters)]
        # GPU: P_idle(f_g) and P(f_g, A) measured with every task on the GPU at the host's highest clock
        self.gpu_idle_w = np.array([b.gpu_idle_w(fg) for fg in self.gpu_levels])
        self.gpu_all_w = np.zeros(len(self.gpu_levels))
        for j, fg in enumerate(self.gpu_levels):
            t, c, m = b.gpu_task_parts(hl[-1], fg)
            self.gpu_all_w[j] = b.gpu_power_w(fg, c.sum() / t.sum(), m.sum() / t.sum())
        g = b.graph
        self._src, self._dst = g.src, g.dst
        self.genome_highs = [self.cores - 1] * self.n + [len(l) - 1 for l in self.levels] + [len(self.gpu_levels) - 1]

    @property
    def genome_length(self) -> int:
        return self.n + len(self.levels) + 1

    # -- genomes --------------------------------------------------------------------------------------------
    def genome(self, mapping, clk: Clocks) -> np.ndarray:
        """The genome of a mapping (core per task) at ``clk``."""
        m = self.board._check(mapping)
        lv = [int(np.flatnonzero(self.levels[k] == clk.cluster(c.name))[0]) for k, c in enumerate(self.board.clusters)]
        return np.array([*m, *lv, int(np.flatnonzero(self.gpu_levels == clk.gpu_mhz)[0])])

    def decode(self, genome) -> tuple[np.ndarray, Clocks]:
        g = np.asarray(genome, dtype=int)
        cl = self.board.clusters
        return g[:self.n].copy(), Clocks(tuple((c.name, float(self.levels[k][g[self.n + k]]))
                                               for k, c in enumerate(cl)), float(self.gpu_levels[g[-1]]))

    def check(self, G) -> np.ndarray:
        G = np.atleast_2d(np.asarray(G))
        if G.shape[1] != self.genome_length or not np.issubdtype(G.dtype, np.integer):
            raise DseError(f"genomes are {self.genome_length} integers (cores per task, a level per cluster, the "
                           f"GPU level), got shape {G.shape}")
        if (G < 0).any() or (G > np.array(self.genome_highs)).any():
            raise DseError(f"a gene is out of range; upper bounds: {self.genome_highs}")
        return G

    # -- Eqs. 1-13 ------------------------------------------------------------------------------------------
    def evaluate(self, G) -> Objectives:
        G = self.check(G)
        pop, n, P = G.shape[0], self.n, self.cores
        M = G[:, :n]
        lv = G[:, n:n + len(self.levels)]
        gl = G[:, -1]
        tasks = np.arange(n)[None, :]
        cl = self.board.core_cluster[M]                                     # [pop, n] cluster of each task's core
        on_gpu = M == self.board.gpu_core
        t = np.zeros((pop, n))
        tok = np.zeros((pop, n))
        for k in range(len(self.levels)):
            sel = cl == k
            lvk = np.broadcast_to(lv[:, k:k + 1], (pop, n))
            t = np.where(sel, self.cpu_tau[k][lvk, tasks], t)
            tok = np.where(sel, self.token_tau[k][lvk, tasks], tok)
        hlv = np.broadcast_to(lv[:, self.host_cluster:self.host_cluster + 1], (pop, n))
        glv = np.broadcast_to(gl[:, None], (pop, n))
        t = np.where(on_gpu, self.off_tau[hlv, glv, tasks], t)
        gpu_t = np.where(on_gpu, self.gpu_tau[hlv, glv, tasks], 0.0)
        if self.comm == "cross_core_only":
            crossing = np.zeros((pop, n))                                   # cross-core edges per task
            c = (M[:, self._src] != M[:, self._dst]).astype(float)
            np.add.at(crossing, (slice(None), self._src), c)
            np.add.at(crossing, (slice(None), self._dst), c)
            tok = np.where(crossing > 0, tok, 0.0)
        t = t + np.where(on_gpu, 0.0, tok)
        offset = (np.arange(pop) * P)[:, None]
        per_core = np.bincount((M + offset).ravel(), t.ravel(), minlength=pop * P).reshape(pop, P)
        per_core[:, self.board.gpu_core] += np.where(on_gpu.any(axis=1), self.frame_tau[lv[:, self.host_cluster]], 0.0)
        tau = per_core.max(axis=1)
        T = per_core.sum(axis=1) if self.idle_time == "sum" else tau
        core_lv = lv[:, self.board.core_cluster]                            # [pop, P]
        busy_w = np.stack([self.core_busy_w[k][core_lv[:, c]] for c, k in enumerate(self.board.core_cluster)], 1)
        e_cpu = (self.core_idle_w[None, :] * T[:, None] + busy_w * per_core).sum(axis=1)
        tau_gpu = gpu_t.sum(axis=1)
        e_gpu = self.gpu_idle_w[gl] * T + (self.gpu_all_w[gl] - self.gpu_idle_w[gl]) * tau_gpu
        with np.errstate(divide="ignore"):
            fps = np.where(tau > 0, 1e6 / tau, 0.0)
        return Objectives(fps=fps, energy_j=(e_cpu + e_gpu) * 1e-6, period_us=tau)


__all__ = ["COMM_MODES", "IDLE_TIMES", "Objectives", "TangModel"]
