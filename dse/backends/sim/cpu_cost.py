"""Per-layer costs of the per-layer-mapping boards (seeds 002 Kang et al., 004 Ha et al.): a layer on a group of k
big CPU cores, an NPU estimated from the CPU, and tensor transfers between PE kinds.

CPU, as ACL's NEON layers run (002 Sec. IV-A, Table 2): a layer is a few kernels run one after another (a
convolution: im2col, GEMM, col2im; an activation, a pool, an add: one each). On one core at the core type's
highest frequency ``fmax`` (``cost.cpu.<core type>``)::

    t(1) = launch_us[kind] + macs / (peak_gmacs * efficiency[kind])
           + (in_bytes + param_bytes + out_passes[kind] * out_bytes) / bandwidth_gbs

and on a group of k cores at frequency f (002 L140: frequency by busy cores; Table 1/2: every kernel joins its
threads, a cost that does not shrink with the layer)::

    t(k) = t(1) * fmax / f / (k * parallel_efficiency[k]) + sync_us * (k - 1) * kernels[kind]

The parameters of the virtual boards are fitted by ``bench/layermap_calibration.py --fit``.
"""
from __future__ import annotations

import numpy as np

from dse.core.errors import DseError, choices_error
from dse.graph.analysis import Layer
from dse.platform import SIZE_UNITS, TIME_UNITS, Platform

