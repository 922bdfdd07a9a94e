"""Per-layer mapping on galaxy-s9-sim against the published results of seeds 004 (Ha et al. 2018) and 002 (Kang
et al. 2020): the 004 ILP under CPU utilization caps (004 Fig. 14, L436-444) and GA vs ILP per CPU configuration
(002 Sec. VI-A, Fig. 6 observations, L249-261).

Instances: the zoo network's task graph, its per-task times from the calibrated sim board (``dse.backends.sim.tasks.profile_from_sim``,
the board matches 004 Fig. 13's GPU-only and CPU-only (4) times within 7 %), the CPU groups of one CPU configuration
of the big cluster + the GPU. CPU times are frequency-corrected to "all big cores busy" (002 L140, 004 L185:
t(k) *= f(k) / f(4), f = the board's freq_by_active_cores), because every configuration keeps all four cores in
use; ``--no-freq`` keeps the profiled-alone times. Transfers: the board's comm model (002 L168-176,
``sim.cpu_cost.transfer_us``); the 004 model (``ha2018``) charges CPU<->GPU transfers only, to the receiver (004
L290); the 002 model (``kang2020``) charges every cross-PE edge, CPU<->CPU memcpy included, to the sender (Eq. 7).
The cap is the linear "stretch" form (period >= CPU busy core-us / (U_max x 4 cores)), the same in ILP and GA.

1. Fig. 14: per network, the 004 ILP (``formulation="ha2018"``, c. 5 "= max(3, #PE)") on (1,1,1,1)+GPU (004
   L454: "1111 is generally best"; the seed does not say which configuration Fig. 14 used) at caps 100/70/60/50 %,
   HiGHS under a time limit; the ha2018 GA on the same instances (its period against the ILP's bound). Checks:
   each period within TOL of the published one, monotone in the cap, 50 % period / GPU-only in [64, 77] % and
   GPU-only / 100 % period in [1.7, 2.1]x (the published ranges, L444).
2. GA vs ILP (002): mobilenet-v1, every CPU configuration of the big cluster x caps 100/60 %, the kang2020 GA and
   the kang2020 ILP (Eq. 4 "exact": one cluster per PE): where the GA is within 2 % of an optimal ILP, where it
   beats it (its space is a superset, 002 L259), tighter cap -> longer period, which configuration is best.

Run: ``nice python -m bench.layermap_fig14 [--time-limit 60] [--gavsilp-time-limit 30] [--parts fig14,gavsilp]``;
writes bench/results/layermap_fig14.json (a run of one part keeps the other part's stored results).
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from bench.layermap_calibration import FIG13, PLATFORM, analysis
from bench.machine import load_average, write_result

OUT = Path(__file__).resolve().parent / "results" / "layermap_fig14.json"
NETS = ("squeezenet", "densenet-40", "mobilenet-v1", "mobilenet-v2")
CAPS = (1.0, 0.7, 0.6, 0.5)
# 004 Fig. 14 (L436-440): ILP optimum period (us) at CPU utilization caps 100/70/60/50 %
FIG14 = {"squeezenet": (11763.7, 15118.6, 15650.7, 17583.0), "densenet-40": (29532.7, 30805.7, 33770.7, 33732.1),
         "mobilenet-v1": (16154.8, 18195.8, 20109.8, 22008.8), "mobilenet-v2": (20713.8, 23734.7, 24749.7, 26459.7)}
TOL = 0.20                    # spec 4.3: the per-layer distribution of the costs is unknown
# Each network's 50 % period / GPU-only (L444: 71.6, 67.9, 77.1, 64.2 %) and GPU-only / 100 % period (2.09x, 1.68x,
# 1.77x, 1.99x) follow from Figs. 13 and 14; ours is judged against its own network's value, within TOL.
CONFIGS = ("4", "3-1", "2-2", "2-1-1", "1-1-1-1")
GAVSILP_NET, GAVSILP_CAPS, NEAR = "mobilenet-v1", (1.0, 0.6), 0.02


def platform():
    from dse.platform import load_platform

    return load_platform(PLATFORM)


def profile(net: str, freq: bool = True):
    """(task graph, profile with cpu1..cpu4 and gpu) of a zoo network on the board."""
    from dse.backends.sim.tasks import profile_from_sim
    from dse.taskgraph import build_task_graph, freq_correct

    plat, a = platform(), analysis(net)
    g = build_task_graph(a)
    prof = profile_from_sim(plat, a, g, ["cpu1", "cpu2", "cpu3", "cpu4", "gpu"])
    if freq:
        f = {int(k): float(v) for k, v in plat.cpu_freq_by_active_cores.items()}
        prof = freq_correct(prof, f, f[max(f)])
    return g, prof


def model(g, prof, config: str, cap: float | None, paper: str):
    """AnalyticModel of ``config`` + GPU in the transfer/charge model of ``paper`` (ha2018 or kang2020)."""
    from dse.backends.sim.tasks import analytic_model
    from dse.taskgraph import PeSet

    return analytic_model(platform(), g, prof, PeSet.build(config, ["gpu"]), cpu_cpu=paper == "kang2020",
                          p_busy=None, u_max=None if cap is None or cap >= 1.0 else cap,
                          charge="receiver" if paper == "ha2018" else "sender")


def references(net: str, freq: bool = True) -> dict:
    """GPU-only and CPU-only (4) whole-network times as the bench's models compute them (all tasks on one PE)."""
    g, prof = profile(net, freq)
    out = {}
    for key, config, pe in (("gpu_only_us", "4", 1), ("cpu_only_us", "4", 0)):
        m = model(g, prof, config, None, "ha2018")
        out[key] = float(m.evaluate(np.full(g.n, pe, dtype=np.int64)).period)
    return out


