"""Exploration methods side by side (issue 7, thesis Table 3.7): the `compare` rule on the Table 3.7 networks.

Runs ``snakemake --cores N compare`` for yolov4, yolov4-tiny, yolov4-csp and cspnet (INT8, virtual Xavier
AGX; nothing is redone that is up to date) and checks the targets on each ``comparison.parquet``:
- the proposed method within 2 % of the best method's FPS (baselines included; each answer's FPS is the
  mean of its re-runs, as the thesis averages five runs of each final configuration);
- fewer points measured than the comprehensive GA, fewer parameter points than the fine-tuning GA;
- the gain over Base(G) inside the published range (+101 % .. +680 %);
- the profile-based estimate too low (the published direction: it ignores pipelining overheads).
Next to the raw counts it reports each method's "points to 98 %" (points spent before its best FPS first
came within 2 % of the best method's), which does not depend on the budget a GA is given.

Run: ``python -m bench.compare_methods [--networks yolov4 ...] [--cores 2] [--rerun]``;
writes bench/results/compare_methods.json.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from bench.machine import load_average, write_result

REPO = Path(__file__).resolve().parents[1]
OUT = Path(__file__).resolve().parent / "results" / "compare_methods.json"
NETWORKS = ("yolov4", "yolov4-tiny", "yolov4-csp", "cspnet")
RUN = "results/{net}/xavier-agx-sim/int8-b1-416"
GAIN_RANGE = (101.0, 680.0)
WITHIN = 0.02


def summarize(frame: pd.DataFrame) -> dict:
    """Targets and headline numbers of one comparison.parquet."""
    ran = frame[frame["status"] == "ok"].set_index("method")
    fps = ran["fps_confirmed"].fillna(ran["fps"])     # the mean of the answer's re-runs, not its lucky sample
    p = ran.loc["Proposed"]
    best_method = fps.idxmax()
    estimates = json.loads(ran.loc["Profiled", "extra_json"]).get("estimates", []) if "Profiled" in ran.index else []
    row = {
        "best_method": best_method, "best_fps": float(fps.max()), "proposed_fps": float(fps["Proposed"]),
        "proposed_over_best": float(fps["Proposed"] / fps.max()),
        "fps": {m: round(float(v), 1) for m, v in fps.items()},
        "fps_std": {m: round(float(v), 1) for m, v in ran["fps_confirmed_std"].items() if v == v},
        "fps_search": {m: round(float(v), 1) for m, v in ran["fps"].items()},
        "points": {m: int(v) for m, v in ran["points_measured"].items()},
        "points_to_98": {m: (int(v) if pd.notna(v) else None) for m, v in ran["points_to_target"].items()},
        "engines": {m: f"{int(r['engines_gpu'])}/{int(r['engines_dla'])}" for m, r in ran.iterrows()},
        "proposed_mapping_param": [int(p["mapping_points"]), int(p["param_points"])],
        "gain_vs_base_g_pct": float(p["gain_vs_base_g_pct"]),
        "profiled_estimate_low_pct": [round(e["difference_pct"], 1) for e in estimates],
        "failed": {m: r for m, r in frame.loc[frame["status"].isin(["refused", "error"]), ["method", "reason"]].values},
    }
    comp = ran.loc["Comprehensive GA"] if "Comprehensive GA" in ran.index else None
    ft = ran.loc["Fine-tuning GA"] if "Fine-tuning GA" in ran.index else None
    row["targets"] = {k: bool(v) for k, v in {
        "within_2pct_of_best": row["proposed_over_best"] >= 1 - WITHIN,
        "fewer_points_than_comprehensive_ga": comp is not None and p["points_measured"] < comp["points_measured"],
        "fewer_param_points_than_finetune_ga": ft is not None and p["param_points"] < ft["param_points"],
        "gain_in_published_range": GAIN_RANGE[0] <= row["gain_vs_base_g_pct"] <= GAIN_RANGE[1],
        "profiled_estimate_too_low": bool(estimates) and all(e["difference_pct"] > 0 for e in estimates),
    }.items()}
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--networks", nargs="+", default=list(NETWORKS))
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--output", type=Path, default=OUT)
    ap.add_argument("--rerun", action="store_true", help="rerun the comparison jobs (not the proposed search)")
    args = ap.parse_args(argv)

    cwd = Path.cwd() if (Path.cwd() / "Snakefile").exists() else REPO
    load = load_average()
    t0 = time.perf_counter()
    cmd = [sys.executable, "-m", "snakemake", "--cores", str(args.cores), "compare", "--config",
           f"benchmarks=[{','.join(args.networks)}]", "overrides=[search.strategy=proposed]"]
    cmd += ["--forcerun", "comparison"] if args.rerun else []
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if proc.returncode:
        print(proc.stderr[-4000:], file=sys.stderr)
        return proc.returncode
    wall = time.perf_counter() - t0
    rows = []
    for net in args.networks:
        frame = pd.read_parquet(cwd / RUN.format(net=net) / "comparison.parquet")
        row = {"network": net, **summarize(frame)}
        rows.append(row)
        t = row["targets"]
        print(f"{net:12s} proposed {row['proposed_fps']:.1f} / best {row['best_fps']:.1f} ({row['best_method']}) = "
              f"{row['proposed_over_best']:.3f}; points {row['points']['Proposed']} vs comprehensive GA "
              f"{row['points'].get('Comprehensive GA')}; gain {row['gain_vs_base_g_pct']:+.0f} %; "
              f"targets met {sum(t.values())}/{len(t)}")
    write_result(args.output, {"benchmark": "compare_methods",
                               "params": {"networks": args.networks, "cores": args.cores, "command": " ".join(cmd[1:])},
                               "rows": rows, "wall_s": round(wall, 1), "load_avg_start": load,
                               "load_avg_end": load_average()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
