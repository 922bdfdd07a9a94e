"""The compared methods of thesis 4.5.3 (l. 1419-1444) on one FSM, and step 3, the frequency table (l. 1361-1363).

- PR: the proposed GA over the FSM's scenarios (maximum FPS; then the least mean energy at the tightest FPS of
  the sweep, seeded with the max-FPS answer), one static mapping, Algorithm 6 per scenario and deadline.
- GB: the GA assuming every app runs at once (one scenario), maximum frequencies, one mapping for every FSM;
  "modified" = its mapping evaluated on the FSM's own scenarios (l. 1499). PR-GB: that mapping + Algorithm 6.
- LC: a mapping per scenario (migration allowed: an ideal reference), the DLA limit per scenario, Algorithm 6.
- BS: every app GPU-only (option E) at maximum frequencies.
- SOTA: ``dse.multi.sota`` (per-layer GA on estimated times, re-evaluated with measured WCETs).

The maximum FPS of a method is that of its mapping(s) at maximum frequencies: the highest FPS at which a GA can
find a feasible mapping equals the best mapping's maximum FPS, so the GA maximizes it directly instead of
re-running the energy GA at rising FPS (l. 1375); the energy GA then runs at each method's tightest constraint.
"""
from __future__ import annotations

import time

import pandas as pd

from dse.multi.combine import INF, Case, Evaluator, evolve

DVFS = {"PR": True, "PR-GB": True, "LC": True, "GB": False, "BS": False, "SOTA": False}


def sc_label(sc) -> str:
    return "+".join(sc)


def _maxfps_ga(case: Case, ev: Evaluator, salt: str, apps=None, fixed=None, seeds=()):
    """Max-FPS GA over the genes of ``apps`` (default all; the others fixed to ``fixed``)."""
    apps = list(apps or case.apps)
    idx = [case.apps.index(a) for a in apps]
    base = list(fixed or [0] * len(case.apps))
    sizes = [case.sizes()[i] for i in idx]

    def full(sub):
        g = list(base)
        for i, v in zip(idx, sub):
            g[i] = v
        return tuple(g)

    def fit(sub):
        v, cases = ev.max_fps(full(sub))
        return v, [v + 1e-3 * sum(cases)] + list(cases)     # ties broken by the other scenarios' headroom

    out = evolve(sizes, fit, maximize=True, ga=case.settings.ga, salt=salt,
                 seeds=[tuple(s[i] for i in idx) for s in seeds])
    return full(out.genes), out


def _energy_ga(case: Case, ev: Evaluator, fps: float, salt: str, apps=None, fixed=None, seeds=()):
    apps = list(apps or case.apps)
    idx = [case.apps.index(a) for a in apps]
    base = list(fixed or [0] * len(case.apps))

    def full(sub):
        g = list(base)
        for i, v in zip(idx, sub):
            g[i] = v
        return tuple(g)

    out = evolve([case.sizes()[i] for i in idx], lambda sub: ev.energy(full(sub), fps), maximize=False,
                 ga=case.settings.ga, salt=salt, seeds=[tuple(s[i] for i in idx) for s in seeds])
    return full(out.genes), out


def _ga_log(out) -> dict:
    return {"evaluations": out.evaluations, "generations": out.generations, "exhaustive": out.exhaustive,
            "history": [round(float(h), 6) if h != INF else None for h in out.history]}


