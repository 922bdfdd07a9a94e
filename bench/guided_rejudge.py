"""The answers of a stored ``bench.guided_quality`` result, re-measured in more paired rounds: is a gap real.

On a noisy host (``host-cpu``: 5-15 % from run to run) the bench's own re-measurement of the answers cannot resolve
a 1 % gap; each row keeps its answers' configurations, so they can be judged again later on as many round-robin
rounds as it takes (repeat r of every answer before repeat r + 1 of any), with fresh repeats the bench never used.
Per row and method: the runs, their mean, quality = mean / the best mean, and the paired quality (run-by-run
ratios to the best answer's run of the same round, +- standard error), next to the stored ones.

Run: ``python -m bench.guided_rejudge bench/results/guided_quality-host-cpu-s62f.json [--rounds 40] [--tag T]``;
writes bench/results/guided_rejudge-<tag>.json (the tag defaults to the stored file's).
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

from bench.guided_quality import RESULTS, paired_quality
from bench.guided_replay import row_setup
from bench.machine import load_average, write_result
from bench.reference import remeasure_together

REPEAT_REJUDGE = 3000   # repeat indices: fresh noise, none of the bench's own (answers 1000, curves 2000)


def rejudge(row: dict, rounds: int) -> dict:
    """The row's answers (the methods that stored a configuration) re-measured together in ``rounds`` rounds."""
    from dse.configuration import Configuration
    from dse.evaluate import Evaluator

    methods = {m: v for m, v in row["methods"].items() if "config" in v}
    with tempfile.TemporaryDirectory(prefix="bench-engines-") as tmp:
        cfg, backend, *_ = row_setup(row, Path(tmp))
        configs = [Configuration.from_dict(v["config"]) for v in methods.values()]
        load = load_average()
        runs = remeasure_together(Evaluator(backend, seed=int(cfg.seed)), configs, rounds, REPEAT_REJUDGE,
                                  strategy="bench")
    means = [statistics.fmean(r) for r in runs]
    best = max(range(len(means)), key=means.__getitem__)
    return {"network": row["network"], "precision": row["precision"], "platform": row["platform"],
            "overrides": row["overrides"], "noise_seed": row.get("noise_seed"), "rounds": rounds,
            "reference": list(methods)[best], "load_avg_start": load, "load_avg_end": load_average(),
            "methods": {m: {"selected": v["selected"], "runs": r, "mean": round(mean, 3),
                            "quality": round(mean / means[best], 4), "paired": paired_quality(r, runs[best]),
                            "stored_quality": v["quality"], "stored_paired": v.get("paired")}
                        for (m, v), r, mean in zip(methods.items(), runs, means)}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("stored", type=Path, help="a bench/results/guided_quality*.json whose rows keep their answers")
    ap.add_argument("--rounds", type=int, default=40, help="round-robin rounds (one run of every answer each)")
    ap.add_argument("--tag", default="", help="suffix of the result file (default: the stored file's)")
    args = ap.parse_args(argv)
    if args.rounds < 2:
        ap.error(f"--rounds {args.rounds}: a paired standard error needs at least 2")
    stored = json.loads(args.stored.read_text())["rows"]
    rows = [r for r in stored if sum("config" in v for v in r["methods"].values()) >= 2]
    if not rows:
        ap.error(f"{args.stored}: no row keeps two answers' configurations (rows written before session 62 do not)")
    tag = args.tag or args.stored.stem.removeprefix("guided_quality").lstrip("-") or "default"
    out = RESULTS / f"guided_rejudge-{tag}.json"
    results = []
    for row in rows:
        results.append(rejudge(row, args.rounds))
        print(f"{row['network']:14s} {row['precision']}: " + "; ".join(
            f"{m} {v['quality']:.4f} paired {v['paired']} (stored {v['stored_quality']}, {v['stored_paired']})"
            for m, v in results[-1]["methods"].items()), flush=True)
        write_result(out, {"benchmark": "guided_rejudge", "stored": str(args.stored), "rows": results})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
