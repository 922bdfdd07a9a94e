"""Cost model: time of a layer range (one pipeline stage) on a GPU or a DLA core.

Per layer: roofline-ish ``max(compute, memory) + launch`` with an efficiency per op kind (grouped and
depthwise convolutions are poor, worst on the DLA), TensorRT-like fusion (an activation folded into its
convolution costs nothing), free concatenation. A DLA stage is split at every layer the DLA cannot run
(GPU fallback): each DLA run is one loadable, each boundary adds a GPU-side reformat: of a loadable's input
and of its output, also where the output feeds a fallback layer (DLA outputs only DLA formats: TensorRT's "I/O
Formats on DLA"). The result of a stage is a list of phases (GPU or DLA, duration, GPU occupancy) that the DES
executes in order.
A PE with an on-chip convolution buffer (``buffer_kb``, the DLA's CBUF) streams a convolution's weights once per
image, and once per input slice, when they do not fit half of it (NVDLA's compiler, nvdla/sw ``ConvCoreNode``:
8 + 8 banks for input and weights; split-K weights are not reused across partial-H slices or batch images); the
extra bytes join the memory side of the roofline, so they cost time only where they outweigh the compute.
Per-layer arrays are cached per (PE type, precision, batch) as prefix sums: a stage costs O(segments).

``sm_fraction`` (seed 003: a task on 4 of the Xavier's 8 SMs) runs the GPU layers on that share of the SMs: a
layer that filled ``occ`` of the whole GPU keeps its speed while ``occ <= sm_fraction`` and is slowed by
``occ / sm_fraction`` beyond; memory bandwidth and launch costs stay as they are.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from dse.graph.layers import LayerTable
from dse.dla.rules import reason_counts
from dse.platform import PECost, Platform

BYTES_SCALE = {"fp32": 1.0, "fp16": 0.5, "int8": 0.25}


@dataclass(frozen=True)
class Phase:
    """One piece of a stage execution: on the GPU (sharing it, with an occupancy) or on the stage's DLA core."""

    resource: str        # "gpu" | "dla" | "host" (a wait that holds the stream but no PE)
    us: float
    occupancy: float = 1.0
    label: str = ""


@dataclass
class StageCost:
    first: int
    last: int
    pe_type: str
    phases: tuple[Phase, ...]
    loadables: int = 0
    fallback_layers: int = 0
    fallback_ids: list[int] = field(default_factory=list)
    fallback_us: float = 0.0     # GPU time of the fallback layers of a DLA stage
    reformat_us: float = 0.0     # GPU-side copies at the DLA <-> GPU boundaries of a DLA stage
    kernels: int = 0             # GPU kernels one execution launches (fused layers, fallback layers, reformats)

    @property
    def total_us(self) -> float:
        """PE time of one execution (GPU + DLA phases); the hand-over wait holds only the stream (``handover_us``)."""
        return float(sum(p.us for p in self.phases if p.resource != "host"))

    @property
    def handover_us(self) -> float:
        return float(sum(p.us for p in self.phases if p.resource == "host"))

    @property
    def gpu_us(self) -> float:
        return float(sum(p.us for p in self.phases if p.resource == "gpu"))

    @property
    def dla_us(self) -> float:
        return float(sum(p.us for p in self.phases if p.resource == "dla"))

    def summary(self) -> dict:
        return {"first": self.first, "last": self.last, "pe_type": self.pe_type, "total_us": self.total_us,
                "gpu_us": self.gpu_us, "dla_us": self.dla_us, "loadables": self.loadables,
                "fallback_layers": self.fallback_layers,
                "phases": [[p.resource, round(p.us, 3), round(p.occupancy, 4), p.label] for p in self.phases]}


@dataclass
class _PerLayer:
    t: np.ndarray        # us per layer (whole batch)
    occ_t: np.ndarray    # t * occupancy
    cum_t: np.ndarray    # prefix sums with a leading 0
    cum_occ: np.ndarray
    cum_bytes: np.ndarray  # DRAM bytes the roofline moves per layer (whole batch), prefix sums with a leading 0
    cum_kernels: np.ndarray  # kernels launched (layers that cost time), prefix sums with a leading 0


