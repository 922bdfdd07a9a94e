"""Analysis speed: `dse inspect` and `dse partition --check` on the largest zoo network and a ~2,000-node chain.

Per model, in-process (library calls the commands make): ``analyze`` of the saved ONNX file (sanitize,
shape inference, folding, layers, feasible cuts), ``partition`` on a feasible 2-cut tuple and
``check_partition`` (whole model vs chained stages in ONNX Runtime). Then the real commands as a user
types them, in a subprocess (interpreter start and imports included): ``dse inspect FILE --json`` and
``dse partition FILE --cuts a,b -o DIR --check``. Each in-process step is timed ``--repeats`` times
(median); the commands once each.

Run: ``python -m bench.analysis_speed [--networks yolov4 densenet-yolo] [--chain-blocks 400]``;
writes bench/results/analysis_speed.json.
"""
from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import onnx

from bench.machine import load_average, write_result

OUT = Path(__file__).resolve().parent / "results" / "analysis_speed.json"


def _timed(fn, repeats: int):
    times, out = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return out, round(statistics.median(times), 3)


def _cli(args: list[str]) -> float:
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "dse", *args], capture_output=True, text=True)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        raise RuntimeError(f"dse {' '.join(args)} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return round(wall, 3)


def bench_model(name: str, model: onnx.ModelProto, shapes: dict | None, tmp: Path, repeats: int,
                cli: bool = True) -> dict:
    from bench.sim_speed import pick_cuts
    from dse.graph.analysis import analyze
    from dse.graph.partition import check_partition, partition

    path = tmp / f"{name}.onnx"
    onnx.save(model, str(path))
    load = load_average()
    analysis, t_an = _timed(lambda: analyze(str(path), shapes), repeats)
    cuts = pick_cuts(analysis, (0.33, 0.66))
    stages, t_part = _timed(lambda: partition(analysis, cuts), repeats)
    diffs, t_check = _timed(lambda: check_partition(analysis, stages), 1)
    row = {"model": name, "onnx_nodes": len(model.graph.node), "layers": len(analysis.layers),
           "feasible_cuts": len(analysis.feasible_cuts), "cuts": list(cuts),
           "analyze_s": t_an, "partition_s": t_part, "check_s": t_check,
           "max_abs_diff": max(diffs.values()) if diffs else None, "load_avg_start": load}
    if cli:
        shape_args = [a for k, v in (shapes or {}).items() for a in ("--input-shape", f"{k}:{'x'.join(map(str, v))}")]
        row["cli_inspect_s"] = _cli(["inspect", str(path), "--json", *shape_args])
        row["cli_partition_check_s"] = _cli(["partition", str(path), "--cuts", ",".join(map(str, cuts)),
                                             "-o", str(tmp / f"{name}-stages"), "--check", *shape_args])
    row["load_avg_end"] = load_average()
    print(f"{name}: {row['onnx_nodes']} nodes -> {row['layers']} layers, analyze {t_an} s, partition {t_part} s, "
          f"check {t_check} s" + (f", CLI inspect {row['cli_inspect_s']} s, CLI partition --check "
                                  f"{row['cli_partition_check_s']} s" if cli else "") + f", load {load}", flush=True)
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--networks", nargs="*", default=["yolov4", "densenet-yolo"])
    ap.add_argument("--size", type=int, default=416)
    ap.add_argument("--chain-blocks", type=int, default=400, help="tests.models.chain_model blocks (0: skip)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-cli", action="store_true", help="skip the subprocess `dse` commands")
    ap.add_argument("--output", type=Path, default=OUT)
    args = ap.parse_args(argv)

    from dse.zoo import build_network

    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-analysis-") as tmp:
        for net in args.networks:
            t = time.perf_counter()
            model = build_network(net, input_size=args.size)
            build_s = round(time.perf_counter() - t, 3)
            rows.append({**bench_model(net, model, None, Path(tmp), args.repeats, not args.no_cli),
                         "zoo_build_s": build_s})
        if args.chain_blocks:
            from tests.models import chain_model

            rows.append(bench_model(f"chain{args.chain_blocks}", chain_model(args.chain_blocks),
                                    {"x": [1, 4, 8, 8]}, Path(tmp), args.repeats, not args.no_cli))
    write_result(args.output, {"benchmark": "analysis_speed", "size": args.size, "repeats": args.repeats,
                               "rows": rows,
                               "ru_maxrss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
