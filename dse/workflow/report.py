"""Rule `report`: merge the run's measurements, write report.md and the plots."""
from __future__ import annotations

from pathlib import Path

from omegaconf import OmegaConf

from dse.platform.checks import unrunnable_options
from dse.report import plots
from dse.report.tables import best_row, cost_row, errors, markdown_table
from dse.store import merge
from dse.store.atomic import read_json, write_json_atomic, write_text_atomic
from dse.workflow.phases import RunContext, own_rows


def report(run: str | Path) -> Path:
    ctx = RunContext(Path(run))
    run, ms, platform = ctx.run, ctx.measure_settings, ctx.platform
    # every measurement goes to the file; the tables and plots describe this run's own search
    merge(sorted((run / "cache").glob("*.parquet")), run / "measurements.parquet", context=ctx.measurement_context)
    frame = own_rows(run, ctx.settings.strategy, ctx.measurement_context)
    best = OmegaConf.to_container(OmegaConf.load(run / "best.yaml"))
    searched = read_json(run / "search.json")
    guided = ctx.settings.strategy == "guided"
    # the option FPS after the global phase (thesis) or the best each option reached while guided
    option_fps = searched["option_fps"] if guided else read_json(run / "selected.json")["option_fps"]
    refined = searched.get("refined", {})
    frames = ms.sample_size + (ms.warmup or 0)
    costs = platform.board_costs
    cost = cost_row(frame, platform, frames, costs)
    base = _base_g(frame)
    plots_dir = run / "plots"
    plots.fps_per_option(frame, plots_dir / "fps_per_option.png")
    plots.trajectory(frame, plots_dir / "trajectory.png")
    gantt = _gantt(ctx, best, plots_dir / "gantt_best.png")
    failed = errors(frame)
    clocks = _clocks(ctx)
    lines = [
        f"# {ms.benchmark} on {platform.name} ({ms.precision.upper()}, batch {ms.batch}, "
        f"{ms.input_size}x{ms.input_size})",
        "",
        "## Best configuration (thesis Table 3.5 row)",
        "",
        markdown_table([best_row(best)]),
        f"Search found {best['search_fps']:.1f} FPS; fine-tuning reached {best['fps']:.1f} FPS."
        + (f" Base(G) (main PE only, 1 stream, 1 thread each, 1 buffer): {base:.1f} FPS,"
           f" gain {100 * (best['fps'] / base - 1):+.0f} %." if base else ""),
        "",
        "## Mapping options (guided exploration)" if guided else "## Mapping options (global search, thesis Fig. 3.8)",
        "",
        markdown_table([{"Option": o, "FPS": round(v, 1),
                         **({} if guided else {"Full search (FPS)": round(refined[o], 1) if o in refined else ""}),
                         "Selected": "yes" if o == searched["selected"] else ""}
                        for o, v in sorted(option_fps.items(), key=lambda kv: -kv[1])]),
        (f"The guided exploration measured {searched['unique_tuples']} cut tuples in {len(searched['rounds'])} "
         f"rounds and stopped: {searched['stopped']}; its best is fine-tuned." if guided else
         f"Options within {100 * ctx.settings.refine_within:.0f} % of the best after the global phase get a "
         "full (global + local) search; the best of them is fine-tuned.")
        + "".join(f" Not explored: {o} ({why})." for o, why in
                  unrunnable_options(platform, ms.precision, ms.batch).items()),
        "",
        "## Exploration cost (thesis Table 3.4 row)",
        "",
        markdown_table([cost]),
        (f"Board hours are estimated for a real board ({costs.run_overhead_s:.0f} s start-up per measurement, "
         f"{ms.sample_size} + {ms.warmup or 0} frames at the measured FPS, engine builds "
         + ", ".join(f"{k} {v:.0f} s" for k, v in costs.engine_build_s.items()) + ")."
         if platform.backend == "sim" else "Board hours are the real measurement and build seconds."),
        "Refused: configurations the SDK or the board's rules reject (cached). Errors: measurements that failed "
        "for a reason that may pass; the next run measures them again."
        + (" Errors of this run: " + "; ".join(f"{n} x {reason}" for reason, n in
                                                 failed["reason"].value_counts().head(5).items()) + "."
           if len(failed) else ""),
        "",
        *_dla_section(ctx, best),
        *_clock_section(clocks),
        "## Plots",
        "",
        "![FPS per option](plots/fps_per_option.png)",
        "![Search trajectory](plots/trajectory.png)",
        *([f"![Gantt chart of the best configuration](plots/{gantt.name})"] if gantt else []),
        "",
        "Every measurement: `measurements.parquet`; the resolved config: `config.yaml`.",
        "",
    ]
    summary = run_summary(best, base, cost, frame, searched["selected"])
    if clocks:
        summary["clocks"] = {k: clocks[k] for k in ("feasible", "reason", "energy_ratio", "measured")}
        summary["clocks"].update({f"{w}_{k}": (clocks[w] or {}).get(k) for w in ("chosen", "reference")
                                  for k in ("fps", "energy_j_per_frame", "power_w", "power_mode", "gpu_mhz",
                                            "dla_mhz", "cpu_mhz", "option")}, **clocks["settings"])
    write_json_atomic(run / "summary.json", summary)
    return write_text_atomic(run / "report.md", "\n".join(lines))


