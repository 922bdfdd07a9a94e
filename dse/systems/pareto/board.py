"""The virtual clocked board of seed 001 (Tang et al., Jetson TX2): what a per-layer mapping plus CPU-cluster and
GPU clocks cost in time and rail energy per image.

A mapping puts each task (a layer, fused chains folded: ``dse.taskgraph.graph``) on one CPU core; the tasks
on the GPU's host core run on the GPU and that core drives them (001 L73). The platform's ``clocked`` section
and ``cost`` hold the parameters (fitted to 001 Table 2 by ``python -m bench.tx2_calibration --fit``):

- CPU task on a core of cluster c at f: ``t = t_fmax * fmax / f`` (``dse.backends.sim.cpu_cost`` per core type),
  plus its FIFO token traffic ``host.token_ns`` per byte read and written at fmax, scaled the same way
  (Eq. 7's tau_r/tau_w: the SDF runtime moves every token through the CPU).
- GPU layer at (f_cpu, f_gpu): ``max(compute, memory) + launch_us`` (``cost.gpu``) with compute = MACs / (peak x
  efficiency)
  x fmax_gpu / f_gpu (3x3 stride-1 convolutions are Winograd kernels: ``efficiency.winograd`` may exceed 1), and
  memory = bytes / (bandwidth x emc(f_cpu) x min(1, f_gpu / knee)^exponent): below the knee a slow GPU cannot
  keep enough requests in flight, and the memory clock floor follows the CPU clock (Tegra's CPU-to-EMC
  scaling), ``emc = min(1, floor + (1 - floor) f_cpu / knee_mhz)``.
- A task on the GPU occupies its host core for ``((host)^k + (gpu)^k)^(1/k)``: the core moves the task's tokens
  while the GPU runs its kernels (k = ``host.overlap``; k -> inf is a plain max). The host core also pays
  ``frame_us * fmax / f_cpu`` per image when it drives any GPU task (input, output, synchronization).
- The period is the busiest core; rail power is CPU idle + a busy term per core (``busy_w (f/fmax)^exponent``
  times its busy share), GPU idle ``idle_min + (idle_max - idle_min) (f/fmax)^2`` + its compute share times
  ``busy_w (f/fmax)^exponent``, memory ``memory_w`` times the GPU's memory-bound share. Energy per image =
  power x period. Only CPU and GPU rails count (001 Eq. 8: Table 2's powers are 0.9-8.3 W).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from dse.core.validate import check_keys
from dse.core.errors import DseError, choices_error
from dse.platform import Platform

SECTION_KEYS = ("host_cluster", "gpu", "emc", "host", "power")
GPU_KEYS = ("mem_knee_mhz", "mem_exponent")
EFFICIENCY_KINDS = ("winograd", "conv", "gemm")      # of cost.gpu.efficiency
HOST_KEYS = ("token_ns", "frame_us", "overlap")
EMC_KEYS = ("floor", "knee_mhz")
POWER_KEYS = ("cpu", "gpu", "memory_w")
CPU_POWER_KEYS = ("idle_w", "busy_w", "exponent")
GPU_POWER_KEYS = ("idle_min_w", "idle_max_w", "busy_w", "exponent")


def _keys(d, valid, where: str) -> dict:
    d = dict(d or {})
    check_keys(d, valid, f"key of {where}")
    missing = [k for k in valid if k not in d]
    if missing:
        raise DseError(f"{where}: missing {', '.join(missing)}")
    return d


@dataclass(frozen=True)
class ClockedParams:
    """The checked ``clocked`` section of a platform profile."""

    host_cluster: str
    gpu: dict
    efficiency: dict
    emc: dict
    host: dict
    cpu_power: dict      # core type -> {idle_w, busy_w, exponent}
    gpu_power: dict
    memory_w: float

    @classmethod
    def of(cls, platform: Platform) -> "ClockedParams":
        where = f"platform {platform.name} clocked"
        d = (platform.raw or {}).get("clocked")
        if not d:
            raise DseError(f"platform {platform.name} has no clocked section: energy/frequency mapping (seed 001) "
                           f"needs a board with per-cluster CPU clocks, a GPU clock table and rail powers "
                           f"(e.g. platform=tx2-sim)")
        d = _keys(d, SECTION_KEYS, where)
        types = {c.core_type for c in platform.cpu_clusters}
        host = str(d["host_cluster"])
        names = [c.name for c in platform.cpu_clusters]
        if host not in names:
            raise choices_error(f"{where}.host_cluster", host, names)
        gpu = _keys(d["gpu"], GPU_KEYS, f"{where}.gpu")
        base = platform.cost.gpu if platform.cost is not None else None
        missing = [k for k in EFFICIENCY_KINDS if base is None or k not in base.efficiency]
        if missing or "fp32" not in base.peak_gmacs:
            raise DseError(f"platform {platform.name}: the clocked GPU model needs cost.gpu.peak_gmacs.fp32 and "
                           f"cost.gpu.efficiency.{{{', '.join(EFFICIENCY_KINDS)}}}")
        gpu.update(peak_gmacs=base.peak_gmacs["fp32"], bandwidth_gbs=base.bandwidth_gbs, layer_us=base.launch_us)
        eff = {k: base.efficiency[k] for k in EFFICIENCY_KINDS}
        power = _keys(d["power"], POWER_KEYS, f"{where}.power")
        cpu_power = {}
        for t in types:
            if t not in (power["cpu"] or {}):
                raise DseError(f"{where}.power.cpu: no entry for core type {t!r} (has: {', '.join(power['cpu'])})")
            cpu_power[t] = {k: float(v) for k, v in _keys(power["cpu"][t], CPU_POWER_KEYS,
                                                         f"{where}.power.cpu.{t}").items()}
        p = cls(host_cluster=host, gpu={k: float(v) for k, v in gpu.items()},
                efficiency={k: float(v) for k, v in eff.items()},
                emc={k: float(v) for k, v in _keys(d["emc"], EMC_KEYS, f"{where}.emc").items()},
                host={k: float(v) for k, v in _keys(d["host"], HOST_KEYS, f"{where}.host").items()},
                cpu_power=cpu_power,
                gpu_power={k: float(v) for k, v in _keys(power["gpu"], GPU_POWER_KEYS, f"{where}.power.gpu").items()},
                memory_w=float(power["memory_w"]))
        positive = [("gpu.peak_gmacs", p.gpu["peak_gmacs"]), ("gpu.bandwidth_gbs", p.gpu["bandwidth_gbs"]),
                    ("gpu.mem_knee_mhz", p.gpu["mem_knee_mhz"]), ("emc.knee_mhz", p.emc["knee_mhz"]),
                    ("host.overlap", p.host["overlap"]), *((f"gpu.efficiency.{k}", v) for k, v in p.efficiency.items())]
        bad = [(k, v) for k, v in positive if not v > 0]
        if bad:
            raise DseError(f"{where}.{bad[0][0]} must be > 0, got {bad[0][1]}")
        if not 0.0 <= p.emc["floor"] <= 1.0:
            raise DseError(f"{where}.emc.floor must be in [0, 1], got {p.emc['floor']}")
        return p


@dataclass(frozen=True)
class Clocks:
    """One frequency per CPU cluster (by cluster name) and the GPU's, in MHz, each a level of the board's tables."""

    cpu_mhz: tuple[tuple[str, float], ...]
    gpu_mhz: float

    def cluster(self, name: str) -> float:
        return dict(self.cpu_mhz)[name]


def gpu_levels(platform: Platform) -> tuple[float, ...]:
    gpu = platform.pes[platform.main_pe]
    if not gpu.freq_mhz:
        raise DseError(f"platform {platform.name}: the GPU {platform.main_pe} declares no freq_mhz table")
    return tuple(sorted(float(f) for f in gpu.freq_mhz))


def clocks(platform: Platform, cpu_mhz=None, gpu_mhz=None) -> Clocks:
    """Checked clocks: ``cpu_mhz`` one value for every cluster or {cluster: MHz}; None = the highest level."""
    levels = gpu_levels(platform)
    g = levels[-1] if gpu_mhz is None else float(gpu_mhz)
    if g not in levels:
        raise choices_error(f"GPU frequency (MHz) of platform {platform.name}", f"{g:g}", [f"{x:g}" for x in levels])
    if cpu_mhz is None or not isinstance(cpu_mhz, dict):
        cpu_mhz = {c.name: cpu_mhz for c in platform.cpu_clusters}
    unknown = sorted(set(cpu_mhz) - {c.name for c in platform.cpu_clusters})
    if unknown:
        raise choices_error(f"CPU cluster of platform {platform.name}", unknown[0], [c.name for c in platform.cpu_clusters])
    out = []
    for c in platform.cpu_clusters:
        f = cpu_mhz.get(c.name)
        f = c.max_freq_mhz if f is None else float(f)
        if f not in c.freq_mhz:
            raise choices_error(f"frequency (MHz) of CPU cluster {c.name} on platform {platform.name}", f"{f:g}",
                                [f"{x:g}" for x in c.freq_mhz])
        out.append((c.name, f))
    return Clocks(tuple(out), g)


class ClockedBoard:
    """Per-task costs of one network on a clocked board, and the board's measurement of (mapping, clocks).

    Cores are numbered 0..n-1 in cluster order; core 0 of ``host_cluster`` hosts the GPU (``gpu_core``)."""

    def __init__(self, platform: Platform, analysis, precision: str = "fp32"):
        from dse.backends.sim.cpu_cost import cpu_kind, cpu_layer_us
        from dse.taskgraph.graph import build_task_graph

        if precision != "fp32":
            raise choices_error(f"precision of the clocked board {platform.name} (seed 001 runs fp32)", precision,
                                ["fp32"])
        self.platform, self.params = platform, ClockedParams.of(platform)
        self.graph = build_task_graph(analysis, precision)
        self.model_digest = analysis.digest
        layers = analysis.layers
        self.clusters = platform.cpu_clusters
        self.core_cluster = np.array([k for k, c in enumerate(self.clusters) for _ in c.cores])
        host = [c.name for c in self.clusters].index(self.params.host_cluster)
        self.gpu_core = int(np.flatnonzero(self.core_cluster == host)[0])
        self.gpu_levels = gpu_levels(platform)
        task_of = self.graph.task_of_layer()
        n = self.graph.n
        # per task: CPU time at each cluster's fmax (one core), token bytes it reads and writes
        self.cpu_us_fmax = np.zeros((len(self.clusters), n))
        for k, c in enumerate(self.clusters):
            per_layer = [cpu_layer_us(platform, l, 1, precision, core_type=c.core_type) for l in layers]
            np.add.at(self.cpu_us_fmax[k], task_of, per_layer)
        self.token_bytes = np.zeros(n)
        for e in range(len(self.graph.src)):
            self.token_bytes[self.graph.src[e]] += self.graph.nbytes[e]
            self.token_bytes[self.graph.dst[e]] += self.graph.nbytes[e]
        # per costed GPU layer: its task, compute us at the GPU's fmax, bytes moved
        gp, eff = self.params.gpu, self.params.efficiency
        rows = []
        for l in layers:
            kind = cpu_kind(l)
            if kind == "free":
                continue
            winograd = kind == "conv" and max(l.attrs.get("kernel_shape") or [1]) == 3 \
                and max(l.attrs.get("strides") or [1]) == 1
            e = eff["winograd"] if winograd else eff["gemm"] if kind == "gemm" else eff["conv"]
            rows.append((task_of[l.index], l.macs / (gp["peak_gmacs"] * 1e3 * e),
                         l.input_bytes + l.param_bytes + l.activation_bytes))
        self._gl_task = np.array([r[0] for r in rows], dtype=int)
        self._gl_compute = np.array([r[1] for r in rows])
        self._gl_bytes = np.array([r[2] for r in rows], dtype=float)

    @property
    def n_tasks(self) -> int:
        return self.graph.n

    @property
    def n_cores(self) -> int:
        return len(self.core_cluster)

    # -- per-task tables ------------------------------------------------------------------------------------
    def emc(self, host_mhz: float) -> float:
        e = self.params.emc
        return min(1.0, e["floor"] + (1.0 - e["floor"]) * host_mhz / e["knee_mhz"])

    def gpu_task_parts(self, host_mhz: float, gpu_mhz: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per task on the GPU: (time us, compute-bound us, memory-bound us) at these clocks."""
        gp, n = self.params.gpu, self.n_tasks
        comp = self._gl_compute * (self.gpu_levels[-1] / gpu_mhz)
        slow = min(1.0, gpu_mhz / gp["mem_knee_mhz"]) ** gp["mem_exponent"]
        mem = self._gl_bytes / (gp["bandwidth_gbs"] * 1e3 * self.emc(host_mhz) * slow)
        t = np.maximum(comp, mem) + gp["layer_us"]
        out = [np.bincount(self._gl_task, w, minlength=n) for w in (t, np.where(comp >= mem, comp, 0.0),
                                                                     np.where(comp >= mem, 0.0, mem))]
        return out[0], out[1], out[2]

    def cpu_task_us(self, cluster: int, mhz: float) -> np.ndarray:
        """Per task on one core of a cluster at ``mhz``: compute + its token traffic."""
        return self.cpu_us_fmax[cluster] * self.clusters[cluster].max_freq_mhz / mhz + self.token_us(mhz)

    def token_us(self, mhz: float) -> np.ndarray:
        """Per task: reading and writing its FIFO tokens on a core at ``mhz`` (001 Eq. 7)."""
        fmax = max(c.max_freq_mhz for c in self.clusters)
        return self.token_bytes * self.params.host["token_ns"] * 1e-3 * fmax / mhz

    def offload_us(self, gpu_task_us: np.ndarray, host_mhz: float) -> np.ndarray:
        """Per task on the GPU: the time its host core spends on it (token traffic overlapped with the kernels)."""
        k = self.params.host["overlap"]
        return (self.token_us(host_mhz) ** k + gpu_task_us ** k) ** (1.0 / k)

    def host_frame_us(self, host_mhz: float) -> float:
        fmax = self.clusters[self.core_cluster[self.gpu_core]].max_freq_mhz
        return self.params.host["frame_us"] * fmax / host_mhz

    # -- the board ------------------------------------------------------------------------------------------
    def measure(self, mapping, clk: Clocks, rng: np.random.Generator | None = None) -> dict:
        """FPS, J/image, average rail power and per-core busy time of one mapping (core id per task) at
        ``clk``; ``rng`` draws the platform's measurement noise (None: the noiseless board)."""
        m = self._check(mapping)
        core_mhz = np.array([clk.cluster(self.clusters[k].name) for k in self.core_cluster])
        busy = np.zeros(self.n_cores)
        for core in set(m.tolist()) - {self.gpu_core}:
            busy[core] = self.cpu_task_us(self.core_cluster[core], core_mhz[core])[m == core].sum()
        gpu_busy = comp = mem = 0.0
        on = m == self.gpu_core
        if on.any():
            f = core_mhz[self.gpu_core]
            t, c, mm = self.gpu_task_parts(f, clk.gpu_mhz)
            gpu_busy, comp, mem = t[on].sum(), c[on].sum(), mm[on].sum()
            busy[self.gpu_core] = self.offload_us(t, f)[on].sum() + self.host_frame_us(f)
        period = float(busy.max())
        if rng is not None:
            period *= float(np.exp(rng.normal(0.0, self.platform.noise_sigma)))
        power = self.power_w(busy / period, core_mhz, clk.gpu_mhz, comp / period, mem / period)
        if rng is not None:
            power *= float(np.exp(rng.normal(0.0, self.platform.noise_sigma / 2)))
        return {"fps": 1e6 / period, "energy_j": power * period * 1e-6, "power_w": power, "period_us": period,
                "core_busy_us": busy, "gpu_busy_us": gpu_busy}

    def power_w(self, core_share, core_mhz, gpu_mhz: float, compute_share: float, memory_share: float) -> float:
        """CPU + GPU rail power: idle terms, busy cores, GPU compute and memory activity."""
        watts = sum(self.params.cpu_power[c.core_type]["idle_w"] for c in self.clusters)
        for core, share in enumerate(core_share):
            watts += min(1.0, share) * self.core_busy_w(self.core_cluster[core], core_mhz[core])
        return watts + self.gpu_power_w(gpu_mhz, compute_share, memory_share)

    def core_busy_w(self, cluster: int, mhz: float) -> float:
        """What one busy core of a cluster adds to the CPU rail at ``mhz``."""
        c = self.clusters[cluster]
        cp = self.params.cpu_power[c.core_type]
        return cp["busy_w"] * (mhz / c.max_freq_mhz) ** cp["exponent"]

    def gpu_power_w(self, gpu_mhz: float, compute_share: float, memory_share: float) -> float:
        """GPU rail (idle at its clock + compute activity) plus the memory the GPU keeps busy."""
        gp = self.params.gpu_power
        busy = gp["busy_w"] * (gpu_mhz / self.gpu_levels[-1]) ** gp["exponent"] * min(1.0, compute_share)
        return self.gpu_idle_w(gpu_mhz) + busy + self.params.memory_w * min(1.0, memory_share)

    def gpu_idle_w(self, gpu_mhz: float) -> float:
        gp = self.params.gpu_power
        return gp["idle_min_w"] + (gp["idle_max_w"] - gp["idle_min_w"]) * (gpu_mhz / self.gpu_levels[-1]) ** 2

    def _check(self, mapping) -> np.ndarray:
        m = np.asarray(mapping)
        if m.shape != (self.n_tasks,) or not np.issubdtype(m.dtype, np.integer):
            raise DseError(f"a mapping is {self.n_tasks} integer core ids (one per task), got shape {m.shape}")
        if m.min() < 0 or m.max() >= self.n_cores:
            raise choices_error(f"core id on platform {self.platform.name}", int(m[(m < 0) | (m >= self.n_cores)][0]),
                                list(range(self.n_cores)))
        return m

    @cached_property
    def gpu_only(self) -> np.ndarray:
        """The TensorRT reference mapping: every task on the GPU, driven by its host core (001 L216)."""
        return np.full(self.n_tasks, self.gpu_core)


__all__ = ["ClockedBoard", "ClockedParams", "Clocks", "clocks", "gpu_levels"]
