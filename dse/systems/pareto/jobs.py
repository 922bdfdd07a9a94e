"""Target `pareto`: seed 001's energy/frequency Pareto search for one network on a clocked board.

One job per (platform, benchmark) directory ``results/pareto/<platform>/<benchmark>/``: NSGA-II on the model
(``dse.systems.pareto``), the TensorRT baseline over every host-CPU x GPU clock pair, both re-measured on the board with
fresh noise through the evaluator (every board run a row of ``cache/pareto.parquet`` in the store's schema:
``dse.systems.pareto.backend``); writes ``pareto.parquet`` (every NSGA-II and baseline point: genome, mapping,
clocks, model and measured throughput/energy, the means of those runs, on-front flags), ``pareto.md`` (the chosen
points, hypervolumes, model error), ``plots/pareto_front.png`` and ``run.json`` (seed, versions, the search log).
Settings: the ``pareto`` config group; the workflow writes the run's config parts before the job
(``config/pareto.yaml``, ``config/platform.yaml``: changing a setting reruns only this job) and the resolved
``config.yaml``.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from dse.core.validate import check_keys, check_sizes
from dse.core.errors import DseError, choices_error
from dse.store.atomic import write_bytes_atomic, write_json_atomic, write_text_atomic
from dse.config import Plan, read_part
from dse.systems.common import compose_sim_case, say

OUTPUTS = ("pareto.parquet", "pareto.md", "plots/pareto_front.png", "config.yaml")
SETTING_KEYS = ("population", "generations", "cxpb", "mutpb", "comm", "idle_time", "repeats", "seed")


def check_settings(d: dict) -> dict:
    """The ``pareto`` group, every key and value checked (a bad one named with the valid choices)."""
    from dse.systems.pareto.model import COMM_MODES, IDLE_TIMES

    check_keys(d, SETTING_KEYS, "pareto setting")
    missing = [k for k in SETTING_KEYS if k not in d]
    if missing:
        raise DseError(f"pareto settings lack {', '.join(missing)} (config/pareto/default.yaml has them all)")
    if d["comm"] not in COMM_MODES:
        raise choices_error("pareto.comm", d["comm"], COMM_MODES)
    if d["idle_time"] not in IDLE_TIMES:
        raise choices_error("pareto.idle_time", d["idle_time"], IDLE_TIMES)
    if int(d["repeats"]) < 1:
        raise DseError(f"pareto.repeats must be >= 1, got {d['repeats']}")
    check_sizes(d, "pareto", {"population": 4, "generations": 0})
    ga_settings(d)
    return dict(d)


def ga_settings(d: dict):
    """The NSGA-II settings of a checked ``pareto`` group (GASettings checks the rates)."""
    from dse.search.ga_common import GASettings

    return GASettings(population=int(d["population"]), generations=int(d["generations"]), cxpb=float(d["cxpb"]),
                      mutpb=float(d["mutpb"]), seed=int(d["seed"]))


def plan_pareto(snakemake_config: dict) -> dict[str, Plan]:
    """Compose the config and check it against the platform (a clocked board) before any job runs."""
    from omegaconf import OmegaConf

    from dse.systems.pareto.board import ClockedParams

    cfg, platform, loaded = compose_sim_case(snakemake_config, "pareto")
    ClockedParams.of(loaded)
    settings = check_settings(OmegaConf.to_container(cfg.pareto, resolve=True))
    if str(cfg.precision) != "fp32":
        raise choices_error("precision of target pareto (seed 001 runs fp32)", str(cfg.precision), ["fp32"])
    settings["benchmark"] = str(cfg.benchmark.model)
    settings["input_size"] = int(cfg.benchmark.input_size)
    text = {"pareto": OmegaConf.to_yaml(OmegaConf.create(settings)),
            "platform": OmegaConf.to_yaml(OmegaConf.create(platform))}
    pdir = f"{cfg.results_dir}/pareto/{loaded.name}/{cfg.benchmark.name}"
    return {pdir: Plan(text, OmegaConf.to_yaml(cfg), OUTPUTS)}


def run(pdir) -> dict:
    """The job: search, baseline, re-measure, write. Returns the summary written to run.json."""
    import time

    from dse.backends.base import MeasureSettings
    from dse.evaluate import Evaluator
    from dse.systems.pareto.backend import ClockedBackend, measurement_context
    from dse.systems.pareto.board import ClockedBoard
    from dse.systems.pareto.model import TangModel
    from dse.systems.pareto.search import dominates_front, hypervolume, nsga2, pareto_mask, remeasure, trt_baseline
    from dse.graph.analysis import analyze
    from dse.platform import load_platform
    from dse.store.schema import versions
    from dse.zoo.registry import build_network

    pdir = Path(pdir)
    raw = read_part(pdir, "pareto")
    s = check_settings({k: v for k, v in raw.items() if k in SETTING_KEYS})
    platform_part = read_part(pdir, "platform")
    platform = load_platform(platform_part)
    seed = int(s["seed"])
    say(f"pareto: analysing {raw['benchmark']} at {raw['input_size']}")
    board = ClockedBoard(platform, analyze(build_network(raw["benchmark"], raw["input_size"], seed=seed)))
    model = TangModel(board, s["comm"], s["idle_time"])
    ga = ga_settings(s)
    say(f"pareto: NSGA-II, population {ga.population} x {ga.generations} generations over {board.n_tasks} tasks on "
         f"{board.n_cores} cores x {len(model.levels)} CPU clusters x {len(model.gpu_levels)} GPU levels")
    found, log = nsga2(model, ga)
    say(f"pareto: {log['evaluations']} model evaluations in {log['seconds']:.1f} s, {len(found)} non-dominated")
    base = trt_baseline(model)
    repeats = int(s["repeats"])
    backend = ClockedBackend(board, MeasureSettings(benchmark=raw["benchmark"], precision="fp32",
                                                    input_size=int(raw["input_size"]), seed=seed))
    evaluator = Evaluator(backend, pdir / "cache" / "pareto.parquet", seed=seed,
                          context=measurement_context(platform_part, raw))
    t0 = time.perf_counter()
    frames = []
    for source, G in (("nsga2", found), ("trt-baseline", base)):
        obj = model.evaluate(G)
        fps, energy = remeasure(evaluator, model, G, repeats, strategy=source)
        rows = []
        for g, mf, me, f, e in zip(G, obj.fps, obj.energy_j, fps, energy):
            mapping, clk = model.decode(g)
            rows.append({"source": source, "genome": ",".join(map(str, g)), "mapping": ",".join(map(str, mapping)),
                         "gpu_tasks": int((mapping == board.gpu_core).sum()), "cores_used": len(set(mapping)),
                         **{f"{n}_mhz": f_ for n, f_ in clk.cpu_mhz}, "gpu_mhz": clk.gpu_mhz,
                         "model_fps": mf, "model_energy_j": me, "fps": f, "energy_j": e})
        df = pd.DataFrame(rows)
        df["on_front"] = pareto_mask(df.fps, df.energy_j)
        frames.append(df)
    say(f"pareto: {sum(len(f) for f in frames)} points re-measured {repeats}x in {time.perf_counter() - t0:.1f} s "
        f"({evaluator.measured} board runs, {evaluator.reused} answered by the cache {evaluator.store})")
    df = pd.concat(frames, ignore_index=True)
    df["fps_model_err"] = df.model_fps / df.fps - 1.0
    df["energy_model_err"] = df.model_energy_j / df.energy_j - 1.0
    df["on_joint_front"] = pareto_mask(df.fps, df.energy_j)
    ref = (0.0, float(df.energy_j.max()) * 1.1)
    summary = {"seed": seed, "versions": versions(), "benchmark": raw["benchmark"], "platform": platform.name,
               "settings": s, "search": {k: v for k, v in log.items() if k != "hypervolume"},
               "hypervolume_ref": list(ref)}
    for source in ("nsga2", "trt-baseline"):
        f = df[(df.source == source) & df.on_front]
        summary[source] = {"front_points": int(len(f)), "max_fps": float(df[df.source == source].fps.max()),
                           "min_energy_j": float(df[df.source == source].energy_j.min()),
                           "hypervolume": hypervolume(f.fps, f.energy_j, ref)}
    nf, bf = (df[(df.source == src) & df.on_front] for src in ("nsga2", "trt-baseline"))
    summary["baseline_points_dominated_or_equalled"] = dominates_front(nf.fps, nf.energy_j, bf.fps, bf.energy_j)
    summary["model_error"] = {"fps_median_abs": float(df.fps_model_err.abs().median()),
                              "fps_max_abs": float(df.fps_model_err.abs().max()),
                              "energy_median_abs": float(df.energy_model_err.abs().median()),
                              "energy_max_abs": float(df.energy_model_err.abs().max())}
    buf = df.to_parquet(index=False)
    write_bytes_atomic(pdir / "pareto.parquet", buf)
    _plot(df, pdir / "plots" / "pareto_front.png", f"{raw['benchmark']} on {platform.name}")
    write_text_atomic(pdir / "pareto.md", _markdown(df, summary))
    write_json_atomic(pdir / "run.json", {**summary, "hypervolume_history": log["hypervolume"]})
    say(f"pareto: NSGA-II max {summary['nsga2']['max_fps']:.1f} img/s (baseline "
         f"{summary['trt-baseline']['max_fps']:.1f}); hypervolume {summary['nsga2']['hypervolume']:.3g} vs "
         f"{summary['trt-baseline']['hypervolume']:.3g}; it dominates or equals "
         f"{summary['baseline_points_dominated_or_equalled']:.0%} of the baseline front -> {pdir}/pareto.md")
    return summary


def _plot(df: pd.DataFrame, path: Path, title: str) -> None:
    import io

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    styles = {"nsga2": ("tab:red", "+", "NSGA-II (Eqs. 1-13), re-measured"),
              "trt-baseline": ("tab:green", "x", "TensorRT, all clock pairs")}
    for source, (color, marker, label) in styles.items():
        d = df[df.source == source]
        ax.scatter(d.fps, d.energy_j, c=color, marker=marker, s=14, alpha=0.35, linewidths=0.8)
        f = d[d.on_front].sort_values("fps")
        ax.plot(f.fps, f.energy_j, color=color, marker=marker, lw=1.2, label=f"{label}: front")
    ax.set_xlabel("throughput (img/s)")
    ax.set_ylabel("energy (J/img)")
    ax.set_yscale("log")
    ax.set_title(title)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120)
    plt.close(fig)
    write_bytes_atomic(path, buf.getvalue())


def _markdown(df: pd.DataFrame, s: dict) -> str:
    lines = [f"# Energy/frequency Pareto search: {s['benchmark']} on {s['platform']}", "",
             f"NSGA-II: {s['search']['evaluations']} model evaluations, {s['search']['generations']} generations, "
             f"{s['search']['seconds']:.1f} s. Every point re-measured {s['settings']['repeats']}x on the board.", "",
             "| search | front points | max img/s | min J/img | hypervolume |", "| --- | --- | --- | --- | --- |"]
    for src in ("nsga2", "trt-baseline"):
        r = s[src]
        lines.append(f"| {src} | {r['front_points']} | {r['max_fps']:.2f} | {r['min_energy_j']:.4f} | "
                     f"{r['hypervolume']:.4g} |")
    me = s["model_error"]
    lines += ["", f"NSGA-II's front dominates or equals {s['baseline_points_dominated_or_equalled']:.0%} of the "
              f"baseline's. Model error (Eqs. 1-13 vs board): throughput median {me['fps_median_abs']:.1%}, max "
              f"{me['fps_max_abs']:.1%}; energy median {me['energy_median_abs']:.1%}, max {me['energy_max_abs']:.1%}.",
              "", "## Chosen points (joint front)", "",
              "| source | img/s | J/img | model img/s | model J/img | GPU tasks | cores | clocks (MHz) |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    clocks = [c for c in df.columns if c.endswith("_mhz")]
    for r in df[df.on_joint_front].sort_values("fps").itertuples():
        clk = ", ".join(f"{c[:-4]} {getattr(r, c):g}" for c in clocks)
        lines.append(f"| {r.source} | {r.fps:.2f} | {r.energy_j:.4f} | {r.model_fps:.2f} | {r.model_energy_j:.4f} | "
                     f"{r.gpu_tasks} | {r.cores_used} | {clk} |")
    return "\n".join(lines) + "\n"


__all__ = ["check_settings", "plan_pareto", "run"]
