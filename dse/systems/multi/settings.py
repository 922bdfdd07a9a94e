"""The ``multi`` config group (config/multi/*.yaml) resolved and checked: apps, priorities, FSM scenarios, FPS
sweeps, GA sizes. Every bad value is refused here, naming it and the valid choices, before any job runs."""
from __future__ import annotations

from dataclasses import asdict, dataclass

from dse.backends.sim.deployment import MAX_DEPLOY_S
from dse.core.validate import bounded_seconds, check_keys, check_sizes, dir_name
from dse.core.errors import DseError, choices_error

METHODS = ("BS", "GB", "PR-GB", "LC", "SOTA", "PR")
KEYS = ("name", "precision", "input_size", "apps", "priorities", "fsms", "fps", "methods", "cpu_cores",
        "controller_core", "controller_us", "contention_margin", "prepost_us", "pareto", "ga", "freq_order", "deploy")
SUB_KEYS = {"pareto": ("options", "exhaustive_max", "population", "generations", "objective_runs", "runs",
                       "wcet_rule", "objectives", "selection"),
            "ga": ("population", "generations", "stall", "seed"), "deploy": ("seconds", "repeats"),
            "prepost_us": ("pre", "post")}
WCET_RULES = ("max6sigma", "6sigma")


@dataclass(frozen=True)
class MultiSettings:
    name: str
    precision: str
    input_size: int
    apps: dict[str, str]                 # app -> benchmark name, in app order
    priorities: tuple[str, ...]          # highest first
    fsms: dict[str, tuple[tuple[str, ...], ...]]
    fps: dict[str, tuple[float, ...]]
    methods: tuple[str, ...]
    cpu_cores: int
    controller_core: int | None
    controller_us: float
    contention_margin: float | None      # None: the platform's accelerator contention
    prepost_us: dict | None
    pareto: dict
    ga: dict
    freq_order: tuple[str, ...]
    deploy: dict

    @property
    def networks(self) -> list[str]:
        """Distinct benchmarks, in app order: one step-1 job each."""
        return list(dict.fromkeys(self.apps.values()))

    def priority(self, app: str) -> int:
        return self.priorities.index(app)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["fsms"] = {k: [list(s) for s in v] for k, v in self.fsms.items()}
        return d

    @classmethod
    def resolve(cls, node, platform=None, benchmarks=None) -> "MultiSettings":
        """``node``: the composed ``multi`` group (DictConfig or dict); ``platform``: the run's Platform (core and
        DLA checks); ``benchmarks``: the known benchmark names."""
        from omegaconf import OmegaConf

        from dse.core.configuration import PRECISIONS

        d = OmegaConf.to_container(node, resolve=True) if not isinstance(node, dict) else dict(node)
        check_keys(d, KEYS, "multi setting")
        missing = [k for k in ("name", "apps", "priorities", "fsms") if not d.get(k)]
        if missing:
            raise DseError(f"multi config {d.get('name', '?')!r} needs {', '.join(missing)}")
        subs = {}
        for key, valid in SUB_KEYS.items():
            sub = d.get(key)
            if sub is None and key == "prepost_us":
                subs[key] = None
                continue
            sub = dict(sub or {})
            check_keys(sub, valid, f"multi.{key} setting")
            subs[key] = sub
        if not isinstance(d["apps"], dict):
            raise DseError(f"multi.apps must map app names to benchmarks (e.g. {{app0: yolov2}}), got {d['apps']!r}")
        apps = {str(a): str(b) for a, b in dict(d["apps"]).items()}
        for a in apps:
            if "+" in a or not a or a.startswith("_"):
                raise DseError(f"app name {a!r}: use letters, digits, '-' or '_' (no '+', which joins scenario "
                               "labels, and no leading '_', reserved)")
        if benchmarks is not None:
            for a, b in apps.items():
                if b not in benchmarks:
                    raise choices_error(f"benchmark of app {a}", b, sorted(benchmarks))
        prio = tuple(str(p) for p in d["priorities"])
        if sorted(prio) != sorted(apps) or len(set(prio)) != len(prio):
            raise DseError(f"multi.priorities must order every app exactly once (a total order), got {list(prio)} "
                           f"for apps {list(apps)}")
        fsms = {}
        for f, scs in dict(d["fsms"]).items():
            if not scs:
                raise DseError(f"FSM {f} has no scenarios; give a list of app lists, e.g. [[app0], [app0, app1]]")
            out = []
            for sc in scs:
                if not sc:
                    raise DseError(f"FSM {f} has an empty scenario")
                for a in sc:
                    if str(a) not in apps:
                        raise choices_error(f"app in a scenario of FSM {f}", a, list(apps))
                out.append(tuple(sorted({str(a) for a in sc}, key=list(apps).index)))
            fsms[str(f)] = tuple(out)
        fps = {}
        if not isinstance(d.get("fps") or {}, dict):
            raise DseError(f"multi.fps must map FSMs to FPS lists (e.g. {{A: [35, 40]}}), got {d.get('fps')!r}")
        for f, values in dict(d.get("fps") or {}).items():
            if str(f) not in fsms:
                raise choices_error("FSM of multi.fps", f, list(fsms))
            vals = tuple(_num(v, f"multi.fps.{f} entry") for v in (values if isinstance(values, list) else [values]))
            if not vals or min(vals) <= 0:
                raise DseError(f"multi.fps.{f} must list FPS values > 0, got {list(values)}")
            fps[str(f)] = tuple(sorted(vals))
        methods = tuple(str(m) for m in d.get("methods") or METHODS)
        for m in methods:
            if m not in METHODS:
                raise choices_error("multi method", m, METHODS)
        precision = str(d.get("precision", "fp16"))
        if precision not in PRECISIONS:
            raise choices_error("multi.precision", precision, PRECISIONS)
        size = _num(d.get("input_size", 256), "multi.input_size", integer=True)
        if size < 32 or size % 32:
            raise DseError(f"multi.input_size must be a positive multiple of 32, got {size}")
        cores = _num(d.get("cpu_cores", 8), "multi.cpu_cores", integer=True)
        ctrl = d.get("controller_core")
        if platform is not None and not 1 <= cores <= platform.cpu_cores:
            raise DseError(f"multi.cpu_cores must be in 1..{platform.cpu_cores} (the cores of {platform.name}), "
                           f"got {cores}")
        if ctrl is not None and not 0 <= int(ctrl) < (platform.cpu_cores if platform is not None else cores):
            raise DseError(f"multi.controller_core {ctrl} is not a core of the board")
        check_sizes(subs["ga"], "multi.ga", {"population": 2, "generations": 0, "stall": 0})
        check_sizes(subs["pareto"], "multi.pareto", {"population": 2, "generations": 0, "runs": 2,
                                                     "objective_runs": 2, "exhaustive_max": 0})
        if "seconds" in subs["deploy"]:
            bounded_seconds(subs["deploy"]["seconds"], "multi.deploy.seconds", MAX_DEPLOY_S)
        check_sizes(subs["deploy"], "multi.deploy", {"repeats": 1}, hi=1000)
        if not isinstance(subs["pareto"].get("options", []), list):
            raise DseError(f"multi.pareto.options must be a list of mapping options, got "
                           f"{subs['pareto']['options']!r}")
        controller_us = _num(d.get("controller_us", 50.0), "multi.controller_us")
        if controller_us < 0:
            raise DseError(f"multi.controller_us must be >= 0, got {controller_us}")
        rule = subs["pareto"].get("wcet_rule", "max6sigma")
        if rule not in WCET_RULES:
            raise choices_error("multi.pareto.wcet_rule", rule, WCET_RULES)
        check_pareto_choices(subs["pareto"], "multi")
        if platform is not None:
            opts = subs["pareto"].get("options") or ["A", "B", "C", "D", "E"]
            for o in opts:
                if o not in platform.options:
                    raise choices_error("multi.pareto.options entry", o, list(platform.options))
        order = tuple(str(k) for k in d.get("freq_order") or ("gpu", "cpu", "dla"))
        if sorted(order) != ["cpu", "dla", "gpu"]:
            raise DseError(f"multi.freq_order must order cpu, gpu and dla once each, got {list(order)}")
        return cls(name=dir_name(d["name"], "multi.name"), precision=precision, input_size=size, apps=apps,
                   priorities=prio,
                   fsms=fsms, fps=fps, methods=methods, cpu_cores=cores,
                   controller_core=None if ctrl is None else int(ctrl),
                   controller_us=controller_us,
                   contention_margin=_margin(d.get("contention_margin", 0.0)), prepost_us=subs["prepost_us"],
                   pareto=subs["pareto"], ga=subs["ga"], freq_order=order, deploy=subs["deploy"])


def check_pareto_choices(pareto: dict, prefix: str) -> None:
    """The step-1 objective set and parent selection, named with the valid choices."""
    from dse.systems.multi.pareto import OBJECTIVE_SETS, SELECTIONS

    for key, valid in (("objectives", OBJECTIVE_SETS), ("selection", SELECTIONS)):
        if key in pareto and pareto[key] not in valid:
            raise choices_error(f"{prefix}.pareto.{key}", pareto[key], valid)


def _margin(v) -> float | None:
    if v in (None, "platform"):
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
        raise DseError(f"multi.contention_margin must be a number >= 0 or 'platform', got {v!r}")
    return float(v)


def _num(v, name: str, integer: bool = False):
    """A number from the config, or a DseError naming the key and the value."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (integer and float(v) != int(v)):
        raise DseError(f"{name} must be {'an integer' if integer else 'a number'}, got {v!r}")
    return int(v) if integer else float(v)