def sub_instance(g, prof, k: int):
    """The first ``k`` tasks of a task graph (a topological prefix) and their profile rows: a small real instance."""
    from dse.taskgraph import ProfileTable, TaskGraph

    keep = g.dst < k
    sg = TaskGraph(names=g.names[:k], layers=g.layers[:k], op_types=g.op_types[:k], macs=g.macs[:k],
                   src=g.src[keep], dst=g.dst[keep], nbytes=g.nbytes[keep], precision=g.precision,
                   digest=f"{g.digest}:prefix{k}")
    sp = ProfileTable(kinds=prof.kinds, time_us=prof.time_us[:k], source=prof.source, graph_digest=sg.digest,
                      tasks=sg.names, corrections=prof.corrections)
    return sg, sp


def solve(m, paper: str, time_limit: float):
    from dse.systems.layermap import solve_ilp

    return solve_ilp(m, formulation=paper, clusters="exact", time_limit=time_limit)


def ga(m, paper: str, seed: int = 0):
    from dse.systems.layermap import run_layer_ga

    return run_layer_ga(m, paper, seed=seed)


def half_published(net: str) -> float:
    """004's 50 % period over its GPU-only time (Fig. 14 over Fig. 13)."""
    return FIG14[net][-1] / FIG13[net][0]


def speedup_published(net: str) -> float:
    """004's GPU-only time over its 100 % period (Fig. 13 over Fig. 14)."""
    return FIG13[net][0] / FIG14[net][0]


def within(ours: float, published: float) -> bool:
    return abs(ours / published - 1.0) <= TOL


