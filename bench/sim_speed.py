"""Speed of the virtual board: milliseconds per measurement (5,000 frames + warm-up) of yolov4 on xavier-agx-sim.

One configuration per pipeline depth: E (1 stage), PND-A (2), B and PND-B (3), D (4), cuts spread over
the feasible cuts. Each is measured ``--repeats`` times through ``SimBackend.measure`` (planning, engine
cache lookup, discrete-event simulation, measurement): median and p90 ms, microseconds per simulated frame.
The first call of each configuration (which plans the stages and builds its sim engines) is reported
apart. Then one more pass under tracemalloc gives the Python heap peak of a measurement; ru_maxrss is
the whole process (network analysis included). Target: <= 50 ms per measurement.

Run: ``python -m bench.sim_speed [--network yolov4 --precision int8 --repeats 30]``;
writes bench/results/sim_speed.json.
"""
from __future__ import annotations

import argparse
import resource
import statistics
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

from bench.machine import load_average, write_result

OUT = Path(__file__).resolve().parent / "results" / "sim_speed.json"
TARGET_MS = 50.0
# option -> cut positions as fractions of the feasible cuts (a 1/3 cut for the DLA-first options)
SHAPES = {"E": (), "PND-A": (0.33,), "B": (0.2, 0.6), "PND-B": (0.2, 0.6), "D": (0.15, 0.45, 0.7)}


def pick_cuts(analysis, fractions) -> tuple[int, ...]:
    """Feasible cuts near the given fractions of the feasible-cut list (nudged until the tuple is feasible)."""
    feas = list(analysis.feasible_cuts)
    idx = [int(f * (len(feas) - 1)) for f in fractions]
    for shift in range(len(feas)):
        for sign in (1, -1):
            cand = [min(max(i + sign * shift * (k + 1), 0), len(feas) - 1) for k, i in enumerate(idx)]
            cuts = tuple(feas[i] for i in cand)
            if len(set(cuts)) == len(cuts) and list(cuts) == sorted(cuts) and \
                    analysis.check_cuts(list(cuts)) is None:
                return cuts
    raise RuntimeError(f"no feasible tuple near {fractions}")


def streams_for(stage_types) -> tuple[int, ...]:
    return tuple({"GPU": 2, "DLA": 2, "PND": 4}.get(t, 1) for t in stage_types)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--network", default="yolov4")
    ap.add_argument("--precision", default="int8")
    ap.add_argument("--platform", default="xavier-agx-sim")
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--options", nargs="+", default=list(SHAPES))
    ap.add_argument("--output", type=Path, default=OUT)
    args = ap.parse_args(argv)

    from dse.workflow.phases import search_setup

    load = load_average()
    with tempfile.TemporaryDirectory(prefix="bench-engines-") as tmp:
        cfg, analysis, backend, space, _, base = search_setup(args.network, args.precision, Path(tmp), args.platform)
        frames = int(cfg.benchmark.sample_size) + int(cfg.benchmark.warmup)
        rows = []
        for option in args.options:
            types = space.stages(option)
            cuts = pick_cuts(analysis, SHAPES.get(option, ())[:len(types) - 1]) if len(types) > 1 else ()
            config = base.with_(option=option, cuts=cuts, streams=streams_for(types), buffers=8, pre_threads=4,
                                post_threads=1)
            t = time.perf_counter()
            first = backend.measure(config)
            first_ms = (time.perf_counter() - t) * 1e3
            times = []
            for _ in range(args.repeats):
                t = time.perf_counter()
                m = backend.measure(config)
                times.append((time.perf_counter() - t) * 1e3)
            tracemalloc.start()
            backend.measure(config)
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            med = statistics.median(times)
            rows.append({
                "option": option, "stages": len(types), "cuts": list(cuts), "streams": list(config.streams),
                "ok": m.ok, "reason": m.reason, "fps": m.fps, "first_ms": round(first_ms, 2),
                "median_ms": round(med, 2), "p90_ms": round(float(np.percentile(times, 90)), 2),
                "min_ms": round(min(times), 2), "us_per_frame": round(med * 1e3 / frames, 3),
                "tracemalloc_peak_mib": round(peak / 2**20, 2), "target_ms": TARGET_MS,
                "met": med <= TARGET_MS, "first_ok": first.ok,
            })
            r = rows[-1]
            print(f"{option:6s} {len(types)} stages cuts {list(cuts)}: median {r['median_ms']} ms, p90 {r['p90_ms']} "
                  f"ms, first {r['first_ms']} ms, {r['us_per_frame']} us/frame, heap peak "
                  f"{r['tracemalloc_peak_mib']} MiB, fps {m.fps:.1f} {m.reason}", flush=True)
    maxrss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    write_result(args.output, {
        "benchmark": "sim_speed", "network": args.network, "precision": args.precision, "platform": args.platform,
        "frames_per_measurement": frames, "repeats": args.repeats, "rows": rows,
        "ru_maxrss_mib": round(maxrss_mib, 1), "target_ms": TARGET_MS, "load_avg_start": load,
        "load_avg_end": load_average(),
    })
    print(f"ru_maxrss {maxrss_mib:.0f} MiB (process, analysis included)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
