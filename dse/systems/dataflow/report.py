"""Report of a dataflow case (target ``dataflow``): per deadline and method the feasibility, the fitness (max
utilization) relative to Entire-GA's and the search time, seed-averaged (Figs. 5.6-5.9 style); the deployment
check; one row per job in ``dataflow.parquet``; a Gantt chart of one period of the tightest feasible co-mapping."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from dse.report.tables import markdown_table
from dse.store.atomic import write_bytes_atomic, write_text_atomic

REFERENCE = "entire-ga"


def load(ddir) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(one row per comap job, one row per deploy run)."""
    ddir = Path(ddir)
    rows = []
    for f in sorted((ddir / "comap").glob("*.json")):
        r = json.loads(f.read_text())
        rows.append({"job": f.stem, "case": r["case"], "method": r["method"], "fps": float(r["fps"]),
                     "ga_seed": int(r["ga_seed"]), "feasible": bool(r["feasible"]),
                     "max_u": r["max_u"] if r["feasible"] else np.nan,
                     "max_wcrt_ratio": r["max_wcrt_ratio"] if r["feasible"] else np.nan,
                     "time_s": float(r["time_s"]), "seed_time_s": float(r["seed_time_s"]),
                     "evaluations": int(r["evaluations"]), "generations": int(r["generations"]),
                     "seeded_from_fps": r.get("seeded_from_fps"), "reason": r["reason"],
                     "dl": json.dumps({a: v["label"] for a, v in r["dl"].items()}),
                     "dataflow": json.dumps(r["dataflow"]), "util": json.dumps(r["util"]),
                     "wcrt_ms": json.dumps(r["wcrt_ms"]), "seed": int(r["seed"]),
                     "versions": json.dumps(r["versions"])})
    deploy = [pd.read_parquet(f) for f in sorted((ddir / "deploy").glob("*.parquet"))]
    deploy = [d for d in deploy if len(d)]
    return pd.DataFrame(rows), (pd.concat(deploy, ignore_index=True) if deploy else pd.DataFrame())


def summary(jobs: pd.DataFrame) -> pd.DataFrame:
    """Per deadline x method: feasible seeds, mean max U (feasible seeds), its ratio to Entire-GA's at that
    deadline (> 1: worse), mean search time."""
    g = jobs.groupby(["fps", "method"], as_index=False).agg(
        feasible=("feasible", "sum"), seeds=("feasible", "size"), max_u=("max_u", "mean"),
        max_wcrt_ratio=("max_wcrt_ratio", "mean"), time_s=("time_s", "mean"), seed_time_s=("seed_time_s", "mean"),
        evaluations=("evaluations", "mean"))
    ref = g[g.method == REFERENCE].set_index("fps").max_u
    g["u_vs_entire"] = g.apply(lambda r: r.max_u / ref.get(r.fps, np.nan) if pd.notna(r.max_u) else np.nan, axis=1)
    return g