def run_summary(best: dict, base: float, cost: dict, frame, selected: str) -> dict:
    """One run in one flat record (what a study merges): the best configuration, its measurements, Base(G),
    the exploration's cost and the versions of the tools that measured it."""
    c = best["config"]
    ok = frame[frame["status"] == "ok"]
    versions = dict(ok["versions"].iloc[0]) if len(ok) and "versions" in ok else {}
    return {"benchmark": best["benchmark"], "platform": best["platform"], "backend": best.get("backend"),
            "precision": c["precision"], "batch": c["batch"], "input_size": c["input_size"], "seed": best.get("seed"),
            "selected": selected, "option": c["option"], "cuts": list(c["cuts"]), "streams": list(c["streams"]),
            "buffers": c["buffers"], "pre_threads": c["pre_threads"], "post_threads": c["post_threads"],
            "fps": best["fps"], "search_fps": best["search_fps"], "latency_ms_p50": best.get("latency_ms_p50"),
            "energy_j_per_frame": best.get("energy_j_per_frame"), "power_w": best.get("power_w"),
            "base_g_fps": base, "gain_pct": 100 * (best["fps"] / base - 1) if base else None,
            "cost": cost, "versions": versions, "config_hash": best.get("config_hash")}


def _dla_section(ctx: RunContext, best: dict) -> list[str]:
    """Why layers of the best configuration's DLA stages run on the GPU (``dse inspect --dla`` for any other)."""
    from dse.backends.sim import SimBackend
    from dse.core.configuration import Configuration
    from dse.report.dla_fallback import explain

    platform = ctx.platform
    if platform.dla_rules is None or platform.cost is None:
        return []
    config = Configuration.from_dict(best["config"])
    # the run's own virtual board, or one on a real board's profile (its sim twin's cost model)
    sim = ctx.backend if isinstance(ctx.backend, SimBackend) else SimBackend(platform, ctx.analysis)
    if not any(s.pe_type == "dla" for s in platform.options[config.option].stages):
        whole = explain(sim, precision=config.precision)
        counts = whole.reason_counts
        return [f"## DLA fallback ({whole.ruleset_label} rules)", "",
                f"The best configuration (option {config.option}) has no DLA stage. Of the whole network "
                f"{sum(v.on_dla for v in whole.layers)} of {len(whole.layers)} layers can run on the DLA"
                + (": the rest " + ", ".join(f"{k} x{n}" for k, n in counts.items()) if counts else "") + ".", ""]
    ex = explain(sim, config=config)
    rows = [{"Stage": s.stage, "PE": s.pes, "Layers": f"{s.first}..{s.last}", "Loadables": s.loadables,
             "Fallback layers": s.fallback_layers, "Fallback (ms)": round(s.fallback_ms, 3),
             "Reformat (ms)": round(s.reformat_ms, 3),
             "Why": ", ".join(f"{k} x{n}" for k, n in s.reasons.items()) or "-"} for s in ex.stages]
    lim = ex.limits
    return [f"## DLA fallback ({ex.ruleset_label} rules)", "", markdown_table(rows),
            "Loadables per core: " + ", ".join(f"{k} {n}" for k, n in ex.loadables_per_core.items())
            + f" (limit {lim['max_dla_loadables_per_core'] or 'none'}); engines on the DLAs {ex.engines_on_dla} "
              f"(limit {lim['max_dla_engines_total'] or 'none'}). Times are the virtual board's charges per frame."
            + "".join(f" Rewrite: {r}." for r in ex.rewrites)
            + f" Per layer: `dse inspect {ctx.measure_settings.model or 'MODEL'} --dla --platform {platform.name} "
              f"--option {config.option} --cuts {','.join(map(str, config.cuts))} --precision {config.precision}`.",
            ""]


