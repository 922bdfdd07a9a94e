"""Platform profiles: a board's processing elements, limits, cost/power parameters and mapping options.

A profile is a YAML file in ``config/platform/`` (or the ``platform`` node of the composed Hydra config).
Loading validates it once so backends and strategies can trust the dataclasses.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from dse.errors import DseError, choices_error

PLATFORM_DIR = Path(__file__).resolve().parents[1] / "config" / "platform"
PE_TYPES = ("gpu", "dla", "cpu")


@dataclass(frozen=True)
class PE:
    """One processing element (GPU, DLA0, ...): its type, DLA core id, precisions and DVFS table."""

    name: str
    type: str
    precisions: tuple[str, ...]
    core: int | None = None
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


@dataclass(frozen=True)
class Limits:
    max_dla_engines_total: int | None = None      # engines deserialized on the DLAs at once (a PND stage: 2)
    max_dla_loadables_per_core: int | None = None # DLA loadables per core (GPU fallback splits an engine into several)
    max_streams_per_stage: int = 16
    max_stages: int = 4


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
class StageSpec:
    """One stage of a mapping option: its PE type and, for a DLA, a core or PND (both cores)."""

    pe_type: str
    core: int | None = None
    pnd: bool = False
    interleaved: bool = False   # the whole network on the GPU and on every DLA core, frames alternate

    def label(self) -> str:
        if self.interleaved:
            return "GPU|DLA*"
        if self.pe_type == "gpu":
            return "GPU"
        return "DLA(x2)" if self.pnd else f"DLA{self.core}"


@dataclass(frozen=True)
class MappingOption:
    name: str
    stages: tuple[StageSpec, ...]

    @property
    def n_stages(self) -> int:
        return len(self.stages)

    def describe(self) -> str:
        return "-".join(s.label() for s in self.stages)


@dataclass(frozen=True)
class Platform:
    name: str
    backend: str
    board_model: str
    toolkit_version: str
    main_pe: str
    cpu_cores: int
    cpu_freq_mhz: tuple[float, ...]
    cpu_contention: float
    pes: dict[str, PE]
    cost: CostParams
    dla_rules: DlaRules | None
    limits: Limits
    prepost: PrePost
    power: PowerModel
    options: dict[str, MappingOption]
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

    def dla_pes(self) -> list[PE]:
        return sorted((p for p in self.pes.values() if p.type == "dla"), key=lambda p: p.core or 0)

    def dla_pe(self, core: int) -> PE:
        for p in self.dla_pes():
            if p.core == core:
                return p
        raise choices_error("DLA core", core, [p.core for p in self.dla_pes()])

    def stage_pes(self, spec: StageSpec) -> list[str]:
        """PE names a stage runs on (two for a PND stage, all for an interleaved one)."""
        if spec.interleaved:
            return [self.main_pe, *(p.name for p in self.dla_pes())]
        if spec.pe_type == "gpu":
            return [self.main_pe]
        if spec.pnd:
            return [p.name for p in self.dla_pes()]
        return [self.dla_pe(spec.core or 0).name]

    def precisions_of(self, pe_type: str) -> set[str]:
        out: set[str] = set()
        for p in self.pes.values():
            if p.type == pe_type:
                out |= set(p.precisions)
        return out


def _plain(cfg: Any) -> dict:
    """DictConfig / Mapping -> plain dict (resolving interpolations)."""
    try:
        from omegaconf import DictConfig, OmegaConf

        if isinstance(cfg, DictConfig):
            return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]
    except ImportError:  # pragma: no cover
        pass
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


def platform_from_dict(d: Mapping) -> Platform:
    """Build and validate a Platform from the YAML content (a dict or an omegaconf DictConfig)."""
    d = _plain(d)
    name = str(_req(d, "name", "the profile"))
    where = f"platform {name}"
    pes: dict[str, PE] = {}
    for pe_name, pd in _req(d, "pes", where).items():
        ptype = str(_req(pd, "type", f"{where} pes.{pe_name}")).lower()
        if ptype not in PE_TYPES:
            raise choices_error(f"PE type of {pe_name}", ptype, PE_TYPES)
        precisions = tuple(str(p) for p in pd.get("precisions", ()))
        if ptype == "dla" and "fp32" in precisions:
            raise DseError(f"{where}: {pe_name} is a DLA and cannot list fp32 (DLAs run fp16/int8 only)")
        pes[pe_name] = PE(name=pe_name, type=ptype, precisions=precisions,
                          core=pd.get("core"), freq_mhz=tuple(float(f) for f in pd.get("freq_mhz", ())))
    main_pe = str(d.get("main_pe", "GPU"))
    if main_pe not in pes:
        raise choices_error(f"main_pe of {where}", main_pe, pes)

    cd = _req(d, "cost", where)
    ref = cd.get("reformat", {}) or {}
    cost = CostParams(gpu=_pe_cost(_req(cd, "gpu", f"{where} cost"), f"{where} cost.gpu"),
                      dla=_pe_cost(cd["dla"], f"{where} cost.dla") if cd.get("dla") else None,
                      reformat_fixed_us=float(ref.get("fixed_us", 0.0)),
                      reformat_bandwidth_gbs=float(ref.get("bandwidth_gbs", 10.0)),
                      boundary_us=float(cd.get("boundary_us", 0.0)))
    has_dla = any(p.type == "dla" for p in pes.values())
    if has_dla and cost.dla is None:
        raise DseError(f"{where}: declares DLA PEs but no cost.dla parameters")

    rd = d.get("dla_rules")
    rules = None
    if rd:
        rules = DlaRules(supported_ops=frozenset(str(o) for o in rd.get("supported_ops", ())),
                         unsupported_name_prefixes=tuple(rd.get("unsupported_name_prefixes", ())),
                         max_kernel=int(rd.get("max_kernel", 16)), concat_axis=int(rd.get("concat_axis", 1)),
                         max_batch=int(rd.get("max_batch", 32)))
    elif has_dla:
        raise DseError(f"{where}: declares DLA PEs but no dla_rules")

    ld = d.get("limits", {}) or {}
    unknown = sorted(set(ld) - set(Limits.__dataclass_fields__))
    if unknown:
        raise choices_error(f"{where} limit", unknown[0], Limits.__dataclass_fields__)
    limits = Limits(max_dla_engines_total=ld.get("max_dla_engines_total"),
                    max_dla_loadables_per_core=ld.get("max_dla_loadables_per_core"),
                    max_streams_per_stage=int(ld.get("max_streams_per_stage", 16)),
                    max_stages=int(ld.get("max_stages", 4)))

    pp = _req(d, "prepost", where)
    pre, post = _req(pp, "pre", f"{where} prepost"), _req(pp, "post", f"{where} prepost")
    prepost = PrePost(pre_per_batch_us=float(pre.get("per_batch_us", 0.0)),
                      pre_per_image_us=float(pre.get("per_image_us", 0.0)),
                      pre_per_image_pixels_us=float(pre.get("per_image_pixels_us", 0.0)),
                      letterbox_factor=float(pre.get("letterbox_factor", 1.0)),
                      post_per_batch_us=float(post.get("per_batch_us", 0.0)),
                      post_per_box_us=float(post.get("per_box_us", 0.0)),
                      post_min_boxes=int(post.get("min_boxes", 0)),
                      reference_size=int(pp.get("reference_size", 416)))

    pw = _req(d, "power", where)
    pe_dyn = {str(k): float(v.get("dynamic_w", 0.0)) for k, v in (pw.get("pe") or {}).items()}
    for k in pe_dyn:
        if k not in pes:
            raise choices_error(f"PE in power.pe of {where}", k, pes)
    power = PowerModel(static_w=float(pw.get("static_w", 0.0)), cpu_core_w=float(pw.get("cpu_core_w", 0.0)),
                       pe_dynamic_w=pe_dyn, freq_exponent=float(pw.get("freq_exponent", 2.4)))

    options: dict[str, MappingOption] = {}
    dla_cores = {p.core for p in pes.values() if p.type == "dla"}
    for oname, stages in _req(d, "options", where).items():
        specs = []
        for i, sd in enumerate(stages):
            ptype = str(_req(sd, "pe_type", f"{where} option {oname} stage {i}")).lower()
            if ptype not in ("gpu", "dla"):
                raise choices_error(f"pe_type of option {oname} stage {i}", ptype, ("GPU", "DLA"))
            pnd = bool(sd.get("pnd", False))
            core = sd.get("core")
            if ptype == "dla":
                if not dla_cores:
                    raise DseError(f"{where}: option {oname} uses a DLA but the platform has none")
                if pnd and len(dla_cores) < 2:
                    raise DseError(f"{where}: option {oname} uses PND but the platform has fewer than 2 DLA cores")
                if not pnd and core not in dla_cores:
                    raise choices_error(f"DLA core of option {oname} stage {i}", core, sorted(dla_cores))
            interleaved = bool(sd.get("interleaved", False))
            if interleaved and (ptype != "gpu" or not dla_cores or len(stages) != 1):
                raise DseError(f"{where}: option {oname}: an interleaved stage is a GPU stage, the only stage of "
                               f"its option, on a platform with DLA cores")
            specs.append(StageSpec(pe_type=ptype, core=None if ptype == "gpu" else (None if pnd else int(core)),
                                   pnd=pnd, interleaved=interleaved))
        if not specs:
            raise DseError(f"{where}: option {oname} has no stages")
        options[str(oname)] = MappingOption(name=str(oname), stages=tuple(specs))
    if "E" not in options or [s.pe_type for s in options["E"].stages] != ["gpu"]:
        raise DseError(f"{where}: every platform needs option E (the whole network on its main PE)")

    cpu = d.get("cpu", {}) or {}
    noise = d.get("noise", {}) or {}
    sim = d.get("sim", {}) or {}
    return Platform(
        name=name, backend=str(d.get("backend", "sim")), board_model=str(d.get("board_model", name)),
        toolkit_version=str(d.get("toolkit_version", "unknown")), main_pe=main_pe,
        cpu_cores=int(cpu.get("cores", 1)), cpu_freq_mhz=tuple(float(f) for f in cpu.get("freq_mhz", ())),
        cpu_contention=float(cpu.get("contention", 0.0)), pes=pes, cost=cost, dla_rules=rules, limits=limits,
        prepost=prepost, power=power, options=options, noise_sigma=float(noise.get("sigma", 0.01)),
        task_sigma=float(noise.get("task_sigma", 0.0)), warmup_frames=int(sim.get("warmup_frames", 40)),
        max_sim_frames=int(sim.get("max_sim_frames", 600)), raw=dict(d))


def available_platforms() -> list[str]:
    return sorted(p.stem for p in PLATFORM_DIR.glob("*.yaml"))


def load_platform(source: Any) -> Platform:
    """A Platform from a profile name (``xavier-agx-sim``), a YAML path, a dict or a DictConfig."""
    if isinstance(source, Platform):
        return source
    if isinstance(source, (str, Path)):
        path = Path(source)
        if not path.suffix:
            path = PLATFORM_DIR / f"{source}.yaml"
        if not path.exists():
            raise choices_error("platform", str(source), available_platforms())
        import yaml

        with open(path) as fh:
            return platform_from_dict(yaml.safe_load(fh))
    return platform_from_dict(source)
