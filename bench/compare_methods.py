"""Exploration methods side by side (thesis Table 3.7): the `compare` rule on the Table 3.7 networks.

Runs ``snakemake --cores N compare`` for yolov4, yolov4-tiny, yolov4-csp and cspnet (INT8, virtual Xavier
AGX; nothing is redone that is up to date) and checks the targets on each ``comparison.parquet``:
- the proposed method within 2 % of the best method's FPS (baselines included; each answer's FPS is the
  mean of its re-runs, as the thesis averages five runs of each final configuration);
- fewer points measured than the comprehensive GA, fewer parameter points than the fine-tuning GA;
- the gain over Base(G) inside the published range (+101 % .. +680 %);
- the profile-based estimate of the proposed method's mapping as far below the measured time as Table 3.11's
  (7.8-8.9 % low, INT8; within ``TABLE_3_11_TOLERANCE`` points), on the two Table 3.11 networks compared here.
Next to the raw counts it reports each method's "points to 98 %" (points spent before its best FPS first
came within 2 % of the best method's), which does not depend on the budget a GA is given.

Run: ``python -m bench.compare_methods [--networks yolov4 ...] [--cores 2] [--rerun]``;
writes bench/results/compare_methods.json; ``--markdown`` prints its table for BENCHMARKS.md, measuring nothing.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from bench.machine import load_average, made_on, write_result

REPO = Path(__file__).resolve().parents[1]
OUT = Path(__file__).resolve().parent / "results" / "compare_methods.json"
NETWORKS = ("yolov4", "yolov4-tiny", "yolov4-csp", "cspnet")
RUN = "results/{net}/xavier-agx-sim/int8-b1-416"
GAIN_RANGE = (101.0, 680.0)
WITHIN = 0.02
# Table 3.11: (profiled - measured) / measured inference time of the proposed method's INT8 mapping, % low
TABLE_3_11 = {"yolov4": 7.79, "yolov4-csp": 8.13, "densenet-yolo": 8.88}
TABLE_3_11_TOLERANCE = 5.0   # percentage points either side


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


def table_3_11_met(row: dict) -> bool | None:
    """The proposed mapping's estimate error within the tolerance of Table 3.11's (None: not a Table 3.11 network)."""
    published, low = TABLE_3_11.get(row["network"]), row["profiled_estimate_low_pct"]
    if published is None or len(low) < 2:
        return None
    return abs(low[1] - published) <= TABLE_3_11_TOLERANCE


def markdown(result: dict) -> str:
    """The methods x networks table and the targets of one stored result."""
    rows = result["rows"]
    methods = list(rows[0]["fps"])
    lines = ["| method | " + " | ".join(r["network"] for r in rows) + " |", "|---" * (len(rows) + 1) + "|"]
    for m in methods:
        cells = []
        for r in rows:
            bold = "**" if m == r["best_method"] else ""
            std = r["fps_std"].get(m)
            cells.append(f"{bold}{r['fps'][m]}{bold}" + (f" +- {std}" if std else "")
                         + f" ({r['points'].get(m)}, {r['engines'].get(m)})")
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    ratio = lambda r, m: f"{r['fps'][m] / r['best_fps']:.3f}"
    lines += [f"| proposed / best method (target >= {1 - WITHIN:.2f}) | "
              + " | ".join(ratio(r, "Proposed") for r in rows) + " |"]
    if "Guided" in methods:
        lines += ["| guided / best method | " + " | ".join(ratio(r, "Guided") for r in rows) + " |"]
    lines += [f"| gain over Base(G) (published +{GAIN_RANGE[0]:.0f} .. +{GAIN_RANGE[1]:.0f} %) | "
              + " | ".join(f"+{r['gain_vs_base_g_pct']:.0f} %" for r in rows) + " |"]
    cell_311 = []
    for r in rows:
        low, met = r["profiled_estimate_low_pct"], table_3_11_met(r)
        ours = " / ".join(f"{x:.1f}" for x in low)
        cell_311.append(f"{ours} (thesis {TABLE_3_11[r['network']]}: {'met' if met else 'missed'})" if met is not None
                        else f"{ours} (not in Table 3.11)")
    lines += ["| profiled estimate low by, % (Profiled's / the proposed mapping; Table 3.11 "
              f"+- {TABLE_3_11_TOLERANCE:.0f} points) | " + " | ".join(cell_311) + " |"]
    lines += ["", f"Each cell: the mean of 5 fresh re-runs of the method's answer +- std (distinct configurations "
              f"asked, GPU/DLA engines built); the best per network in bold. M{made_on(result['machine'])[1:]}, "
              f"in {result.get('wall_s')} s."]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--networks", nargs="+", default=list(NETWORKS))
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--output", type=Path, default=OUT)
    ap.add_argument("--rerun", action="store_true", help="rerun the comparison jobs (not the proposed search)")
    ap.add_argument("--markdown", action="store_true", help="print the table of the result file, measure nothing")
    args = ap.parse_args(argv)
    if args.markdown:
        print(markdown(json.loads(args.output.read_text())))
        return 0

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
