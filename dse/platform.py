"""Platform profiles: one model for every board, real or virtual: processing elements, mapping options, limits,
and (for the virtual boards) cost, power and pre/post-processing parameters.

A profile is a YAML file in ``config/platform/`` (or the ``platform`` node of the composed Hydra config).
Jetson profiles declare their PEs (GPU, DLA cores) and options; ``host-cpu`` declares ``options: auto`` and
gets one PE per CPU core group and one option per group configuration of this machine's cores
(``dse.runtime.cpu_groups``). Loading validates the profile once, so backends and strategies can trust the
dataclasses; a backend that needs a part a profile lacks (the sim needs ``cost``, ``prepost``, ``power``)
says so by name.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from dse.errors import DseError, choices_error

PE_TYPES = ("gpu", "dla", "cpu")
TOP_LEVEL_KEYS = ("name", "backend", "board_model", "toolkit_version", "main_pe", "cpu", "pes", "cost", "dla_rules",
                  "limits", "prepost", "power", "noise", "sim", "options", "extra_options", "cores", "max_groups",
                  "precisions", "transport", "board_costs")


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
    concat_copy: float = 0.0         # fraction of a concat's output bytes actually copied


@dataclass(frozen=True)
class CostParams:
    gpu: PECost
    dla: PECost | None
    reformat_fixed_us: float = 0.0
    reformat_bandwidth_gbs: float = 10.0
    boundary_us: float = 0.0

    def for_type(self, pe_type: str) -> PECost:
        cost = self.gpu if pe_type == "gpu" else self.dla
        if cost is None:
            raise DseError(f"this platform has no cost parameters for PE type {pe_type!r}")
        return cost


@dataclass(frozen=True)
class DlaRules:
    """What a DLA core can run: operator types, kernel size, concat axis, batch."""

    supported_ops: frozenset[str]
    unsupported_name_prefixes: tuple[str, ...] = ()
    max_kernel: int = 16
    concat_axis: int = 1
    max_batch: int = 32

    def layer_support(self, table) -> "np.ndarray":
        """Per layer of a ``LayerTable``: whether a DLA core runs it. The one place for the operator rules: the
        sim's cost model and the guided search's board model both read them (a real board's builder decides
        the same way from the same rules)."""
        import numpy as np

        ok = np.ones(table.n, dtype=bool)
        for i in range(table.n):
            name, op = table.names[i].lower(), table.op_types[i]
            if op not in self.supported_ops or table.kind[i] == "head":
                ok[i] = False
            elif any(name.startswith(p) for p in self.unsupported_name_prefixes):
                ok[i] = False
            elif table.kernel[i] > self.max_kernel:
                ok[i] = False
            elif op == "Concat" and int(table.concat_axis[i]) not in (self.concat_axis, self.concat_axis - 4):
                ok[i] = False
        return ok


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

    def threads(self, cpu_cores: int) -> int:
        return self.max_threads if self.max_threads is not None else 4 * max(1, cpu_cores)


# The SDK's DLA limits per TensorRT major version (first version it applies to -> limits, source). A profile's
# `limits` may still set either value explicitly.
DLA_LIMITS_BY_TENSORRT: tuple[tuple[tuple[int, ...], dict, str], ...] = (
    ((5,), {"max_dla_engines_total": 4, "max_dla_loadables_per_core": None},
     "at most 4 engines mapped to the DLAs at once (thesis Sec. 2.2, TensorRT 6 on JetPack 4.3)"),
    ((7,), {"max_dla_engines_total": None, "max_dla_loadables_per_core": 8},
     "TensorRT 7 developer guide, DLA restrictions: at most 8 subgraphs (loadables) per DLA core"),
    ((8,), {"max_dla_engines_total": None, "max_dla_loadables_per_core": 16},
     "TensorRT 8.x-10.x developer guide, DLA restrictions: at most 16 loadables per DLA core"),
)


def toolkit_version_tuple(text: str) -> tuple[int, ...] | None:
    """The first dotted version in a toolkit string, else its first number: 'tensorrt-8.5.2' -> (8, 5, 2),
    'tensorrt-6.0-sim' -> (6, 0), 'jetpack5-tensorrt-8.5' -> (8, 5), '10.0.0b6' -> (10, 0, 0); None without one."""
    m = re.search(r"\d+(?:\.\d+)+", str(text)) or re.search(r"\d+", str(text))
    return tuple(int(p) for p in m.group(0).split(".")) if m else None


def dla_limits_for(toolkit_version: str) -> dict:
    """The DLA limits the toolkit version implies (empty before the first known version or without one)."""
    version = toolkit_version_tuple(toolkit_version)
    out: dict = {}
    if version is None:
        return out
    for first, limits, _source in DLA_LIMITS_BY_TENSORRT:
        if version >= first:
            out = dict(limits)
    return out


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
    """Board power = static + busy CPU cores + sum over PEs of dynamic * load * (f/fmax)^exponent."""

    static_w: float
    cpu_core_w: float
    pe_dynamic_w: dict[str, float]
    freq_exponent: float = 2.4


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
    dla_rules: DlaRules | None = None
    cost: CostParams | None = None
    prepost: PrePost | None = None
    power: PowerModel | None = None
    board_costs: BoardCosts = field(default_factory=BoardCosts)
    noise_sigma: float = 0.01
    task_sigma: float = 0.0
    warmup_frames: int = 40
    max_sim_frames: int = 600
    raw: dict = field(default_factory=dict, compare=False, repr=False)

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

    def require_model(self, backend: str) -> None:
        """Refuse, naming the missing parts, when the profile lacks what a virtual board simulates."""
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


def _pe_cost(d: Mapping, where: str) -> PECost:
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
        concat_copy=float(d.get("concat_copy", 0.0)),
    )


def _cost(d: Mapping, where: str, has_dla: bool) -> CostParams | None:
    cd = d.get("cost")
    if not cd:
        return None
    ref = cd.get("reformat", {}) or {}
    cost = CostParams(gpu=_pe_cost(_req(cd, "gpu", f"{where} cost"), f"{where} cost.gpu"),
                      dla=_pe_cost(cd["dla"], f"{where} cost.dla") if cd.get("dla") else None,
                      reformat_fixed_us=float(ref.get("fixed_us", 0.0)),
                      reformat_bandwidth_gbs=float(ref.get("bandwidth_gbs", 10.0)),
                      boundary_us=float(cd.get("boundary_us", 0.0)))
    if has_dla and cost.dla is None:
        raise DseError(f"{where}: declares DLA PEs but no cost.dla parameters")
    return cost


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


def _power(d: Mapping, where: str, pes: Mapping[str, PE]) -> PowerModel | None:
    pw = d.get("power")
    if not pw:
        return None
    pe_dyn = {str(k): float(v.get("dynamic_w", 0.0)) for k, v in (pw.get("pe") or {}).items()}
    for k in pe_dyn:
        if k not in pes:
            raise choices_error(f"PE in power.pe of {where}", k, pes)
    return PowerModel(static_w=float(pw.get("static_w", 0.0)), cpu_core_w=float(pw.get("cpu_core_w", 0.0)),
                      pe_dynamic_w=pe_dyn, freq_exponent=float(pw.get("freq_exponent", 2.4)))


def _board_costs(d: Mapping, where: str) -> BoardCosts:
    bc = d.get("board_costs") or {}
    unknown = sorted(set(bc) - set(BoardCosts.__dataclass_fields__))
    if unknown:
        raise choices_error(f"{where} board_costs key", unknown[0], BoardCosts.__dataclass_fields__)
    default = BoardCosts()
    builds = {**default.engine_build_s, **{str(k).upper(): float(v) for k, v in (bc.get("engine_build_s") or {}).items()}}
    return BoardCosts(engine_build_s=builds, run_overhead_s=float(bc.get("run_overhead_s", default.run_overhead_s)))


def _limits(d: Mapping, where: str, toolkit_version: str) -> Limits:
    ld = d.get("limits", {}) or {}
    unknown = sorted(set(ld) - set(Limits.__dataclass_fields__))
    if unknown:
        raise choices_error(f"{where} limit", unknown[0], Limits.__dataclass_fields__)
    by_version = dla_limits_for(toolkit_version)   # a DLA limit left null (or out) follows the TensorRT version
    default = Limits()
    engines, loadables = ld.get("max_dla_engines_total"), ld.get("max_dla_loadables_per_core")
    limits = Limits(max_dla_engines_total=by_version.get("max_dla_engines_total") if engines is None else engines,
                    max_dla_loadables_per_core=(by_version.get("max_dla_loadables_per_core") if loadables is None
                                                else loadables),
                    max_streams_per_stage=ld.get("max_streams_per_stage", default.max_streams_per_stage),
                    max_stages=ld.get("max_stages", default.max_stages),
                    max_buffers=ld.get("max_buffers", default.max_buffers),
                    max_threads=ld.get("max_threads", default.max_threads),
                    max_batch=ld.get("max_batch", default.max_batch))
    for name in Limits.__dataclass_fields__:
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
    if ptype not in PE_TYPES:
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
    from dse.runtime.cpu_groups import usable_cores

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
    from dse.runtime.cpu_groups import core_group_name

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
    group configuration of at most ``max_groups`` groups ("2", "1-1", "3-1", ...)."""
    from dse.runtime.cpu_groups import core_group_layouts, usable_cores

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


