"""Target `layermap`: per-layer mapping of the run's network onto the platform's PEs (seeds 002/004).

Jobs (``workflow/rules/layermap.smk``): ``profile`` (task graph + per-PE-kind profile table -> ``profile.parquet``:
the sim cost models on the virtual boards, real ORT per-task runs on host-cpu), one ``solve`` per CPU
configuration x cap x method (``layermap/<method>_<cpu>_<cap>.json``), ``pareto`` (SPEA2 period + energy for one
configuration) and ``merge``: every chosen mapping and the GPU-only / CPU-only references measured through the
platform's backend (Evaluator -> ``cache/layermap.parquet``), ``layermap.parquet`` (one row per result),
``layermap.md`` (002 Fig. 6 / 004 Fig. 14), the grouped bar plot and Gantt charts of the best mapping at 100 %
and at the tightest cap (task-graph DES trace). Settings: the ``layermap`` config group
(``config/layermap/default.yaml``), resolved against the platform when the run is planned.
"""
from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from dse.errors import DseError, choices_error
from dse.store.atomic import write_bytes_atomic, write_json_atomic, write_text_atomic

METHODS = ("ga", "ilp")
PROFILE_SOURCES = ("auto", "sim", "ort")
SETTING_KEYS = ("cpu_configs", "caps", "methods", "accelerators", "ga", "ilp", "profile", "pareto", "measure")
SUB_KEYS = {"ga": ("preset", "seed", "budget", "population", "generations"),
            "ilp": ("formulation", "clusters", "solver", "time_limit_s"),
            "profile": ("source", "repeats", "warmup"), "pareto": ("cpu_config", "budget", "population")}
if TYPE_CHECKING:
    import pandas as pd

PART_OF = {"profile": "lm-profile", "ga": "lm-ga", "ilp": "lm-ilp"}   # run/config/<part>.yaml each job reads


def cap_label(cap: float) -> str:
    """0.7 -> "70" (the file-name and table form of a cap, in percent)."""
    return f"{cap * 100:g}"


def _sub(d: dict, key: str) -> dict:
    node = dict(d.get(key) or {})
    for k in node:
        if k not in SUB_KEYS[key]:
            raise choices_error(f"layermap.{key} setting", k, SUB_KEYS[key])
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

        from dse.layermap.ga import PRESETS
        from dse.layermap.ilp import CLUSTER_MODES, FORMULATIONS, SOLVERS
        from dse.layermap.mapping import CpuConfig

        d = OmegaConf.to_container(node, resolve=True) if not isinstance(node, dict) else dict(node)
        for k in d:
            if k not in SETTING_KEYS:
                raise choices_error("layermap setting", k, SETTING_KEYS)
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
            for key, lo in (("budget", 1), ("population", 2), ("generations", 1)):
                if sub.get(key) is not None and (not isinstance(sub[key], int) or sub[key] < lo):
                    raise DseError(f"layermap.{group}.{key} must be an integer >= {lo}, got {sub[key]!r}")
        if ilp.get("formulation", "kang2020") not in FORMULATIONS:
            raise choices_error("layermap.ilp.formulation", ilp["formulation"], FORMULATIONS)
        if ilp.get("clusters", "exact") not in CLUSTER_MODES:
            raise choices_error("layermap.ilp.clusters", ilp["clusters"], ["exact", "at_most", "null"])
        if ilp.get("solver", "highs") not in SOLVERS:
            raise choices_error("layermap.ilp.solver", ilp["solver"], SOLVERS)
        if not isinstance(ilp.get("time_limit_s", 60), (int, float)) or ilp.get("time_limit_s", 60) <= 0:
            raise DseError(f"layermap.ilp.time_limit_s must be a number > 0, got {ilp['time_limit_s']!r}")
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
        from dse.layermap import CpuConfig

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


def _log(msg: str) -> None:
    print(f"[layermap] {msg}", file=sys.stderr, flush=True)


