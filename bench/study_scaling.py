"""Design studies at scale: one study run by the `study` target with 1, 2 and 4 concurrent jobs on
this machine and through a SLURM cluster (``scripts/slurm/cluster.sh start`` first), in fresh working
directories; wall time, jobs run, the executor's overhead per job, and whether every mode merged the same
study.parquet (the virtual board is deterministic given the seed, so they must be equal).

Run: ``python -m bench.study_scaling [--study xavier-36] [--overrides search.top_k=2 ...]
[--modes local-1 local-2 local-4 slurm-2]``; writes bench/results/study_scaling.json and prints the Markdown
table for BENCHMARKS.md, with the paper-scale projection computed from the measured per-job costs.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import pandas as pd

from bench.machine import write_result

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "bench" / "results" / "study_scaling.json"
DETERMINISTIC = ["benchmark", "precision", "input_size", "batch", "seed", "option", "cuts", "streams", "buffers",
                 "pre_threads", "post_threads", "fps", "base_g_fps", "energy_j_per_frame", "tuples", "measurements"]


def run_mode(mode: str, study: str, overrides: list[str], keep: Path) -> dict:
    """One mode (``local-N`` or ``slurm-N``) in a fresh working directory: wall seconds, jobs, the merged study."""
    kind, n = mode.split("-")
    keep.mkdir(parents=True, exist_ok=True)
    wd = Path(tempfile.mkdtemp(prefix=f"study-{mode}-", dir=keep))
    for name in ("Snakefile", "workflow", "config", "profiles"):
        os.symlink(REPO / name, wd / name)
    cmd = [sys.executable, "-m", "snakemake", "study", "--config",
           f"overrides=[study={study}{''.join(',' + o for o in overrides)}]"]
    cmd += (["--cores", n] if kind == "local" else ["--workflow-profile", "profiles/slurm", "--jobs", n])
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=wd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    log = proc.stdout + proc.stderr
    if proc.returncode:
        raise SystemExit(f"{mode} failed ({proc.returncode}):\n{log[-4000:]}")
    m = re.search(r"(\d+) of \1 steps \(100%\) done", log)
    local_rules = len(re.findall(r"^localrule ", log, re.M))
    frame = pd.read_parquet(wd / "results" / "studies" / study / "study.parquet")
    return {"mode": mode, "wall_s": round(wall, 1), "jobs": int(m[1]) if m else None, "local_jobs": local_rules,
            "points": len(frame), "workdir": str(wd), "frame": frame}


def adopt(mode: str, wd: Path, study: str) -> dict:
    """A mode that ran to the end in ``wd`` under an earlier bench process (stopped before it wrote its JSON):
    wall time from the first to the last timestamp of Snakemake's log (DAG building excluded, a few seconds)."""
    (log,) = sorted((wd / ".snakemake" / "log").glob("*.snakemake.log"))[-1:]
    text = log.read_text()
    stamps = [datetime.strptime(t, "%a %b %d %H:%M:%S %Y") for t in re.findall(r"^\[(\w{3} \w{3} +\d+ [\d:]+ \d{4})\]", text, re.M)]
    m = re.search(r"(\d+) of \1 steps \(100%\) done", text)
    if not m:
        raise SystemExit(f"{log}: the run did not finish")
    frame = pd.read_parquet(wd / "results" / "studies" / study / "study.parquet")
    return {"mode": mode, "wall_s": (stamps[-1] - stamps[0]).total_seconds(), "jobs": int(m[1]),
            "local_jobs": len(re.findall(r"^localrule ", text, re.M)), "points": len(frame), "workdir": str(wd),
            "wall_from": "snakemake log timestamps"}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--study", default="xavier-36")
    ap.add_argument("--overrides", nargs="*", default=[], help="applied to every point, e.g. search.top_k=2")
    ap.add_argument("--modes", nargs="*", default=["local-1", "local-2", "local-4", "slurm-2"])
    ap.add_argument("--keep", type=Path, default=Path(tempfile.gettempdir()) / "dse-study-bench",
                    help="parent of the working directories (kept: later invocations compare against them)")
    ap.add_argument("--output", type=Path, default=OUT)
    ap.add_argument("--adopt", nargs="*", default=[], metavar="MODE=WORKDIR",
                    help="record modes that ran to the end in these working directories instead of running them")
    args = ap.parse_args(argv)
    # modes measured by an earlier invocation of the same study stay (each mode may run alone, e.g. SLURM later)
    earlier = json.loads(args.output.read_text()) if args.output.exists() else {}
    same = earlier.get("study") == args.study and earlier.get("overrides") == args.overrides
    fresh = set(args.modes) | {a.split("=", 1)[0] for a in args.adopt}
    by = {r["mode"]: r for r in (earlier.get("runs", []) if same else []) if r["mode"] not in fresh}
    for item in args.adopt:
        mode, wd = item.split("=", 1)
        by[mode] = adopt(mode, Path(wd), args.study)
    for mode in args.modes:
        r = run_mode(mode, args.study, args.overrides, args.keep)
        r.pop("frame")
        by[mode] = r
    runs = sorted(by.values(), key=lambda r: (r["mode"].split("-")[0], int(r["mode"].split("-")[1])))
    # compare the studies still on disk with the first of them; a mode whose working directory is gone (an earlier
    # machine) keeps the verdict it was recorded with
    on_disk = [(r, Path(r["workdir"]) / "results" / "studies" / args.study / "study.parquet") for r in runs]
    frames = [(r, pd.read_parquet(f)[DETERMINISTIC]) for r, f in on_disk if f.exists()]
    for r, f in frames:
        r["same_as_first"] = bool(f.equals(frames[0][1]))
    out = {"study": args.study, "overrides": args.overrides, "runs": runs,
           "cpu_s_per_point_1_job": None, "slurm_overhead_s_per_job": None}
    if "local-1" in by:
        out["cpu_s_per_point_1_job"] = round(by["local-1"]["wall_s"] / by["local-1"]["points"], 1)
    for mode, r in by.items():
        local = by.get(mode.replace("slurm", "local"))
        if mode.startswith("slurm") and local:
            remote_jobs = r["jobs"] - r["local_jobs"]
            waves = remote_jobs / int(mode.split("-")[1])
            out["slurm_overhead_s_per_job"] = round((r["wall_s"] - local["wall_s"]) / max(1.0, waves), 2)
    write_result(args.output, out)
    print("| Mode | Wall (s) | Jobs (local) | Points | Same study.parquet as the first |")
    print("| --- | --- | --- | --- | --- |")
    for r in runs:
        print(f"| {r['mode']} | {r['wall_s']} | {r['jobs']} ({r['local_jobs']}) | {r['points']} | {r['same_as_first']} |")
    print(f"\nper point at 1 job: {out['cpu_s_per_point_1_job']} s; SLURM overhead per job: "
          f"{out['slurm_overhead_s_per_job']} s")
    return 0 if all(r["same_as_first"] for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