class CostModel:
    """Stage costs of one network (a LayerTable) on one platform; ``scale`` rescales spatial sizes."""

    def __init__(self, platform: Platform, table: LayerTable, scale: float = 1.0, sm_fraction: float = 1.0):
        if not 0 < sm_fraction <= 1:
            raise ValueError(f"sm_fraction must be in (0, 1], got {sm_fraction!r}")
        self.platform = platform
        self.table = table
        self.scale = float(scale)
        self.sm_fraction = float(sm_fraction)
        self._cache: dict[tuple, _PerLayer] = {}
        rules = platform.dla_rules
        # the DLA rules' verdict per layer (None without a DLA): what runs where, and why not
        self.dla_verdicts = rules.verdicts(table) if rules is not None else None
        self.dla_ok = np.array([v.on_dla for v in self.dla_verdicts] if self.dla_verdicts else [False] * table.n,
                               dtype=bool)
        # An unsupported layer nothing reads (a detection head feeding only network outputs) runs on the GPU
        # but does not split the DLA subgraph: TensorRT's DLA partitions are connected components.
        leaf = table.leaf if table.leaf is not None else np.zeros(table.n, dtype=bool)
        self._unsupported = np.flatnonzero(~self.dla_ok & ~leaf)
        self._leaf_fallback = np.flatnonzero(~self.dla_ok & leaf)

    # ---- per layer -------------------------------------------------------------------------------
    def fallback_reasons(self, layer_ids) -> dict[str, int]:
        """Failed DLA rule (``op/feature``) -> count over some fallback layers."""
        if self.dla_verdicts is None:
            return {}
        return reason_counts([v.check for v in self.dla_verdicts], layer_ids)

    def per_layer(self, pe_type: str, precision: str, batch: int) -> _PerLayer:
        key = (pe_type, precision, int(batch))
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        c: PECost = self.platform.cost.for_type(pe_type)
        t = self.table
        s, b = self.scale, int(batch)
        bscale = BYTES_SCALE.get(precision, 1.0)
        peak = c.peak_gmacs.get(precision) or max(c.peak_gmacs.values())
        batch_eff = 1.0 + c.batch_gain * math.log2(max(b, 1))
        eff = np.array([c.efficiency.get(k, c.efficiency.get("conv", 0.4)) if k.startswith("conv") or k == "gemm"
                        else 1.0 for k in t.kind])
        atom = c.channel_atom_by_precision.get(precision, c.channel_atom)
        if atom > 0:  # narrow outputs (DenseNet growth 32) fill a compute tile only partly
            narrow = np.clip(np.where(t.out_channels > 0, t.out_channels, atom) / atom, 0.05, 1.0)
            eff = np.where(eff < 1.0, eff * narrow ** c.channel_exponent, eff)
        compute = np.where(eff < 1.0 + 1e-12, t.macs * b * s / (peak * 1e3 * eff * batch_eff), 0.0)
        if c.saturation_elems > 0:
            occ = np.clip(t.out_elems * b * s / c.saturation_elems, c.min_occupancy, 1.0)
        else:
            occ = np.ones(t.n)
        if pe_type == "gpu" and self.sm_fraction < 1.0:
            compute = compute * np.maximum(1.0, occ / self.sm_fraction)
            occ = np.minimum(1.0, occ / self.sm_fraction)
        is_eltwise = np.array([k in ("eltwise", "head") for k in t.kind])
        compute = np.where(is_eltwise, 0.0, compute)
        mem_bytes = (t.in_bytes + t.out_bytes) * b * s * bscale + t.param_bytes * bscale
        bw = c.bandwidth_gbs * 1e3 * np.where(is_eltwise, c.eltwise_bw_factor, 1.0)
        mem = mem_bytes / bw
        refetch = self._weight_refetch_bytes(c, bscale, b, s)
        mem = mem + refetch / (c.bandwidth_gbs * 1e3)
        work = np.maximum(compute, mem)
        is_concat = np.array([op == "Concat" for op in t.op_types])
        # a concat is free when producers write into its buffer; chained concats (DenseNet) copy
        concat_bytes = t.out_bytes * b * s * bscale * c.concat_copy
        work = np.where(is_concat, concat_bytes / (c.bandwidth_gbs * 1e3), work)
        free = (np.array([k == "free" for k in t.kind]) & ~is_concat) | t.fused
        total = np.where(free, 0.0, work + np.where(is_concat, 0.0, c.launch_us))
        occ_t = np.where(free, 0.0, work * occ + c.launch_us * c.min_occupancy)
        moved = np.where(free, 0.0, np.where(is_concat, concat_bytes, mem_bytes + refetch))
        out = _PerLayer(t=total, occ_t=occ_t, cum_t=np.concatenate([[0.0], np.cumsum(total)]),
                        cum_occ=np.concatenate([[0.0], np.cumsum(occ_t)]),
                        cum_bytes=np.concatenate([[0.0], np.cumsum(moved)]),
                        cum_kernels=np.concatenate([[0], np.cumsum(total > 0)]))
        self._cache[key] = out
        return out

    def _weight_refetch_bytes(self, c: PECost, bscale: float, batch: int, scale: float) -> np.ndarray:
        """Weight bytes read beyond the one read per batch the roofline counts. Weights that fit half the on-chip
        buffer stay there for every input slice and image; larger ones are streamed in kernel groups (split-K),
        once per image, and once per input slice when the input does not fit its half either."""
        t = self.table
        if c.buffer_kb <= 0:
            return np.zeros(t.n)
        half = c.buffer_kb * 1024 / 2
        w = t.param_bytes * bscale
        x = t.in_bytes * scale * bscale
        conv = np.array([k.startswith("conv") for k in t.kind])
        slices = np.where(x > half, np.ceil(x / half), 1.0)
        reads = np.where(conv & (w > half), slices * batch, 1.0)
        return (reads - 1) * w

    def dram_bytes(self, first: int, last: int, pe_type: str, precision: str, batch: int) -> float:
        """DRAM bytes layers first..last move per execution on a PE type: the memory side of their rooflines
        (activations, weights and their re-reads; a copied concat's output; fused layers nothing)."""
        pl = self.per_layer(pe_type, precision, batch)
        return float(pl.cum_bytes[last + 1] - pl.cum_bytes[first])

    def gpu_layer_profile_us(self, precision: str, batch: int) -> np.ndarray:
        return self.per_layer("gpu", precision, batch).t.copy()

    # ---- helpers ---------------------------------------------------------------------------------
    def _range(self, pl: _PerLayer, a: int, b: int) -> tuple[float, float]:
        """(time, occupancy-weighted time) of layers a..b inclusive."""
        return float(pl.cum_t[b + 1] - pl.cum_t[a]), float(pl.cum_occ[b + 1] - pl.cum_occ[a])

    def boundary_bytes(self, cut: int) -> float:
        """fp32 bytes per image crossing a cut after layer ``cut`` (-1 = the network input)."""
        if cut < 0:
            return self.table.input_bytes * self.scale
        return float(self.table.crossing_bytes[cut]) * self.scale

    def reformat_us(self, cut: int, precision: str, batch: int) -> float:
        c = self.platform.cost
        nbytes = self.boundary_bytes(cut) * batch * BYTES_SCALE.get(precision, 1.0)
        return c.reformat_fixed_us + nbytes / (c.reformat_bandwidth_gbs * 1e3)

    def _reformat_occ(self, cut: int, batch: int) -> float:
        g = self.platform.cost.gpu
        if g.saturation_elems <= 0:
            return 1.0
        return float(np.clip(self.boundary_bytes(cut) / 4.0 * batch / g.saturation_elems, g.min_occupancy, 1.0))

    # ---- stages ----------------------------------------------------------------------------------
    def _handover(self, first: int) -> tuple[Phase, ...]:
        """The wait of a stage that starts after a boundary until the runtime notices its input is ready (JEDI's
        stage threads poll stream completion and the next stage's input flags, sleeping 100 us between polls)."""
        us = self.platform.cost.handover_us
        return (Phase("host", us, 0.0, "handover"),) if first > 0 and us > 0 else ()

    def gpu_stage(self, first: int, last: int, precision: str, batch: int) -> StageCost:
        pl = self.per_layer("gpu", precision, batch)
        g = self.platform.cost.gpu
        t, ot = self._range(pl, first, last)
        extra = g.per_inference_us + (self.platform.cost.boundary_us if first > 0 else 0.0)
        total = t + extra
        occ = (ot + extra * g.min_occupancy) / total if total > 0 else g.min_occupancy
        return StageCost(first, last, "gpu", (*self._handover(first), Phase("gpu", total, occ, "infer")),
                         kernels=self._kernels(pl, first, last))

    @staticmethod
    def _kernels(pl: _PerLayer, a: int, b: int) -> int:
        """Kernels of layers a..b inclusive: those that cost time (fused and free layers launch none)."""
        return int(pl.cum_kernels[b + 1] - pl.cum_kernels[a])

    def _leaves(self, first: int, last: int) -> np.ndarray:
        lo, hi = np.searchsorted(self._leaf_fallback, [first, last + 1])
        return self._leaf_fallback[lo:hi]

    def dla_runs(self, first: int, last: int) -> list[tuple[bool, int, int]]:
        """Maximal runs (on_dla, a, b) of layers first..last split at unsupported layers."""
        runs: list[tuple[bool, int, int]] = []
        lo = int(np.searchsorted(self._unsupported, first))
        hi = int(np.searchsorted(self._unsupported, last, side="right"))
        cur = first
        for u in self._unsupported[lo:hi]:
            u = int(u)
            if u > cur:
                runs.append((True, cur, u - 1))
            if runs and not runs[-1][0] and runs[-1][2] == u - 1:
                runs[-1] = (False, runs[-1][1], u)
            else:
                runs.append((False, u, u))
            cur = u + 1
        if cur <= last:
            runs.append((True, cur, last))
        return runs

    def dla_stage(self, first: int, last: int, precision: str, batch: int) -> StageCost:
        pd = self.per_layer("dla", precision, batch)
        pg = self.per_layer("gpu", precision, batch)
        d = self.platform.cost.dla
        g = self.platform.cost.gpu
        phases: list[Phase] = list(self._handover(first))
        loadables = fallback = kernels = 0
        fallback_ids: list[int] = []
        spent = {"reformat": 0.0, "fallback": 0.0}

        def add_gpu(us: float, occ_us: float, label: str):
            spent[label] += us
            if phases and phases[-1].resource == "gpu":
                prev = phases[-1]
                tot = prev.us + us
                occ = (prev.us * prev.occupancy + occ_us) / tot if tot > 0 else prev.occupancy
                phases[-1] = Phase("gpu", tot, occ, prev.label + "+" + label)
            else:
                phases.append(Phase("gpu", us, occ_us / us if us > 0 else g.min_occupancy, label))

        def add_reformat(cut: int, extra_us: float = 0.0):      # the tensor crossing after ``cut``, on the GPU
            nonlocal kernels
            r = self.reformat_us(cut, precision, batch) + extra_us
            add_gpu(r, r * self._reformat_occ(cut, batch), "reformat")
            kernels += 1

        boundary = self.platform.cost.boundary_us if first > 0 else 0.0
        runs = self.dla_runs(first, last)
        for k, (on_dla, a, b) in enumerate(runs):
            if on_dla:
                add_reformat(a - 1, boundary if k == 0 else 0.0)      # its input, to the DLA's format
                t, _ = self._range(pd, a, b)
                leaves = self._leaves(a, b)
                t -= float(sum(pd.cum_t[i + 1] - pd.cum_t[i] for i in leaves))
                phases.append(Phase("dla", t + d.per_inference_us, 1.0, f"loadable{loadables}"))
                loadables += 1
                add_reformat(b)                                       # its output, to the GPU's format
            else:
                t, ot = self._range(pg, a, b)
                extra = g.per_inference_us * 0.5
                if k == 0:
                    extra += boundary
                add_gpu(t + extra, ot + extra * g.min_occupancy, "fallback")
                fallback += b - a + 1
                fallback_ids.extend(range(a, b + 1))
                kernels += self._kernels(pg, a, b)
        leaves = self._leaves(first, last)
        if len(leaves):  # leaf fallback layers: GPU kernels on the DLA loadables' outputs
            t = float(sum(pg.cum_t[i + 1] - pg.cum_t[i] for i in leaves))
            ot = float(sum(pg.cum_occ[i + 1] - pg.cum_occ[i] for i in leaves))
            add_gpu(t, ot, "fallback")
            kernels += sum(self._kernels(pg, i, i) for i in leaves)
            fallback += len(leaves)
            fallback_ids.extend(int(i) for i in leaves)
        return StageCost(first, last, "dla", tuple(phases), loadables=loadables, fallback_layers=fallback,
                         fallback_ids=fallback_ids, fallback_us=spent["fallback"], reformat_us=spent["reformat"],
                         kernels=kernels)

    def stage(self, first: int, last: int, pe_type: str, precision: str, batch: int) -> StageCost:
        if pe_type == "gpu":
            return self.gpu_stage(first, last, precision, batch)
        return self.dla_stage(first, last, precision, batch)

    def whole_network_us(self, pe_type: str, precision: str, batch: int = 1) -> float:
        return self.stage(0, self.table.n - 1, pe_type, precision, batch).total_us