class LayermapRun:
    """A planned run directory seen by the layermap jobs."""

    def __init__(self, run: str | Path):
        from dse.workflow.phases import RunContext

        self.ctx = RunContext(Path(run))
        self.run = self.ctx.run

    @cached_property
    def settings(self) -> LayermapSettings:
        return LayermapSettings.from_dict(self.ctx.part("layermap"))

    @cached_property
    def graph(self):
        from dse.layermap import build_task_graph

        return build_task_graph(self.ctx.analysis, self.ctx.measure_settings.precision)

    @property
    def cores(self) -> list[int]:
        return self.ctx.platform.mapping_core_ids()

    @cached_property
    def accelerators(self) -> tuple[str, ...]:
        return tuple(self.ctx.part("lm-profile")["accelerators"])

    @cached_property
    def profile(self):
        from dse.layermap import ProfileTable

        return ProfileTable.read_parquet(self.run / "profile.parquet", self.graph)

    def model(self, cpu: str, cap: float | None, charge: str = "sender", accelerators=None):
        """The AnalyticModel of one CPU configuration (+ the run's accelerators) under a cap: the platform's
        transfer costs and per-PE busy/idle power where it has a power model (``AnalyticModel.for_platform``)."""
        from dse.layermap import AnalyticModel, PeSet

        accels = self.accelerators if accelerators is None else accelerators
        pes = PeSet.build(cpu, accels, self.cores)
        return AnalyticModel.for_platform(self.ctx.platform, self.graph, self.profile, pes, charge=charge,
                                          u_max=None if cap is None or cap >= 1 else cap)


def _preset_fields(ga: dict) -> dict:
    """The GA preset's fields the config sets (null: the preset's own value)."""
    return {k: int(ga[k]) for k in ("population", "generations") if ga.get(k) is not None}


# -- jobs ----------------------------------------------------------------------------------------------------
def write_profile(run: str | Path) -> Path:
    """Job ``layermap_profile``: the per-task profile of every PE kind the run's configurations use."""
    from dse.layermap import ProfileTable

    lm = LayermapRun(run)
    part, p = lm.ctx.part("lm-profile"), lm.ctx.platform
    kinds = part["kinds"]
    t0 = time.perf_counter()
    _log(f"profiling {lm.graph.n} tasks on {', '.join(kinds)} ({part['source']}, {p.name})")
    if part["source"] == "sim":
        table = ProfileTable.from_sim(p, lm.ctx.analysis, lm.graph, kinds, lm.ctx.measure_settings.precision)
    else:
        if any(not k.startswith("cpu") for k in kinds):
            raise DseError(f"an ort profile times CPU core groups only; accelerators {list(part['accelerators'])} "
                           f"need the sim (layermap.accelerators=[] on {p.name})")
        table = ProfileTable.from_ort(lm.ctx.analysis, lm.graph, [int(k[3:]) for k in kinds],
                                     repeats=int(part["repeats"]), warmup=int(part["warmup"]),
                                     seed=lm.ctx.measure_settings.seed, cores=lm.cores)
    out = table.write_parquet(lm.run / "profile.parquet")
    _log(f"profile.parquet: {table.n_tasks} tasks x {len(table.kinds)} kinds in {time.perf_counter() - t0:.1f} s")
    return out


