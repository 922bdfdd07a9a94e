"""The ``dataflow`` config group (config/dataflow/*.yaml) resolved and checked: DL apps, groups of dataflow graphs
and DL apps with their grafts and priorities, the deadline sweep, methods, seeds and GA sizes. Every bad value is
refused here, naming it and the valid choices, before any job runs."""
from __future__ import annotations

from dataclasses import asdict, dataclass

from dse.core.errors import DseError, choices_error
from dse.core.validate import bounded_seconds, check_keys, check_sizes, dir_name
from dse.backends.sim.deployment import MAX_DEPLOY_S
from dse.systems.multi.settings import WCET_RULES, _num, check_pareto_choices

METHODS = ("heuristic-ga", "entire-ga", "baseline")
KEYS = ("name", "precision", "input_size", "networks", "groups", "priorities", "random_graphs", "fps", "methods",
        "seeds", "cpu_cores", "controller_core", "prepost_us", "tasktime", "pareto", "ga", "deploy")
GROUP_KEYS = ("graphs", "dl", "graft")
RANDOM_KEYS = ("count", "tasks", "cpu_us", "gpu_us", "gpu_only_share", "seed")
SUB_KEYS = {"pareto": ("options", "exhaustive_max", "population", "generations", "objective_runs", "runs",
                       "wcet_rule", "objectives", "selection"),
            "ga": ("population", "generations", "stall", "loose_fps"), "deploy": ("seconds",)}


@dataclass(frozen=True)
class GroupSpec:
    """One group: its dataflow graphs (names under config/dataflow/graphs), its DL apps, and the graph task
    each DL app's pre-processing follows (None: the DL app is independent of the graphs)."""

    name: str
    graphs: tuple[str, ...]
    dl: tuple[str, ...]
    graft: str | None


