"""Power calibration and deployment on the virtual board (thesis 4.4.2.3 and 4.5.4).

``power_fit``: the energy model's regressions from board runs. Idle power of each processor's rail over its DVFS
table (no app running); per network, its dynamic power while busy at each level of one processor (the others at
maximum): option E for CPU and GPU, the option-A mapping with the most DLA layers for the DLA (l. 1317-1323).
``deploy``: a method's mapping and frequency table run in the periodic multi-app simulation, per scenario and
FPS constraint (10 s x 3 repetitions in the thesis), with the whole board's energy (all rails: the estimate
covers the processors only, so measured savings come out a bit smaller, l. 1547) and every response time.
"""
from __future__ import annotations

import pandas as pd

from dse.backends.sim.periodic import PeriodicApp, PeriodicStage
from dse.backends.sim.power import RAIL_OF_TYPE, idle_rails_w
from dse.core.errors import DseError
from dse.systems.multi.combine import CONTROLLER, controller_app
from dse.systems.multi.pareto import task_chains
from dse.rt.energy import PowerFit, fit_dynamic, fit_static

FIT_PERIOD_US = 100_000.0      # fixed-period mode: one frame per 100 ms
FIT_SECONDS = 2.0


def _solo_placement(stages) -> dict[tuple[str, int], str]:
    pl, dla = {}, 0
    for k, st in enumerate(stages):
        if st.kind == "cpu":
            pl["app", k] = f"CPU{k % 2}"
        elif st.kind == "gpu":
            pl["app", k] = "GPU"
        else:
            pl["app", k] = f"DLA{dla}"
            dla += 1
    return pl


def _fit_mappings(front: pd.DataFrame) -> dict[str, int]:
    """kind -> the step-1 mapping the dynamic sweep of that kind runs (E for cpu/gpu; the A with most DLA layers)."""
    e = front[front.option == "E"]
    out = {}
    if len(e):
        out["cpu"] = out["gpu"] = int(e.mapping.iloc[0])
    a = front[front.option == "A"]
    if len(a):
        out["dla"] = int(a.loc[a.cuts.map(lambda c: c[0]).idxmax()].mapping)
    elif (front.n_dla > 0).any():     # no option A on the front: the mapping that keeps the DLA busiest
        out["dla"] = int(front.loc[front.busy_dla_us.idxmax()].mapping)
    return out


def power_fit(evaluator, fronts: dict[str, pd.DataFrame], tasks: dict[str, pd.DataFrame], levels: dict[str, list],
              seed: int = 0) -> tuple[PowerFit, dict]:
    """The PowerFit and the sweeps it was fitted to (records for powerfit.json). The idle rails are the platform's
    power model at each level; each dynamic sweep point is one run of a network alone at one clock, measured as a
    deployment through ``evaluator`` (over a ``dse.backends.sim.deployment.DeploymentBackend``), one batch."""
    from dse.backends.sim.deployment import deployment_config

    board = evaluator.backend
    platform = board.platform
    fmax = {k: v[-1] for k, v in levels.items()}
    static, records = {}, {"idle": [], "dynamic": []}
    for kind, fs in levels.items():
        rail = RAIL_OF_TYPE[kind]
        w = [idle_rails_w(platform, {kind: f})[rail] for f in fs]
        static[kind] = tuple(float(c) for c in fit_static(fs, w))
        records["idle"] += [{"kind": kind, "rail": rail, "mhz": f, "w": x} for f, x in zip(fs, w)]
    points = []        # (net, kind, mapping, mhz, PEs, deployment)
    for net, front in fronts.items():
        _, bases = task_chains(tasks[net])
        for kind, mid in _fit_mappings(front).items():
            stages = bases[mid]
            app = PeriodicApp("app", FIT_PERIOD_US, 0, stages)
            pl = _solo_placement(stages)
            pes = [pe for (_, k), pe in pl.items() if stages[k].kind == kind]
            for f in levels[kind]:
                points.append((net, kind, mid, f, set(pes), deployment_config(
                    platform, "app", [app], pl, {kind: f}, 1e6 / FIT_PERIOD_US, FIT_SECONDS * 1e6, seed, True)))
    evaluator.evaluate_many([(c, 0) for *_, c in points], phase="powerfit", strategy="powerfit")
    per_level: dict[tuple[str, str], list[float]] = {}
    for net, kind, mid, f, pes, config in points:
        res = board.take_result(config)
        rail = RAIL_OF_TYPE[kind]
        busy = sum(res.busy.get(pe, 0.0) for pe in pes)
        dyn = res.rail_w[rail] - idle_rails_w(platform, {kind: f})[rail]
        g = per_level.setdefault((net, kind), [])
        g.append(dyn / busy if busy > 0 else 0.0)
        records["dynamic"].append({"network": net, "kind": kind, "mapping": mid, "mhz": f, "busy": busy,
                                   "dynamic_w": dyn, "busy_w": g[-1]})
    dynamic = {}
    for (net, kind), g in per_level.items():
        if min(g) <= 0:
            raise DseError(f"power fit: {net} on the {kind} measured no dynamic power at some level "
                           f"({[round(x, 3) for x in g]} W); the energy model needs it")
        dynamic[net, kind] = fit_dynamic(levels[kind], g)
    return PowerFit(static=static, dynamic=dynamic, fmax_mhz=fmax), records


