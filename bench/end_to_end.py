"""End to end: wall time and peak memory of the default exploration (``snakemake --cores 2``), cold and warm.

A fresh directory holds symlinks to the repository's Snakefile, workflow/ and config/ (as a user's
checkout would), so "cold" starts with no results, no measurement cache and no engines. "Warm" reruns
the same command in the same directory: every output is up to date, so Snakemake only checks them.
Peak memory is ``ru_maxrss`` from ``os.wait4`` on the snakemake process: the largest resident set of
that process or any of its (waited) descendants, i.e. the biggest single job, not a sum over the tree.
Targets: cold <= 5 min, warm <= 10 s.

Run: ``python -m bench.end_to_end [--cores 2] [--overrides '[benchmark=yolov4]'] [--keep DIR]``;
writes bench/results/end_to_end.json.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.machine import load_average, write_result

REPO = Path(__file__).resolve().parents[1]
OUT = Path(__file__).resolve().parent / "results" / "end_to_end.json"
TARGETS_S = {"cold": 300.0, "warm": 10.0}


def workdir(path: Path) -> Path:
    for name in ("Snakefile", "workflow", "config"):
        os.symlink(REPO / name, path / name)
    return path


def timed_run(cmd: list[str], cwd: Path) -> dict:
    """Run ``cmd``, return wall seconds, exit status, peak RSS of the process tree's largest member, CPU seconds."""
    load = load_average()
    t = time.perf_counter()
    with open(cwd / f"bench-{time.time_ns()}.log", "w") as log:
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=log, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t
    return {"wall_s": round(wall, 2), "rc": proc.returncode, "max_rss_mib": round(usage.ru_maxrss / 1024, 1),
            "cpu_s": round(usage.ru_utime + usage.ru_stime, 2), "load_avg_start": load, "load_avg_end": load_average(),
            "log": log.name}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--overrides", default=None, help="Hydra overrides for --config overrides=... (default: none)")
    ap.add_argument("--keep", type=Path, default=None, help="run in this (empty or new) directory and keep it")
    ap.add_argument("--output", type=Path, default=OUT)
    args = ap.parse_args(argv)

    cmd = [sys.executable, "-m", "snakemake", "--cores", str(args.cores)]
    if args.overrides:
        cmd += ["--config", f"overrides={args.overrides}"]
    tmp = None
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        wd = workdir(args.keep)
    else:
        tmp = tempfile.mkdtemp(prefix="bench-e2e-")
        wd = workdir(Path(tmp))
    try:
        runs = {}
        for kind in ("cold", "warm"):
            r = timed_run(cmd, wd)
            if r["rc"] != 0:
                raise SystemExit(f"{kind} run failed ({r['rc']}): see {r['log']}\n" +
                                 Path(r["log"]).read_text()[-3000:])
            r["target_s"] = TARGETS_S[kind]
            r["met"] = r["wall_s"] <= TARGETS_S[kind]
            runs[kind] = r
            print(f"{kind}: {r['wall_s']} s wall, {r['cpu_s']} s CPU, peak RSS {r['max_rss_mib']} MiB, load "
                  f"{r['load_avg_start']} (target {TARGETS_S[kind]:.0f} s: {'met' if r['met'] else 'missed'})",
                  flush=True)
        outputs = sorted(str(p.relative_to(wd)) for p in (wd / "results").rglob("report.md"))
        write_result(args.output, {"benchmark": "end_to_end", "command": " ".join(cmd[2:]),
                                   "cores": args.cores, "overrides": args.overrides, "runs": runs,
                                   "reports": outputs})
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
