"""Seed 002 Sec. VI for real on this host: SqueezeNet / MobileNet v1 / MobileNet v2 at 100 / 120 / 150 ms on the
host's core groups (case `multiapp=host`), through the `multiapp` target itself, its report (calibration runs, then
the checked periodic run of 3 mappings) repeated ``--passes`` times, each with fresh noise.

Reports per app over every mapping and pass: the bound (measured segment WCETs), the measured worst stage response,
bound / worst, misses and how often a response went above its bound (the target: never, where the analysis says
schedulable).

Run: ``python -m bench.multiapp_host [--passes 3]`` (about 2.5 min a pass on 2 cores); writes
bench/results/multiapp_host.json.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.end_to_end import workdir
from bench.machine import write_result

OUT = Path(__file__).resolve().parent / "results" / "multiapp_host.json"
APPS = ("squeezenet", "mobilenet-v1", "mobilenet-v2")


def run_passes(passes: int, where: Path):
    """The target once, then its report again ``passes - 1`` times; every pass's check.parquet rows."""
    import pandas as pd

    cmd = [sys.executable, "-m", "snakemake", "--cores", "2", "multiapp", "--resources", "board=1", "--config",
           "overrides=[multiapp=host]"]
    case = where / "results" / "multiapp" / "host" / "host-cpu"
    frames = []
    for k in range(passes):
        proc = subprocess.run(cmd + (["-R", "multiapp_report"] if k else []), cwd=where, capture_output=True,
                              text=True)
        if proc.returncode:
            raise SystemExit(f"the multiapp target failed on pass {k + 1}:\n{proc.stderr[-3000:]}")
        frames.append(pd.read_parquet(case / "check.parquet").assign(run=k + 1))
        print(f"pass {k + 1}: {frames[-1][['solution', 'app', 'bound_us', 'worst_us', 'misses']].to_dict('records')}",
              flush=True)
    return pd.concat(frames, ignore_index=True)


def summary(rows) -> dict:
    from dse.systems.layermap.multiapp_jobs import exceeded

    sched = rows[rows.schedulable]
    out = {}
    for a in APPS:
        r = sched[sched.app == a]
        out[a] = {"checks": len(r), "misses": int(r.misses.sum()),
                  "bound_exceeded": int(exceeded(r).sum()),
                  "bound_ms": [float(r.bound_us.min() / 1e3), float(r.bound_us.max() / 1e3)],
                  "worst_ms": [float(r.worst_us.min() / 1e3), float(r.worst_us.max() / 1e3)],
                  "pessimism": [float(r.pessimism.min()), float(r.pessimism.max())]}
    return out


def markdown(per_app: dict) -> str:
    span = lambda lo_hi, f="{:.1f}": "-".join(f.format(x) for x in lo_hi)  # noqa: E731
    lines = ["| per app, over mappings and passes | " + " | ".join(APPS) + " |", "|---" * (len(APPS) + 1) + "|"]
    for label, key, fmt in (("bound (ms)", "bound_ms", "{:.1f}"), ("measured worst (ms)", "worst_ms", "{:.1f}"),
                            ("bound / worst", "pessimism", "{:.2f}")):
        lines.append(f"| {label} | " + " | ".join(span(per_app[a][key], fmt) for a in APPS) + " |")
    lines.append("| misses, bound exceeded (of checks) | " + " | ".join(
        f"{per_app[a]['misses']}, {per_app[a]['bound_exceeded']} (of {per_app[a]['checks']})" for a in APPS) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--passes", type=int, default=3)
    args = ap.parse_args(argv)
    if args.passes < 1:
        ap.error(f"--passes must be >= 1, got {args.passes}")
    with tempfile.TemporaryDirectory() as tmp:
        rows = run_passes(args.passes, workdir(Path(tmp)))
    per_app = summary(rows)
    print(markdown(per_app))
    write_result(OUT, {"passes": args.passes, "per_app": per_app, "rows": rows.to_dict("records")})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
