"""comparison.parquet / comparison.md and the plots of rule `compare` (thesis Table 3.7, Figs 3.9-3.11).

Per method: the answer's FPS and energy per frame, the distinct configurations it asked for, the
distinct engines those need (per PE type: what a board would build for this method alone), and the
board hours a real board would spend (each configuration's run + each engine build, the platform's
``dse.platform.BoardCosts``).
"""
from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pyarrow as pa  # noqa: E402
from dse.report.plots import save_figure  # noqa: E402
from dse.search.study import anytime  # noqa: E402
from dse.report.tables import board_seconds, distinct_engines, markdown_table  # noqa: E402
from dse.store.atomic import write_text_atomic  # noqa: E402

SEARCHES = ("Proposed", "Guided")   # the two exploration strategies, drawn apart from the baselines they face


def method_cost(asked, platform, frames: int, costs, reruns=()) -> dict:
    """Engines and board hours of the distinct configurations one method asked for and of its re-runs."""
    engines = distinct_engines(((m.config.option, m.engine_keys) for _, m in asked), platform)
    runs = [m.fps if m.ok else None for m in [*(m for _, m in asked), *reruns]]
    hours = board_seconds(runs, engines, frames, costs) / 3600.0
    return {"engines": {t: len(keys) for t, keys in engines.items()}, "board_hours": hours}


def comparison_frame(cmp, results: dict, confirmed: dict, skipped: dict) -> pd.DataFrame:
    """One row per method: ``results`` its answer (``dse.search.result.StrategyResult``), ``confirmed`` the FPS of
    the answer's fresh re-runs, ``skipped`` why a method did not run."""
    ms = cmp.ctx.measure_settings
    frames = ms.sample_size + (ms.warmup or 0)
    base_g = results.get("Base(G)")
    base_runs = confirmed.get("Base(G)") or []
    base_fps = (float(np.mean(base_runs)) if base_runs
                else base_g.measurement.fps if base_g and base_g.measurement is not None else 0.0)
    rows = []
    for method, r in results.items():
        m = r.measurement
        cost = method_cost(r.asked, cmp.backend.platform, frames, cmp.ctx.platform.board_costs, r.reruns)
        c = m.config if m is not None else None
        fps = float(m.fps) if m is not None and m.ok else 0.0
        curve = anytime(r.asked)
        extra = r.extra
        runs = confirmed.get(method) or []
        rows.append({
            "method": method, "status": "ok" if fps > 0 else (m.status if m is not None else "error"), "fps": fps,
            "fps_confirmed": float(np.mean(runs)) if runs else float("nan"),
            "fps_confirmed_std": float(np.std(runs)) if runs else float("nan"), "repeats": len(runs),
            "fps_runs": [float(x) for x in runs],
            "gain_vs_base_g_pct": (100 * ((float(np.mean(runs)) if runs else fps) / base_fps - 1)
                                   if base_fps and fps else float("nan")),   # on the re-run means
            "energy_j_per_frame": (float(m.energy_j_per_frame) if m is not None and m.energy_j_per_frame is not None
                                   else float("nan")),
            "points_measured": len(r.asked),
            "mapping_points": extra.get("mapping_points"), "param_points": extra.get("param_points"),
            "engines_gpu": cost["engines"].get("GPU", 0), "engines_dla": cost["engines"].get("DLA", 0),
            "board_hours": cost["board_hours"],
            "option": c.option if c else "", "cuts": ",".join(map(str, c.cuts)) if c else "",
            "streams": ",".join(map(str, c.streams)) if c else "", "buffers": c.buffers if c else 0,
            "pre_threads": c.pre_threads if c else 0, "post_threads": c.post_threads if c else 0,
            "config_hash": c.hash if c else "", "anytime": [float(x) for x in curve],
            "extra_json": json.dumps(extra, default=str), "reason": m.reason if m is not None else "",
        })
    for method, why in skipped.items():
        rows.append({"method": method, "status": "skipped", "reason": why, "anytime": [], "fps_runs": [],
                     "extra_json": "{}"})
    best = max((r.get("fps", 0.0) for r in rows), default=0.0)
    for r in rows:   # budget-free cost: distinct points until the method came within target of the best method
        curve = r["anytime"]
        r["points_to_target"] = next((i + 1 for i, v in enumerate(curve) if v >= cmp.settings.target * best), None)
    order = list(cmp.settings.methods)
    rows.sort(key=lambda r: order.index(r["method"]) if r["method"] in order else len(order))
    return pd.DataFrame(rows)


def plot_fps(frame: pd.DataFrame, out: Path) -> Path:
    """Each method's answer: the mean of its re-runs with their standard deviation (the single search
    measurement where there were no re-runs)."""
    ok = frame[frame["status"] == "ok"]
    fps = ok["fps_confirmed"].fillna(ok["fps"]) if "fps_confirmed" in ok else ok["fps"]
    err = ok["fps_confirmed_std"].fillna(0.0) if "fps_confirmed_std" in ok else None
    fig, ax = plt.subplots(figsize=(7.5, 3.4))
    colors = ["#DD8452" if m in SEARCHES else "#4C72B0" for m in ok["method"]]
    bars = ax.bar(ok["method"], fps, yerr=err, capsize=2, color=colors)
    for bar, v in zip(bars, fps):
        ax.text(bar.get_x() + bar.get_width() / 2, v, f"{v:.0f}", ha="center", va="bottom", fontsize=7)
    ax.set_ylabel("FPS")
    ax.set_title("FPS per exploration method")
    ax.tick_params(axis="x", labelrotation=35, labelsize=7)
    ax.margins(y=0.15)
    fig.tight_layout()
    return save_figure(fig, out)