def combine(case: Case, fsm: str, method: str, *, sota=None) -> dict:
    """One method on one FSM: its maximum FPS, its mapping(s) (one per scenario) and the GA logs.
    ``sota``: for SOTA, the step-1 genes of its re-measured mapping (``dse.multi.sota``)."""
    t0 = time.perf_counter()
    s = case.settings
    scs = list(s.fsms[fsm])
    sweep = s.fps.get(fsm, ())
    ev = Evaluator(case, scs, dvfs=DVFS[method])
    out: dict = {"case": s.name, "fsm": fsm, "method": method, "dvfs": DVFS[method], "ga": {}}
    plans: dict[str, tuple[int, ...]] = {}
    if method in ("PR",):
        genes, g1 = _maxfps_ga(case, ev, f"{fsm}:{method}:fps")
        out["ga"]["max_fps"] = _ga_log(g1)
        out["max_fps"] = g1.value
        if sweep:
            g_e, g2 = _energy_ga(case, ev, sweep[0], f"{fsm}:{method}:energy", seeds=[genes])
            out["ga"]["energy"] = _ga_log(g2)
            if g2.value < INF:
                genes = g_e
        plans = {sc_label(sc): genes for sc in scs}
    elif method in ("GB", "PR-GB", "SOTA", "BS"):
        every = [tuple(case.apps)]
        if method == "BS":
            genes = tuple(case.e_index(s.apps[a]) for a in case.apps)
        elif method == "SOTA":
            if sota is None:
                raise ValueError("SOTA needs its re-measured genes (dse.multi.sota)")
            genes = tuple(sota)
        else:
            gb = Evaluator(case, every, dvfs=False)
            genes, g1 = _maxfps_ga(case, gb, f"GB:fps")          # one mapping for every FSM (no FSM in the salt)
            out["ga"]["max_fps"] = _ga_log(g1)
        out["max_fps_all_apps"] = Evaluator(case, every, dvfs=False).max_fps(genes)[0]
        out["max_fps"] = ev.max_fps(genes)[0]                       # GB "modified" (l. 1499)
        plans = {sc_label(sc): genes for sc in scs}
    elif method == "LC":
        per = []
        base = None
        for i, sc in enumerate(scs):
            one = Evaluator(case, [sc], dvfs=True, limit_apps=sc)
            base = base or tuple(case.e_index(s.apps[a]) for a in case.apps)
            genes, g1 = _maxfps_ga(case, one, f"{fsm}:LC:{i}:fps", apps=sc, fixed=base)
            if sweep:
                g_e, g2 = _energy_ga(case, one, sweep[0], f"{fsm}:LC:{i}:energy", apps=sc, fixed=genes, seeds=[genes])
                if g2.value < INF:
                    genes = g_e
            per.append(g1.value)
            plans[sc_label(sc)] = genes
        out["max_fps"] = min(per)
        out["ga"]["scenario_max_fps"] = per
    else:
        raise ValueError(method)
    out["plans"] = {k: list(v) for k, v in plans.items()}
    # the best FPS each scenario reaches with the method's mapping there (what a too-tight deadline can have)
    pl_ev = {k: ev if method != "LC" else Evaluator(case, [tuple(k.split("+"))], limit_apps=k.split("+"))
             for k in plans}
    out["scenario_max_fps"] = {k: pl_ev[k].scenario_max_fps(tuple(k.split("+")), tuple(v), pl_ev[k].placement(tuple(v)))
                               for k, v in plans.items()}
    out["mapping"] = {k: mapping_rows(case, ev if method != "LC" else Evaluator(case, [tuple(k.split("+"))]), v)
                      for k, v in plans.items()}
    out["cpa_calls"] = ev.cpa_calls
    out["time_s"] = round(time.perf_counter() - t0, 3)
    return out


def mapping_rows(case: Case, ev: Evaluator, genes) -> list[dict]:
    """Per app: network, Pareto index, option + cuts label, and the PE of every stage (Table 4.9(a))."""
    pl = ev.placement(tuple(genes))
    chains = ev.chains_of(tuple(genes))
    s = case.settings
    return [{"app": a, "network": s.apps[a], "pareto_index": int(g), "mapping": case.labels[s.apps[a]][g],
             "pes": [pl[a, k] for k in range(len(chains[a]))]} for a, g in zip(case.apps, genes)]


def frequency_table(case: Case, result: dict) -> pd.DataFrame:
    """Step 3: per scenario and FPS of the sweep (and the method's maximum FPS), the frequencies of least
    estimated energy (Algorithm 6; maximum frequencies for methods without DVFS) and the WCRTs there."""
    s = case.settings
    fsm, method = result["fsm"], result["method"]
    scs = list(s.fsms[fsm])
    ev = Evaluator(case, scs, dvfs=result["dvfs"])
    fmax = case.fmax()
    rows = []
    for fps in sorted(set(s.fps.get(fsm, ())) | ({result["max_fps"]} if result["max_fps"] > 0 else set())):
        for sc in scs:
            genes = tuple(result["plans"][sc_label(sc)])
            one = ev if method != "LC" else Evaluator(case, [sc], dvfs=True, limit_apps=sc)
            pl = one.placement(genes)
            ch = one.scenario_energy(sc, genes, pl, fps)
            row = {"case": s.name, "fsm": fsm, "method": method, "fps": float(fps), "scenario": sc_label(sc),
                   "feasible": bool(ch.ok) and one.dla_reason(genes) is None,
                   "est_w": ch.watts if ch.ok else None}
            freqs = ch.freqs_mhz if ch.ok else fmax
            row.update({f"{k}_mhz": float(freqs[k]) for k in ("cpu", "gpu", "dla")})
            res = one.problem(sc, genes, pl, fps).analyse({k: fmax[k] / freqs[k] for k in freqs})
            row["wcrt_ms"] = {a: round(v / 1000, 4) for a, v in res.wcrt_us.items()}
            row["max_wcrt_ms"] = max(res.wcrt_us.values()) / 1000
            rows.append(row)
    return pd.DataFrame(rows)