def scenario_run(case, combine: dict, row) -> tuple[list[PeriodicApp], dict, dict]:
    """(apps, placement, clocks) of one frequency-table entry as the board runs it: each app of the scenario with
    the base times of its mapping there and the PEs the analysis placed it on, and the release controller above
    every app on its core (the same task the analysis charges, ``combine.controller_app``)."""
    s = case.settings
    sc = row.scenario.split("+")
    period = 1e6 / row.fps
    genes = dict(zip(case.apps, combine["plans"][row.scenario]))
    apps = [PeriodicApp(a, period, s.priority(a), case.bases[s.apps[a]][genes[a]]) for a in sc]
    pl = {(m["app"], k): pe for m in combine["mapping"][row.scenario] if m["app"] in sc
          for k, pe in enumerate(m["pes"])}
    if s.controller_core is not None:
        ctrl = controller_app(s, row.fps, len(sc))
        apps.append(PeriodicApp(CONTROLLER, period, ctrl.priority,
                                tuple(PeriodicStage(st.kind, (st.wcet_us,), st.label) for st in ctrl.stages)))
        pl[CONTROLLER, 0] = f"CPU{s.controller_core}"
    return apps, pl, {"cpu": row.cpu_mhz, "gpu": row.gpu_mhz, "dla": row.dla_mhz}


def deploy_rows(evaluator, case, combine: dict, freqtable: pd.DataFrame, *, seed: int = 0) -> pd.DataFrame:
    """Every feasible (FPS, scenario) entry of a method's frequency table run on the virtual board, measured as one
    batch through ``evaluator`` (over a ``dse.backends.sim.deployment.DeploymentBackend``; an infeasible entry is
    a refused row of its store), with what the store has no field for read off each run's ``PeriodicResult``."""
    from dse.backends.sim.deployment import deployment_config

    seconds = float(case.settings.deploy.get("seconds", 10))
    repeats = int(case.settings.deploy.get("repeats", 3))
    board = evaluator.backend
    configs = []
    for r in freqtable.itertuples():
        apps, pl, freqs = scenario_run(case, combine, r)
        configs.append((r, deployment_config(board.platform, r.scenario, apps, pl, freqs, r.fps, seconds * 1e6,
                                             seed * 1000, bool(r.feasible))))   # its repeats: seed * 1000 + r
    evaluator.evaluate_many([(c, rep) for r, c in configs for rep in (range(repeats) if r.feasible else (0,))],
                            phase="deploy", strategy=combine["method"])
    rows = []
    for r, config in configs:
        if not r.feasible:
            continue
        for rep in range(repeats):
            res = board.take_result(config, rep)
            worst = {a: v for a, v in res.max_response_us.items() if a != CONTROLLER}
            rows.append({"case": combine["case"], "fsm": combine["fsm"], "method": combine["method"],
                         "fps": float(r.fps), "scenario": r.scenario, "repeat": rep,
                         "board_w": res.board_power_w,
                         "processors_w": sum(w for k, w in res.rail_w.items() if k != "VDD_SOC_REST"),
                         "est_w": r.est_w, "misses": int(sum(v for a, v in res.misses.items() if a != CONTROLLER)),
                         "jobs": int(sum(res.completed.values())),
                         "max_response_ms": max(worst.values()) / 1000,
                         "max_response_over_wcrt": max(worst[a] / 1000 / v for a, v in _wcrt(r).items() if a in worst),
                         **{f"rail_{k}_w": v for k, v in res.rail_w.items()}})
    return pd.DataFrame(rows)


def _wcrt(r) -> dict[str, float]:
    import json

    w = r.wcrt_ms
    return json.loads(w) if isinstance(w, str) else dict(w)


def summarize(deploy: pd.DataFrame) -> pd.DataFrame:
    """Per method x FSM x FPS: the mean over scenarios (equal residence) of the repetition-averaged power."""
    if deploy.empty:
        return deploy
    per_sc = deploy.groupby(["case", "fsm", "method", "fps", "scenario"], as_index=False).agg(
        board_w=("board_w", "mean"), processors_w=("processors_w", "mean"), est_w=("est_w", "first"),
        misses=("misses", "sum"), worst=("max_response_over_wcrt", "max"))
    return per_sc.groupby(["case", "fsm", "method", "fps"], as_index=False).agg(
        board_w=("board_w", "mean"), processors_w=("processors_w", "mean"), est_w=("est_w", "mean"),
        misses=("misses", "sum"), worst=("worst", "max"), scenarios=("scenario", "count"))

