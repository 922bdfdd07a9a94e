"""Thesis Ch. 4 on the virtual Xavier: cases alpha and beta x FSM-A..D x the six methods, against the thesis'
published numbers (Tables 4.8, 4.9, 4.11, Sec. 4.5.4) with the tolerances of the Ch. 4 implementation spec.

It runs the `multi` target's own job functions (``dse.systems.multi.jobs``: pareto -> powerfit -> combine ->
freqtable -> deploy -> report) into ``--results`` (reusing finished files there), then checks:
- Table 4.8 shapes: PR >= GB >= SOTA and BS lowest per column; PR = GB on FSM-D; PR = LC except alpha FSM-C;
  FSM ranking C >= A = B >= D per method; PR/BS within 20 % of the thesis' ratios; alpha BS within 10 %.
- energy: deployed savings of PR and PR-GB against GB and SOTA in 22-31 %; estimated savings above deployed;
  the DLA frequency at its maximum in >= 90 % of the DVFS table entries;
- safety: no deadline miss, observed maximum response <= the analysed WCRT;
- Table 4.11: Algorithm 6 against the brute-force enumeration of the 1,200 frequency vectors, on the scenarios of
  random chromosomes of each case (agreement, fitness-evaluation speed-up) and on a short GA (total speed-up).

Run: ``python -m bench.multi_ch4 [--cases ch4-alpha ch4-beta] [--results results]``; writes
bench/results/multi_ch4.json and prints the Markdown tables for BENCHMARKS.md.
"""
from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

OUT = Path(__file__).resolve().parent / "results" / "multi_ch4.json"
FSMS = ("A", "B", "C", "D")
THESIS_FPS = {   # Table 4.8 (l. 1452-1458); GB and SOTA: one value for every FSM
    "ch4-alpha": {"LC": (47, 47, 71, 40), "BS": (32, 32, 44, 24), "GB": (40,) * 4, "SOTA": (39,) * 4,
                  "PR": (47, 47, 56, 40)},
    "ch4-beta": {"LC": (32, 32, 38, 28), "BS": (21, 21, 33, 15), "GB": (28,) * 4, "SOTA": (26,) * 4,
                 "PR": (32, 32, 38, 28)},
}
SAVING_BAND = (0.22, 0.31)   # Fig. 4.9 / l. 1547


def run_case(case: str, results: str) -> str:
    """Every job of the multi target for one case, skipping outputs that exist; returns the case directory."""
    from dse.store.atomic import write_text_atomic
    from dse.systems.multi import jobs as multi

    plans = multi.plan_multi({"overrides": f"[multi={case},results_dir={results}]"})
    (mdir, plan), = plans.items()
    root = Path(mdir)
    for part, text in plan.parts.items():
        path = root / "config" / f"{part}.yaml"
        if not path.exists() or path.read_text() != text:
            write_text_atomic(path, text)
            for stale in ("pareto", "tasks", "global", "combine", "freqtable", "deploy"):
                for f in (root / stale).glob("*"):
                    f.unlink()
            (root / "powerfit.json").unlink(missing_ok=True)
    timings = {}
    t0 = time.perf_counter()
    todo = [n for n in plan.facts["networks"] if not (root / "pareto" / f"{n}.parquet").exists()]
    for net in todo:
        multi.pareto(mdir, net)
    if todo:
        timings["pareto_s"] = time.perf_counter() - t0
    if not (root / "powerfit.json").exists():
        multi.powerfit(mdir)
    t1 = time.perf_counter()
    for kind in ("GB", "SOTA"):
        if not (root / "global" / f"{kind}.json").exists():
            multi.global_mapping(mdir, kind)
    for fsm in plan.facts["fsms"]:
        for m in plan.facts["methods"]:
            if not (root / "combine" / f"{fsm}-{m}.json").exists():
                multi.combine(mdir, fsm, m)
            if not (root / "freqtable" / f"{fsm}-{m}.parquet").exists():
                multi.freqtable(mdir, fsm, m)
            if not (root / "deploy" / f"{fsm}-{m}.parquet").exists():
                multi.deploy(mdir, fsm, m)
    timings["combine_deploy_s"] = time.perf_counter() - t1   # only what was missing (finished files are reused)
    multi.report(mdir)
    old = json.loads((root / "bench-timings.json").read_text()) if (root / "bench-timings.json").exists() else {}
    write_text_atomic(root / "bench-timings.json", json.dumps({**old, **{k: v for k, v in timings.items() if v > 1}}))
    return mdir