@dataclass(frozen=True)
class DataflowSettings:
    name: str
    precision: str
    input_size: int
    networks: dict[str, str]             # DL app -> benchmark
    groups: tuple[GroupSpec, ...]        # in priority order, highest first
    random_graphs: dict | None           # {count, tasks, cpu_us, gpu_us, gpu_only_share, seed}: one group each
    fps: tuple[float, ...]
    methods: tuple[str, ...]
    seeds: tuple[int, ...]
    cpu_cores: int
    controller_core: int | None
    prepost_us: dict | None
    tasktime: dict | None
    pareto: dict
    ga: dict
    deploy: dict

    @property
    def benchmarks(self) -> list[str]:
        """Distinct benchmarks, in app order: one step-1 job each."""
        return list(dict.fromkeys(self.networks.values()))

    def to_dict(self) -> dict:
        d = asdict(self)
        d["groups"] = {g.name: {"graphs": list(g.graphs), "dl": list(g.dl), "graft": g.graft} for g in self.groups}
        d["priorities"] = [g.name for g in self.groups]
        return d

    @classmethod
    def resolve(cls, node, platform=None, benchmarks=None, graphs=None) -> "DataflowSettings":
        """``node``: the composed ``dataflow`` group; ``platform``: the run's Platform (core checks); ``benchmarks``
        and ``graphs``: the known benchmark and graph names."""
        from omegaconf import OmegaConf

        from dse.core.configuration import PRECISIONS

        d = OmegaConf.to_container(node, resolve=True) if not isinstance(node, dict) else dict(node)
        check_keys(d, KEYS, "dataflow setting")
        missing = [k for k in ("name", "groups", "priorities", "fps") if not d.get(k)]
        if missing:
            raise DseError(f"dataflow config {d.get('name', '?')!r} needs {', '.join(missing)}")
        subs = {}
        for key, valid in SUB_KEYS.items():
            sub = dict(d.get(key) or {})
            check_keys(sub, valid, f"dataflow.{key} setting")
            subs[key] = sub
        nets = {str(a): str(b) for a, b in dict(d.get("networks") or {}).items()}
        if benchmarks is not None:
            for a, b in nets.items():
                if b not in benchmarks:
                    raise choices_error(f"benchmark of DL app {a}", b, sorted(benchmarks))
        if not isinstance(d["groups"], dict):
            raise DseError(f"dataflow.groups must map group names to {{graphs, dl, graft}}, got {d['groups']!r}")
        specs, used = {}, []
        for g, spec in dict(d["groups"]).items():
            spec = dict(spec or {})
            check_keys(spec, GROUP_KEYS, f"key of dataflow group {g}")
            gl, dl = [str(x) for x in spec.get("graphs") or []], [str(x) for x in spec.get("dl") or []]
            if not gl and not dl:
                raise DseError(f"dataflow group {g} has neither graphs nor DL apps")
            for x in gl:
                if graphs is not None and x not in graphs:
                    raise choices_error(f"graph of dataflow group {g}", x, graphs)
            for a in dl:
                if a not in nets:
                    raise choices_error(f"DL app of dataflow group {g}", a, list(nets))
            used += dl
            graft = spec.get("graft")
            if graft is not None and not (gl and dl):
                raise DseError(f"dataflow group {g}: graft {graft!r} needs both a graph and a DL app in the group")
            if graft is not None and graphs is not None:
                from dse.systems.dataflow.comap import graft_index
                from dse.systems.dataflow.graphs import load_graph

                graft_index(str(g), [load_graph(x) for x in gl], str(graft))
            specs[str(g)] = GroupSpec(str(g), tuple(gl), tuple(dl), None if graft is None else str(graft))
        dup = sorted({a for a in used if used.count(a) > 1})
        if dup:
            raise DseError(f"DL app {dup[0]} is in more than one dataflow group: each app belongs to one group")
        prio = [str(p) for p in d["priorities"]]
        if sorted(prio) != sorted(specs) or len(set(prio)) != len(prio):
            raise DseError(f"dataflow.priorities must order every group exactly once (a total order), got {prio} for "
                           f"groups {list(specs)}")
        rnd = d.get("random_graphs")
        if rnd is not None:
            rnd = dict(rnd)
            check_keys(rnd, RANDOM_KEYS, "dataflow.random_graphs setting")
            if _num(rnd.get("count", 0), "dataflow.random_graphs.count", integer=True) < 1:
                raise DseError(f"dataflow.random_graphs.count must be >= 1, got {rnd.get('count')!r}")
            for k in ("cpu_us", "gpu_us"):
                lo_hi = rnd.get(k)
                if lo_hi is not None and (not isinstance(lo_hi, list) or len(lo_hi) != 2 or not 0 < lo_hi[0] <= lo_hi[1]):
                    raise DseError(f"dataflow.random_graphs.{k} must be [low, high] with 0 < low <= high, got {lo_hi!r}")
        fps = tuple(sorted(_num(v, "dataflow.fps entry") for v in (d["fps"] if isinstance(d["fps"], list)
                                                                      else [d["fps"]])))
        if min(fps) <= 0:
            raise DseError(f"dataflow.fps must list FPS values > 0 (group deadlines), got {list(fps)}")
        methods = tuple(str(m) for m in d.get("methods") or METHODS)
        for m in methods:
            if m not in METHODS:
                raise choices_error("dataflow method", m, METHODS)
        seeds = tuple(_num(s, "dataflow.seeds entry", integer=True) for s in d.get("seeds") or [0])
        precision = str(d.get("precision", "fp16"))
        if precision not in PRECISIONS:
            raise choices_error("dataflow.precision", precision, PRECISIONS)
        size = _num(d.get("input_size", 256), "dataflow.input_size", integer=True)
        if size < 32 or size % 32:
            raise DseError(f"dataflow.input_size must be a positive multiple of 32, got {size}")
        cores = _num(d.get("cpu_cores", 4), "dataflow.cpu_cores", integer=True)
        board_cores = platform.cpu_cores if platform is not None else 64
        if not 1 <= cores <= board_cores:
            raise DseError(f"dataflow.cpu_cores must be in 1..{board_cores}, got {cores}")
        ctrl = d.get("controller_core")
        if ctrl is not None and not cores <= _num(ctrl, "dataflow.controller_core", integer=True) < board_cores:
            raise DseError(f"dataflow.controller_core must be a core outside the {cores} app cores (in "
                           f"{cores}..{board_cores - 1}), got {ctrl}")
        check_sizes(subs["ga"], "dataflow.ga", {"population": 2, "generations": 0, "stall": 0})
        if "loose_fps" in subs["ga"] and _num(subs["ga"]["loose_fps"], "dataflow.ga.loose_fps") <= 0:
            raise DseError(f"dataflow.ga.loose_fps must be > 0, got {subs['ga']['loose_fps']!r}")
        rule = subs["pareto"].get("wcet_rule", "6sigma")
        if rule not in WCET_RULES:
            raise choices_error("dataflow.pareto.wcet_rule", rule, WCET_RULES)
        check_pareto_choices(subs["pareto"], "dataflow")
        if "seconds" in subs["deploy"]:
            bounded_seconds(subs["deploy"]["seconds"], "dataflow.deploy.seconds", MAX_DEPLOY_S)
        return cls(name=dir_name(d["name"], "dataflow.name"), precision=precision, input_size=size, networks=nets,
                   groups=tuple(specs[g] for g in prio), random_graphs=rnd, fps=fps, methods=methods, seeds=seeds,
                   cpu_cores=cores, controller_core=None if ctrl is None else int(ctrl),
                   prepost_us=d.get("prepost_us"), tasktime=d.get("tasktime"), pareto=subs["pareto"], ga=subs["ga"],
                   deploy=subs["deploy"])

