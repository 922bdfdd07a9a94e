"""The ``layermap`` config group (``config/layermap/default.yaml``) resolved against a platform when a run is planned:
every value checked, "auto" replaced, one config part per job kind."""
from __future__ import annotations

from dataclasses import asdict, dataclass

from dse.core.errors import DseError, choices_error
from dse.core.validate import bounded_seconds, check_keys, check_sizes
from dse.ilp import MAX_TIME_LIMIT_S


METHODS = ("ga", "ilp")


PROFILE_SOURCES = ("auto", "sim", "ort")


SETTING_KEYS = ("cpu_configs", "caps", "methods", "accelerators", "ga", "ilp", "profile", "pareto", "measure")


SUB_KEYS = {"ga": ("preset", "seed", "budget", "population", "generations"),
            "ilp": ("formulation", "clusters", "solver", "time_limit_s"),
            "profile": ("source", "repeats", "warmup"), "pareto": ("cpu_config", "budget", "population")}


PART_OF = {"profile": "lm-profile", "ga": "lm-ga", "ilp": "lm-ilp"}   # run/config/<part>.yaml each job reads


def cap_label(cap: float) -> str:
    """0.7 -> "70" (the file-name and table form of a cap, in percent)."""
    return f"{cap * 100:g}"


def _sub(d: dict, key: str) -> dict:
    node = dict(d.get(key) or {})
    check_keys(node, SUB_KEYS[key], f"layermap.{key} setting")
    return node