def table48(mdir: str, case: str) -> dict:
    from dse.systems.multi.report import load

    combos, ft, dp = load(mdir)
    ours = {}
    for c in combos:
        key = c["method"]
        val = c.get("max_fps_all_apps", c["max_fps"]) if key in ("GB", "SOTA") else c["max_fps"]
        ours.setdefault(key, {})[c["fsm"]] = val
        if key in ("GB", "SOTA"):
            ours.setdefault(f"{key}-mod", {})[c["fsm"]] = c["max_fps"]
        if key == "SOTA" and c.get("sota"):
            ours.setdefault("SOTA-estimated", {})[c["fsm"]] = c["sota"]["estimated_max_fps"]
    thesis = THESIS_FPS[case]
    col = {f: {m: ours[m][f] for m in ours if f in ours[m]} for f in FSMS}
    eps = 0.05
    # GB and SOTA evaluated on the FSM's own scenarios ("modified", l. 1499): with their all-apps values the
    # thesis' own column C has BS above both (alpha 44 vs 40/39, beta 33 vs 28/26)
    checks = {
        "PR >= GB >= SOTA, BS lowest (every FSM; GB, SOTA on the FSM's scenarios)": all(
            v["PR"] + eps >= v["GB-mod"] >= v["SOTA-mod"] - eps and
            v["BS"] <= min(v[m] for m in ("PR", "GB-mod", "SOTA-mod", "LC")) + eps for v in col.values()),
        "PR >= GB >= SOTA (all-apps values, as Table 4.8 prints them)": all(
            v["PR"] + eps >= v["GB"] >= v["SOTA"] - eps for v in col.values()),
        "PR = GB on FSM-D": abs(col["D"]["PR"] - col["D"]["GB"]) <= 0.5,
        "PR = LC except alpha FSM-C": all(abs(col[f]["PR"] - col[f]["LC"]) <= 0.5 for f in FSMS
                                         if not (case == "ch4-alpha" and f == "C")),
        "alpha FSM-C: PR < LC (DLA sharing)": case != "ch4-alpha" or col["C"]["PR"] < col["C"]["LC"] - 0.5,
        "FSM ranking C >= A = B >= D (every method)": all(
            ours[m]["C"] + eps >= ours[m]["A"] and abs(ours[m]["A"] - ours[m]["B"]) <= 0.5 and
            ours[m]["B"] + eps >= ours[m]["D"] for m in ("LC", "BS", "GB-mod", "PR")),
    }
    ratios = {f: {"ours": col[f]["PR"] / col[f]["BS"], "thesis": thesis["PR"][i] / thesis["BS"][i]}
              for i, f in enumerate(FSMS)}
    for r in ratios.values():
        r["within_20pct"] = abs(r["ours"] / r["thesis"] - 1) <= 0.20
    bs = {f: {"ours": col[f]["BS"], "thesis": thesis["BS"][i],
              "within_10pct": abs(col[f]["BS"] / thesis["BS"][i] - 1) <= 0.10} for i, f in enumerate(FSMS)}
    return {"ours": ours, "thesis": {m: dict(zip(FSMS, v)) for m, v in thesis.items()}, "checks": checks,
            "pr_over_bs": ratios, "bs": bs}


def energy(mdir: str) -> dict:
    from dse.systems.multi.report import energy_table, load, savings
    from dse.systems.multi.case_dir import load_settings

    settings, _, _ = load_settings(mdir)
    combos, ft, dp = load(mdir)
    table = energy_table(ft, dp, settings.fps)
    out = {}
    for col in ("est_w", "board_w"):
        sv = savings(table, col)
        out[col] = {f"{a} vs {b}": [round(float(x), 4) for x in g.saving]
                    for (a, b), g in sv.groupby(["method", "vs"])} if not sv.empty else {}
    dv = ft[ft.feasible & ft.method.isin(["PR", "PR-GB", "LC"])]
    out["dla_at_max"] = float((dv.dla_mhz >= ft.dla_mhz.max() - 1e-6).mean()) if len(dv) else None
    out["misses"] = int(dp.misses.sum()) if len(dp) else 0
    out["worst_response_over_wcrt"] = float(dp.max_response_over_wcrt.max()) if len(dp) else None
    return out