def fig14(time_limit: float, freq: bool) -> dict:
    rows, nets = [], {}
    for net in NETS:
        g, prof = profile(net, freq)
        ref = references(net, freq)
        periods = []
        for cap, pub in zip(CAPS, FIG14[net]):
            m = model(g, prof, "1-1-1-1", cap, "ha2018")
            r = solve(m, "ha2018", time_limit)
            t0 = time.perf_counter()
            gr = ga(m, "ha2018")
            ga_s = time.perf_counter() - t0
            best = min(r.objective, gr.fitness)
            periods.append(best)
            ev = m.evaluate(gr.mapping if gr.fitness <= r.objective else r.mapping)
            rows.append({"net": net, "cap": cap, "published_us": pub, "ilp_status": r.status, "ilp_us": r.objective,
                         "ilp_bound_us": r.bound, "ilp_gap": r.gap, "ilp_s": r.seconds, "ga_us": gr.fitness,
                         "ga_s": ga_s, "ga_evals": gr.evaluations, "ga_vs_bound": gr.fitness / r.bound - 1.0,
                         "best_us": best, "util_cpu": float(ev.util_cpu), "error": best / pub - 1.0,
                         "ok": abs(best / pub - 1.0) <= TOL})
            print(f"  {net:13s} {cap:4.0%} ILP {r.status:10s} {r.objective:9.0f} (bound {r.bound:9.0f}, "
                  f"{r.seconds:5.1f} s)  GA {gr.fitness:9.0f} ({ga_s:5.1f} s)  published {pub:9.0f}", flush=True)
        gpu = ref["gpu_only_us"]
        nets[net] = {**ref, "gpu_only_published_us": FIG13[net][0], "cpu_only_published_us": FIG13[net][1],
                     "monotone": bool(all(b >= a * (1 - 1e-9) for a, b in zip(periods, periods[1:]))),
                     "half_over_gpu": periods[-1] / gpu, "half_published": half_published(net),
                     "half_ok": within(periods[-1] / gpu, half_published(net)),
                     "speedup_100": gpu / periods[0], "speedup_published": speedup_published(net),
                     "speedup_ok": within(gpu / periods[0], speedup_published(net))}
    return {"rows": rows, "nets": nets, "tolerance": TOL, "time_limit_s": time_limit}


def gavsilp(time_limit: float, freq: bool) -> dict:
    g, prof = profile(GAVSILP_NET, freq)
    rows = []
    for config in CONFIGS:
        for cap in GAVSILP_CAPS:
            m = model(g, prof, config, cap, "kang2020")
            r = solve(m, "kang2020", time_limit)
            t0 = time.perf_counter()
            gr = ga(m, "kang2020")
            ga_s = time.perf_counter() - t0
            rel = gr.fitness / r.objective - 1.0
            rows.append({"config": config, "cap": cap, "ilp_status": r.status, "ilp_us": r.objective,
                         "ilp_bound_us": r.bound, "ilp_gap": r.gap, "ilp_s": r.seconds, "ga_us": gr.fitness,
                         "ga_s": ga_s, "ga_evals": gr.evaluations, "ga_vs_ilp": rel,
                         "ga_within_2pct": r.status == "optimal" and abs(rel) <= NEAR, "ga_beats_ilp": rel < -1e-9})
            print(f"  {config:8s} {cap:4.0%} ILP {r.status:10s} {r.objective:9.0f} ({r.seconds:5.1f} s)  "
                  f"GA {gr.fitness:9.0f} ({ga_s:5.1f} s)  GA/ILP {rel:+.1%}", flush=True)
    best = {}
    for cap in GAVSILP_CAPS:
        sub = [x for x in rows if x["cap"] == cap]
        best[f"{cap:.0%}"] = {k: [x["config"] for x in sub if x[f"{k}_us"] <= min(y[f"{k}_us"] for y in sub)
                                  * (1 + 1e-9)] for k in ("ga", "ilp")}
    tighter = [all(x["cap"] == GAVSILP_CAPS[0] or x[k] >= y[k] * (1 - 1e-9)
                   for x in rows for y in rows if y["config"] == x["config"] and y["cap"] == GAVSILP_CAPS[0])
               for k in ("ga_us", "ilp_us")]
    return {"net": GAVSILP_NET, "rows": rows, "best_config": best, "tighter_cap_longer": {"ga": tighter[0],
            "ilp": tighter[1]}, "time_limit_s": time_limit}


