"""What each job of the default run pays besides measuring: its wall time rerun on a finished run (every measurement
cached, so what is left is the interpreter, the imports, reading the run and the strategy's own work) and the
heaviest packages it imports (``python -X importtime``: each third-party package's cumulative import time where it is
first imported).

The finished run is made first in a fresh directory (``bench.end_to_end``'s cold run). With ``--baseline CHECKOUT
--baseline-python PYTHON`` the same is measured for another checkout in its own environment, for a paired
before/after. Each job runs ``--repeats`` times; the fastest is kept (start-up cost is a floor, noise only adds).

Run: ``python -m bench.job_startup [--baseline DIR --baseline-python PATH] [--repeats 3] [--top 6]``;
writes bench/results/job_startup.json.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from pathlib import Path

from bench.end_to_end import add_baseline_args, cold_and_warm, sides_of
from bench.machine import write_result

OUT = Path(__file__).resolve().parent / "results" / "job_startup.json"
JOBS = ("analyze", "maximize", "search", "finetune", "report")


def top_imports(stderr: str, top: int) -> list[list]:
    """[[package, ms], ...] of the third-party packages imported, heaviest first: per package the largest
    cumulative time of one of its modules (e.g. ``scipy.optimize``, with what it imports in turn)."""
    cost: dict[str, float] = {}
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = line.split("|")
        root = name.strip().split(".")[0]
        if cumulative.strip().isdigit() and not root.startswith(("_", "dse", "bench")):
            cost[root] = max(cost.get(root, 0.0), round(int(cumulative) / 1000, 1))
    return [list(kv) for kv in sorted(cost.items(), key=lambda kv: -kv[1])[:top]]


def job_costs(python: str, workdir: Path, run: str, repeats: int, top: int) -> dict:
    out = {}
    for job in JOBS:
        best = None
        for _ in range(repeats):
            t = time.perf_counter()
            proc = subprocess.run([python, "-X", "importtime", "-m", "dse", "workflow", job, run], cwd=workdir,
                                  capture_output=True, text=True)
            wall = time.perf_counter() - t
            if proc.returncode != 0:
                raise SystemExit(f"{job} failed on {run}:\n{proc.stderr[-3000:]}")
            if best is None or wall < best["wall_s"]:
                best = {"wall_s": round(wall, 3), "imports": top_imports(proc.stderr, top)}
        out[job] = best
    return out


def markdown(result: dict) -> str:
    sides = list(result["jobs"])
    head = "| job | " + " | ".join(f"{s}: wall s | {s}: heaviest imports (ms)" for s in sides) + " |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for job in JOBS:
        cells = []
        for s in sides:
            j = result["jobs"][s][job]
            cells += [f"{j['wall_s']:.2f}", ", ".join(f"{m} {ms:.0f}" for m, ms in j["imports"][:3])]
        lines.append(f"| {job} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_baseline_args(ap)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--top", type=int, default=6)
    ap.add_argument("--output", type=Path, default=OUT)
    ap.add_argument("--markdown", action="store_true", help="print the table of the stored result and stop")
    args = ap.parse_args(argv)
    if args.markdown:
        print(markdown(json.loads(args.output.read_text())))
        return 0
    sides = sides_of(args, ap)
    jobs = {}
    with tempfile.TemporaryDirectory(prefix="bench-jobs-") as tmp:
        for side, (python, repo) in sides.items():
            wd = Path(tmp) / side
            run = cold_and_warm(python, repo, 2, None, wd)["reports"][0].rsplit("/", 1)[0]
            jobs[side] = job_costs(python, wd, run, args.repeats, args.top)
            for job, j in jobs[side].items():
                print(f"{side} {job}: {j['wall_s']} s; " + ", ".join(f"{m} {ms} ms" for m, ms in j["imports"][:4]),
                      flush=True)
    write_result(args.output, {"benchmark": "job_startup", "repeats": args.repeats, "jobs": jobs,
                               "baseline": str(args.baseline) if args.baseline else None})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