BYTES_SCALE = {"fp32": 1.0, "fp16": 0.5, "int8": 0.25}
FREE_OPS = frozenset({"Flatten", "Reshape", "Squeeze", "Unsqueeze", "Identity", "Dropout"})
POOL_OPS = frozenset({"MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "LpPool"})
# kernels ACL runs per layer of a kind: a GEMM convolution is im2col + GEMM + col2im (002 Table 2; its
# activation is its own layer here); a depthwise convolution is one direct kernel
KERNELS = {"conv": 3, "conv_1x1": 3, "conv_grouped": 3, "conv_depthwise": 1, "gemm": 1, "pool": 1, "eltwise": 1,
           "concat": 1, "free": 0}


def cpu_kind(layer: Layer) -> str:
    """The op kind the CPU cost model distinguishes (``dse.platform.CPU_OP_KINDS``, or ``free``)."""
    op = layer.op_type
    if op in ("Conv", "ConvTranspose"):
        group = int(layer.attrs.get("group", 1) or 1)
        out_c = layer.output_shapes[0][1] if layer.output_shapes and len(layer.output_shapes[0]) > 1 else 0
        if group > 1:
            return "conv_depthwise" if out_c and group >= out_c else "conv_grouped"
        return "conv_1x1" if max(layer.attrs.get("kernel_shape") or [1]) <= 1 else "conv"
    if op in ("Gemm", "MatMul"):
        return "gemm"
    if op in POOL_OPS:
        return "pool"
    if op == "Concat":
        return "concat"
    if op in FREE_OPS:
        return "free"
    return "eltwise"


def _core_type(platform: Platform, core_type: str | None) -> str:
    if core_type is not None:
        return core_type
    big = platform.big_cluster
    if big is None:
        raise DseError(f"platform {platform.name} declares no cpu.clusters: the CPU cost model needs the core type")
    return big.core_type


def cpu_layer_us(platform: Platform, layer: Layer, cores: int, precision: str = "fp32", *,
                 active_cores: int | None = None, core_type: str | None = None) -> float:
    """Time (us) of one analysed layer on a group of ``cores`` cores of the big cluster (or ``core_type``).

    The frequency is the platform's frequency while ``active_cores`` big cores are busy, by default ``cores``:
    the time a profiler would see running the layer alone (002 L140). Pass ``active_cores`` = all big cores for
    002's "all cores busy" correction. Layers that only reshape cost nothing."""
    kind = cpu_kind(layer)
    if kind == "free":
        return 0.0
    ctype = _core_type(platform, core_type)
    costs = platform.cost.cpu if platform.cost is not None else {}
    if ctype not in costs:
        raise DseError(f"platform {platform.name} has no cost.cpu parameters for core type {ctype!r}"
                       + (f"; it has: {', '.join(sorted(costs))}" if costs else ""))
    c = costs[ctype]
    if cores not in c.parallel_efficiency:
        raise choices_error(f"core count on platform {platform.name}", cores, c.parallel_efficiency)
    if precision not in c.peak_gmacs:
        raise choices_error(f"CPU precision on platform {platform.name}", precision, c.peak_gmacs)
    cluster = next(cl for cl in platform.cpu_clusters if cl.core_type == ctype)   # cost.cpu keys are cluster types
    fmax = cluster.max_freq_mhz
    f = platform.cpu_freq_mhz_at(active_cores or cores) if cluster is platform.big_cluster else fmax

    compute = 0.0
    if layer.macs and kind in c.efficiency:
        compute = layer.macs / (c.peak_gmacs[precision] * 1e3 * c.efficiency[kind])
    scale = BYTES_SCALE.get(precision, 1.0)
    moved = (layer.input_bytes + layer.param_bytes + c.out_passes.get(kind, 1.0) * layer.activation_bytes) * scale
    t1 = c.launch_us.get(kind, 0.0) + compute + moved / (c.bandwidth_gbs * 1e3)
    return t1 * fmax / f / (cores * c.parallel_efficiency[cores]) + c.sync_us * (cores - 1) * KERNELS[kind]


def npu_us(platform: Platform, cpu_ref_us: float) -> float:
    """NPU time from the CPU time on ``cost.npu.reference_cores`` cores: ``t / speedup`` (002 L180: 6.5x the
    quad-core CPU)."""
    npu = platform.cost.npu if platform.cost is not None else None
    if npu is None:
        raise DseError(f"platform {platform.name} has no NPU cost (cost.npu)")
    return float(cpu_ref_us) / npu.speedup


def transfer_us(platform: Platform, nbytes: float, src_kind: str, dst_kind: str) -> float:
    """Time (us) to hand ``nbytes`` from a PE of ``src_kind`` to one of ``dst_kind`` (``cpu1``..``cpuK``, ``gpu``,
    ``npu``, ``dla``). Same-PE hand-overs are free; telling them apart is the caller's business.

    ``linear`` model: ``fixed_us + bytes / bandwidth``. ``poly`` (002 L168-180): CPU->CPU = memcpy,
    accelerator->CPU = map + memcpy, CPU->accelerator = map + memcpy + unmap (CPU<->NPU as CPU<->GPU); between
    two accelerators the tensor goes through host memory (accelerator->CPU, then CPU->accelerator)."""
    src, _ = platform.parse_pe_kind(src_kind)
    dst, _ = platform.parse_pe_kind(dst_kind)
    if nbytes < 0:
        raise DseError(f"transfer of {nbytes} bytes: the size must not be negative")
    m = platform.comm
    if m.model == "linear":
        return m.fixed_us + nbytes / (m.bandwidth_gbs * 1e3)
    size = nbytes / SIZE_UNITS[m.size_unit]
    memcpy, map_, unmap = (max(0.0, float(np.polyval(p, size))) * TIME_UNITS[m.time_unit]
                           for p in (m.memcpy, m.map, m.unmap))
    if src == "cpu" and dst == "cpu":
        return memcpy
    if src == "cpu":
        return map_ + memcpy + unmap
    if dst == "cpu":
        return map_ + memcpy
    return (map_ + memcpy) + (map_ + memcpy + unmap)


def layer_times_us(platform: Platform, analysis, kind: str, precision: str = "fp32", *,
                   active_cores: int | None = None) -> np.ndarray:
    """Per layer of an analysed network (``dse.graph.analysis.NetworkAnalysis``), its time (us) on one PE kind:
    ``cpuK`` by ``cpu_layer_us``, ``gpu`` by the sim's GPU cost model (an activation fused into its convolution
    costs nothing there), ``npu`` by ``npu_us`` of the reference core group. Their sum is the kind-only time."""
    pe_type, k = platform.parse_pe_kind(kind)
    if pe_type == "cpu":
        return np.array([cpu_layer_us(platform, layer, k, precision, active_cores=active_cores)
                         for layer in analysis.layers])
    if pe_type == "npu":
        ref = platform.cost.npu.reference_cores if platform.cost and platform.cost.npu else 4
        return np.array([npu_us(platform, cpu_layer_us(platform, layer, ref, precision, active_cores=active_cores))
                         for layer in analysis.layers])
    from dse.backends.sim.cost import CostModel
    from dse.graph.layers import frame_of, layer_table

    table = layer_table(frame_of(analysis), digest=getattr(analysis, "digest", None))
    return CostModel(platform, table).per_layer(pe_type, precision, 1).t.copy()


class PlatformComm:
    """``transfer_us`` of a board as the comm callable of ``dse.systems.layermap.AnalyticModel`` (vectorized over sizes);
    ``cpu_cpu=False``: CPU<->CPU hand-overs are free (004's ILP charges CPU<->GPU transfers only)."""

    def __init__(self, platform: Platform, cpu_cpu: bool = True):
        self.platform, self.cpu_cpu = platform, cpu_cpu

    def __call__(self, nbytes, src: str, dst: str) -> np.ndarray:
        nb = np.asarray(nbytes, dtype=float)
        if not self.cpu_cpu and src.startswith("cpu") and dst.startswith("cpu"):
            return np.zeros_like(nb)
        return np.array([transfer_us(self.platform, float(x), src, dst) for x in nb.ravel()]).reshape(nb.shape)


__all__ = ["KERNELS", "PlatformComm", "cpu_kind", "cpu_layer_us", "layer_times_us", "npu_us", "transfer_us"]