@dataclass(frozen=True)
class LayermapSettings:
    """The ``layermap`` group resolved against a platform ("auto" replaced, every value checked)."""

    cpu_configs: tuple[str, ...]
    caps: tuple[float, ...]
    methods: tuple[str, ...]
    accelerators: tuple[str, ...]
    ga: dict
    ilp: dict
    profile: dict
    pareto: dict
    measure: bool = True
    energy: bool = False      # the platform has a power model (Pareto plot, energy column)
    n_cores: int = 1          # the cores per-layer mapping splits (the CPU-only reference is one group of all)

    @classmethod
    def resolve(cls, node, platform) -> "LayermapSettings":
        from omegaconf import OmegaConf

        from dse.systems.layermap.ga import PRESETS
        from dse.systems.layermap.ilp import CLUSTER_MODES, FORMULATIONS, SOLVERS
        from dse.taskgraph.mapping import CpuConfig

        d = OmegaConf.to_container(node, resolve=True) if not isinstance(node, dict) else dict(node)
        check_keys(d, SETTING_KEYS, "layermap setting")
        n = platform.mapping_cores()
        valid = ["-".join(map(str, c)) for c in platform.cpu_configs()]
        cpus = d.get("cpu_configs", "auto")
        cpus = valid if cpus == "auto" else [str(c) for c in (cpus if isinstance(cpus, list) else [cpus])]
        for c in cpus:
            try:
                CpuConfig.parse(c, n_cores=n)
            except DseError:
                raise DseError(f"unknown CPU configuration {c!r} in layermap.cpu_configs; valid choices on "
                               f"{platform.name} ({n} cores): {', '.join(valid)}, or auto") from None
        caps = d.get("caps", [1.0])
        caps = caps if isinstance(caps, list) else [caps]
        for cap in caps:
            if isinstance(cap, bool) or not isinstance(cap, (int, float)) or not 0 < cap <= 1:
                raise DseError(f"layermap.caps: cap {cap!r} is outside (0, 1]; valid: CPU utilization fractions "
                               f"such as 1.0, 0.7, 0.5")
        methods = d.get("methods", list(METHODS))
        for m in (methods := methods if isinstance(methods, list) else [methods]):
            if m not in METHODS:
                raise choices_error("layermap method", m, METHODS)
        have = [k for k in platform.pe_kinds() if not k.startswith("cpu")]
        accels = d.get("accelerators", "auto")
        accels = have if accels == "auto" else [str(a).lower() for a in (accels or [])]
        for a in accels:
            if a not in have:
                raise choices_error(f"layermap accelerator of platform {platform.name}", a, have or ["none (use [])"])
        ga, ilp, prof, par = (_sub(d, k) for k in ("ga", "ilp", "profile", "pareto"))
        if ga.get("preset", "kang2020") not in PRESETS:
            raise choices_error("layermap.ga.preset", ga["preset"], PRESETS)
        for group, sub in (("ga", ga), ("pareto", par)):
            check_sizes(sub, f"layermap.{group}", {"population": 2, "generations": 1})
            check_sizes(sub, f"layermap.{group}", {"budget": 1}, hi=10**8)
        if ilp.get("formulation", "kang2020") not in FORMULATIONS:
            raise choices_error("layermap.ilp.formulation", ilp["formulation"], FORMULATIONS)
        if ilp.get("clusters", "exact") not in CLUSTER_MODES:
            raise choices_error("layermap.ilp.clusters", ilp["clusters"], ["exact", "at_most", "null"])
        if ilp.get("solver", "highs") not in SOLVERS:
            raise choices_error("layermap.ilp.solver", ilp["solver"], SOLVERS)
        bounded_seconds(ilp.get("time_limit_s", 60), "layermap.ilp.time_limit_s", MAX_TIME_LIMIT_S)
        source = prof.get("source", "auto")
        if source not in PROFILE_SOURCES:
            raise choices_error("layermap.profile.source", source, PROFILE_SOURCES)
        prof["source"] = ("ort" if platform.backend == "ort" else "sim") if source == "auto" else source
        par_cpu = par.get("cpu_config", "auto")
        par["cpu_config"] = cpus[-1] if par_cpu == "auto" else str(par_cpu)
        if par["cpu_config"] not in valid:
            raise DseError(f"unknown CPU configuration {par_cpu!r} in layermap.pareto.cpu_config; valid choices on "
                           f"{platform.name}: {', '.join(valid)}, or auto")
        return cls(cpu_configs=tuple(dict.fromkeys(cpus)), caps=tuple(dict.fromkeys(float(c) for c in caps)),
                   methods=tuple(dict.fromkeys(methods)), accelerators=tuple(accels),
                   ga={"preset": "kang2020", "seed": 0, "budget": 60000, "population": None, "generations": None, **ga},
                   ilp={"formulation": "kang2020", "clusters": "exact", "solver": "highs", "time_limit_s": 60, **ilp},
                   profile={"repeats": 20, "warmup": 3, **prof}, pareto={"budget": 10000, "population": 100, **par},
                   measure=bool(d.get("measure", True)), energy=platform.power is not None, n_cores=n)

    def to_dict(self) -> dict:
        return {**asdict(self), "cpu_configs": list(self.cpu_configs), "caps": list(self.caps),
                "methods": list(self.methods), "accelerators": list(self.accelerators)}

    @classmethod
    def from_dict(cls, d: dict) -> "LayermapSettings":
        return cls(**{**d, **{k: tuple(d[k]) for k in ("cpu_configs", "caps", "methods", "accelerators")}})

    def parts(self) -> dict[str, dict]:
        """The config parts of the layermap jobs: a job reruns only when its own part changes."""
        from dse.taskgraph import CpuConfig

        sizes = sorted({g for c in self.cpu_configs for g in CpuConfig.parse(c).groups} | {self.n_cores})
        kinds = [f"cpu{k}" for k in sizes] + list(self.accelerators)
        return {"layermap": self.to_dict(), "lm-ga": self.ga, "lm-ilp": self.ilp,
                "lm-profile": {**self.profile, "accelerators": list(self.accelerators), "kinds": kinds},
                "lm-pareto": {**self.pareto, "energy": self.energy}}

    def solve_files(self) -> list[str]:
        """Run-relative paths of the solve jobs' results."""
        return [f"layermap/{m}_{c}_{cap_label(cap)}.json"
                for c in self.cpu_configs for cap in self.caps for m in self.methods]


def refusal(platform, precision: str) -> str:
    """Why the layermap target cannot run on ``platform`` ("" when it can)."""
    if platform.backend == "sim" and platform.purpose != "layer-mapping":
        return (f"platform {platform.name} is a pipeline board: the layermap target runs on the layer-mapping boards "
                f"(galaxy-s9-sim, hikey970-sim) or on host-cpu (real ONNX Runtime runs)")
    if platform.backend not in ("sim", "ort"):
        return f"the layermap target runs on the sim and ort backends, not {platform.backend!r} ({platform.name})"
    if precision != "fp32":
        return f"per-layer mapping runs fp32 (ACL / ONNX Runtime CPU kernels), not {precision}"
    return ""
