"""The compared methods of thesis 4.5.3 (l. 1419-1444) on one FSM, and step 3, the frequency table (l. 1361-1363).

- PR: the proposed GA over the FSM's scenarios (maximum FPS; then the least mean energy at the tightest FPS of
  the sweep, seeded with the max-FPS answer), one static mapping, Algorithm 6 per scenario and deadline.
- GB: the GA assuming every app runs at once (one scenario), maximum frequencies, one mapping for every FSM;
  "modified" = its mapping evaluated on the FSM's own scenarios (l. 1499). PR-GB: that mapping + Algorithm 6.
- LC: a mapping per scenario (migration allowed: an ideal reference), the DLA limit per scenario, Algorithm 6.
- BS: every app GPU-only (option E) at maximum frequencies.
- SOTA: ``dse.systems.multi.sota`` (per-layer GA on estimated times, re-evaluated with measured WCETs).

The maximum FPS of a method is that of its mapping(s) at maximum frequencies: the highest FPS at which a GA can
find a feasible mapping equals the best mapping's maximum FPS, so the GA maximizes it directly instead of
re-running the energy GA at rising FPS (l. 1375); the energy GA then runs at each method's tightest constraint.
"""
from __future__ import annotations

import time

import pandas as pd

from dse.systems.multi.combine import INF, Case, ScenarioEvaluator, evolve
from dse.rt.dvfs import scales

DVFS = {"PR": True, "PR-GB": True, "LC": True, "GB": False, "BS": False, "SOTA": False}


def sc_label(sc) -> str:
    return "+".join(sc)


def _ga_over(case: Case, evaluate, maximize: bool, salt: str, apps=None, fixed=None, seeds=()):
    """The step-2 GA over the genes of ``apps`` (default every app; the others fixed to ``fixed``):
    ``evaluate(full genes) -> (value, cases)``. Returns the full genes of the best and the GA outcome."""
    idx = [case.apps.index(a) for a in (apps or case.apps)]
    base = list(fixed or [0] * len(case.apps))

    def full(sub):
        g = list(base)
        for i, v in zip(idx, sub):
            g[i] = v
        return tuple(g)

    out = evolve([case.sizes()[i] for i in idx], lambda sub: evaluate(full(sub)), maximize=maximize,
                 ga=case.settings.ga, salt=salt, seeds=[tuple(s[i] for i in idx) for s in seeds])
    return full(out.genes), out


def _maxfps_ga(case: Case, ev: ScenarioEvaluator, salt: str, **kw):
    """Highest FPS every scenario meets; ties broken by the other scenarios' headroom."""
    def fit(genes):
        v, cases = ev.max_fps(genes)
        return v, [v + 1e-3 * sum(cases)] + list(cases)
    return _ga_over(case, fit, True, salt, **kw)


def _energy_ga(case: Case, ev: ScenarioEvaluator, fps: float, salt: str, **kw):
    """Least mean energy over the scenarios at ``fps`` (inf where a scenario misses)."""
    return _ga_over(case, lambda genes: ev.energy(genes, fps), False, salt, **kw)


def _ga_log(out) -> dict:
    return {"evaluations": out.evaluations, "generations": out.generations, "exhaustive": out.exhaustive,
            "history": [round(float(h), 6) if h != INF else None for h in out.history]}


STATIC = ("GB", "PR-GB", "SOTA", "BS")      # one mapping for every FSM, placed as if every app ran at once


def evaluator(case: Case, method: str, scenarios, sc=None) -> ScenarioEvaluator:
    """The one way a method's plan is evaluated: its DVFS, the scenarios Algorithm 5 places by (every app at once
    for the static baselines: the same PEs on every FSM), and for LC the scenario ``sc`` alone."""
    if method == "LC" and sc is not None:
        return ScenarioEvaluator(case, [tuple(sc)], dvfs=True, limit_apps=sc)
    every = [tuple(case.apps)] if method in STATIC else None
    return ScenarioEvaluator(case, scenarios, dvfs=DVFS[method], placement_scenarios=every)


def tightest(sweep, max_fps: float) -> float | None:
    """The tightest FPS constraint of the sweep a method's best mapping can meet (the energy GA's target)."""
    ok = [f for f in sweep if f <= max_fps + 1e-9]
    return max(ok) if ok else None


def global_mapping(case: Case) -> dict:
    """GB's one mapping for every FSM: the GA assuming every app runs at once at maximum frequencies (highest FPS),
    then the least energy at fmax among mappings that keep that FPS (seeded with the first answer)."""
    every = [tuple(case.apps)]
    ev = ScenarioEvaluator(case, every, dvfs=False)
    genes, g1 = _maxfps_ga(case, ev, "GB:fps")
    out = {"max_fps": g1.value, "ga": {"max_fps": _ga_log(g1)}}
    if g1.value > 0:
        g_e, g2 = _energy_ga(case, ev, g1.value, "GB:energy", seeds=[genes])
        out["ga"]["energy"] = _ga_log(g2)
        if g2.value < INF:
            genes = g_e
    out["genes"] = list(genes)
    return out