def solve(run: str | Path, method: str, cpu: str, cap: float) -> dict:
    """Job ``layermap_solve``: one method on one CPU configuration under one cap -> layermap/<...>.json."""
    from dse.layermap import preset, run_layer_ga, solve_ilp

    lm = LayermapRun(run)
    if method not in METHODS:
        raise choices_error("layermap method", method, METHODS)
    t0 = time.perf_counter()
    out = {"method": method, "cpu_config": cpu, "cap": cap, "accelerators": list(lm.accelerators)}
    if method == "ga":
        s = lm.ctx.part("lm-ga")
        model = lm.model(cpu, cap, preset(s["preset"]).charge)
        r = run_layer_ga(model, s["preset"], seed=int(s["seed"]), budget=int(s["budget"]), **_preset_fields(s))
        mapping, status, gap = r.mapping, "done", None
        out.update(evaluations=r.evaluations, generations=r.generations, preset=s["preset"])
    else:
        s = lm.ctx.part("lm-ilp")
        model = lm.model(cpu, cap, preset(s["formulation"]).charge)   # the presets are named after the papers
        r = solve_ilp(model, formulation=s["formulation"], clusters=s["clusters"], solver=s["solver"],
                      time_limit=float(s["time_limit_s"]))
        mapping, status, gap = r.mapping, r.status, r.gap
        out.update(bound_us=r.bound, solver=r.solver, formulation=s["formulation"], clusters=s["clusters"])
    if mapping is not None:
        ev = model.evaluate(mapping)
        out.update(period_us=float(ev.period), util=float(ev.util_cpu),
                   energy_mj=None if np.isnan(ev.energy_j) else float(ev.energy_j) * 1e3,
                   mapping=[int(x) for x in mapping], latency_us=float(model.latency(mapping)))
    else:
        out.update(period_us=None, util=None, energy_mj=None, mapping=None, latency_us=None)
    out.update(status=status, gap=None if gap is None or np.isnan(gap) else float(gap),
               seconds=time.perf_counter() - t0)
    path = lm.run / "layermap" / f"{method}_{cpu}_{cap_label(cap)}.json"
    write_json_atomic(path, out)
    period = "-" if out["period_us"] is None else f"{out['period_us']:.0f} us"
    _log(f"{method} {cpu} cap {cap_label(cap)} %: period {period}, {status}, {out['seconds']:.1f} s")
    return out


def pareto(run: str | Path) -> dict:
    """Job ``layermap_pareto``: the SPEA2 period + energy front of one CPU configuration (002 Fig. 9), no cap."""
    from dse.layermap import run_layer_ga
    from dse.report.plots import save_figure

    lm = LayermapRun(run)
    s, ga = lm.ctx.part("lm-pareto"), lm.ctx.part("lm-ga")
    model = lm.model(s["cpu_config"], None, "sender")
    r = run_layer_ga(model, ga["preset"], seed=int(ga["seed"]), budget=int(s["budget"]), objectives="period+energy",
                     population=int(s["population"]))   # SPEA2's truncation is superlinear in the population
    front = [{"period_us": f[0], "energy_mj": f[1] * 1e3, "mapping": m.tolist()} for m, f in r.pareto]
    out = {"cpu_config": s["cpu_config"], "accelerators": list(lm.accelerators), "front": front,
           "evaluations": r.evaluations, "seconds": r.seconds}
    write_json_atomic(lm.run / "layermap" / "pareto.json", out)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot([f["period_us"] / 1000 for f in front], [f["energy_mj"] for f in front], "o-")
    ax.set_xlabel("period (ms)")
    ax.set_ylabel("energy per frame (mJ)")
    ax.set_title(f"SPEA2 front, ({s['cpu_config']})+{'+'.join(lm.accelerators).upper() or 'CPU only'}")
    save_figure(fig, lm.run / "plots" / "layermap_pareto.png")
    _log(f"pareto: {len(front)} points in {r.seconds:.1f} s")
    return out


def references(lm: LayermapRun) -> list[dict]:
    """GPU-only (the whole network on the first accelerator) and CPU-only (all cores as one group) mappings."""
    cpu_all = str(len(lm.cores))
    out = [{"method": "CPU-only", "cpu_config": cpu_all, "accelerators": [], "mapping": [0] * lm.graph.n}]
    if lm.settings.accelerators:
        acc = lm.settings.accelerators[0]
        out.insert(0, {"method": f"{acc.upper()}-only", "cpu_config": cpu_all, "accelerators": [acc],
                       "mapping": [1] * lm.graph.n})
    for r in out:
        model = lm.model(r["cpu_config"], None, accelerators=r["accelerators"])
        ev = model.evaluate(np.array(r["mapping"]))
        r.update(cap=1.0, period_us=float(ev.period), util=float(ev.util_cpu), status="reference", gap=None,
                 energy_mj=None if np.isnan(ev.energy_j) else float(ev.energy_j) * 1e3, seconds=0.0)
    return out


