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
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from dse.core.errors import DseError, choices_error
from dse.report.tables import format_cell, markdown_table
from dse.store.atomic import write_bytes_atomic, write_json_atomic, write_text_atomic
from dse.systems.layermap.settings import METHODS, LayermapSettings, cap_label

if TYPE_CHECKING:
    import pandas as pd


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
        from dse.taskgraph import build_task_graph

        return build_task_graph(self.ctx.analysis, self.ctx.measure_settings.precision)

    @property
    def cores(self) -> list[int]:
        return self.ctx.platform.mapping_core_ids()

    @cached_property
    def accelerators(self) -> tuple[str, ...]:
        return tuple(self.ctx.part("lm-profile")["accelerators"])

    @cached_property
    def profile(self):
        from dse.taskgraph import ProfileTable

        return ProfileTable.read_parquet(self.run / "profile.parquet", self.graph)

    def model(self, cpu: str, cap: float | None, charge: str = "sender", accelerators=None):
        """The AnalyticModel of one CPU configuration (+ the run's accelerators) under a cap: the platform's
        transfer costs and per-PE busy/idle power where it has a power model (``dse.backends.sim.tasks.analytic_model``)."""
        from dse.backends.sim.tasks import analytic_model
        from dse.taskgraph import PeSet

        accels = self.accelerators if accelerators is None else accelerators
        pes = PeSet.build(cpu, accels, self.cores)
        return analytic_model(self.ctx.platform, self.graph, self.profile, pes, charge=charge,
                              u_max=None if cap is None or cap >= 1 else cap)


def _preset_fields(ga: dict) -> dict:
    """The GA preset's fields the config sets (null: the preset's own value)."""
    return {k: int(ga[k]) for k in ("population", "generations") if ga.get(k) is not None}


# -- jobs ----------------------------------------------------------------------------------------------------
def write_profile(run: str | Path) -> Path:
    """Job ``layermap_profile``: the per-task profile of every PE kind the run's configurations use."""
    from dse.backends.sim.tasks import profile_from_sim
    from dse.runtime.task_profile import profile_from_ort

    lm = LayermapRun(run)
    part, p = lm.ctx.part("lm-profile"), lm.ctx.platform
    kinds = part["kinds"]
    t0 = time.perf_counter()
    _log(f"profiling {lm.graph.n} tasks on {', '.join(kinds)} ({part['source']}, {p.name})")
    if part["source"] == "sim":
        table = profile_from_sim(p, lm.ctx.analysis, lm.graph, kinds, lm.ctx.measure_settings.precision)
    else:
        if any(not k.startswith("cpu") for k in kinds):
            raise DseError(f"an ort profile times CPU core groups only; accelerators {list(part['accelerators'])} "
                           f"need the sim (layermap.accelerators=[] on {p.name})")
        table = profile_from_ort(lm.ctx.analysis, lm.graph, [int(k[3:]) for k in kinds],
                                 repeats=int(part["repeats"]), warmup=int(part["warmup"]),
                                 seed=lm.ctx.measure_settings.seed, cores=lm.cores)
    out = table.write_parquet(lm.run / "profile.parquet")
    _log(f"profile.parquet: {table.n_tasks} tasks x {len(table.kinds)} kinds in {time.perf_counter() - t0:.1f} s")
    return out


def solve(run: str | Path, method: str, cpu: str, cap: float) -> dict:
    """Job ``layermap_solve``: one method on one CPU configuration under one cap -> layermap/<...>.json."""
    from dse.systems.layermap import preset, run_layer_ga, solve_ilp

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
    from dse.systems.layermap import run_layer_ga
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

    from dse.taskgraph import LayerMapping, simulate
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


# layermap.md's table of every result: its columns and how each shows a number
RESULT_COLUMNS = ("method", "CPU config", "cap", "period us", "util", "energy mJ", "status", "gap", "s",
                  "measured FPS", "measured ms", "error")
RESULT_FORMATS = {"period us": "{:.0f}", "util": "{:.2f}", "energy mJ": "{:.2f}", "gap": "{:.2%}", "s": "{:.1f}",
                  "measured FPS": "{:.1f}", "measured ms": "{:.2f}", "error": "{:+.1f} %"}


def table_md(frame: pd.DataFrame, s: LayermapSettings, lm: LayermapRun) -> str:
    """layermap.md: the period table (002 Fig. 6 / 004 Fig. 14), references, every result with its measurement."""
    acc = "+" + "+".join(s.accelerators).upper() if s.accelerators else " (CPU only)"
    ms = lm.ctx.measure_settings
    lines = [f"# Per-layer mapping: {ms.benchmark} on {lm.ctx.platform.name}", "",
             f"Task graph: {lm.graph.n} tasks; profile: {s.profile['source']}; PEs: CPU groups{acc}; "
             f"GA {s.ga['preset']} (budget {s.ga['budget']}), ILP {s.ilp['formulation']} (clusters "
             f"{s.ilp['clusters']}, {s.ilp['solver']}, {s.ilp['time_limit_s']} s). Periods in us (schedule).", "",
             "## Period per CPU configuration x cap (002 Fig. 6 / 004 Fig. 14)", ""]
    key = frame.set_index(["cpu_config", "cap", "method"])
    columns = {(cap, m): f"{m.upper()} {cap_label(cap)} %" for cap in s.caps for m in s.methods}
    rows = []
    for cpu in s.cpu_configs:
        row = {"CPU config": f"({cpu.replace('-', ',')})"}
        for (cap, m), col in columns.items():
            r = key.loc[(cpu, cap, m)]
            mark = "" if m == "ga" or r["status"] == "optimal" else f" ({r['status']})"
            row[col] = format_cell(r["period_us"], "{:.0f}", "-") + mark
        rows.append(row)
    lines += markdown_table(rows, ["CPU config", *columns.values()], compact=True).splitlines()
    refs = frame[frame["status"] == "reference"]
    lines += ["", "References (whole network on one PE): " + "; ".join(
        f"{r.method} {format_cell(r.period_us, '{:.0f}', '-')} us" for r in refs.itertuples())]
    best = frame[frame["method"].isin(s.methods)].groupby("cap")["period_us"].min()
    gpu = refs[refs["method"] != "CPU-only"]
    if len(gpu):
        g = float(gpu["period_us"].iloc[0])
        share = "/ " + gpu["method"].iloc[0]
        lines += [""] + markdown_table(
            [{"cap": f"{cap_label(c)} %", "best period (us)": format_cell(best[c], "{:.0f}", "-"),
              share: format_cell(100 * best[c] / g, "{:.1f}", "-") + " %"} for c in s.caps],
            ["cap", "best period (us)", share], compact=True).splitlines()
    lines += ["", "## Every result (schedule vs measurement through the " + lm.ctx.platform.backend + " backend)", ""]
    results = [{"method": r.method,
                "CPU config": f"({r.cpu_config.replace('-', ',')})"
                              + ("+" + r.accelerators.upper() if r.accelerators else ""),
                "cap": f"{cap_label(r.cap)} %", "period us": r.period_us, "util": r.util, "energy mJ": r.energy_mj,
                "status": r.status, "gap": r.gap, "s": r.seconds, "measured FPS": r.measured_fps,
                "measured ms": r.measured_ms, "error": r.error_pct} for r in frame.itertuples()]
    lines += markdown_table(results, RESULT_COLUMNS, formats=RESULT_FORMATS, missing="-", compact=True).splitlines()
    return "\n".join(lines) + "\n"


__all__ = ["LayermapRun", "write_profile", "solve", "pareto", "merge", "table_md"]