def platform_from_dict(d: Mapping) -> Platform:
    """Build and validate a Platform from the YAML content (a dict or an omegaconf DictConfig)."""
    d = _plain(d)
    name = str(_req(d, "name", "the profile"))
    where = f"platform {name}"
    unknown = sorted(set(d) - set(TOP_LEVEL_KEYS))
    if unknown:
        raise choices_error(f"key of {where}", unknown[0], TOP_LEVEL_KEYS)
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
    rules = None
    if rd:
        rules = DlaRules(supported_ops=frozenset(str(o) for o in rd.get("supported_ops", ())),
                         unsupported_name_prefixes=tuple(rd.get("unsupported_name_prefixes", ())),
                         max_kernel=int(rd.get("max_kernel", 16)), concat_axis=int(rd.get("concat_axis", 1)),
                         max_batch=int(rd.get("max_batch", 32)))
    elif has_dla:
        raise DseError(f"{where}: declares DLA PEs but no dla_rules")
    toolkit = str(d.get("toolkit_version", "unknown"))
    cpu = d.get("cpu", {}) or {}
    cpu_pes = [p for p in pes.values() if p.type == "cpu"]
    noise = d.get("noise", {}) or {}
    sim = d.get("sim", {}) or {}
    return Platform(
        name=name, backend=str(d.get("backend", "sim")), board_model=str(d.get("board_model", name)),
        toolkit_version=toolkit, main_pe=main_pe, pes=pes, options=options, limits=_limits(d, where, toolkit),
        cpu_cores=int(cpu.get("cores", len({c for p in cpu_pes for c in p.cores}) or 1)),
        cpu_freq_mhz=tuple(float(f) for f in cpu.get("freq_mhz", ())),
        cpu_contention=float(cpu.get("contention", 0.0)), dla_rules=rules, cost=_cost(d, where, has_dla),
        prepost=_prepost(d, where), power=_power(d, where, pes), board_costs=_board_costs(d, where),
        noise_sigma=float(noise.get("sigma", 0.01)), task_sigma=float(noise.get("task_sigma", 0.0)),
        warmup_frames=int(sim.get("warmup_frames", 40)), max_sim_frames=int(sim.get("max_sim_frames", 600)),
        raw=dict(d))


def load_platform(source: Any) -> Platform:
    """A Platform from a profile name (composed through Hydra, so a board profile inherits its -sim twin),
    a YAML path, a dict or a DictConfig."""
    if isinstance(source, Platform):
        return source
    if isinstance(source, (str, Path)):
        path = Path(source)
        if path.suffix in (".yaml", ".yml"):
            if not path.is_file():
                raise DseError(f"platform profile {str(path)!r}: no such file")
            import yaml

            with open(path) as fh:
                return platform_from_dict(yaml.safe_load(fh))
        from dse.config import compose_config, group_choices

        if str(source) not in group_choices("platform"):
            raise choices_error("platform", str(source), group_choices("platform"))
        return platform_from_dict(compose_config([f"platform={source}"]).platform)
    return platform_from_dict(source)
