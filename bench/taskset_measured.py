"""Seed 003's campaign on variants our evaluator measured (``config/taskset/zoo-xavier.yaml``):
the variant table's shapes next to Table 4's, and the three scenarios' success ratios next to the paper's text.

The networks are not Apollo's, so only shapes compare (Table 4 nominal values, spec 5.3):
- dla2 / dla1 in [0.55, 0.75] (Table 4: 0.59-0.73 on DNN1/3/4/5);
- rc4 / rc8: big detectors 1.5-2.0 (DNN1 1.70, DNN3 1.60), small networks below the big ones (DNN4 1.04, DNN5 1.18);
- tc4 / tc8 on big detectors 1.3-1.5 (DNN1 1.34, DNN3 1.47);
- tc8 / rc8 on big detectors 0.65-1.0 (DNN1 0.67, DNN3 1.0);
- dla1 < tc8 on big detectors (Table 4: the NVDLA is the fastest CE for DNN1/3/4);
- no CPU variant for big detectors ("x"), CPU variants for the small networks;
- cpu4/cpu2, cpu6/cpu4: fitted to Table 4 (the Carmel ``parallel_efficiency``), so reported, not checked.
Campaign: comb <= split <= +GPU <= +CPU at every threshold per scenario (the issue's ordering target), and where
each configuration stays at 100 % and stops, next to the paper's statements (NVDLA: 100 % to 2.8 with the other
CEs, some sets to 3.4; TC: ~80 % at 1.5 with TC, 85 % at 1.6 with TC+RC+CPU, TC alone to 2.0).

Run: ``python -m bench.taskset_measured [--sets 200] [--results /tmp/taskset-measured]``; writes
bench/results/taskset_measured.json (``--output``) and prints the Markdown for BENCHMARKS.md.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from bench.taskset_003 import SCENARIOS, markdown, run, success_shape

OUT = Path(__file__).resolve().parent / "results" / "taskset_measured.json"
BIG = ("yolov4", "yolov4-csp", "yolov3", "yolov2")
SMALL = ("mobilenet-v2", "squeezenet")
# (name, numerator option, denominator option, networks, paper range, Table 4 source)
RATIOS = [("dla2/dla1", "dla2", "dla1", BIG + SMALL, (0.55, 0.75), "DNN1 0.61, DNN3 0.64, DNN4 0.59, DNN5 0.73"),
          ("rc4/rc8 big", "rc4", "rc8", BIG, (1.5, 2.0), "DNN1 1.70, DNN3 1.60"),
          ("tc4/tc8 big", "tc4", "tc8", BIG, (1.3, 1.5), "DNN1 1.34, DNN3 1.47"),
          ("tc8/rc8 big", "tc8", "rc8", BIG, (0.65, 1.0), "DNN1 0.67, DNN3 1.00"),
          ("dla1/tc8 big", "dla1", "tc8", BIG, (0.0, 1.0), "DNN1 0.62, DNN3 0.73, DNN4 0.27"),
          ("cpu4/cpu2", "cpu4", "cpu2", SMALL, (0.50, 0.55), "fitted: RNN1-3, DNN5 0.50-0.55"),
          ("cpu6/cpu4", "cpu6", "cpu4", SMALL, (0.69, 0.77), "fitted: RNN1-3, DNN5 0.69-0.77")]


def prepare(results: str, sets: int) -> str:
    """The campaign directory, its variants measured when the config changed; stale campaigns removed."""
    from dse.systems.taskset import jobs as taskset

    tdir, node, changed = taskset.prepare([f"results_dir={results}", "taskset=zoo-xavier", f"taskset.sets={sets}"])
    if taskset.measure_if_stale(tdir, node, changed):
        for stale in (Path(tdir) / "campaign").glob("*"):
            stale.unlink()
    return tdir


def variant_shapes(tdir: str) -> list[dict]:
    import pandas as pd

    rows = pd.read_parquet(Path(tdir) / "variants.parquet")
    ms = rows.set_index(["type", "option"]).ms
    out = []
    for name, a, b, nets, (lo, hi), source in RATIOS:
        ours = {n: round(float(ms[n, a] / ms[n, b]), 3) for n in nets}
        out.append({"ratio": name, "ours": ours, "paper": source, "range": [lo, hi],
                    "met": all(lo <= v <= hi for v in ours.values())})
    kept = rows.set_index(["type", "option"]).kept
    cpu = {n: [o for o in ("cpu2", "cpu4", "cpu6") if kept[n, o]] for n in BIG + SMALL}
    out.append({"ratio": "CPU variants", "ours": cpu, "paper": "x for DNN1/3/4, all three for RNNs and DNN5",
                "met": all(not cpu[n] for n in BIG) and all(cpu[n] for n in SMALL)})
    return out


def _run(job):
    return run(*job)


def main(argv=None) -> int:
    import pandas as pd

    from bench.machine import worker_pool, write_result
    from dse.systems.taskset.campaign import summarize
    from dse.systems.taskset.report import pivot

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sets", type=int, default=200)
    ap.add_argument("--results", default="/tmp/taskset-measured")
    ap.add_argument("--output", default=str(OUT))
    args = ap.parse_args(argv)
    t0 = time.time()
    tdir = prepare(args.results, args.sets)
    with worker_pool(2) as pool:
        metas = dict(zip(SCENARIOS, pool.map(_run, [(tdir, sc) for sc in SCENARIOS])))
    scenarios = {}
    for sc, meta in metas.items():
        summary = summarize(pd.read_parquet(Path(tdir) / "campaign" / f"{sc}.parquet"))
        scenarios[sc] = success_shape(pivot(summary, sc, "success"), meta)
    report = {"variants": variant_shapes(tdir), "physical": {"units": "physical", "scenarios": scenarios},
              "wall_s": round(time.time() - t0, 1)}
    write_result(args.output, report)
    for v in report["variants"]:
        print(f"| {v['ratio']} | {v['ours']} | {v['paper']} | {'met' if v['met'] else 'missed'} |")
    print(markdown(report["physical"]))
    print(json.dumps({sc: r["ordered"] for sc, r in scenarios.items()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