def _clocks(ctx: RunContext) -> dict | None:
    """clocks.json where the run has a clock phase (a stale file of an earlier setting is not reported)."""
    from dse.search.clocks import EnergySettings

    path = ctx.run / "clocks.json"
    if not (EnergySettings.from_dict(ctx.part("energy")).active and path.exists()):
        return None
    return read_json(path)


def _clock_section(clocks: dict | None) -> list[str]:
    """The answer of the clock phase next to the FPS-optimal configuration at full clocks, and the front."""
    if not clocks:
        return []
    s = clocks["settings"]
    head = [f"## Energy: objective {s['objective']}, min_fps {s['min_fps']:g} (clock phase)", ""]
    if not clocks["feasible"]:
        return head + [f"No answer: {clocks['reason']}. {clocks['measured']} configurations measured.", ""]

    def row(what: str, d: dict) -> dict:
        return {"": what, "Option": d["option"], "Cuts": ",".join(map(str, d["cuts"])) or "-",
                "Power mode": d["power_mode"], "GPU MHz": d["gpu_mhz"], "DLA MHz": d["dla_mhz"],
                "CPU MHz": d["cpu_mhz"], "FPS": round(d["fps"], 1), "W": round(d["power_w"], 2),
                "J/frame": round(d["energy_j_per_frame"], 4), "FPS/W": round(d["fps"] / d["power_w"], 2)}

    front = sorted((p for p in clocks["points"] if p["on_front"]), key=lambda p: -p["fps"])
    return head + [
        markdown_table([row("answer", clocks["chosen"]), row("FPS-optimal, full clocks", clocks["reference"])]),
        f"Means of {s['repeats']} fresh re-runs each. The answer uses {100 * clocks['energy_ratio']:.0f} % of the "
        f"energy per frame of the FPS-optimal configuration. The phase measured {clocks['measured']} "
        f"configurations ({s['mappings']} mappings x {len(s['power_modes']) or 'all'} power modes x clocks, "
        "thesis Ch. 4's Algorithm 6).", "",
        f"FPS vs J/frame front ({len(front)} points, single samples): "
        + "; ".join(f"{p['fps']:.0f} FPS {p['energy_j_per_frame']:.3f} J ({p['option']}, {p['power_mode']}, "
                    f"GPU {_mhz(p['gpu_mhz'])} / DLA {_mhz(p['dla_mhz'])} / CPU {_mhz(p['cpu_mhz'])} MHz)"
                    for p in front[:12])
        + (" ..." if len(front) > 12 else "") + ". ![front](plots/energy_front.png)", ""]


def _mhz(v) -> str:
    return "-" if v is None else f"{v:g}"


def _base_g(frame) -> float:
    ok = frame[(frame["status"] == "ok") & (frame["strategy"] == "Base(G)")]
    return float(ok["fps"].iloc[0]) if len(ok) else 0.0


def _gantt(ctx: RunContext, best: dict, out: Path) -> Path | None:
    """The steady-state schedule of the best configuration, where the backend keeps one (``TRACE``)."""
    from dse.backends.base import TRACE, supports
    from dse.core.configuration import Configuration

    if not supports(ctx.backend, TRACE):
        return None
    from dse.report.gantt import draw_gantt

    _, res = ctx.backend.measure_with_trace(Configuration.from_dict(best["config"]), trace=True)
    if res is None or not getattr(res, "trace", None):
        return None
    return draw_gantt(res.trace, out, title=f"{best['benchmark']}: best configuration")
