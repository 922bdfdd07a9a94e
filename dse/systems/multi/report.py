"""The multi-network report: the Table 4.8 grid (maximum FPS per method and FSM), the mappings (Table 4.9(a)), the
frequency table of the proposed method (Table 4.9(b)), estimated and deployed energy with the savings of PR and
PR-GB against GB and SOTA (Figs. 4.7/4.9), deadline checks, a bar plot and the Gantt chart of one hyperperiod."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from dse.report.tables import markdown_table

ORDER = ("LC", "BS", "GB", "SOTA", "PR-GB", "PR")


def load(mdir) -> tuple[list[dict], pd.DataFrame, pd.DataFrame]:
    mdir = Path(mdir)
    combos = [json.loads(p.read_text()) for p in sorted((mdir / "combine").glob("*.json"))]
    ft = [pd.read_parquet(p) for p in sorted((mdir / "freqtable").glob("*.parquet"))]
    dp = [pd.read_parquet(p) for p in sorted((mdir / "deploy").glob("*.parquet"))]
    return combos, pd.concat(ft, ignore_index=True) if ft else pd.DataFrame(), \
        pd.concat(dp, ignore_index=True) if dp else pd.DataFrame()


def fps_grid(combos: list[dict]) -> pd.DataFrame:
    """Rows: methods (GB twice: every app at once, as in Table 4.8, and 'modified' on the FSM's scenarios)."""
    rows = {}
    for c in combos:
        m = c["method"]
        if m in ("GB", "SOTA") and "max_fps_all_apps" in c:
            rows.setdefault(f"{m} (all apps)", {})[c["fsm"]] = c["max_fps_all_apps"]
            m = f"{m} (FSM scenarios)"
        rows.setdefault(m, {})[c["fsm"]] = c["max_fps"]
    grid = pd.DataFrame(rows).T
    return grid.reindex(sorted(grid.index, key=lambda r: (ORDER.index(r.split()[0]) if r.split()[0] in ORDER else 9, r)))


def energy_table(ft: pd.DataFrame, dp: pd.DataFrame, sweeps: dict) -> pd.DataFrame:
    """Per FSM x method x FPS of the sweep: estimated processor watts (mean over scenarios; all must be feasible)
    and the deployed board watts, misses and the worst observed response / WCRT."""
    from dse.systems.multi.deploy import summarize

    if ft.empty:
        return pd.DataFrame()
    est = ft.groupby(["fsm", "method", "fps"], as_index=False).agg(
        est_w=("est_w", "mean"), feasible=("feasible", "all"), scenarios=("scenario", "count"))
    est = est[est.apply(lambda r: r.fps in sweeps.get(r.fsm, ()), axis=1)]
    if not dp.empty:
        dep = summarize(dp)[["fsm", "method", "fps", "board_w", "processors_w", "misses", "worst"]]
        est = est.merge(dep, on=["fsm", "method", "fps"], how="left")
    return est


def savings(table: pd.DataFrame, col: str) -> pd.DataFrame:
    """Energy saved by PR and PR-GB against GB and SOTA at each constraint where all four are feasible."""
    rows = []
    if table.empty or col not in table:
        return pd.DataFrame()
    for (fsm, fps), g in table[table.feasible].groupby(["fsm", "fps"]):
        w = dict(zip(g.method, g[col]))
        for a in ("PR", "PR-GB"):
            for b in ("GB", "SOTA"):
                if a in w and b in w and pd.notna(w[a]) and pd.notna(w[b]):
                    rows.append({"fsm": fsm, "fps": fps, "method": a, "vs": b, "saving": 1 - w[a] / w[b]})
    return pd.DataFrame(rows)


def fps_plot(grid: pd.DataFrame, out) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dse.report.plots import save_figure

    fig, ax = plt.subplots(figsize=(8, 4))
    grid.T.plot.bar(ax=ax, rot=0)
    ax.set_xlabel("FSM")
    ax.set_ylabel("maximum FPS (every app, every scenario)")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    return save_figure(fig, out)


def hyperperiod_gantt(mdir, combo: dict, ft: pd.DataFrame, out) -> Path | None:
    """One hyperperiod of the largest scenario of a method at its tightest feasible FPS (periodic DES trace)."""
    from dse.backends.sim.periodic import simulate_periodic
    from dse.systems.multi.deploy import scenario_run
    from dse.systems.multi.networks import case_platform
    from dse.platform import load_platform
    from dse.report.gantt import draw_gantt
    from dse.systems.multi.case_dir import load_result, load_settings

    ok = ft[(ft.fsm == combo["fsm"]) & (ft.method == combo["method"]) & ft.feasible]
    if ok.empty:
        return None
    ok = ok.assign(n=ok.scenario.str.count(r"\+")).sort_values(["n", "fps"], ascending=[False, False])
    r = ok.iloc[0]
    case, seed, _ = load_result(mdir, combo["fsm"], combo["method"])
    _, platform, _ = load_settings(mdir)
    sc = r.scenario.split("+")
    apps, pl, freqs = scenario_run(case, combo, r)
    period = 1e6 / r.fps
    res = simulate_periodic(apps, pl, platform=load_platform(case_platform(platform, case.settings)),
                            freqs_mhz=freqs, duration_us=3 * period, seed=seed, controller_core=None, trace=True)
    t0 = period                                   # the second hyperperiod: the first has no backlog
    # one colour per app: its index in the scenario as the frame
    trace = [s._replace(frame=sc.index(s.label)) for s in res.trace if s.label in sc and t0 <= s.start < t0 + period]
    if not trace:
        return None
    return draw_gantt(trace, out, first_frame=0, n_frames=len(sc),
                      title=f"{combo['method']} FSM-{combo['fsm']} {r.scenario} at {r.fps:g} FPS "
                            f"(one period, CPU {r.cpu_mhz:g} / GPU {r.gpu_mhz:g} / DLA {r.dla_mhz:g} MHz)")


def write_report(mdir) -> str:
    from dse.systems.multi.case_dir import load_settings

    settings, _, seed = load_settings(mdir)
    mdir = Path(mdir)
    combos, ft, dp = load(mdir)
    grid = fps_grid(combos)
    fps_plot(grid, mdir / "plots" / "multi_fps.png")
    lines = [f"# Multi-network case {settings.name}", "",
             f"Apps: {', '.join(f'{a} = {n}' for a, n in settings.apps.items())}; CPU priority "
             f"{' > '.join(settings.priorities)}; {settings.precision}, {settings.input_size}x{settings.input_size}; "
             f"seed {seed}.", "",
             "## Maximum FPS (Table 4.8)", "", markdown_table(grid.round(1).rename_axis("method").reset_index().to_dict("records")), "",
             "![max FPS](plots/multi_fps.png)", ""]
    pr_a = next((c for c in combos if c["method"] == "PR"), None)
    lines += ["## Mappings (Table 4.9(a))", ""]
    for c in combos:
        if c["method"] in ("PR", "GB", "SOTA") and c["fsm"] == (pr_a or c)["fsm"]:
            first = next(iter(c["mapping"].values()))
            lines += [f"**{c['method']}** (FSM-{c['fsm']}):", "",
                      markdown_table([{**m, "pes": " ".join(m["pes"])} for m in first])]
    if not ft.empty and pr_a is not None:
        t = ft[(ft.method == "PR") & (ft.fsm == pr_a["fsm"]) & ft.feasible]
        if len(t):
            big = t.assign(n=t.scenario.str.count(r"\+")).sort_values("n").scenario.iloc[-1]
            lines += [f"## Frequencies of PR, FSM-{pr_a['fsm']}, scenario {big} (Table 4.9(b))", "",
                      markdown_table(t[t.scenario == big][["fps", "cpu_mhz", "gpu_mhz", "dla_mhz", "est_w",
                                                           "max_wcrt_ms"]].round(3).to_dict("records"))]
        dla_max = float((ft[ft.feasible & ft.method.isin(["PR", "PR-GB", "LC"])].dla_mhz
                         == ft.dla_mhz.max()).mean()) if len(ft) else float("nan")
        lines += [f"DLA at its maximum frequency in {dla_max:.0%} of the DVFS methods' table entries.", ""]
    table = energy_table(ft, dp, settings.fps)
    if not table.empty:
        lines += ["## Energy at the FPS constraints (Table 4.10; estimated = processors, deployed = whole board)", "",
                  markdown_table(table.round(3).to_dict("records")), ""]
        for col, what in (("est_w", "estimated"), ("board_w", "deployed")):
            sv = savings(table, col)
            if not sv.empty:
                agg = sv.groupby(["method", "vs"]).saving.agg(["min", "mean", "max"]).round(3)
                lines += [f"Savings ({what}):", "", markdown_table(agg.reset_index().to_dict("records")), ""]
        if "misses" in table:
            lines += [f"Deadline misses in the deployment runs: {int(table.misses.fillna(0).sum())}; worst observed "
                      f"response / analysed WCRT: {table.worst.max():.3f}.", ""]
    if pr_a is not None and not ft.empty:
        out = hyperperiod_gantt(mdir, pr_a, ft, mdir / "plots" / "multi_gantt.png")
        if out is not None:
            lines += ["## One hyperperiod of PR (periodic simulation)", "", "![gantt](plots/multi_gantt.png)", ""]
    infeasible = [f"{c['method']} FSM-{c['fsm']}: best achievable {c['max_fps']:.1f} FPS, below the tightest "
                  f"constraint {min(settings.fps.get(c['fsm'], [0]))}; per scenario: " +
                  ", ".join(f"{k} {v:.1f}" for k, v in c.get("scenario_max_fps", {}).items()) +
                  (f" ({c['refused']})" if c.get("refused") else "") for c in combos
                  if settings.fps.get(c["fsm"]) and c["max_fps"] < min(settings.fps[c["fsm"]])]
    if infeasible:
        lines += ["## Constraints no mapping of a method meets", ""] + [f"- {x}" for x in infeasible] + [""]
    text = "\n".join(lines)
    from dse.store.atomic import write_text_atomic

    write_text_atomic(mdir / "multi.md", text)
    return text