def plot_anytime(frame: pd.DataFrame, out: Path) -> Path:
    """Best FPS found against configurations asked for (searching methods only)."""
    fig, ax = plt.subplots(figsize=(7, 3.4))
    for _, r in frame[frame["status"] == "ok"].iterrows():
        curve = list(r["anytime"])
        if len(curve) > 1:
            ax.step(range(1, len(curve) + 1), curve, where="post", label=r["method"],
                    lw=2 if r["method"] in SEARCHES else 1)
    ax.set_xscale("log")
    ax.set_xlabel("configurations measured")
    ax.set_ylabel("best FPS so far")
    ax.set_title("Anytime performance")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return save_figure(fig, out)


def _r(x, nd=1):
    return "" if x is None or (isinstance(x, float) and x != x) else round(float(x), nd)


def write_comparison(cmp, results: dict, confirmed: dict, skipped: dict) -> dict:
    from dse.store.parquet import write_atomic

    run = cmp.ctx.run
    frame = comparison_frame(cmp, results, confirmed, skipped)
    write_atomic(pa.Table.from_pandas(frame, preserve_index=False), run / "comparison.parquet")
    plot_fps(frame, run / "plots" / "compare_fps.png")
    plot_anytime(frame, run / "plots" / "compare_anytime.png")
    ms, platform = cmp.ctx.measure_settings, cmp.ctx.platform
    ok = frame[frame["status"] != "skipped"]
    n = cmp.settings.repeats
    table = [{"Method": r["method"], "FPS": _r(r["fps"]), f"FPS ({n} runs)": _r(r["fps_confirmed"]),
              "+-": _r(r["fps_confirmed_std"]), "vs Base(G) (%)": _r(r["gain_vs_base_g_pct"], 0),
              "Energy (mJ/frame)": _r(1000 * r["energy_j_per_frame"]), "Points": int(r["points_measured"]),
              f"Points to {100 * cmp.settings.target:.0f} %": (int(r["points_to_target"])
                                                             if pd.notna(r.get("points_to_target")) else "never"),
              "Mapping/Param": (f"{int(r['mapping_points'])}/{int(r['param_points'])}"
                                if pd.notna(r.get("mapping_points")) and pd.notna(r.get("param_points")) else ""),
              "Engines GPU/DLA": f"{int(r['engines_gpu'])}/{int(r['engines_dla'])}",
              "Board h (est.)": _r(r["board_hours"], 2), "Option": r["option"], "Cuts": r["cuts"] or "-",
              "Streams": r["streams"], "Buf.": int(r["buffers"]), "Pre/Post": f"{int(r['pre_threads'])}/{int(r['post_threads'])}"}
             for _, r in ok.iterrows()]
    lines = [f"# Exploration methods: {ms.benchmark} on {platform.name} ({ms.precision.upper()}, "
             f"batch {ms.batch}, {ms.input_size}x{ms.input_size})", "",
             markdown_table(table),
             f"FPS: the single measurement the method chose its answer by; FPS ({n} runs): mean and standard "
             f"deviation of {n} fresh re-runs of that answer (a method that measured many noisy points tends to "
             "keep a lucky one, so compare these). "
             "Points: distinct configurations a method asked for, counted whether or not another method had "
             "measured them first (all methods share one evaluator cache, so nothing was measured twice). "
             f"Points to {100 * cmp.settings.target:.0f} %: how many of them the method had asked for when its best "
             f"FPS so far first reached {100 * cmp.settings.target:.0f} % of the best method's FPS (independent of the "
             "budget a method is given; 'never': it did not get there). "
             "Engines: distinct engines those configurations need, per PE type. Board hours: what a real board "
             "would spend on this method alone (runs + engine builds).", ""]
    if "Exhaustive" in results:
        lines.append(f"- Exhaustive (a reference sweep, not the whole space): {results['Exhaustive'].extra['coverage']}"
                     "; the best tuple fine-tuned like the proposed method's answer")
    for method, why in skipped.items():
        lines.append(f"- {method}: skipped ({why})")
    for _, r in frame[frame["status"].isin(["refused", "error"])].iterrows():
        what = "refused" if r["status"] == "refused" else "could not measure (error)"
        lines.append(f"- {r['method']}: the board {what} its answer ({r['reason']})")
    prof = results.get("Profiled")
    if prof and prof.extra.get("estimates"):
        e = prof.extra
        lines += ["", f"## Profile-based estimate vs measurement (thesis Table 3.11; DLA/GPU multiple "
                      f"{e['dla_ratio']:.2f} from {e['ratio_from']})", "",
                  markdown_table([{"Mapping": x["mapping"], "Option": x["option"], "Cuts": ",".join(map(str, x["cuts"])) or "-",
                                   "Estimated stages (ms)": ", ".join(f"{v:.2f}" for v in x["estimate_ms"]),
                                   "Measured stages (ms)": ", ".join(f"{v:.2f}" for v in x["measured_ms"]),
                                   "Estimated (us)": round(1000 * x["estimate_sum_ms"]),
                                   "Measured (us)": round(1000 * x["measured_sum_ms"]),
                                   "Difference (%)": round(x["difference_pct"], 2)} for x in e["estimates"]]),
                  "Difference = (measured - estimated) / measured: positive means the estimate is too low."]
    lines += ["", "![FPS per method](plots/compare_fps.png)", "![Anytime curves](plots/compare_anytime.png)", ""]
    write_text_atomic(run / "comparison.md", "\n".join(lines))
    return {"rows": frame.to_dict("records"), "skipped": skipped}
