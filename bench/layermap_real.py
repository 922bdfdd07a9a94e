"""Seed 002 Table 3 analog, real: per-layer mappings scheduled from an ORT per-task profile and then measured
with the task-graph runtime (through the ``ort`` backend, as ``LM:`` configurations).

For each network and CPU configuration of ``--cores`` (two cores: C2 = (2), one PE of 2 cores with 2 intra-op
threads, 002's ACL-threading configuration; C1 = (1,1), two single-core PEs, 1 thread each): profile every task on
1 and 2 pinned cores (``dse.runtime.task_profile.profile_from_ort``), take the GA's mapping (preset kang2020, throughput objective,
no cap, as 002 Table 3), then measure it over ``--frames`` frames with the network's own application
(``classify``). "schedule" = the analytic period in ms per frame, error = (schedule - actual) / actual (002's
definition, L336-348).

Three choices keep host effects out of the comparison, as 002's quiet boards did (all reported):
- The network alone: each image is pre-processed once and its tensors reused (``reuse_inputs``); 002's pre/post
  ran on little cores outside the measured PEs, and on a 2-core host the 2.7 ms resize per frame would run on
  the PE cores (``--prepost`` puts it back).
- The host's fast state: this VM alternates between two speeds (MobileNet v1 on one core: 18.5 or 24.5 ms per
  run, in episodes of 0.1-3 s, the slow share changing from about 10 % to over half between minutes). The
  profile keeps the fastest 20 % of 200 whole-network runs (``fastest``); "actual" is the 10th-percentile time
  per frame over 10-frame windows (``RunResult.period_ms_p10``). 1000 / FPS and its error are reported too.
- ``--screen``: the GA's distinct finalists planned within 5 % of its best are measured (300 frames each), the
  fastest is measured again with fresh noise and reported (``screen_finalists``).
- ``--rounds K`` (K > 1): after the GA has chosen from the first profile, K rounds of (a fresh profile, then the
  chosen mapping's run) for each configuration; each round's error compares a schedule and a run taken seconds
  apart, and the row reports the median error over the rounds and their range. On a host whose speed drifts
  between minutes this is the comparison that means something; on a quiet board it repeats one number.

Run: ``python -m bench.layermap_real [--networks mobilenet-v1 mobilenet-v2] [--cores 0 1] [--frames 1000]
[--rounds 1]``;
writes bench/results/layermap_real.json.
"""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

from bench.machine import load_average, write_result
from dse.backends.base import MeasureSettings
from dse.backends.ort import OrtBackend
from dse.config import compose_config
from dse.core.configuration import Configuration
from dse.graph.analysis import analyze
from dse.platform import platform_from_dict
from dse.runtime.task_profile import profile_from_ort
from dse.systems.layermap import run_layer_ga, screen_finalists
from dse.taskgraph import AnalyticModel, LayerMapping
from dse.taskgraph.mapping import encode_ids
from dse.zoo import build_network

OUT = Path(__file__).resolve().parent / "results" / "layermap_real.json"
TARGET = 0.07      # |error| for MobileNet v1 (002 reports <= 7 % in 7 of 8 rows)
FASTEST = 0.2      # profile = median over the fastest 20 % of the runs; actual = 10th-percentile period
SCREEN_FRAMES = 300   # frames per finalist when screening
WITHIN = 0.05      # finalists planned within 5 % of the GA's best are screened


ROUND_REPEATS = 60   # whole-network profile runs per round of --rounds


