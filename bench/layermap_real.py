"""Seed 002 Table 3 analog, real: per-layer mappings scheduled from an ORT per-task profile and then measured
with the task-graph runtime (through the ``ort`` backend, as ``LM:`` configurations).

For each network and CPU configuration of ``--cores`` (two cores: C2 = (2), one PE of 2 cores with 2 intra-op
threads, 002's ACL-threading configuration; C1 = (1,1), two single-core PEs, 1 thread each): profile every task on
1 and 2 pinned cores (``ProfileTable.from_ort``), take the GA's mapping (preset kang2020, throughput objective,
no cap, as 002 Table 3), then measure it over ``--frames`` frames with the network's own application
(``classify``: resize pre-processing, arg-max post-processing). "schedule" = the analytic period in ms per frame,
"actual" = 1000 / measured FPS, error = (schedule - actual) / actual (002's definition, L336-348).

The measured PEs are the cores given; pre/post-processing threads are not pinned, so where the process may use
more cores (``taskset``), they run beside the PEs as on 002's boards, whose little cores did that work.

Run: ``python -m bench.layermap_real [--networks mobilenet-v1 mobilenet-v2] [--cores 0 1] [--frames 1000]``;
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
from dse.configuration import Configuration
from dse.graph.analysis import analyze
from dse.layermap import AnalyticModel, LayerMapping, ProfileTable, run_layer_ga
from dse.platform import platform_from_dict
from dse.zoo import build_network

OUT = Path(__file__).resolve().parent / "results" / "layermap_real.json"
TARGET = 0.07      # |error| for MobileNet v1 (issue 15; 002 reports <= 7 % in 7 of 8 rows)


def run(networks, size: int, cores: list[int], frames: int, busy: bool = False) -> dict:
    platform = platform_from_dict(compose_config(["platform=host-cpu", f"platform.cores=[{','.join(map(str, cores))}]"]).platform)
    confs = [("C2", str(len(cores))), ("C1", "-".join("1" * len(cores)))]
    rows = []
    for net in networks:
        analysis = analyze(build_network(net, input_size=size))
        backend = OrtBackend(platform, analysis, MeasureSettings(precision="fp32", sample_size=frames, input_size=size,
                                                                 warmup=50, application="classify", model=net))
        graph = backend.layermap.graph("fp32")
        t0 = time.perf_counter()
        profile = ProfileTable.from_ort(analysis, graph, sorted({1, len(cores)}), repeats=30, warmup=5, cores=cores,
                                        busy_neighbours=busy)
        profile_s = time.perf_counter() - t0
        for label, cpu in confs:
            pes = LayerMapping(cpu, (0,) * graph.n).pes()
            model = AnalyticModel(graph, profile, pes)
            ga = run_layer_ga(model, "kang2020", seed=0)
            best = tuple(int(x) for x in ga.mapping)
            schedule_ms = float(model.evaluate(np.array(best)).period) / 1000.0
            base = Configuration(benchmark=net, platform="host-cpu", precision="fp32", input_size=size,
                                 buffers=2 * len(pes) + 2)
            config = LayerMapping(cpu, best, graph_digest=graph.digest).to_configuration(base)
            m = backend.measure(config)
            if not m.ok:
                raise SystemExit(f"{net} {cpu}: {m.status}: {m.reason}")
            actual_ms = 1000.0 / m.fps
            row = {"network": net, "input_size": size, "conf": label, "cpu_config": cpu, "cores": cores,
                   "tasks": graph.n, "layer_map": dict(config.extra)["layer_map"], "segments": len(m.stage_ms),
                   "ga_evaluations": ga.evaluations, "schedule_ms": round(schedule_ms, 3),
                   "actual_ms": round(actual_ms, 3), "error": round((schedule_ms - actual_ms) / actual_ms, 4),
                   "fps": round(m.fps, 2), "latency_ms_p50": round(m.latency_ms_p50, 3),
                   "util": {k: round(v, 3) for k, v in m.util.items()}, "cpu_util": round(m.cpu_util, 3),
                   "profile_s": round(profile_s, 1), "load_avg": load_average()}
            rows.append(row)
            print(f"{net:13s} {label} ({cpu:3s}) {row['segments']:2d} segments  schedule {schedule_ms:7.2f} ms  "
                  f"actual {actual_ms:7.2f} ms  error {100 * row['error']:+6.1f} %  load {row['load_avg']}",
                  flush=True)
    v1 = [r for r in rows if r["network"] == "mobilenet-v1"]
    if v1:
        met = all(abs(r["error"]) <= TARGET for r in v1)
        print(f"MobileNet v1 |error| <= {TARGET:.0%} on every configuration: {'met' if met else 'missed'}")
    return {"frames": frames, "cores": cores, "busy_neighbours": busy, "process_cores": sorted(os.sched_getaffinity(0)),
            "rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--networks", nargs="+", default=["mobilenet-v1", "mobilenet-v2"])
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--cores", nargs="+", type=int, default=sorted(os.sched_getaffinity(0))[:2])
    ap.add_argument("--frames", type=int, default=1000)
    ap.add_argument("--busy-neighbours", action="store_true",
                    help="profile each core count with the other PE cores running the network (ProfileTable.from_ort)")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()
    write_result(args.out, run(args.networks, args.size, args.cores, args.frames, args.busy_neighbours))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