def combine(case: Case, fsm: str, method: str, *, genes=None) -> dict:
    """One method on one FSM: its maximum FPS (Table 4.8), its mapping(s) (one per scenario; LC differs per
    scenario), the plan's own maximum FPS and the GA logs. ``genes``: the static mapping of GB/PR-GB
    (``global_mapping``) or SOTA (``dse.systems.multi.sota``)."""
    t0 = time.perf_counter()
    s = case.settings
    scs = list(s.fsms[fsm])
    sweep = s.fps.get(fsm, ())
    ev = evaluator(case, method, scs)
    out: dict = {"case": s.name, "fsm": fsm, "method": method, "dvfs": DVFS[method], "ga": {}}
    plans: dict[str, tuple[int, ...]] = {}
    if method == "PR":
        best, g1 = _maxfps_ga(case, ev, f"{fsm}:{method}:fps")
        out["ga"]["max_fps"] = _ga_log(g1)
        out["max_fps"] = g1.value
        target = tightest(sweep, g1.value)
        if target is not None:        # step 3 keeps the mapping found at the tightest constraint (l. 1361-1363)
            g_e, g2 = _energy_ga(case, ev, target, f"{fsm}:{method}:energy", seeds=[best])
            out["ga"]["energy"] = {**_ga_log(g2), "fps": target}
            if g2.value < INF:
                best = g_e
        plans = {sc_label(sc): best for sc in scs}
    elif method in STATIC:
        if method == "BS":
            genes = tuple(case.e_index(s.apps[a]) for a in case.apps)
        elif genes is None:
            raise ValueError(f"{method} needs its static mapping (global_mapping / dse.systems.multi.sota)")
        genes = tuple(genes)
        out["max_fps_all_apps"] = ScenarioEvaluator(case, [tuple(case.apps)], dvfs=False).max_fps(genes)[0]
        out["max_fps"] = ev.max_fps(genes)[0]                       # GB "modified" (l. 1499)
        plans = {sc_label(sc): genes for sc in scs}
    elif method == "LC":
        base = tuple(case.e_index(s.apps[a]) for a in case.apps)   # apps outside a scenario do not matter
        found = [_maxfps_ga(case, evaluator(case, "LC", scs, sc), f"{fsm}:LC:{i}:fps", apps=sc, fixed=base)
                 for i, sc in enumerate(scs)]
        per = [g.value for _, g in found]
        out["max_fps"] = min(per)
        out["ga"]["scenario_max_fps"] = per
        target = tightest(sweep, out["max_fps"])
        for i, (sc, (genes_sc, _)) in enumerate(zip(scs, found)):
            if target is not None:
                g_e, g2 = _energy_ga(case, evaluator(case, "LC", scs, sc), target, f"{fsm}:LC:{i}:energy", apps=sc,
                                     fixed=genes_sc, seeds=[genes_sc])
                if g2.value < INF:
                    genes_sc = g_e
            plans[sc_label(sc)] = genes_sc
    else:
        raise ValueError(method)
    out["plans"] = {k: list(v) for k, v in plans.items()}
    evs = {k: ev if method != "LC" else evaluator(case, "LC", scs, sc) for k, sc in zip(plans, scs)}
    # the best FPS each scenario reaches with the plan there (what a too-tight deadline can have)
    out["scenario_max_fps"] = {k: evs[k].scenario_max_fps(sc, v, evs[k].placement(v))
                               for (k, v), sc in zip(plans.items(), scs)}
    out["plan_max_fps"] = min(out["scenario_max_fps"].values())
    out["refused"] = next((r for k, v in plans.items() if (r := evs[k].dla_reason(v))), "")   # e.g. the DLA limit
    out["mapping"] = {k: mapping_rows(case, evs[k], v) for k, v in plans.items()}
    out["cpa_calls"] = sum(e.cpa_calls for e in {id(e): e for e in evs.values()}.values())
    out["time_s"] = round(time.perf_counter() - t0, 3)
    return out


def mapping_rows(case: Case, ev: ScenarioEvaluator, genes) -> list[dict]:
    """Per app: network, Pareto index, option + cuts label, and the PE of every stage (Table 4.9(a))."""
    pl = ev.placement(tuple(genes))
    chains = ev.chains_of(tuple(genes))
    s = case.settings
    return [{"app": a, "network": s.apps[a], "pareto_index": int(g), "mapping": case.label(s.apps[a], g),
             "option": case.mappings[s.apps[a]][g][0], "cuts": list(case.mappings[s.apps[a]][g][1]),
             "pes": [pl[a, k] for k in range(len(chains[a]))]} for a, g in zip(case.apps, genes)]


def frequency_table(case: Case, result: dict) -> pd.DataFrame:
    """Step 3: per scenario and FPS of the sweep, the frequencies of least estimated energy (Algorithm 6; the
    maximum frequencies for methods without DVFS) and the WCRTs there, for the plan the method deploys."""
    s = case.settings
    fsm, method = result["fsm"], result["method"]
    scs = list(s.fsms[fsm])
    fmax = case.fmax()
    ev = evaluator(case, method, scs)
    rows = []
    for fps in sorted(set(s.fps.get(fsm, ()))):
        for sc in scs:
            genes = tuple(result["plans"][sc_label(sc)])
            one = ev if method != "LC" else evaluator(case, "LC", scs, sc)
            pl = one.placement(genes)
            ch = one.scenario_energy(sc, genes, pl, fps)
            ok = bool(ch.ok) and one.dla_reason(genes) is None
            row = {"case": s.name, "fsm": fsm, "method": method, "fps": float(fps), "scenario": sc_label(sc),
                   "feasible": ok, "est_w": ch.watts if ok else None}
            freqs = ch.freqs_mhz if ch.ok else fmax
            row.update({f"{k}_mhz": float(freqs[k]) for k in ("cpu", "gpu", "dla")})
            res = one.problem(sc, genes, pl, fps).analyse(scales(fmax, freqs))
            row["wcrt_ms"] = {a: round(v / 1000, 4) for a, v in res.wcrt_us.items() if a in sc}
            row["max_wcrt_ms"] = max(row["wcrt_ms"].values())
            rows.append(row)
    return pd.DataFrame(rows)
