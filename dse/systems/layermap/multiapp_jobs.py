"""Target `multiapp`: several DNNs mapped layer by layer onto one board's PEs under periods and fixed priorities
(seed 002, Kang et al. 2020, Sec. VI; spec seeds-001-004 section 3.5).

Jobs (``workflow/rules/multiapp.smk``), in ``results/multiapp/<name>/<platform>/``:
- ``profile`` per app: its task graph's per-PE-kind profile on the board (``profiles/<app>.parquet``), the cost
  models the single-app ``layermap`` target uses;
- ``search``: each app's minimum response time alone, then SPEA2 over the joint chromosome with the schedule-based
  analysis (``dse.rt.schedule_based``) as the response-time objectives, and the total energy
  (``multiapp.parquet``: the Pareto set, one row per solution);
- ``report``: the chosen Pareto solutions run in the periodic simulation with fixed priorities on every PE
  (``check.parquet``: misses and simulated worst response against the analysis' bound), ``multiapp.md`` and the
  plots of the seed's Fig. 11 (relative response times) and Fig. 12 (energy over two apps' response times).
Settings: the ``multiapp`` config group (``config/multiapp/s9.yaml``), checked against the board when planned.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from dse.backends.sim.deployment import MAX_DEPLOY_S
from dse.config import Plan, read_part
from dse.core.errors import DseError, choices_error
from dse.core.validate import check_keys, check_sizes, dir_name
from dse.systems.common import compose_sim_case, say

if TYPE_CHECKING:
    import pandas as pd

PROFILE_REPEATS, PROFILE_WARMUP = 20, 3     # host-cpu: real runs per task (median), as the layermap target's default
KEYS = ("name", "platform", "cpu_config", "accelerators", "response", "apps", "ga", "alone", "check")
SUB_KEYS = {"ga": ("population", "generations", "seed"), "alone": ("population", "generations"),
            "check": ("mappings", "hyperperiods")}
APP_KEYS = ("benchmark", "period_ms", "priority")
MAX_APPS = 8
OUTPUTS = ("multiapp.md", "multiapp.parquet", "check.parquet", "plots/relative_response.png",
           "plots/energy_pairs.png", "config.yaml")


@dataclass(frozen=True)
class AppSpec:
    benchmark: str
    period_ms: float
    priority: int


@dataclass(frozen=True)
class MultiappSettings:
    name: str
    platform: str
    cpu_config: str
    accelerators: tuple[str, ...]
    response: str
    apps: tuple[AppSpec, ...]
    ga: dict
    alone: dict
    check: dict

    @classmethod
    def from_dict(cls, d: dict, platform=None, benchmarks=None) -> "MultiappSettings":
        """Every value checked (names, periods, distinct priorities, GA and check sizes; with ``platform``, the
        CPU configuration and accelerators against the board; with ``benchmarks``, the apps' names)."""
        from dse.taskgraph.mapping import CpuConfig, PeSet

        check_keys(d, KEYS, "key of multiapp")
        subs = {k: dict(d.get(k) or {}) for k in SUB_KEYS}
        for k, sub in subs.items():
            check_keys(sub, SUB_KEYS[k], f"key of multiapp.{k}")
        check_sizes(subs["ga"], "multiapp.ga", {"population": 4, "generations": 0})
        check_sizes(subs["alone"], "multiapp.alone", {"population": 4, "generations": 0})
        check_sizes(subs["check"], "multiapp.check", {"mappings": 0, "hyperperiods": 1}, hi=10_000)
        apps = d.get("apps")
        if not isinstance(apps, list) or not 1 <= len(apps) <= MAX_APPS:
            raise DseError(f"multiapp.apps must be a list of 1..{MAX_APPS} apps ({{benchmark, period_ms, priority}}), "
                           f"got {apps!r}")
        specs = []
        for i, a in enumerate(apps):
            if not isinstance(a, dict):
                raise DseError(f"multiapp.apps[{i}] must be a mapping with keys {', '.join(APP_KEYS)}, got {a!r}")
            check_keys(a, APP_KEYS, f"key of multiapp.apps[{i}]")
            missing = [k for k in APP_KEYS if k not in a]
            if missing:
                raise DseError(f"multiapp.apps[{i}] lacks {', '.join(missing)}")
            if benchmarks is not None and a["benchmark"] not in benchmarks:
                raise choices_error(f"multiapp.apps[{i}].benchmark", a["benchmark"], benchmarks)
            period = a["period_ms"]
            if isinstance(period, bool) or not isinstance(period, (int, float)) or not 0 < period <= 10_000:
                raise DseError(f"multiapp.apps[{i}].period_ms must be a number in (0, 10,000], got {period!r}")
            if isinstance(a["priority"], bool) or not isinstance(a["priority"], int):
                raise DseError(f"multiapp.apps[{i}].priority must be an integer, got {a['priority']!r}")
            specs.append(AppSpec(str(a["benchmark"]), float(period), int(a["priority"])))
        for what in ("benchmark", "priority"):
            values = [getattr(s, what) for s in specs]
            if len(set(values)) != len(values):
                raise DseError(f"multiapp.apps: every app needs its own {what}, got {values}")
        from dse.rt.schedule_based import RESPONSES

        response = str(d.get("response", "pipelined"))
        if response not in RESPONSES:
            raise choices_error("multiapp.response", response, RESPONSES)
        accels = tuple(str(a).lower() for a in d.get("accelerators") or ())
        cpu = str(d.get("cpu_config", "1-1-1-1"))
        if platform is not None:
            cores = platform.mapping_core_ids()
            config = CpuConfig.parse(cpu, len(cores))
            PeSet.build(config, accels, cores)
            have = sorted({p.type for p in platform.pes.values() if p.type in ("gpu", "npu", "dla")})
            for a in accels:
                if a not in have:
                    raise choices_error(f"multiapp accelerator of platform {platform.name}", a, have)
        out = cls(dir_name(d.get("name"), "multiapp.name"), str(d.get("platform")), cpu, accels, response,
                  tuple(specs),
                  {"population": 100, "generations": 150, "seed": 0, **subs["ga"]},
                  {"population": 100, "generations": 100, **subs["alone"]},
                  {"mappings": 6, "hyperperiods": 100, **subs["check"]})
        simulated_s = out.check["hyperperiods"] * out.hyperperiod_ms / 1000
        if simulated_s > MAX_DEPLOY_S:
            raise DseError(f"multiapp.check: {out.check['hyperperiods']} hyperperiods of {out.hyperperiod_ms:,g} ms "
                           f"are {simulated_s:,.0f} s to simulate per mapping; at most {MAX_DEPLOY_S:,.0f} s (fewer "
                           "hyperperiods, or periods with a shorter common multiple)")
        return out

    def to_dict(self) -> dict:
        d = asdict(self)
        d["accelerators"], d["apps"] = list(self.accelerators), [asdict(a) for a in self.apps]
        return d

    @property
    def hyperperiod_ms(self) -> float:
        """The apps' hyperperiod (periods rounded to us)."""
        return float(math.lcm(*(round(a.period_ms * 1000) for a in self.apps))) / 1000


def case_dir(results_dir: str, name: str, platform: str) -> str:
    return f"{results_dir}/multiapp/{name}/{platform}"


def plan_multiapp(snakemake_config: dict) -> dict[str, Plan]:
    """Compose the config (``overrides``, e.g. ``[multiapp=s9]``) and check the case against its board and the
    apps' benchmarks before any job runs. Writes nothing."""
    from omegaconf import OmegaConf

    from dse.config import compose_config, group_choices
    from dse.network import model_source

    cfg, _, _ = compose_sim_case(snakemake_config, "multiapp")
    raw = OmegaConf.to_container(cfg.multiapp, resolve=True)
    if not isinstance(raw, dict):
        raise DseError(f"the multiapp group must be a mapping, got {raw!r}")
    platform_name = str(raw.get("platform"))
    if platform_name not in group_choices("platform"):
        raise choices_error("multiapp.platform", platform_name, group_choices("platform"))
    per_app = {}
    for a in raw.get("apps") or []:
        bench = a.get("benchmark") if isinstance(a, dict) else None
        if bench in group_choices("benchmark"):
            per_app[bench] = compose_config([f"platform={platform_name}", f"benchmark={bench}", f"seed={cfg.seed}"])
    first = next(iter(per_app.values()), None) or compose_config([f"platform={platform_name}"])
    platform = OmegaConf.to_container(first.platform, resolve=True)
    from dse.platform import load_platform

    loaded = load_platform(platform)
    if loaded.backend not in ("sim", "ort"):
        raise DseError(f"target multiapp runs on a virtual board (backend sim) or this host's CPU core groups "
                       f"(host-cpu, backend ort); multiapp.platform {loaded.name} has backend {loaded.backend}")
    settings = MultiappSettings.from_dict(raw, loaded, group_choices("benchmark"))
    # what a profile depends on (the apps' models, the PEs) is a part of its own: a GA setting reruns no profile
    profiled = {"sources": {b: {**model_source(c), "precision": str(c.precision)} for b, c in per_app.items()},
                "cpu_config": settings.cpu_config, "accelerators": list(settings.accelerators)}
    text = {"multiapp": OmegaConf.to_yaml(OmegaConf.create(settings.to_dict())),
            "multiapp-apps": OmegaConf.to_yaml(OmegaConf.create(profiled)),
            "platform": OmegaConf.to_yaml(OmegaConf.create(platform))}
    mdir = case_dir(cfg.results_dir, settings.name, loaded.name)
    names = tuple(a.benchmark for a in settings.apps)
    return {mdir: Plan(text, OmegaConf.to_yaml(cfg), OUTPUTS, {"profiles": tuple(f"profiles/{n}.parquet"
                                                                                 for n in names)},
                       {"apps": names})}


class Case:
    """A planned case directory seen by its jobs: its settings, board, PEs and the apps' task graphs."""

    def __init__(self, mdir: str | Path):
        from dse.platform import load_platform

        self.dir = Path(mdir)
        self.profiled = read_part(self.dir, "multiapp-apps")
        self.sources = self.profiled["sources"]
        self.platform = load_platform(read_part(self.dir, "platform"))
        self._analyses: dict = {}

    @cached_property
    def settings(self) -> MultiappSettings:
        return MultiappSettings.from_dict(read_part(self.dir, "multiapp"), self.platform)

    def pes(self):
        from dse.taskgraph.mapping import CpuConfig, PeSet

        cores = self.platform.mapping_core_ids()
        config = CpuConfig.parse(self.profiled["cpu_config"], len(cores))
        return PeSet.build(config, self.profiled["accelerators"], cores)

    def analysis(self, app: str):
        from dse.network import analyze_source

        if app not in self._analyses:
            self._analyses[app] = analyze_source({k: v for k, v in self.sources[app].items() if k != "precision"})
        return self._analyses[app]

    def graph(self, app: str):
        from dse.taskgraph import build_task_graph

        return build_task_graph(self.analysis(app), self.sources[app]["precision"])

    def model(self, app: str):
        """The AnalyticModel of one app on the case's PEs: the board's transfer costs and per-PE power."""
        from dse.backends.sim.tasks import analytic_model
        from dse.taskgraph import ProfileTable

        graph = self.graph(app)
        profile = ProfileTable.read_parquet(self.dir / "profiles" / f"{app}.parquet", graph)
        pes = self.pes()
        power = {}
        if self.real:       # no power model of this host: the energy term is busy core time (1 W per busy core)
            power = {"p_busy": [float(len(pe.core_ids)) for pe in pes.pes], "p_idle": [0.0] * len(pes)}
        return analytic_model(self.platform, graph, profile, pes, **power)

    @property
    def real(self) -> bool:
        """The case runs on this host's core groups (host-cpu): real profiles and a real periodic check."""
        return self.platform.backend == "ort"


def write_profile(mdir: str | Path, app: str) -> Path:
    """Job ``multiapp_profile``: one app's per-task profile on every PE kind of the case."""
    from dse.backends.sim.tasks import profile_from_sim

    case = Case(mdir)
    if app not in case.sources:
        raise choices_error("multiapp app", app, list(case.sources))
    analysis = case.analysis(app)
    graph = case.graph(app)
    kinds = list(dict.fromkeys(case.pes().kinds))
    say(f"[multiapp] profiling {app}: {graph.n} tasks on {', '.join(kinds)} ({case.platform.name})")
    if case.real:
        from dse.runtime.task_profile import profile_from_ort

        table = profile_from_ort(analysis, graph, [int(k[3:]) for k in kinds], repeats=PROFILE_REPEATS,
                                 warmup=PROFILE_WARMUP, seed=int(case.settings.ga["seed"]),
                                 cores=case.platform.mapping_core_ids())
    else:
        table = profile_from_sim(case.platform, analysis, graph, kinds, case.sources[app]["precision"])
    return table.write_parquet(case.dir / "profiles" / f"{app}.parquet")


def _mapped_apps(case: Case, row, models: dict) -> list:
    """The apps of one Pareto solution as ``MappedApp``: PE ids from the row's mapping, occupancies from the model."""
    from dse.rt.schedule_based import MappedApp
    from dse.systems.layermap.multiapp import task_preds
    from dse.taskgraph.mapping import decode_ids

    out = []
    for a in case.settings.apps:
        model = models[a.benchmark]
        m = np.array(decode_ids(row[f"{a.benchmark}_mapping"]), dtype=np.int64)
        occupancy = model.occupancy(m)
        preds = tuple(task_preds(model))
        out.append(MappedApp(a.benchmark, a.period_ms * 1000, a.priority, tuple(int(x) for x in m),
                             tuple(float(t) for t in occupancy), preds))
    return out


def chosen(frame, apps: list[str], k: int) -> list[int]:
    """Row positions of the Pareto solutions to simulate: each app's fastest, the least energy, then solutions
    spread evenly over the energy order, ``k`` in all (fewer where the set is smaller)."""
    picks = [int(frame[f"{a}_response_us"].to_numpy().argmin()) for a in apps]
    order = np.argsort(frame["power_w"].to_numpy(), kind="stable")
    picks.append(int(order[0]))
    for q in np.linspace(0, len(order) - 1, num=max(k, 1)):
        picks.append(int(order[int(round(q))]))
    return list(dict.fromkeys(picks))[:max(k, 0)]


def check(case: Case, frame, models: dict, picks: list[int]) -> "pd.DataFrame":
    """The solutions at ``picks`` in the periodic simulation (fixed priorities on every PE, CPU preemptive, GPU/NPU not)
    for ``check.hyperperiods`` hyperperiods, released in phase (repeat 0) and at seeded random phases (repeat 1),
    through the evaluator into ``cache/check.parquet``: per app its misses and simulated worst response next to
    the analysis' bound."""
    import pandas as pd

    from dse.backends.sim.deployment import deployment_config
    from dse.backends.sim.periodic import periodic_apps, pipelined_stage_apps
    from dse.rt.schedule_based import analyse
    from dse.systems.common import deployment_evaluator

    s = case.settings
    pes = case.pes()
    preemptive = [k.startswith("cpu") for k in pes.kinds]
    seed = int(s.ga["seed"])
    evaluator = deployment_evaluator(case.platform, seed, case.dir / "cache" / "check.parquet")
    duration = s.check["hyperperiods"] * s.hyperperiod_ms * 1000
    rows, configs = [], []
    for pos in picks:
        row = frame.iloc[pos]
        mapped = _mapped_apps(case, row, models)
        bound = analyse(mapped, preemptive, s.response)
        if s.response == "pipelined":
            apps, placement, owner = pipelined_stage_apps(mapped, pes.names)
        else:
            apps, placement = periodic_apps(mapped, pes.names)
            owner = {a.name: a.name for a in apps}
        config = deployment_config(case.platform, "+".join(a.name for a in apps), apps, placement, {},
                                   1e6 / (s.hyperperiod_ms * 1000), duration, seed, True, accelerators="priority")
        configs.append((int(row["solution"]), bound, config, owner))
    evaluator.evaluate_many([(config, repeat) for _, _, config, _ in configs for repeat in (0, 1)], phase="check",
                            strategy="multiapp")
    for solution, bound, config, owner in configs:
        results = [evaluator.backend.take_result(config, repeat) for repeat in (0, 1)]
        for a in bound.apps:
            parts = [k for k, v in owner.items() if v == a.name]     # its stages, pipelined; else the app itself
            worst = max(r.max_response_us[k] for r in results for k in parts)
            rows.append({"solution": solution, "app": a.name, "period_us": a.period_us,
                         "schedulable": bool(a.schedulable), "bound_us": a.response_us, "worst_us": worst,
                         "misses": int(sum(r.misses[k] for r in results for k in parts)),
                         "jobs": int(sum(min(r.completed[k] for k in parts) for r in results)),
                         "pessimism": a.response_us / worst if worst > 0 else math.nan})
    return pd.DataFrame(rows)


def exceeded(checked: "pd.DataFrame") -> "pd.Series":
    """Per check row: a worst response above its bound (beyond float rounding): what "safe" is judged by."""
    return checked.worst_us > checked.bound_us * (1 + 1e-9)


def report(mdir: str | Path) -> Path:
    """Job ``multiapp_report``: the periodic check of the chosen solutions, ``multiapp.md`` and the plots."""
    import json

    import pandas as pd

    from dse.report.plots import energy_over_pairs, relative_responses
    from dse.report.tables import markdown_table
    from dse.store.atomic import read_json, write_bytes_atomic, write_text_atomic

    case = Case(mdir)
    s = case.settings
    frame = pd.read_parquet(case.dir / "multiapp.parquet")
    summary = read_json(case.dir / "search.json")
    names = [a.benchmark for a in s.apps]
    models = {n: case.model(n) for n in names}
    picks = chosen(frame, names, int(s.check["mappings"]))
    say(f"[multiapp] {'running' if case.real else 'simulating'} {len(picks)} of {len(frame)} Pareto solutions "
        f"for {s.check['hyperperiods']} hyperperiods of {s.hyperperiod_ms:g} ms")
    if case.real:
        from dse.systems.layermap.multiapp_host import host_check

        checked, jobs = host_check(case, frame, picks)
        write_bytes_atomic(case.dir / "host_jobs.parquet", jobs.to_parquet(index=False))
        where = ("this host's core groups, for real, after calibration runs: every group non-preemptive at segment "
                 "boundaries, the bound over the segments' measured WCETs plus dispatch delay")
    else:
        checked = check(case, frame, models, picks)
        where = "the periodic simulation, in phase and at random phases; fixed priorities on every PE"
    write_bytes_atomic(case.dir / "check.parquet", checked.to_parquet(index=False))
    relative_responses(frame, names, case.dir / "plots" / "relative_response.png")
    energy_over_pairs(frame, names, case.dir / "plots" / "energy_pairs.png")
    apps = [{"app": a.benchmark, "period ms": a.period_ms, "priority": a.priority,
             "alone ms": summary["alone_us"][a.benchmark] / 1e3,
             "min response ms": frame[f"{a.benchmark}_response_us"].min() / 1e3,
             "min relative": frame[f"{a.benchmark}_relative"].min()} for a in s.apps]
    sched = checked[checked.schedulable]
    safe = not exceeded(sched).any() and bool((sched.misses == 0).all())
    text = "\n".join([
        f"# {s.name}: {len(names)} apps on {case.platform.name} ({' + '.join([s.cpu_config, *s.accelerators])})", "",
        f"SPEA2 over every app's per-layer map (seed 002 Sec. VI): {summary['evaluations']:,} evaluations, "
        f"{summary['generations']} generations, {summary['seconds']:.1f} s; **{len(frame)} Pareto solutions** "
        "(the seed: 288). Response times are the schedule-based analysis' bounds (dse.rt.schedule_based); relative "
        "= over the app's minimum response time alone.", "",
        markdown_table(apps, right=("period ms", "alone ms", "min response ms", "min relative"),
                       formats={"alone ms": "{:.1f}", "min response ms": "{:.1f}", "min relative": "{:.2f}"}), "",
        f"## Analysis vs {'the run' if case.real else 'the simulation'} ({s.check['hyperperiods']} hyperperiods "
        f"on {where})", "",
        "Every mapping the analysis calls schedulable " + ("had no miss and no response above its bound." if safe
                                                           else "did NOT stay within its bound: see the rows."),
        "",
        f"{'Measured' if case.real else 'Simulated'} worst response per app: `worst_us`; pessimism = bound / worst.",
        "",
        markdown_table(checked.to_dict("records"), right=("bound_us", "worst_us", "misses", "jobs", "pessimism"),
                       formats={"bound_us": "{:.0f}", "worst_us": "{:.0f}", "pessimism": "{:.2f}",
                                "period_us": "{:.0f}"}), "",
        "![relative responses](plots/relative_response.png)", "", "![energy](plots/energy_pairs.png)", ""])
    out = write_text_atomic(case.dir / "multiapp.md", text)
    misses = {n: int(checked[checked.app == n].misses.sum()) for n in names}
    say(f"[multiapp] {case.dir}/multiapp.md: {len(frame)} Pareto solutions; check {'safe' if safe else 'UNSAFE'}: "
        f"{json.dumps(misses)} misses")
    return out


def first_solutions(apps, alone: dict, pes, limit: int) -> list[list[tuple[int, ...]]]:
    """Solutions the GA starts from: every app on its fastest mapping alone, then each app whole on a PE of its own
    (every assignment of distinct PEs, the faster PEs first): mixed mappings seldom assemble either, and at
    periods the apps cannot share a PE at, only the second kind is schedulable."""
    import itertools

    out = [[alone[a.name].mapping for a in apps]]
    speed = np.argsort([sum(a.model.E[:, p].sum() for a in apps) for p in range(len(pes))], kind="stable")
    for assignment in itertools.permutations([int(p) for p in speed], len(apps)):
        if len(out) >= limit:
            break
        out.append([(pe,) * a.model.n for pe, a in zip(assignment, apps)])
    return out[:max(limit, 1)]


def search(mdir: str | Path) -> Path:
    """Job ``multiapp_search``: each app's fastest response alone (the relative times' reference), then SPEA2 over
    the joint chromosome, seeded with every app on its fastest mapping alone: ``multiapp.parquet`` (the Pareto set)
    and ``search.json`` (the references, the GA's counts, seed and versions)."""
    from dse.store.atomic import write_bytes_atomic, write_json_atomic
    from dse.store.schema import versions
    from dse.systems.layermap.multiapp import App, min_response_alone, run_multiapp_ga

    case = Case(mdir)
    s = case.settings
    apps = [App(a.benchmark, case.model(a.benchmark), a.period_ms * 1000, a.priority) for a in s.apps]
    alone = {}
    for a in apps:
        alone[a.name] = min_response_alone(a.model, population=int(s.alone["population"]),
                                           generations=int(s.alone["generations"]), seed=int(s.ga["seed"]),
                                           response=s.response)
        say(f"[multiapp] {a.name}: fastest alone {alone[a.name].response_us / 1e3:.2f} ms")
    result = run_multiapp_ga(apps, [alone[a.name].response_us for a in apps], population=int(s.ga["population"]),
                             generations=int(s.ga["generations"]), seed=int(s.ga["seed"]),
                             seeds=first_solutions(apps, alone, case.pes(), int(s.ga["population"]) // 2),
                             response=s.response)
    frame = result.to_frame()
    write_bytes_atomic(case.dir / "multiapp.parquet", frame.to_parquet(index=False))
    summary = {"seed": int(s.ga["seed"]), "versions": versions(), "case": s.name, "platform": case.platform.name,
               "pes": list(case.pes().names), "alone_us": {n: a.response_us for n, a in alone.items()},
               "alone_mappings": {n: list(a.mapping) for n, a in alone.items()}, "archive": result.archive,
               "solutions": len(result.solutions), "schedulable": bool(frame["schedulable"].all() and len(frame)),
               "evaluations": result.evaluations, "generations": result.generations, "seconds": result.seconds,
               "min_relative": result.min_relative()}
    out = write_json_atomic(case.dir / "search.json", summary)
    say(f"[multiapp] SPEA2: {result.evaluations:,} evaluations, {len(result.solutions)} Pareto solutions "
        f"({'schedulable' if summary['schedulable'] else 'NONE schedulable: the whole archive, flagged'}) in "
        f"{result.seconds:.1f} s")
    return out
