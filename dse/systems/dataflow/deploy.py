"""A co-mapping run on the virtual board (Ch. 5's code-generation check, spec 1.5-4): every group released each
period by a controller on its own core, its dataflow tasks and DL stages on the PEs the co-mapping chose, with
the board's task-time noise and accelerator contention. Once with synchronous releases (the critical instant of
the analysis), once with seeded random phases. A miss here means the analysis was not safe for this board."""
from __future__ import annotations

import pandas as pd

from dse.backends.sim.periodic import PeriodicApp, PeriodicStage
from dse.systems.dataflow.comap import Problem, build_apps


def group_runs(problem: Problem, result: dict) -> tuple[list[PeriodicApp], dict, dict[str, float]]:
    """(periodic apps, placement, analysed WCRT per group in us) of one comap result: DL tasks run around their
    candidates' noise-free times, dataflow tasks around their ACET."""
    period = 1e6 / float(result["fps"])
    genes = [result["dl"][a]["candidate"] for a in problem.apps]
    chains = problem.chains_of(genes)
    df_pes = [result["dataflow"][f"{problem.groups[gi].name}/{problem.layout[gi]['labels'][i]}"]
              for gi, i, _ in problem.df]
    dl_place = {(a, int(k)): pe for a, k, pe in result["dl_placement"]}
    apps, pl = build_apps(problem, period, chains, df_pes, dl_place)
    runs = []
    for gi, app in enumerate(apps):
        stages = []
        n_df = len(problem.layout[gi]["labels"])
        for i, st in enumerate(app.stages[:n_df]):
            stages.append(PeriodicStage(st.kind, tuple(t.acet_us for t in st.tasks), st.label))
        for a in problem.groups[gi].dl:
            stages += list(problem.candidates[problem.networks[a]].bases[genes[problem.apps.index(a)]])
        runs.append(PeriodicApp(app.name, period, app.priority, tuple(stages), edges=app.edges))
    wcrt = {g: float(v) * 1e3 for g, v in result["wcrt_ms"].items()}
    return runs, pl, wcrt


def deploy_runs(evaluator, problem: Problem, result: dict, settings, *, seed: int = 0) -> pd.DataFrame:
    """One row per run (synchronous, random phase): misses, jobs, worst response and its ratio to the WCRT. Both
    runs are one deployment (``dse.backends.sim.deployment.deployment_config``, repeats 0 and 1) measured through
    ``evaluator`` (over a ``DeploymentBackend``), rows of its store."""
    from dse.backends.sim.deployment import deployment_config

    if not result["feasible"]:
        return pd.DataFrame()
    apps, pl, wcrt = group_runs(problem, result)
    seconds = float(settings.deploy.get("seconds", 2.0))
    board = evaluator.backend
    config = deployment_config(board.platform, "+".join(a.name for a in apps), apps, pl, {}, float(result["fps"]),
                               seconds * 1e6, seed * 1000, True, controller_core=settings.controller_core)
    evaluator.evaluate_many([(config, 0), (config, 1)], phase="deploy", strategy=result["method"])
    rows = []
    for rep, phase in enumerate((False, True)):
        res = board.take_result(config, rep)
        worst = res.max_response_us
        rows.append({"case": result["case"], "method": result["method"], "fps": float(result["fps"]),
                     "ga_seed": int(result["ga_seed"]), "repeat": rep, "random_phase": phase,
                     "misses": int(sum(res.misses.values())), "jobs": int(sum(res.completed.values())),
                     "max_response_ms": max(worst.values()) / 1e3,
                     "max_response_over_wcrt": max(worst[g] / wcrt[g] for g in worst),
                     "max_response_over_period": max(worst.values()) / (1e6 / float(result["fps"])),
                     "board_w": res.board_power_w, **{f"busy_{pe}": b for pe, b in sorted(res.busy.items())}})
    return pd.DataFrame(rows)