def alg6_vs_brute(mdir: str, samples: int = 40, seed: int = 0) -> dict:
    """Agreement and speed of Algorithm 6 against enumerating every frequency vector (Table 4.11)."""
    from dse.systems.multi.combine import ScenarioEvaluator
    from dse.rt.dvfs import brute_force, set_freq
    from dse.rt.energy import scenario_watts
    from dse.systems.multi.case_dir import load_case

    case, _ = load_case(mdir)
    s = case.settings
    rng = random.Random(seed)
    fmax = case.fmax()
    agree = total = 0
    t_heur = t_brute = 0.0
    gaps = []
    for fsm in s.fsms:
        fps = min(s.fps[fsm])
        ev = ScenarioEvaluator(case, list(s.fsms[fsm]))
        for _ in range(samples // len(s.fsms)):
            genes = tuple(rng.randrange(n) for n in case.sizes())
            if ev.dla_reason(genes):
                continue
            pl = ev.placement(genes)
            for sc in s.fsms[fsm]:
                prob = ev.problem(sc, genes, pl, fps)
                apps_e = ev.energies(sc, genes, fps)
                sched = (lambda p: lambda f: p.schedulable({k: fmax[k] / v for k, v in f.items()}))(prob)
                en = (lambda a: lambda f: scenario_watts(case.fit, a, f))(apps_e)
                t = time.perf_counter()
                h = set_freq(case.levels, sched, en, s.freq_order)
                t_heur += time.perf_counter() - t
                t = time.perf_counter()
                b = brute_force(case.levels, sched, en)
                t_brute += time.perf_counter() - t
                if not b.ok:
                    continue
                total += 1
                agree += abs(h.watts - b.watts) <= 1e-9 * max(1.0, b.watts)
                gaps.append(h.watts / b.watts - 1)
    return {"instances": total, "agreement": agree / max(1, total), "mean_gap": sum(gaps) / max(1, len(gaps)),
            "max_gap": max(gaps, default=0.0), "speedup": t_brute / max(t_heur, 1e-12),
            "heuristic_s": t_heur, "brute_s": t_brute}


def ga_speed(mdir: str, fsm: str | None = None, generations: int = 10) -> dict:
    """Total time and final fitness of a short energy GA with Algorithm 6 and with the brute force inside."""
    from dse.systems.multi.combine import ScenarioEvaluator, evolve
    from dse.rt.dvfs import brute_force, set_freq
    from dse.systems.multi.case_dir import load_case

    case, _ = load_case(mdir)
    s = case.settings
    fsm = fsm or next(iter(s.fsms))
    fps = min(s.fps[fsm])
    ga = {**s.ga, "generations": generations, "stall": 0}
    out = {}
    for name, search in (("heuristic", set_freq), ("brute", brute_force)):
        ev = ScenarioEvaluator(case, list(s.fsms[fsm]), freq_search=search)
        t = time.perf_counter()
        res = evolve(case.sizes(), lambda g: ev.energy(g, fps), maximize=False, ga=ga, salt="bench")
        out[name] = {"s": time.perf_counter() - t, "fitness": res.value, "evaluations": res.evaluations}
    out["speedup"] = out["brute"]["s"] / out["heuristic"]["s"]
    out["same_fitness"] = abs(out["brute"]["fitness"] - out["heuristic"]["fitness"]) <= 1e-9 * out["brute"]["fitness"]
    return out


def markdown(res: dict) -> str:
    lines = []
    for case, r in res["cases"].items():
        t = r.get("table48")
        if t is None:
            continue
        lines += [f"#### {case}: maximum FPS (Table 4.8), ours / thesis", "",
                  "| method | " + " | ".join(f"FSM-{f}" for f in FSMS) + " |", "|---" * 5 + "|"]
        for m in ("LC", "BS", "GB", "GB-mod", "SOTA", "SOTA-mod", "SOTA-estimated", "PR-GB", "PR"):
            if m in t["ours"]:
                th = t["thesis"].get(m, {})
                lines.append(f"| {m} | " + " | ".join(
                    f"{t['ours'][m].get(f, float('nan')):.1f}" + (f" / {th[f]}" if f in th else "") for f in FSMS) + " |")
        lines += ["", "| check | holds |", "|---|---|"] + [f"| {k} | {v} |" for k, v in t["checks"].items()]
        lines += ["", "PR/BS ours vs thesis: " + ", ".join(
            f"{f} {v['ours']:.2f}/{v['thesis']:.2f}{'' if v['within_20pct'] else ' (miss)'}"
            for f, v in t["pr_over_bs"].items()),
            "BS ours vs thesis: " + ", ".join(
            f"{f} {v['ours']:.1f}/{v['thesis']}{'' if v['within_10pct'] else ' (miss)'}" for f, v in t["bs"].items()),
            ""]
        e = r["energy"]
        for col, what in (("est_w", "estimated (processors)"), ("board_w", "deployed (whole board)")):
            lines.append(f"Savings, {what}: " + "; ".join(
                f"{k} {min(v):.0%}-{max(v):.0%}" for k, v in e[col].items() if v))
        lines += [f"DLA at maximum in {e['dla_at_max']:.0%} of DVFS table entries; deadline misses {e['misses']}; "
                  f"worst observed/WCRT {e['worst_response_over_wcrt']:.3f}.", ""]
        a = r["alg6"]
        lines += [f"Algorithm 6 vs brute force: equal on {a['agreement']:.0%} of {a['instances']} scenario "
                  f"instances (mean gap {a['mean_gap']:.2%}, max {a['max_gap']:.2%}), {a['speedup']:.0f}x faster; "
                  f"a {r['ga']['heuristic']['evaluations']}-chromosome GA: {r['ga']['speedup']:.0f}x faster, same "
                  f"final fitness: {r['ga']['same_fitness']}.", f"Time: {r['timings']}", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    from bench.machine import write_result

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="+", default=["ch4-alpha", "ch4-beta"])
    ap.add_argument("--results", default="results")
    ap.add_argument("--output", default=str(OUT))
    args = ap.parse_args(argv)
    res = {"cases": {}}
    for case in args.cases:
        t = time.perf_counter()
        mdir = run_case(case, args.results)
        wall = time.perf_counter() - t
        timings = json.loads((Path(mdir) / "bench-timings.json").read_text())
        res["cases"][case] = {"dir": mdir, "energy": energy(mdir), "alg6": alg6_vs_brute(mdir), "ga": ga_speed(mdir),
                              "timings": {**timings, "wall_s": wall}}
        if case in THESIS_FPS:
            res["cases"][case]["table48"] = table48(mdir, case)
        write_result(args.output, res)
    print(markdown(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