def run(networks, size: int, cores: list[int], frames: int, busy: bool = False, prepost: bool = False,
        screen: bool = False, rounds: int = 1) -> dict:
    platform = platform_from_dict(compose_config(["platform=host-cpu", f"platform.cores=[{','.join(map(str, cores))}]"]).platform)
    confs = [("C2", str(len(cores))), ("C1", "-".join("1" * len(cores)))]
    rows = []
    for net in networks:
        analysis = analyze(build_network(net, input_size=size))
        backends = {n: OrtBackend(platform, analysis, MeasureSettings(
            precision="fp32", sample_size=n, input_size=size, warmup=50, application="classify", model=net,
            reuse_inputs=not prepost)) for n in {frames, SCREEN_FRAMES}}
        graph = backends[frames].layermap.graph("fp32")
        t0 = time.perf_counter()
        profile = profile_from_ort(analysis, graph, sorted({1, len(cores)}), repeats=200, warmup=10, cores=cores,
                                        busy_neighbours=busy, fastest=FASTEST)
        profile_s = time.perf_counter() - t0
        for label, cpu in confs:
            pes = LayerMapping(cpu, (0,) * graph.n).pes()
            model = AnalyticModel(graph, profile, pes)
            base = Configuration(benchmark=net, platform="host-cpu", precision="fp32", input_size=size,
                                 buffers=2 * len(pes) + 2)

            def measured(mapping, n: int, planner=model) -> dict:
                """One fresh run of ``n`` frames: the fast-state period (the actual) and 1000 / FPS."""
                config = LayerMapping(cpu, tuple(int(x) for x in mapping), graph_digest=graph.digest).to_configuration(base)
                m = backends[n].measure(config)
                if not m.ok:
                    raise SystemExit(f"{net} {cpu}: {m.status}: {m.reason}")
                schedule = float(planner.evaluate(np.asarray(mapping)).period) / 1000.0
                actual = backends[n].last_run.period_ms_p10
                return {"layer_map": dict(config.extra)["layer_map"], "segments": len(m.stage_ms),
                        "schedule_ms": round(schedule, 3), "actual_ms": round(actual, 3),
                        "error": round((schedule - actual) / actual, 4), "actual_mean_ms": round(1000.0 / m.fps, 3),
                        "error_mean": round((schedule - 1000.0 / m.fps) * m.fps / 1000.0, 4),
                        "latency_ms_p50": round(m.latency_ms_p50, 3), "util": {k: round(v, 3) for k, v in m.util.items()},
                        "cpu_util": round(m.cpu_util, 3)}

            def round_error(mapping) -> dict:
                """A fresh profile, then the mapping's run: one schedule vs actual pair taken seconds apart."""
                fresh = profile_from_ort(analysis, graph, sorted({1, len(cores)}), repeats=ROUND_REPEATS,
                                              warmup=5, cores=cores, busy_neighbours=busy, fastest=FASTEST)
                row = measured(mapping, frames, AnalyticModel(graph, fresh, pes))
                return {k: row[k] for k in ("schedule_ms", "actual_ms", "error")}

            ga = run_layer_ga(model, "kang2020", seed=0)
            screened = (screen_finalists(ga.finalists, lambda mp: measured(mp, SCREEN_FRAMES)["actual_ms"], WITHIN)
                        if screen else [])
            ga_best = measured(ga.mapping, frames)
            chosen = (measured(screened[0].mapping, frames)          # fresh noise, not the screen's sample
                      if screened and not np.array_equal(screened[0].mapping, ga.mapping) else ga_best)
            per_round = [round_error(screened[0].mapping if screened else ga.mapping) for _ in range(rounds - 1)]
            if per_round:
                errors = [chosen["error"]] + [r["error"] for r in per_round]
                chosen = {**chosen, "rounds": [{k: chosen[k] for k in ("schedule_ms", "actual_ms", "error")}]
                          + per_round, "error_first": chosen["error"], "error": round(float(np.median(errors)), 4),
                          "error_range": [min(errors), max(errors)]}
            row = {"network": net, "input_size": size, "conf": label, "cpu_config": cpu, "cores": cores,
                   "tasks": graph.n, **chosen, "ga_best": ga_best, "ga_evaluations": ga.evaluations,
                   "screened": [{"layer_map": encode_ids(s.mapping),
                                 "schedule_ms": round(s.planned / 1000.0, 3), "screen_ms": round(s.measured, 3)}
                                for s in screened],
                   "profile_s": round(profile_s, 1), "load_avg": load_average()}
            rows.append(row)
            print(f"{net:13s} {label} ({cpu:3s}) {row['segments']:2d} segments  schedule {row['schedule_ms']:7.2f} ms  "
                  f"actual {row['actual_ms']:7.2f} ms  error {100 * row.get('error_first', row['error']):+6.1f} %  (mean "
                  f"{row['actual_mean_ms']:6.2f} ms, {100 * row['error_mean']:+6.1f} %); GA's best "
                  f"{ga_best['segments']} segments {100 * ga_best['error']:+6.1f} %; {len(screened)} screened  "
                  f"load {row['load_avg']}"
                  + (f"; median error over {rounds} rounds {100 * row['error']:+.1f} % (range "
                     f"{100 * row['error_range'][0]:+.1f} to {100 * row['error_range'][1]:+.1f} %)" if per_round else ""),
                  flush=True)
    v1 = [r for r in rows if r["network"] == "mobilenet-v1"]
    if v1:
        met = all(abs(r["error"]) <= TARGET for r in v1)
        print(f"MobileNet v1 |error| <= {TARGET:.0%} on every configuration: {'met' if met else 'missed'}")
    return {"frames": frames, "cores": cores, "busy_neighbours": busy, "prepost": prepost, "screen": screen,
            "rounds": rounds, "process_cores": sorted(os.sched_getaffinity(0)),
            "rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--networks", nargs="+", default=["mobilenet-v1", "mobilenet-v2"])
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--cores", nargs="+", type=int, default=sorted(os.sched_getaffinity(0))[:2])
    ap.add_argument("--frames", type=int, default=1000)
    ap.add_argument("--busy-neighbours", action="store_true",
                    help="profile each core count with the other PE cores running the network "
                         "(dse.runtime.task_profile.profile_from_ort)")
    ap.add_argument("--prepost", action="store_true",
                    help="pre-process every frame on the PE cores too (default: each image once, then reused)")
    ap.add_argument("--screen", action="store_true",
                    help=f"measure the GA's finalists planned within {WITHIN:.0%} of its best ({SCREEN_FRAMES} frames "
                         "each) and keep the fastest measured")
    ap.add_argument("--rounds", type=int, default=1,
                    help="rounds of (fresh profile, run) per configuration; the row's error is their median")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error(f"--rounds must be >= 1, got {args.rounds}")
    write_result(args.out, run(args.networks, args.size, args.cores, args.frames, args.busy_neighbours,
                               args.prepost, args.screen, args.rounds))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