def print_tables(res: dict) -> None:
    if "fig14" in res:
        f = res["fig14"]
        print(f"\n004 Fig. 14 on {PLATFORM}, (1,1,1,1)+GPU, period us (best of ILP and GA; tolerance {TOL:.0%})")
        print(f"{'net':13s} {'cap':>4s} {'published':>10s} {'ILP':>9s} {'status':>10s} {'gap':>6s} {'GA':>9s} "
              f"{'GA/bound':>8s} {'error':>7s}")
        for r in f["rows"]:
            print(f"{r['net']:13s} {r['cap']:4.0%} {r['published_us']:10.0f} {r['ilp_us']:9.0f} {r['ilp_status']:>10s} "
                  f"{r['ilp_gap']:6.1%} {r['ga_us']:9.0f} {r['ga_vs_bound']:+8.1%} {r['error']:+7.1%}"
                  f"{'' if r['ok'] else '  MISS'}")
        print(f"{'net':13s} {'GPU-only':>9s} {'50%/GPU':>8s} (64-77 %) {'GPU/100%':>9s} (1.7-2.1x) monotone")
        for net, n in f["nets"].items():
            print(f"{net:13s} {n['gpu_only_us']:9.0f} {n['half_over_gpu']:8.1%} {'ok' if n['half_ok'] else 'MISS':>9s} "
                  f"{n['speedup_100']:8.2f}x {'ok' if n['speedup_ok'] else 'MISS':>9s} {n['monotone']}")
    if "gavsilp" in res:
        v = res["gavsilp"]
        print(f"\nGA vs ILP (kang2020), {v['net']} on {PLATFORM}, period us")
        print(f"{'config':8s} {'cap':>4s} {'ILP':>9s} {'status':>10s} {'ILP s':>6s} {'GA':>9s} {'GA s':>6s} "
              f"{'GA/ILP':>7s}")
        for r in v["rows"]:
            flag = "  within 2 %" if r["ga_within_2pct"] else ""
            flag += "  GA better" if r["ga_beats_ilp"] else ""
            print(f"{r['config']:8s} {r['cap']:4.0%} {r['ilp_us']:9.0f} {r['ilp_status']:>10s} {r['ilp_s']:6.1f} "
                  f"{r['ga_us']:9.0f} {r['ga_s']:6.1f} {r['ga_vs_ilp']:+7.1%}{flag}")
        print(f"best configuration per cap: {v['best_config']}; tighter cap -> longer: {v['tighter_cap_longer']}")


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=60.0, help="HiGHS seconds per Fig. 14 instance")
    ap.add_argument("--gavsilp-time-limit", type=float, default=30.0, help="HiGHS seconds per GA-vs-ILP instance")
    ap.add_argument("--parts", default="fig14,gavsilp")
    ap.add_argument("--no-freq", action="store_true", help="no all-cores-busy frequency correction")
    ap.add_argument("--output", type=Path, default=OUT)
    args = ap.parse_args(argv)
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    bad = [p for p in parts if p not in ("fig14", "gavsilp")]
    if bad:
        ap.error(f"unknown part(s) {bad}; valid: fig14, gavsilp")
    old = json.loads(args.output.read_text()) if args.output.exists() else {}
    res = {k: old[k] for k in ("fig14", "gavsilp") if k in old and k not in parts}
    freq = not args.no_freq
    if "fig14" in parts:
        res["fig14"] = fig14(args.time_limit, freq)
    if "gavsilp" in parts:
        res["gavsilp"] = gavsilp(args.gavsilp_time_limit, freq)
    print_tables(res)
    write_result(args.output, {"platform": PLATFORM, "freq_correction": freq, **res, "load_average": load_average()})
    return res


if __name__ == "__main__":
    main()
