"""Platform profiles: one model for every board, real or virtual: processing elements, mapping options, limits,
and (for the virtual boards) cost, power and pre/post-processing parameters.

A profile is a YAML file in ``config/platform/`` (or the ``platform`` node of the composed Hydra config).
Jetson profiles declare their PEs (GPU, DLA cores) and options; ``host-cpu`` declares ``options: auto`` and
gets one PE per CPU core group and one option per group configuration of this machine's cores
(``dse.platform.cpu_groups``). Loading validates the profile once, so backends and strategies can trust the
dataclasses; a backend that needs a part a profile lacks (the sim needs ``cost``, ``prepost``, ``power``)
says so by name.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from dse.core.configuration import PRECISIONS
from dse.core.errors import DseError, choices_error
from dse.core.validate import check_keys

if TYPE_CHECKING:
    from dse.dla.rules import DlaRuleSet

PE_TYPES = ("gpu", "dla", "cpu", "npu")
TOP_LEVEL_KEYS = ("name", "backend", "board_model", "toolkit_version", "main_pe", "cpu", "pes", "cost", "dla_rules",
                  "limits", "prepost", "power", "noise", "sim", "options", "extra_options", "cores", "max_groups",
                  "precisions", "transport", "board_costs", "comm", "purpose",
                  # multi-app sim sections, read by dse.backends.sim.tasktime / .periodic (optional)
                  "tasks", "dvfs", "contention",
                  # the clocked board of seed 001 (per-cluster CPU + GPU clocks, rail power), read by dse.systems.pareto.board
                  "clocked",
                  # nvpmodel power modes of a Jetson (clock ceilings, online cores), read by dse.platform.modes
                  "power_modes",
                  # how a real board's agent sets those modes and clocks (nvpmodel, sysfs files), dse.platform.modes
                  "clock_control")
# What a profile is for: the pipeline DSE (stages on PEs, the default) or per-layer mapping only (seeds 002/004:
# boards whose PEs are CPU core groups, a GPU and an NPU, costed per layer by dse.backends.sim.cpu_cost).
PURPOSES = ("pipeline", "layer-mapping")
CPU_KEYS = ("cores", "freq_mhz", "contention", "clusters", "freq_by_active_cores", "stage_thread_cpu",
            "stage_thread_us")
# Op kinds of the CPU cost model (dse.backends.sim.cpu_cost.cpu_kind)
CPU_OP_KINDS = ("conv", "conv_1x1", "conv_depthwise", "conv_grouped", "gemm", "pool", "eltwise", "concat")
COMM_MODELS = ("linear", "poly")
TIME_UNITS = {"us": 1.0, "ms": 1e3, "s": 1e6}
SIZE_UNITS = {"B": 1.0, "KB": 1e3, "MB": 1e6, "KiB": 1024.0, "MiB": 1024.0 ** 2}


@dataclass(frozen=True)
class PE:
    """One processing element: its type, precisions, DVFS table, and its DLA core id or CPU cores."""

    name: str
    type: str
    precisions: tuple[str, ...]
    core: int | None = None            # DLA core id
    cores: tuple[int, ...] = ()        # the CPU cores of a core group
    freq_mhz: tuple[float, ...] = ()

    @property
    def max_freq_mhz(self) -> float:
        return max(self.freq_mhz) if self.freq_mhz else 0.0


@dataclass(frozen=True)
class PECost:
    """Roofline-ish cost parameters of one PE type (see dse.backends.sim.cost)."""

    peak_gmacs: dict[str, float]
    bandwidth_gbs: float
    launch_us: float
    per_inference_us: float
    saturation_elems: float
    min_occupancy: float
    batch_gain: float
    efficiency: dict[str, float]
    eltwise_bw_factor: float = 1.0
    channel_atom: float = 0.0        # output channels a compute tile needs; fewer waste it
    channel_exponent: float = 0.0
    channel_atom_by_precision: dict[str, float] = field(default_factory=dict)   # a precision's own tile width
    concat_copy: float = 0.0         # fraction of a concat's output bytes actually copied
    buffer_kb: float = 0.0           # on-chip convolution buffer (NVDLA CBUF); 0 = weights never re-fetched


@dataclass(frozen=True)
class CpuCost:
    """Cost of one CPU core type (see dse.backends.sim.cpu_cost): a layer on one core at the type's highest
    frequency = launch + compute + memory passes, and its scaling over the k cores of a group,
    ``t(k) = t(1) * fmax / f / (k * parallel_efficiency[k]) + sync_us * (k - 1) * kernels``."""

    peak_gmacs: dict[str, float]              # per core at the highest frequency, per precision
    bandwidth_gbs: float                      # per core, for the passes over inputs, weights and outputs
    efficiency: dict[str, float]              # fraction of peak per MAC-carrying op kind
    launch_us: dict[str, float]               # per layer of an op kind, on one core (missing kinds: 0)
    out_passes: dict[str, float]              # passes over the output per op kind (col2im, ...; missing: 1)
    parallel_efficiency: dict[int, float]     # k -> eff(k), for k = 1 .. cores of the largest cluster
    sync_us: float = 0.0                      # per kernel and extra thread (002 Table 2's sync overhead)


@dataclass(frozen=True)
class NpuCost:
    """An NPU costed from the CPU: ``t_npu = t_cpu(reference_cores) / speedup`` (002 L180)."""

    speedup: float
    reference_cores: int = 4


@dataclass(frozen=True)
class CostParams:
    gpu: PECost
    dla: PECost | None
    reformat_fixed_us: float = 0.0
    reformat_bandwidth_gbs: float = 10.0
    boundary_us: float = 0.0
    handover_us: float = 0.0    # a stream held per stage boundary until the runtime's polling threads notice
    cpu: dict[str, CpuCost] = field(default_factory=dict)   # per CPU core type (per-layer mapping)
    npu: NpuCost | None = None

    def for_type(self, pe_type: str) -> PECost:
        cost = self.gpu if pe_type == "gpu" else self.dla
        if cost is None:
            raise DseError(f"this platform has no cost parameters for PE type {pe_type!r}")
        return cost


@dataclass(frozen=True)
class CpuCluster:
    """Cores sharing one frequency (a big.LITTLE cluster): their ids, core type and DVFS table."""

    name: str
    cores: tuple[int, ...]
    core_type: str
    freq_mhz: tuple[float, ...]

    @property
    def max_freq_mhz(self) -> float:
        return max(self.freq_mhz)


@dataclass(frozen=True)
class CommModel:
    """Time to hand a tensor from one PE kind to another (see dse.backends.sim.cpu_cost.transfer_us).

    ``linear``: ``fixed_us + bytes / bandwidth`` for any pair. ``poly`` (002 L170-176): polynomials of the
    size (highest power first, in ``size_unit``, giving ``time_unit``): CPU->CPU = memcpy, accelerator->CPU =
    map + memcpy, CPU->accelerator = map + memcpy + unmap."""

    model: str = "linear"
    bandwidth_gbs: float = 10.0
    fixed_us: float = 0.0
    memcpy: tuple[float, ...] = ()
    map: tuple[float, ...] = ()
    unmap: tuple[float, ...] = ()
    time_unit: str = "us"
    size_unit: str = "MB"


@dataclass(frozen=True)
class DlaRules:
    """A platform's DLA rules: the documented rule set of its TensorRT release (``dse.dla.rules``) plus the layers
    the platform keeps on the GPU whatever the rules say (detection heads are TensorRT plugins)."""

    ruleset: "DlaRuleSet"
    unsupported_name_prefixes: tuple[str, ...] = ()

    @property
    def max_batch(self) -> int:
        return self.ruleset.max_batch

    def gpu_only(self, name: str, kind: str = "") -> str:
        """Why the platform keeps a layer off the DLA ('' when it does not)."""
        low = name.lower()
        if kind == "head" or any(low.startswith(p) for p in self.unsupported_name_prefixes):
            return "detection head: a TensorRT plugin layer, GPU only"
        return ""

    def verdicts(self, table) -> list:
        """Per layer of a ``LayerTable``: the rules' verdict. The one place for the operator rules: the sim's cost
        model, the guided search's board model and ``dse inspect --dla`` read them (a real board's builder decides
        the same way from the same documentation)."""
        return [self.ruleset.check(table.op_types[i], table.features[i], self.gpu_only(table.names[i], table.kind[i]))
                for i in range(table.n)]

    def layer_support(self, table) -> "np.ndarray":
        import numpy as np

        return np.array([v.on_dla for v in self.verdicts(table)], dtype=bool)


@dataclass(frozen=True)
class Limits:
    """What one configuration may ask of the board: every count a user or a strategy can set is bounded here
    (a configuration beyond a limit is refused, naming it), so no input grows without bound."""

    max_dla_engines_total: int | None = None      # engines deserialized on the DLAs at once (a PND stage: 2)
    max_dla_loadables_per_core: int | None = None # DLA loadables per core (GPU fallback splits an engine into several)
    max_streams_per_stage: int = 16
    max_stages: int = 4
    max_buffers: int = 256                        # frames in flight
    max_threads: int | None = None                # pre- and post-processing threads each (None: 4 per CPU core)
    max_batch: int = 256
    cpu_util_max: float = 1.0                     # average CPU utilization a per-layer mapping may use (002 L249)

    def threads(self, cpu_cores: int) -> int:
        return self.max_threads if self.max_threads is not None else 4 * max(1, cpu_cores)


def toolkit_version_tuple(text: str) -> tuple[int, ...] | None:
    """The first dotted version in a toolkit string, else its first number: 'tensorrt-8.5.2' -> (8, 5, 2),
    'tensorrt-6.0-sim' -> (6, 0), 'jetpack5-tensorrt-8.5' -> (8, 5), '10.0.0b6' -> (10, 0, 0); None without one."""
    m = re.search(r"\d+(?:\.\d+)+", str(text)) or re.search(r"\d+", str(text))
    return tuple(int(p) for p in m.group(0).split(".")) if m else None


@dataclass(frozen=True)
class PrePost:
    """CPU pre-/post-processing cost per buffer (batch): fixed + per image terms, in microseconds."""

    pre_per_batch_us: float
    pre_per_image_us: float
    pre_per_image_pixels_us: float
    letterbox_factor: float
    post_per_batch_us: float
    post_per_box_us: float
    post_min_boxes: int = 0
    reference_size: int = 416

    def pre_us(self, input_size: int, batch: int, preprocess: str = "resize") -> float:
        area = (input_size / self.reference_size) ** 2
        per_image = self.pre_per_image_us + self.pre_per_image_pixels_us * area
        if preprocess == "letterbox":
            per_image *= self.letterbox_factor
        return self.pre_per_batch_us + batch * per_image

    def post_us(self, boxes: int, batch: int) -> float:
        return self.post_per_batch_us + batch * self.post_per_box_us * max(boxes, self.post_min_boxes)


@dataclass(frozen=True)
class PowerModel:
    """Board power = static + busy CPU cores + sum over PEs of dynamic * load * (f/fmax)^exponent (a PE may have
    its own exponent: ``exponent_of``).

    Per-layer mapping (002 L236: energy = busy time x power of the PE) uses per-PE busy/idle powers instead:
    ``pe_busy_w``/``pe_idle_w`` per declared PE, ``cpu_busy_w``/``cpu_idle_w`` per core of a CPU core type."""

    static_w: float
    cpu_core_w: float
    pe_dynamic_w: dict[str, float]
    freq_exponent: float = 2.4
    pe_freq_exponent: dict[str, float] = field(default_factory=dict)   # per PE, where its rail voltage differs
    pe_busy_w: dict[str, float] = field(default_factory=dict)
    pe_idle_w: dict[str, float] = field(default_factory=dict)
    cpu_busy_w: dict[str, float] = field(default_factory=dict)
    cpu_idle_w: dict[str, float] = field(default_factory=dict)

    def exponent_of(self, pe: str) -> float:
        return self.pe_freq_exponent.get(pe, self.freq_exponent)


@dataclass(frozen=True)
class BoardCosts:
    """What a real board spends on an exploration: a start-up per measurement, the frames at the measured
    FPS, and one build per new engine (per PE type). The defaults reproduce thesis Table 3.4 with Table 3.7's
    engine counts: yolov4 INT8, 344 tuples + 19 parameter points at ~150 FPS (5,200 frames) and 61 GPU + 276 DLA
    engines -> 363 x (10 + 35) s + 61 x 135 s + 276 x 45 s = 10.3 h (the thesis: 10.1 h)."""

    engine_build_s: Mapping[str, float] = field(default_factory=lambda: {"GPU": 135.0, "DLA": 45.0, "CPU": 5.0})
    run_overhead_s: float = 10.0

    def build_s(self, pe_type: str) -> float:
        return float(self.engine_build_s.get(pe_type.upper(), 60.0))

    def run_s(self, frames: int, fps: float) -> float:
        return self.run_overhead_s + (frames / fps if fps > 0 else 0.0)


@dataclass(frozen=True)
class StageSpec:
    """One stage of a mapping option: the PE type its engine is built for and the PEs it runs on (two for a
    stage duplicated on two PEs, PND; every PE for an interleaved stage, whose frames alternate over them)."""

    pe_type: str
    pes: tuple[str, ...]
    interleaved: bool = False

    @property
    def pnd(self) -> bool:
        return len(self.pes) > 1 and not self.interleaved

    @property
    def kind(self) -> str:
        """What the strategies reason about: GPU, DLA or CPU for a stage on one PE, PND for one on several."""
        return "PND" if len(self.pes) > 1 else self.pe_type.upper()

    def label(self) -> str:
        if self.interleaved:
            return "|".join(self.pes)
        if self.pnd and self.pe_type == "dla":
            return "DLA(x2)"
        return "+".join(self.pes)


@dataclass(frozen=True)
class MappingOption:
    name: str
    stages: tuple[StageSpec, ...]

    @property
    def n_stages(self) -> int:
        return len(self.stages)

    def kinds(self) -> list[str]:
        return [s.kind for s in self.stages]

    def describe(self) -> str:
        return "-".join(s.label() for s in self.stages) if all(s.pe_type != "cpu" for s in self.stages) \
            else " -> ".join(s.label() for s in self.stages)


@dataclass(frozen=True)
class StageThreadWork:
    """CPU work of a pipeline stage's host thread per execution, beside the PE's: TensorRT's enqueue sets up and
    launches each GPU kernel on the CPU ("enqueue has some kernel setup work for each layer", NVIDIA/TensorRT
    #1256), a DLA loadable is submitted through the driver, and each execution records and waits for its events.
    It competes with pre/post-processing for the cores (``dse.backends.sim.des``)."""

    execution: float = 0.0      # per stage execution (events, buffer flags, the enqueue call itself)
    kernel: float = 0.0         # per GPU kernel launched
    loadable: float = 0.0       # per DLA loadable submitted

    def us(self, kernels: int, loadables: int) -> float:
        """The work of one execution that launches ``kernels`` GPU kernels and submits ``loadables``."""
        return self.execution + self.kernel * kernels + self.loadable * loadables


@dataclass(frozen=True)
class Platform:
    """A board: its PEs, mapping options and limits; the sim's model parts (cost, prepost, power, noise) are
    None on a profile that only a real backend measures (``require_model`` names what is missing)."""

    name: str
    backend: str
    board_model: str
    toolkit_version: str
    main_pe: str
    pes: dict[str, PE]
    options: dict[str, MappingOption]
    limits: Limits
    cpu_cores: int = 1
    cpu_freq_mhz: tuple[float, ...] = ()
    cpu_contention: float = 0.0
    stage_thread_cpu: float = 0.0     # cores a pipeline stage's host thread keeps busy (polling its stream)
    stage_thread_us: StageThreadWork = field(default_factory=StageThreadWork)   # its work per execution
    dla_rules: DlaRules | None = None
    cost: CostParams | None = None
    prepost: PrePost | None = None
    power: PowerModel | None = None
    board_costs: BoardCosts = field(default_factory=BoardCosts)
    noise_sigma: float = 0.01
    task_sigma: float = 0.0
    warmup_frames: int = 40
    max_sim_frames: int = 600
    buffer_scope: str = "pipeline"    # what ``buffers`` bounds in the pipeline DES (dse.backends.sim.des)
    full_window: bool = False         # the DES window ends with the pipeline still full (no drain in it)
    cpu_clusters: tuple[CpuCluster, ...] = ()
    cpu_freq_by_active_cores: dict[int, float] = field(default_factory=dict)   # MHz by busy cores (hot-plug/governor)
    comm: CommModel = field(default_factory=CommModel)
    purpose: str = "pipeline"
    raw: dict = field(default_factory=dict, compare=False, repr=False)

    def with_dla_ruleset(self, version: str) -> "Platform":
        """The same board with the DLA rules of another TensorRT release (and the SDK limits that follow them)."""
        if self.dla_rules is None:
            raise DseError(f"platform {self.name} has no DLA: no DLA rule set to replace")
        d = dict(self.raw)
        d["dla_rules"] = {**dict(d.get("dla_rules") or {}), "ruleset": str(version)}
        return platform_from_dict(d)

    def option(self, name: str) -> MappingOption:
        try:
            return self.options[name]
        except KeyError:
            raise choices_error(f"mapping option for platform {self.name}", name, self.options) from None

    @property
    def main_kind(self) -> str:
        """The stage kind of the main PE (GPU on a Jetson, CPU on host-cpu): what Algorithm 2 watches."""
        return self.pes[self.main_pe].type.upper()

    def stage_kinds(self) -> dict[str, list[str]]:
        """Per mapping option, the stage kinds the strategies reason about (GPU | DLA | PND | CPU)."""
        return {name: option.kinds() for name, option in self.options.items()}

    def dla_pes(self) -> list[PE]:
        return sorted((p for p in self.pes.values() if p.type == "dla"), key=lambda p: p.core or 0)

    def stage_pes(self, spec: StageSpec) -> list[PE]:
        return [self.pes[n] for n in spec.pes]

    def precisions_of(self, pe_type: str) -> set[str]:
        out: set[str] = set()
        for p in self.pes.values():
            if p.type == pe_type:
                out |= set(p.precisions)
        return out

    # ---- per-layer mapping (seeds 002/004) -------------------------------------------------------------
    @property
    def big_cluster(self) -> CpuCluster | None:
        """The cluster per-layer mapping splits into core groups: the fastest one (the big cores)."""
        return _big(self.cpu_clusters)

    def mapping_core_ids(self) -> list[int]:
        """The cores per-layer mapping splits into groups: the big cluster's where the board declares clusters,
        else the cores of its CPU PEs (host-cpu: the usable ones), else 0..cpu_cores-1."""
        if self.big_cluster:
            return sorted(self.big_cluster.cores)
        cores = sorted({c for p in self.pes.values() if p.type == "cpu" for c in (p.cores or ())})
        return cores or list(range(self.cpu_cores))

    def mapping_cores(self) -> int:
        return len(self.mapping_core_ids())

    def shared_cores(self) -> int:
        """Where the PEs are the host's own CPU cores (host-cpu), their number: pre/post threads time-slice with the
        inference there; 0 where threads have cores of their own (a Jetson's CPU beside its GPU and DLAs)."""
        return self.mapping_cores() if self.main_kind == "CPU" else 0

    def cpu_configs(self, max_groups: int = 4) -> list[tuple[int, ...]]:
        """CPU configurations of per-layer mapping (002 Fig. 1): group sizes of the big cluster, e.g. 4 cores ->
        (4), (3,1), (2,2), (2,1,1), (1,1,1,1)."""
        from dse.platform.cpu_groups import group_sizes

        return group_sizes(self.mapping_cores(), max_groups)

    def pe_kinds(self) -> list[str]:
        """PE kinds of per-layer mapping: a group of k big cores ``cpuk``, then the accelerators."""
        accel = [t for t in ("gpu", "npu", "dla") if any(p.type == t for p in self.pes.values())]
        return [f"cpu{k}" for k in range(1, self.mapping_cores() + 1)] + accel

    def parse_pe_kind(self, kind: str) -> tuple[str, int]:
        """'cpu3' -> ('cpu', 3); 'gpu' -> ('gpu', 0); anything else names the valid kinds."""
        valid = self.pe_kinds()
        if kind not in valid:
            raise choices_error(f"PE kind of platform {self.name}", kind, valid)
        return ("cpu", int(kind[3:])) if kind.startswith("cpu") else (kind, 0)

    def freq_table(self, kind: str) -> tuple[float, ...]:
        """Ascending DVFS levels of a clock kind (cpu: the CPU's; gpu, dla: the first PE of that type), () without."""
        if kind == "cpu":
            table = self.cpu_freq_mhz
        else:
            pes = [p for p in self.pes.values() if p.type == kind]
            table = pes[0].freq_mhz if pes else ()
        return tuple(sorted(float(f) for f in table))

    def cpu_freq_mhz_at(self, active_cores: int) -> float:
        """Big-core frequency while ``active_cores`` of them are busy (governor + hot-plug table), else the
        highest frequency of the big cluster (no DVFS policy, as on HiKey970)."""
        if self.cpu_freq_by_active_cores:
            if active_cores not in self.cpu_freq_by_active_cores:
                raise choices_error(f"number of active cores of platform {self.name}", active_cores,
                                    self.cpu_freq_by_active_cores)
            return self.cpu_freq_by_active_cores[active_cores]
        big = self.big_cluster
        if big is not None:
            return big.max_freq_mhz
        if self.cpu_freq_mhz:
            return max(self.cpu_freq_mhz)
        raise DseError(f"platform {self.name} declares no CPU frequencies (cpu.clusters or cpu.freq_mhz)")

    def pe_power_w(self, kind: str) -> tuple[float, float]:
        """(P_busy, P_idle) in W of a PE kind: a k-core group = k x the big core type's per-core power; an
        accelerator kind = its PE's busy/idle power (002 L180, L236)."""
        if self.power is None:
            raise DseError(f"platform {self.name} has no power section")
        pe_type, k = self.parse_pe_kind(kind)
        if pe_type == "cpu":
            core_type = self.big_cluster.core_type if self.big_cluster else ""
            busy, idle = self.power.cpu_busy_w.get(core_type), self.power.cpu_idle_w.get(core_type, 0.0)
            if busy is None:
                raise DseError(f"platform {self.name}: power.cpu has no busy_w for core type {core_type!r}")
            return k * busy, k * idle
        pe = next(p for p in self.pes.values() if p.type == pe_type)
        if pe.name not in self.power.pe_busy_w:
            raise DseError(f"platform {self.name}: power.pe.{pe.name} has no busy_w")
        return self.power.pe_busy_w[pe.name], self.power.pe_idle_w.get(pe.name, 0.0)

    def pipeline_refusal(self, backend: str) -> str:
        return (f"platform {self.name} is a per-layer-mapping board (purpose: layer-mapping; seeds 002/004: CPU core "
                f"groups, GPU, NPU costed per layer); the pipeline DSE ({backend!r} backend) needs a pipeline board "
                f"such as xavier-agx-sim")

    def require_model(self, backend: str, *, layer_mapping: bool = False) -> None:
        """Refuse, naming the missing parts, when the profile lacks what a virtual board simulates;
        ``layer_mapping``: the caller measures per-layer mappings, which a layer-mapping board serves too."""
        if self.purpose == "layer-mapping":
            if layer_mapping:
                return
            raise DseError(self.pipeline_refusal(backend))
        missing = [k for k in ("cost", "prepost", "power") if getattr(self, k) is None]
        if missing:
            raise DseError(f"platform {self.name} has no {', '.join(missing)} section(s): the {backend!r} backend "
                           f"simulates a board from them (see config/platform/xavier-agx-sim.yaml)")


def _plain(cfg: Any) -> dict:
    """DictConfig / Mapping -> plain dict (resolving interpolations)."""
    from omegaconf import DictConfig, OmegaConf

    if isinstance(cfg, DictConfig):
        return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]
    return dict(cfg)


def _req(d: Mapping, key: str, where: str):
    if key not in d or d[key] is None:
        raise DseError(f"platform profile: missing '{key}' in {where}")
    return d[key]


def _number(value, where: str, low: float = 0.0, high: float | None = None, strict: bool = True) -> float:
    """A float in (low, high] (or [low, high] with strict=False), else an error naming the value and the range."""
    try:
        x = float(value)
        if isinstance(value, bool):
            raise TypeError
    except (TypeError, ValueError):
        raise DseError(f"{where} must be a number, got {value!r}") from None
    if math.isnan(x) or (x <= low if strict else x < low) or (high is not None and x > high):   # NaN <= low is False
        bounds = f"{'(' if strict else '['}{low:g}, {'inf)' if high is None else f'{high:g}]'}"
        raise DseError(f"{where} must be in {bounds}, got {value!r}")
    return x


def _table(d, where: str, valid=None, **bounds) -> dict[str, float]:
    """A {key: number} mapping whose keys are in ``valid`` (when given)."""
    if not isinstance(d, Mapping):
        raise DseError(f"{where} must be a mapping such as {{conv: 0.5}}, got {d!r}")
    if valid is not None:
        check_keys(d, valid, f"key of {where}")
    return {str(k): _number(v, f"{where}.{k}", **bounds) for k, v in d.items()}


PE_COST_KEYS = tuple(f.name for f in fields(PECost))


def _atoms_by_precision(d, where: str) -> dict[str, float]:
    """A precision's own compute-tile width (FP16 tensor-core kernels may tile wider than INT8 ones)."""
    where = f"{where}.channel_atom_by_precision"
    if d is None:
        return {}
    if not isinstance(d, Mapping):
        raise DseError(f"{where} must map a precision ({', '.join(PRECISIONS)}) to channels, got {d!r}")
    check_keys(d, PRECISIONS, f"precision in {where}")
    return {str(k): _number(v, f"{where}.{k}", 0.0, None, strict=False) for k, v in d.items()}


def _pe_cost(d: Mapping, where: str) -> PECost:
    if not isinstance(d, Mapping):
        raise DseError(f"{where} must be a mapping with keys {', '.join(PE_COST_KEYS)}, got {d!r}")
    check_keys(d, PE_COST_KEYS, f"key of {where}")
    return PECost(
        peak_gmacs={str(k): float(v) for k, v in _req(d, "peak_gmacs", where).items()},
        bandwidth_gbs=float(_req(d, "bandwidth_gbs", where)),
        launch_us=float(d.get("launch_us", 0.0)),
        per_inference_us=float(d.get("per_inference_us", 0.0)),
        saturation_elems=float(d.get("saturation_elems", 0.0)),
        min_occupancy=float(d.get("min_occupancy", 1.0)),
        batch_gain=float(d.get("batch_gain", 0.0)),
        efficiency={str(k): float(v) for k, v in _req(d, "efficiency", where).items()},
        eltwise_bw_factor=float(d.get("eltwise_bw_factor", 1.0)),
        channel_atom=float(d.get("channel_atom", 0.0)),
        channel_exponent=float(d.get("channel_exponent", 0.0)),
        channel_atom_by_precision=_atoms_by_precision(d.get("channel_atom_by_precision"), where),
        concat_copy=float(d.get("concat_copy", 0.0)),
        buffer_kb=_number(d.get("buffer_kb", 0.0), f"{where}.buffer_kb", 0.0, None, strict=False),
    )


CPU_COST_KEYS = ("peak_gmacs", "bandwidth_gbs", "efficiency", "launch_us", "out_passes", "parallel_efficiency",
                 "sync_us")


def _cpu_cost(d: Mapping, where: str, max_cores: int) -> CpuCost:
    if not isinstance(d, Mapping):
        raise DseError(f"{where} must be a mapping with keys {', '.join(CPU_COST_KEYS)}, got {d!r}")
    check_keys(d, CPU_COST_KEYS, f"key of {where}")
    par = d.get("parallel_efficiency") or {1: 1.0}
    if not isinstance(par, Mapping):
        raise DseError(f"{where}.parallel_efficiency must map core counts to efficiencies, got {par!r}")
    parallel = {}
    for k, v in par.items():
        if not str(k).isdigit() or not 1 <= int(k) <= max_cores:
            raise DseError(f"{where}.parallel_efficiency: core count {k!r} must be in 1..{max_cores}")
        parallel[int(k)] = _number(v, f"{where}.parallel_efficiency.{k}", high=1.0)
    missing = sorted(set(range(1, max_cores + 1)) - set(parallel))
    if missing:
        raise DseError(f"{where}.parallel_efficiency lacks core counts {missing} (needs 1..{max_cores})")
    return CpuCost(peak_gmacs=_table(_req(d, "peak_gmacs", where), f"{where}.peak_gmacs", ("fp32", "fp16", "int8")),
                   bandwidth_gbs=_number(_req(d, "bandwidth_gbs", where), f"{where}.bandwidth_gbs"),
                   efficiency=_table(_req(d, "efficiency", where), f"{where}.efficiency", CPU_OP_KINDS, high=1.0),
                   launch_us=_table(d.get("launch_us") or {}, f"{where}.launch_us", CPU_OP_KINDS, strict=False),
                   out_passes=_table(d.get("out_passes") or {}, f"{where}.out_passes", CPU_OP_KINDS, strict=False),
                   parallel_efficiency=parallel,
                   sync_us=_number(d.get("sync_us", 0.0), f"{where}.sync_us", strict=False))


def _cost(d: Mapping, where: str, has_dla: bool, core_types: set[str], max_cores: int) -> CostParams | None:
    cd = d.get("cost")
    if not cd:
        return None
    ref = cd.get("reformat", {}) or {}
    cpu = cd.get("cpu") or {}
    if not isinstance(cpu, Mapping):
        raise DseError(f"{where} cost.cpu must map core types to their cost, got {cpu!r}")
    for core_type in cpu:
        if str(core_type) not in core_types:
            raise choices_error(f"core type in {where} cost.cpu (declare it in cpu.clusters)", core_type,
                                core_types)
    npu = cd.get("npu")
    if npu is not None and not isinstance(npu, Mapping):
        raise DseError(f"{where} cost.npu must be a mapping such as {{speedup: 6.5, reference_cores: 4}}")
    if npu is not None:
        npu = NpuCost(speedup=_number(_req(npu, "speedup", f"{where} cost.npu"), f"{where} cost.npu.speedup"),
                      reference_cores=int(_number(npu.get("reference_cores", 4), f"{where} cost.npu.reference_cores")))
    cost = CostParams(gpu=_pe_cost(_req(cd, "gpu", f"{where} cost"), f"{where} cost.gpu"),
                      dla=_pe_cost(cd["dla"], f"{where} cost.dla") if cd.get("dla") else None,
                      reformat_fixed_us=float(ref.get("fixed_us", 0.0)),
                      reformat_bandwidth_gbs=float(ref.get("bandwidth_gbs", 10.0)),
                      boundary_us=float(cd.get("boundary_us", 0.0)),
                      handover_us=_number(cd.get("handover_us", 0.0), f"{where} cost.handover_us", strict=False),
                      cpu={str(k): _cpu_cost(v, f"{where} cost.cpu.{k}", max_cores) for k, v in cpu.items()},
                      npu=npu)
    if has_dla and cost.dla is None:
        raise DseError(f"{where}: declares DLA PEs but no cost.dla parameters")
    return cost


def _clusters(cpu: Mapping, where: str) -> tuple[CpuCluster, ...]:
    out, seen = [], set()
    for i, cd in enumerate(cpu.get("clusters") or ()):
        w = f"{where} cpu.clusters[{i}]"
        if not isinstance(cd, Mapping):
            raise DseError(f"{w} must be a mapping with name, cores, core_type, freq_mhz, got {cd!r}")
        check_keys(cd, ("name", "cores", "core_type", "freq_mhz"), f"key of {w}")
        cores = tuple(int(_number(c, f"{w}.cores", strict=False)) for c in _req(cd, "cores", w))
        freqs = tuple(_number(f, f"{w}.freq_mhz") for f in _req(cd, "freq_mhz", w))
        if not cores or not freqs:
            raise DseError(f"{w}: needs at least one core and one frequency")
        if seen & set(cores):
            raise DseError(f"{w}: cores {sorted(seen & set(cores))} already belong to another cluster")
        seen |= set(cores)
        out.append(CpuCluster(name=str(_req(cd, "name", w)), cores=cores, core_type=str(_req(cd, "core_type", w)),
                              freq_mhz=freqs))
    return tuple(out)


def _big(clusters: tuple[CpuCluster, ...]) -> CpuCluster | None:
    return max(clusters, key=lambda c: (c.max_freq_mhz, len(c.cores))) if clusters else None


def _freq_by_active_cores(cpu: Mapping, where: str, clusters: tuple[CpuCluster, ...]) -> dict[int, float]:
    table = cpu.get("freq_by_active_cores") or {}
    if not table:
        return {}
    if not isinstance(table, Mapping):
        raise DseError(f"{where} cpu.freq_by_active_cores must map busy cores to MHz, got {table!r}")
    if not clusters:
        raise DseError(f"{where}: cpu.freq_by_active_cores needs cpu.clusters (it is the big cluster's table)")
    big = _big(clusters)
    out = {}
    for k, f in table.items():
        if not str(k).isdigit() or not 1 <= int(k) <= len(big.cores):
            raise DseError(f"{where} cpu.freq_by_active_cores: {k!r} busy cores; valid: 1..{len(big.cores)} "
                           f"(cores of cluster {big.name})")
        f = _number(f, f"{where} cpu.freq_by_active_cores.{k}")
        if not min(big.freq_mhz) <= f <= big.max_freq_mhz:
            raise DseError(f"{where} cpu.freq_by_active_cores.{k} = {f:g} MHz is outside cluster {big.name}'s "
                           f"frequencies {min(big.freq_mhz):g}..{big.max_freq_mhz:g} MHz")
        out[int(k)] = f
    missing = sorted(set(range(1, len(big.cores) + 1)) - set(out))
    if missing:
        raise DseError(f"{where} cpu.freq_by_active_cores lacks {missing} busy cores (needs 1..{len(big.cores)})")
    return out


COMM_KEYS = ("model", "bandwidth_gbs", "fixed_us", "memcpy", "map", "unmap", "units")


def _comm(d: Mapping, where: str, cost: CostParams | None) -> CommModel:
    """The ``comm`` section; without one, the linear model with the sim's GPU<->DLA reformat terms."""
    cd = d.get("comm")
    if not cd:
        if cost is None:
            return CommModel()
        return CommModel(bandwidth_gbs=cost.reformat_bandwidth_gbs, fixed_us=cost.reformat_fixed_us)
    w = f"{where} comm"
    check_keys(cd, COMM_KEYS, f"key of {w}")
    model = str(cd.get("model", "linear"))
    if model not in COMM_MODELS:
        raise choices_error(f"{w}.model", model, COMM_MODELS)
    if model == "linear":
        return CommModel(bandwidth_gbs=_number(_req(cd, "bandwidth_gbs", w), f"{w}.bandwidth_gbs"),
                         fixed_us=_number(cd.get("fixed_us", 0.0), f"{w}.fixed_us", strict=False))
    units = cd.get("units") or {}
    time_unit, size_unit = str(units.get("time", "us")), str(units.get("size", "MB"))
    if time_unit not in TIME_UNITS:
        raise choices_error(f"{w}.units.time", time_unit, TIME_UNITS)
    if size_unit not in SIZE_UNITS:
        raise choices_error(f"{w}.units.size", size_unit, SIZE_UNITS)

    def poly(key: str) -> tuple[float, ...]:
        coeffs = _req(cd, key, w)
        if not isinstance(coeffs, (list, tuple)) or not coeffs:
            raise DseError(f"{w}.{key} must be a list of polynomial coefficients (highest power first), "
                           f"got {coeffs!r}")
        return tuple(_number(c, f"{w}.{key}", low=float("-inf")) for c in coeffs)

    return CommModel(model="poly", memcpy=poly("memcpy"), map=poly("map"), unmap=poly("unmap"),
                     time_unit=time_unit, size_unit=size_unit)


def _prepost(d: Mapping, where: str) -> PrePost | None:
    pp = d.get("prepost")
    if not pp:
        return None
    pre, post = _req(pp, "pre", f"{where} prepost"), _req(pp, "post", f"{where} prepost")
    return PrePost(pre_per_batch_us=float(pre.get("per_batch_us", 0.0)),
                   pre_per_image_us=float(pre.get("per_image_us", 0.0)),
                   pre_per_image_pixels_us=float(pre.get("per_image_pixels_us", 0.0)),
                   letterbox_factor=float(pre.get("letterbox_factor", 1.0)),
                   post_per_batch_us=float(post.get("per_batch_us", 0.0)),
                   post_per_box_us=float(post.get("per_box_us", 0.0)),
                   post_min_boxes=int(post.get("min_boxes", 0)),
                   reference_size=int(pp.get("reference_size", 416)))


def _power(d: Mapping, where: str, pes: Mapping[str, PE], core_types: set[str]) -> PowerModel | None:
    pw = d.get("power")
    if not pw:
        return None
    pe_section = pw.get("pe") or {}
    check_keys(pe_section, pes, f"PE in power.pe of {where}")
    pe_dyn = {str(k): float(v.get("dynamic_w", 0.0)) for k, v in pe_section.items()}
    cpu = pw.get("cpu") or {}
    check_keys(cpu, core_types, f"core type in power.cpu of {where}")

    def watts(section: Mapping, key: str, what: str) -> dict[str, float]:
        return {str(k): _number(v[key], f"{where} power.{what}.{k}.{key}", strict=False)
                for k, v in section.items() if v.get(key) is not None}

    return PowerModel(static_w=float(pw.get("static_w", 0.0)), cpu_core_w=float(pw.get("cpu_core_w", 0.0)),
                      pe_dynamic_w=pe_dyn, freq_exponent=float(pw.get("freq_exponent", 2.4)),
                      pe_freq_exponent={str(k): float(v["freq_exponent"]) for k, v in pe_section.items()
                                        if v.get("freq_exponent") is not None},
                      pe_busy_w=watts(pe_section, "busy_w", "pe"), pe_idle_w=watts(pe_section, "idle_w", "pe"),
                      cpu_busy_w=watts(cpu, "busy_w", "cpu"), cpu_idle_w=watts(cpu, "idle_w", "cpu"))


def _board_costs(d: Mapping, where: str) -> BoardCosts:
    bc = d.get("board_costs") or {}
    check_keys(bc, BoardCosts.__dataclass_fields__, f"{where} board_costs key")
    default = BoardCosts()
    builds = {**default.engine_build_s, **{str(k).upper(): float(v) for k, v in (bc.get("engine_build_s") or {}).items()}}
    return BoardCosts(engine_build_s=builds, run_overhead_s=float(bc.get("run_overhead_s", default.run_overhead_s)))


DLA_RULE_KEYS = ("ruleset", "unsupported_name_prefixes")


def _dla_rules(rd, where: str, toolkit: str) -> DlaRules:
    """The platform's DLA rules: ``dla_rules.ruleset`` (a rule set name or TensorRT version; null = the one of
    ``toolkit_version``) and the layer-name prefixes kept on the GPU."""
    from dse.dla.rules import ruleset_for

    rd = rd or {}
    unknown = sorted(set(map(str, rd)) - set(DLA_RULE_KEYS))
    if unknown:
        hint = (" (operator rules now come from the documented rule sets in dse/dla/rulesets: pick one with "
                "dla_rules.ruleset)" if unknown[0] in ("supported_ops", "max_kernel", "concat_axis", "max_batch") else "")
        raise DseError(f"{where}: unknown dla_rules key {unknown[0]!r}; valid: {', '.join(DLA_RULE_KEYS)}{hint}")
    choice = rd.get("ruleset")
    try:
        ruleset = ruleset_for(str(choice) if choice is not None else toolkit)
    except DseError as exc:
        raise DseError(f"{where}: {exc}") from None
    return DlaRules(ruleset=ruleset, unsupported_name_prefixes=tuple(str(p) for p in rd.get("unsupported_name_prefixes", ())))


def _limits(d: Mapping, where: str, rules: DlaRules | None) -> Limits:
    ld = d.get("limits", {}) or {}
    check_keys(ld, Limits.__dataclass_fields__, f"{where} limit")
    # a DLA limit left null (or out) follows the platform's DLA rule set (its TensorRT release)
    by_version = ({"max_dla_engines_total": rules.ruleset.max_engines_total,
                   "max_dla_loadables_per_core": rules.ruleset.max_loadables_per_core} if rules else {})
    default = Limits()
    engines, loadables = ld.get("max_dla_engines_total"), ld.get("max_dla_loadables_per_core")
    limits = Limits(max_dla_engines_total=by_version.get("max_dla_engines_total") if engines is None else engines,
                    max_dla_loadables_per_core=(by_version.get("max_dla_loadables_per_core") if loadables is None
                                                else loadables),
                    max_streams_per_stage=ld.get("max_streams_per_stage", default.max_streams_per_stage),
                    max_stages=ld.get("max_stages", default.max_stages),
                    max_buffers=ld.get("max_buffers", default.max_buffers),
                    max_threads=ld.get("max_threads", default.max_threads),
                    max_batch=ld.get("max_batch", default.max_batch),
                    cpu_util_max=_number(ld.get("cpu_util_max", default.cpu_util_max), f"{where}: limits.cpu_util_max",
                                         high=1.0))
    for name in Limits.__dataclass_fields__:
        if name == "cpu_util_max":
            continue
        value = getattr(limits, name)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise DseError(f"{where}: limits.{name} must be a positive integer (or null), got {value!r}")
    return limits


def _declared_pes(d: Mapping, where: str) -> dict[str, PE]:
    pes: dict[str, PE] = {}
    for pe_name, pd in _req(d, "pes", where).items():
        ptype = str(_req(pd, "type", f"{where} pes.{pe_name}")).lower()
        if ptype not in PE_TYPES:
            raise choices_error(f"PE type of {pe_name}", ptype, PE_TYPES)
        precisions = tuple(str(p) for p in pd.get("precisions", ()))
        if ptype == "dla" and "fp32" in precisions:
            raise DseError(f"{where}: {pe_name} is a DLA and cannot list fp32 (DLAs run fp16/int8 only)")
        pes[str(pe_name)] = PE(name=str(pe_name), type=ptype, precisions=precisions, core=pd.get("core"),
                               cores=tuple(int(c) for c in pd.get("cores", ()) or ()),
                               freq_mhz=tuple(float(f) for f in pd.get("freq_mhz", ())))
    return pes


def _stage(sd: Mapping, pes: dict[str, PE], where: str, n_stages: int, precisions: tuple[str, ...]) -> StageSpec:
    """A stage from its YAML: {pe_type: GPU} | {pe_type: DLA, core: 0} | {pe_type: DLA, pnd: true} |
    {pe_type: GPU, interleaved: true} | {pe_type: CPU, cores: [0, 1]} | {pe_type: CPU, cores: [[0], [1]]} (PND)."""
    if not isinstance(sd, Mapping):
        raise DseError(f"{where}: a stage is a mapping such as {{pe_type: GPU}}, {{pe_type: DLA, core: 0}} or "
                       f"{{pe_type: CPU, cores: [0, 1]}} (two core lists for PND: cores: [[0], [1]]), got {sd!r}")
    ptype = str(_req(sd, "pe_type", where)).lower()
    if ptype not in ("gpu", "dla", "cpu"):
        if ptype == "npu":
            raise DseError(f"{where}: an NPU takes part in per-layer mapping only (seeds 002/004), not in a "
                           f"pipeline stage; valid stage pe_types: GPU, DLA, CPU")
        raise choices_error(f"pe_type of {where}", ptype, ("GPU", "DLA", "CPU"))
    of_type = [p for p in pes.values() if p.type == ptype]
    dlas = sorted((p for p in pes.values() if p.type == "dla"), key=lambda p: p.core or 0)
    if sd.get("interleaved"):
        if ptype != "gpu" or not dlas or n_stages != 1:
            raise DseError(f"{where}: an interleaved stage is a GPU stage, the only stage of its option, on a "
                           f"platform with DLA cores")
        return StageSpec("gpu", (of_type[0].name, *(p.name for p in dlas)), interleaved=True)
    if ptype == "gpu":
        if not of_type:
            raise DseError(f"{where} runs on a GPU but the platform has none")
        return StageSpec("gpu", (of_type[0].name,))
    if ptype == "dla":
        if not dlas:
            raise DseError(f"{where} uses a DLA but the platform has none")
        if sd.get("pnd"):
            if len(dlas) < 2:
                raise DseError(f"{where} uses PND but the platform has fewer than 2 DLA cores")
            return StageSpec("dla", tuple(p.name for p in dlas[:2]))
        core = sd.get("core")
        match = [p for p in dlas if p.core == core]
        if not match:
            raise choices_error(f"DLA core of {where}", core, [p.core for p in dlas])
        return StageSpec("dla", (match[0].name,))
    groups = sd.get("cores")
    if not groups:
        raise DseError(f"{where}: a CPU stage lists its cores, e.g. cores: [0, 1] (or [[0], [1]] for PND)")
    groups = groups if isinstance(groups[0], (list, tuple)) else [groups]
    from dse.platform.cpu_groups import usable_cores

    missing = sorted({int(c) for g in groups for c in g} - set(usable_cores()))
    if missing:
        raise DseError(f"{where}: cores {missing} are not usable here; usable: {usable_cores()}")
    names = []
    for g in groups:
        pe = cpu_group_pe(tuple(int(c) for c in g), precisions)
        pes.setdefault(pe.name, pe)
        names.append(pe.name)
    return StageSpec("cpu", tuple(names))


def cpu_group_pe(cores: tuple[int, ...], precisions: tuple[str, ...]) -> PE:
    from dse.platform.cpu_groups import core_group_name

    return PE(name=core_group_name(cores), type="cpu", precisions=precisions, cores=tuple(sorted(cores)))


def _options(spec: Mapping, pes: dict[str, PE], where: str, precisions: tuple[str, ...]) -> dict[str, MappingOption]:
    options: dict[str, MappingOption] = {}
    for oname, stages in spec.items():
        if not stages:
            raise DseError(f"{where}: option {oname} has no stages")
        specs = tuple(_stage(sd, pes, f"{where} option {oname} stage {i}", len(stages), precisions)
                      for i, sd in enumerate(stages))
        options[str(oname)] = MappingOption(name=str(oname), stages=specs)
    return options


def _core_group_options(d: Mapping, where: str, precisions: tuple[str, ...]) -> tuple[dict[str, PE], dict, str]:
    """``options: auto``: this machine's usable cores (or ``cores``), E on all of them plus one option per
    group configuration of two to ``max_groups`` groups ("1-1", "3-1", ...)."""
    from dse.platform.cpu_groups import core_group_layouts, usable_cores

    available = usable_cores()
    cores = d.get("cores", "auto")
    if cores in (None, "auto"):
        cores = available
    else:
        cores = sorted(int(c) for c in cores)
        missing = sorted(set(cores) - set(available))
        if missing:
            raise DseError(f"{where}: cores {missing} are not usable here; usable: {available}")
    pes: dict[str, PE] = {}
    options: dict[str, MappingOption] = {}
    for name, layout in core_group_layouts(list(cores), int(d.get("max_groups", 4))).items():
        stages = []
        for groups in layout:
            names = []
            for g in groups:
                pe = cpu_group_pe(g, precisions)
                pes.setdefault(pe.name, pe)
                names.append(pe.name)
            stages.append(StageSpec("cpu", tuple(names)))
        options[name] = MappingOption(name=name, stages=tuple(stages))
    return pes, options, options["E"].stages[0].pes[0]


# the sections that are mappings (``options`` may also be ``auto``) and lists: a scalar in their place is refused
# by name before a reader walks it
MAPPING_SECTIONS = ("cpu", "pes", "cost", "limits", "prepost", "power", "noise", "sim", "extra_options", "transport",
                    "board_costs", "comm", "tasks", "dvfs", "contention", "clocked", "power_modes", "dla_rules",
                    "clock_control")
LIST_SECTIONS = ("precisions",)


def platform_from_dict(d: Mapping) -> Platform:
    """Build and validate a Platform from the YAML content (a dict or an omegaconf DictConfig). A section of the
    wrong shape deeper than the checks below reach is still one DseError naming the platform, never a traceback."""
    d = _plain(d)
    if not isinstance(d, Mapping):
        raise DseError(f"a platform profile is a mapping of sections, got {type(d).__name__}")
    name = str(_req(d, "name", "the profile"))
    where = f"platform {name}"
    check_keys(d, TOP_LEVEL_KEYS, f"key of {where}")
    for key in MAPPING_SECTIONS:
        if d.get(key) is not None and not isinstance(d[key], Mapping) and not (key == "dla_rules"
                                                                              and isinstance(d[key], str)):
            raise DseError(f"{where}: {key} must be a mapping, got {d[key]!r}")
    if not (d.get("options") is None or d["options"] == "auto" or isinstance(d["options"], Mapping)):
        raise DseError(f"{where}: options must be a mapping of option names or 'auto', got {d['options']!r}")
    for key in LIST_SECTIONS:
        if d.get(key) is not None and not isinstance(d[key], (list, tuple)):
            raise DseError(f"{where}: {key} must be a list, got {d[key]!r}")
    try:
        return _platform(d, name, where)
    except (AttributeError, TypeError, KeyError, IndexError, ValueError) as exc:
        if isinstance(exc, DseError):
            raise
        raise DseError(f"{where}: a section has the wrong shape ({type(exc).__name__}: {exc}); "
                       "compare with config/platform/xavier-agx-sim.yaml") from None


def _platform(d: dict, name: str, where: str) -> Platform:
    precisions = tuple(str(p) for p in d.get("precisions") or ("fp32",))
    if d.get("options") == "auto":
        pes, options, main_pe = _core_group_options(d, where, precisions)
    else:
        pes = _declared_pes(d, where)
        options = _options(_req(d, "options", where), pes, where, precisions)
        main_pe = str(d.get("main_pe", "GPU"))
    options.update(_options(d.get("extra_options") or {}, pes, where, precisions))
    if main_pe not in pes:
        raise choices_error(f"main_pe of {where}", main_pe, pes)
    main_only = [o for o in options.values() if [s.pes for s in o.stages] == [(main_pe,)]]
    if "E" not in options or options["E"] not in main_only:
        raise DseError(f"{where}: every platform needs option E (the whole network on its main PE {main_pe})")
    has_dla = any(p.type == "dla" for p in pes.values())
    rd = d.get("dla_rules")
    toolkit = str(d.get("toolkit_version", "unknown"))
    rules = _dla_rules(rd, where, toolkit) if has_dla or rd else None
    cpu = d.get("cpu", {}) or {}
    check_keys(cpu, CPU_KEYS, f"key of {where} cpu")
    cpu_pes = [p for p in pes.values() if p.type == "cpu"]
    clusters = _clusters(cpu, where)
    core_types = {c.core_type for c in clusters}
    cpu_cores = int(cpu.get("cores", len({c for p in cpu_pes for c in p.cores}) or 1))
    if clusters and sum(len(c.cores) for c in clusters) != cpu_cores:
        raise DseError(f"{where}: cpu.clusters hold {sum(len(c.cores) for c in clusters)} cores but cpu.cores "
                       f"is {cpu_cores}")
    max_cores = max((len(c.cores) for c in clusters), default=cpu_cores)
    cost = _cost(d, where, has_dla, core_types, max_cores)
    if any(p.type == "npu" for p in pes.values()) and (cost is None or cost.npu is None):
        raise DseError(f"{where}: declares an NPU PE but no cost.npu (e.g. {{speedup: 6.5, reference_cores: 4}})")
    purpose = str(d.get("purpose", "pipeline"))
    if purpose not in PURPOSES:
        raise choices_error(f"purpose of {where}", purpose, PURPOSES)
    noise = d.get("noise", {}) or {}
    sim = d.get("sim", {}) or {}
    return Platform(
        name=name, backend=str(d.get("backend", "sim")), board_model=str(d.get("board_model", name)),
        toolkit_version=toolkit, main_pe=main_pe, pes=pes, options=options, limits=_limits(d, where, rules),
        cpu_cores=cpu_cores, cpu_freq_mhz=tuple(float(f) for f in cpu.get("freq_mhz", ())),
        cpu_contention=float(cpu.get("contention", 0.0)),
        stage_thread_cpu=_number(cpu.get("stage_thread_cpu", 0.0), f"{where} cpu.stage_thread_cpu", high=1.0,
                                 strict=False),
        stage_thread_us=_stage_thread_work(cpu.get("stage_thread_us"), f"{where} cpu.stage_thread_us"),
        dla_rules=rules, cost=cost,
        prepost=_prepost(d, where), power=_power(d, where, pes, core_types), board_costs=_board_costs(d, where),
        noise_sigma=float(noise.get("sigma", 0.01)), task_sigma=float(noise.get("task_sigma", 0.0)),
        warmup_frames=int(sim.get("warmup_frames", 40)), max_sim_frames=int(sim.get("max_sim_frames", 600)),
        buffer_scope=_buffer_scope(sim, where), full_window=_flag(sim.get("full_window", False),
                                                                 f"{where} sim.full_window"),
        cpu_clusters=clusters,
        cpu_freq_by_active_cores=_freq_by_active_cores(cpu, where, clusters),
        comm=_comm(d, where, cost), purpose=purpose, raw=dict(d))


def _stage_thread_work(d, where: str) -> StageThreadWork:
    if d is None:
        return StageThreadWork()
    parts = StageThreadWork.__dataclass_fields__
    if not isinstance(d, Mapping):
        raise DseError(f"{where} must map {', '.join(parts)} to microseconds, got {d!r}")
    check_keys(d, parts, f"key of {where}")
    return StageThreadWork(**{k: _number(v, f"{where}.{k}", strict=False) for k, v in d.items()})


def _flag(value, where: str) -> bool:
    if not isinstance(value, bool):
        raise DseError(f"{where} must be true or false, got {value!r}")
    return value


BUFFER_SCOPES = ("pipeline", "interface")


def _buffer_scope(sim: Mapping, where: str) -> str:
    scope = str(sim.get("buffer_scope", "pipeline"))
    if scope not in BUFFER_SCOPES:
        raise choices_error(f"sim.buffer_scope of {where}", scope, BUFFER_SCOPES)
    return scope


def load_platform(source: Any) -> Platform:
    """A Platform from a profile name (composed through Hydra, so a board profile inherits its -sim twin),
    a YAML path, a dict or a DictConfig."""
    if isinstance(source, Platform):
        return source
    if isinstance(source, (str, Path)):
        path = Path(source)
        if path.suffix in (".yaml", ".yml"):
            from dse.core.validate import load_yaml

            return platform_from_dict(load_yaml(path, "platform profile"))
        from dse.config import compose_config, group_choices

        if str(source) not in group_choices("platform"):
            raise choices_error("platform", str(source), group_choices("platform"))
        return platform_from_dict(compose_config([f"platform={source}"]).platform)
    return platform_from_dict(source)