def merge(run: str | Path) -> dict:
    """Job ``layermap_merge``: measure, tabulate, plot."""
    import pandas as pd

    from dse.layermap import LayerMapping, simulate
    from dse.report.gantt import draw_gantt

    lm = LayermapRun(run)
    s = lm.settings
    rows = [json.loads((lm.run / f).read_text()) for f in s.solve_files()] + references(lm)
    ev = lm.ctx.evaluator("layermap", "layermap") if s.measure else None
    for i, r in enumerate(rows):
        r["measured_fps"] = r["measured_ms"] = r["error_pct"] = r["config_hash"] = None
        if ev is None or r["mapping"] is None:
            continue
        cap = r["cap"] if r["cap"] < 1 else None
        mapping = LayerMapping(r["cpu_config"], r["mapping"], tuple(r["accelerators"]), cap, lm.graph.digest)
        m = ev.evaluate(mapping.to_configuration(lm.ctx.base), phase=f"layermap/{r['method']}",
                        strategy=f"layermap-{r['method']}")
        r["config_hash"] = m.config.hash
        if m.ok and m.fps > 0:
            r["measured_fps"], r["measured_ms"] = m.fps, 1000.0 / m.fps
            r["error_pct"] = 100 * (r["period_us"] / 1000 - r["measured_ms"]) / r["measured_ms"]   # 002 Table 3
        if i % 5 == 0 or i == len(rows) - 1:
            _log(f"measured {i + 1}/{len(rows)} mappings ({lm.ctx.platform.backend})")
    frame = pd.DataFrame(rows)
    frame["mapping"] = frame["mapping"].map(lambda m: None if m is None else ",".join(map(str, m)))
    frame["accelerators"] = frame["accelerators"].map(lambda a: "+".join(a))
    frame.insert(0, "platform", lm.ctx.platform.name)
    frame.insert(0, "benchmark", lm.ctx.measure_settings.benchmark)
    write_bytes_atomic(lm.run / "layermap.parquet", frame.to_parquet(index=False))
    plots = lm.run / "plots"
    _bar_plot(frame, s, plots / "layermap_periods.png", lm.ctx.platform.name)
    gantt = {}
    for tag, cap in (("100", 1.0), ("cap", min(s.caps))):
        sub = frame[(frame["cap"] == cap) & frame["period_us"].notna() & frame["method"].isin(s.methods)]
        if sub.empty:
            raise DseError(f"no solver found a mapping at cap {cap_label(cap)} %: see {lm.run}/layermap/*.json")
        best = sub.loc[sub["period_us"].idxmin()]
        model = lm.model(best["cpu_config"], cap)
        res = simulate(model, np.array([int(x) for x in best["mapping"].split(",")]), frames=32, trace=True)
        title = f"{best['method']} ({best['cpu_config']}) cap {cap_label(cap)} %: period {best['period_us'] / 1000:.2f} ms"
        draw_gantt(res.trace, plots / f"layermap_gantt_{tag}.png", title=title)
        gantt[tag] = title
    md = table_md(frame, s, lm)
    write_text_atomic(lm.run / "layermap.md", md)
    _log(f"{len(frame)} results -> {lm.run}/layermap.parquet, layermap.md; best: {gantt['100']}")
    return {"rows": len(frame), "gantt": gantt}