def plot(summ: pd.DataFrame, out) -> Path:
    """Relative fitness (max U / Entire-GA's) and search time per deadline and method."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dse.report.plots import save_figure

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.8))
    for m, g in summ.groupby("method", sort=False):
        g = g.sort_values("fps")
        a.plot(g.fps, g.u_vs_entire, marker="o", label=m)
        bad = g[g.feasible == 0]
        a.scatter(bad.fps, [1.0] * len(bad), marker="x", s=80, color=a.lines[-1].get_color())
        b.plot(g.fps, g.time_s + g.seed_time_s, marker="o", label=m)
    a.set_xlabel("deadline (FPS)")
    a.set_ylabel("max utilization / Entire-GA's (x: none feasible)")
    b.set_xlabel("deadline (FPS)")
    b.set_ylabel("search time (s)")
    b.set_yscale("log")
    a.legend(fontsize=8)
    fig.tight_layout()
    return save_figure(fig, out)


def gantt(ddir, jobs: pd.DataFrame, out) -> Path | None:
    """One period of the tightest feasible Entire-GA (else any) co-mapping in the periodic simulation."""
    from dse.backends.sim.periodic import simulate_periodic
    from dse.systems.dataflow.deploy import group_runs
    from dse.systems.multi.networks import case_platform
    from dse.platform import load_platform
    from dse.report.gantt import draw_gantt
    from dse.systems.dataflow.case_dir import load_problem

    ok = jobs[jobs.feasible].assign(ref=lambda d: d.method == REFERENCE).sort_values(
        ["fps", "ref", "max_u"], ascending=[False, False, True])
    if ok.empty:
        return None
    job = ok.iloc[0]
    settings, platform, seed, problem = load_problem(ddir)
    result = json.loads((Path(ddir) / "comap" / f"{job.job}.json").read_text())
    apps, pl, _ = group_runs(problem, result)
    period = 1e6 / job.fps
    res = simulate_periodic(apps, pl, platform=load_platform(case_platform(platform, settings)),
                            duration_us=3 * period, seed=seed, controller_core=settings.controller_core, trace=True)
    names = [a.name for a in apps]
    # one colour per group: its index as the frame
    trace = [s._replace(frame=names.index(s.label)) for s in res.trace if period <= s.start < 2 * period]
    if not trace:
        return None
    return draw_gantt(trace, out, first_frame=0, n_frames=len(names),
                      title=f"{job.method} at {job.fps:g} FPS: one period, every group")


def write_report(ddir) -> str:
    from dse.systems.dataflow.case_dir import load_settings

    settings, _, seed = load_settings(ddir)
    ddir = Path(ddir)
    jobs, deploy = load(ddir)
    write_bytes_atomic(ddir / "dataflow.parquet", jobs.to_parquet(index=False))
    summ = summary(jobs)
    plot(summ, ddir / "plots" / "dataflow_fitness.png")
    g = gantt(ddir, jobs, ddir / "plots" / "dataflow_gantt.png")
    groups = "; ".join(f"{s.name} = {' + '.join([*s.graphs, *s.dl])}" for s in settings.groups)
    lines = [f"# Dataflow case {settings.name}", "",
             f"Groups (priority order): {groups}"
             + (f"; plus {settings.random_graphs['count']} random graphs" if settings.random_graphs else "")
             + f". DL apps: {', '.join(f'{a} = {n}' for a, n in settings.networks.items())}; {settings.cpu_cores} "
             f"CPU cores; {settings.precision}, {settings.input_size}x{settings.input_size}; case seed {seed}, GA seeds "
             f"{list(settings.seeds)}.", "",
             "## Fitness and search time per deadline (Figs. 5.6-5.9)", "",
             "max U: the largest PE utilization of the best feasible solution (seed mean); vs Entire-GA: its ratio "
             "to Entire-GA's at that deadline (> 1 is worse); time: the method's own search (Entire-GA's seeding "
             "Heuristic+GA runs in `seed s`).", "",
             markdown_table(summ.round(4).to_dict("records")), "", "![fitness](plots/dataflow_fitness.png)", ""]
    if not deploy.empty:
        d = deploy.groupby(["fps", "method"], as_index=False).agg(
            runs=("misses", "size"), misses=("misses", "sum"), jobs=("jobs", "sum"),
            worst_vs_wcrt=("max_response_over_wcrt", "max"), worst_vs_period=("max_response_over_period", "max"))
        lines += ["## Deployment on the virtual board", "",
                  "Each feasible co-mapping runs in the periodic simulation (synchronous and random-phase releases, "
                  "board noise and accelerator contention): deadline misses and the worst observed response over "
                  "the analysed WCRT.", "", markdown_table(d.round(4).to_dict("records")), ""]
    best = jobs[jobs.feasible & (jobs.method == REFERENCE)].sort_values(["fps", "max_u"]).groupby("fps").head(1)
    if len(best):
        lines += ["## Entire-GA's co-mapping per deadline", "",
                  markdown_table([{"fps": r.fps, "max_u": r.max_u, "dl": r.dl} for r in best.itertuples()]), ""]
    if g is not None:
        lines += ["![gantt](plots/dataflow_gantt.png)", ""]
    text = "\n".join(lines)
    write_text_atomic(ddir / "dataflow.md", text)
    return text
