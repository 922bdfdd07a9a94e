"""The guided searches of a stored ``bench.guided_quality`` result, re-run on today's code: which rows changed.

A change to the guided search that should leave some board untouched (a bound that binds only where re-runs cost
what measurements do) is shown to by re-running only the guided searches of that board's stored bench, with the
same platform, overrides and noise draw, and comparing each row's answer, measurements and re-runs: the sim's
noise depends on (configuration, repeat) only, so an unchanged search gives the same row, and its stored quality
still holds. A changed row needs the full bench (``bench.guided_quality``) again. Minutes where the full bench takes
an hour: no other method, no re-measurement of the answers, no true FPS.

Run: ``python -m bench.guided_replay bench/results/guided_quality-xavier.json [--networks ...] [--tag T]``; writes
bench/results/guided_replay-<tag>.json (the tag defaults to the stored file's).
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from bench.guided_quality import RESULTS, board_setup, end_to_end, search_costs
from bench.machine import write_result
from dse.calibration.truth import noise_free

COMPARED = ("selected", "measured", "reruns", "unique_tuples")


def replay(row: dict) -> dict:
    """Today's guided search on a stored row's network, precision, platform, overrides and noise draw; on a virtual
    board also its answer's true FPS and ``true_quality`` against the stored reference's true FPS (what a changed
    answer is worth without the full bench's re-measurements)."""
    with tempfile.TemporaryDirectory(prefix="bench-engines-") as tmp:
        cfg, backend, space, settings, base = row_setup(row, Path(tmp))
        t = time.perf_counter()
        study, r, extra = end_to_end("guided", space, backend, base, settings, int(cfg.seed))
        costs = search_costs([m for _, m in study.asked], backend, backend.settings, study.reruns)
        seconds = round(time.perf_counter() - t, 2)
        reference = (row.get("reference") or {}).get("true_fps")
        if backend.name == "sim" and reference:
            true_fps = noise_free(row["network"], row["precision"], Path(tmp), row["platform"],
                                  tuple(row["overrides"]))(r.config)
            extra.update(true_fps=round(true_fps, 3), true_quality=round(true_fps / reference, 4))
        return {**costs, **extra, "seconds": seconds}


def row_setup(row: dict, workdir: Path) -> tuple:
    """``board_setup`` of a stored row (its network, precision, platform, overrides and noise draw)."""
    return board_setup(row["network"], row["precision"], workdir, row["platform"], tuple(row["overrides"]),
                       row.get("noise_seed"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("stored", type=Path, help="a bench/results/guided_quality*.json with guided rows")
    ap.add_argument("--networks", nargs="+", default=None, help="only these networks' rows")
    ap.add_argument("--tag", default="", help="suffix of the result file (default: the stored file's)")
    args = ap.parse_args(argv)
    stored = json.loads(args.stored.read_text())["rows"]
    rows = [r for r in stored if "guided" in r["methods"] and (not args.networks or r["network"] in args.networks)]
    if not rows:
        ap.error(f"{args.stored}: no guided row" + (f" of {' '.join(args.networks)}" if args.networks else ""))
    tag = args.tag or args.stored.stem.removeprefix("guided_quality").lstrip("-") or "default"
    out = RESULTS / f"guided_replay-{tag}.json"
    results = []
    for row in rows:
        before = row["methods"]["guided"]
        now = replay(row)
        changed = [k for k in COMPARED if before.get(k) != now[k]]
        results.append({"network": row["network"], "precision": row["precision"], "platform": row["platform"],
                        "overrides": row["overrides"], "noise_seed": row.get("noise_seed"),
                        "stored": {k: before.get(k) for k in (*COMPARED, "board_hours", "true_quality")}, "now": now,
                        "changed": changed})
        print(f"{row['network']:14s} {row['precision']}: "
              + ("same" if not changed else "CHANGED " + ", ".join(f"{k} {before.get(k)} -> {now[k]}" for k in changed))
              + (f", true quality {before.get('true_quality')} -> {now['true_quality']}" if "true_quality" in now
                 else "")
              + f" (board h {before.get('board_hours')} -> {now['board_hours']}, {now['batches_refused']} batches "
              f"refused, {now['seconds']} s)", flush=True)
        write_result(out, {"benchmark": "guided_replay", "stored": str(args.stored), "rows": results})
    n = sum(bool(r["changed"]) for r in results)
    print(f"{len(results) - n} of {len(results)} rows the same; {n} changed", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