def _bar_plot(frame: pd.DataFrame, s: LayermapSettings, out: Path, platform: str) -> Path:
    """002 Fig. 6: period per CPU configuration, one bar per method x cap."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dse.report.plots import save_figure

    bars = [(m, c) for m in s.methods for c in s.caps]
    width = 0.8 / len(bars)
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(s.cpu_configs)), 4))
    x = np.arange(len(s.cpu_configs))
    for j, (m, cap) in enumerate(bars):
        sub = frame[(frame["method"] == m) & (frame["cap"] == cap)].set_index("cpu_config")["period_us"]
        ax.bar(x + j * width - 0.4 + width / 2, [sub.get(c, np.nan) / 1000 for c in s.cpu_configs], width,
               label=f"{m.upper()} {cap_label(cap)} %", hatch="//" if m == "ilp" else None,
               color=plt.get_cmap("viridis")(s.caps.index(cap) / max(1, len(s.caps) - 1)), edgecolor="black")
    for r in frame[frame["status"] == "reference"].itertuples():
        ax.axhline(r.period_us / 1000, ls="--", color="gray")
        ax.text(len(s.cpu_configs) - 0.5, r.period_us / 1000, r.method, va="bottom", ha="right", fontsize=7)
    ax.set_xticks(x, [f"({c.replace('-', ',')})" for c in s.cpu_configs])
    ax.set_ylabel("period (ms)")
    ax.set_title(f"per-layer mapping on {platform}: period per CPU configuration")
    ax.legend(fontsize=7, ncol=2)
    return save_figure(fig, out)


def _f(x, fmt="{:.0f}") -> str:
    return "-" if x is None or (isinstance(x, float) and np.isnan(x)) else fmt.format(x)


def table_md(frame: pd.DataFrame, s: LayermapSettings, lm: LayermapRun) -> str:
    """layermap.md: the period table (002 Fig. 6 / 004 Fig. 14), references, every result with its measurement."""
    acc = "+" + "+".join(s.accelerators).upper() if s.accelerators else " (CPU only)"
    ms = lm.ctx.measure_settings
    lines = [f"# Per-layer mapping: {ms.benchmark} on {lm.ctx.platform.name}", "",
             f"Task graph: {lm.graph.n} tasks; profile: {s.profile['source']}; PEs: CPU groups{acc}; "
             f"GA {s.ga['preset']} (budget {s.ga['budget']}), ILP {s.ilp['formulation']} (clusters "
             f"{s.ilp['clusters']}, {s.ilp['solver']}, {s.ilp['time_limit_s']} s). Periods in us (schedule).", "",
             "## Period per CPU configuration x cap (002 Fig. 6 / 004 Fig. 14)", "",
             "| CPU config | " + " | ".join(f"{m.upper()} {cap_label(c)} %" for c in s.caps for m in s.methods) + " |",
             "|---" * (1 + len(s.caps) * len(s.methods)) + "|"]
    key = frame.set_index(["cpu_config", "cap", "method"])
    for cpu in s.cpu_configs:
        cells = []
        for cap in s.caps:
            for m in s.methods:
                r = key.loc[(cpu, cap, m)]
                mark = "" if m == "ga" or r["status"] == "optimal" else f" ({r['status']})"
                cells.append(_f(r["period_us"]) + mark)
        lines.append(f"| ({cpu.replace('-', ',')}) | " + " | ".join(cells) + " |")
    refs = frame[frame["status"] == "reference"]
    lines += ["", "References (whole network on one PE): " + "; ".join(
        f"{r.method} {_f(r.period_us)} us" for r in refs.itertuples())]
    best = frame[frame["method"].isin(s.methods)].groupby("cap")["period_us"].min()
    gpu = refs[refs["method"] != "CPU-only"]
    if len(gpu):
        g = float(gpu["period_us"].iloc[0])
        lines += ["", "| cap | best period (us) | / " + gpu["method"].iloc[0] + " |", "|---|---|---|"]
        lines += [f"| {cap_label(c)} % | {_f(best[c])} | {_f(100 * best[c] / g, '{:.1f}')} % |" for c in s.caps]
    lines += ["", "## Every result (schedule vs measurement through the " + lm.ctx.platform.backend + " backend)", "",
              "| method | CPU config | cap | period us | util | energy mJ | status | gap | s | measured FPS | "
              "measured ms | error |", "|---" * 12 + "|"]
    for r in frame.itertuples():
        lines.append(f"| {r.method} | ({r.cpu_config.replace('-', ',')}){'+' + r.accelerators.upper() if r.accelerators else ''}"
                     f" | {cap_label(r.cap)} % | {_f(r.period_us)} | {_f(r.util, '{:.2f}')} | "
                     f"{_f(r.energy_mj, '{:.2f}')} | {r.status} | {_f(r.gap, '{:.2%}')} | {_f(r.seconds, '{:.1f}')} | "
                     f"{_f(r.measured_fps, '{:.1f}')} | {_f(r.measured_ms, '{:.2f}')} | {_f(r.error_pct, '{:+.1f} %')} |")
    return "\n".join(lines) + "\n"


__all__ = ["LayermapSettings", "LayermapRun", "METHODS", "cap_label", "refusal", "write_profile", "solve", "pareto",
           "merge", "table_md"]
