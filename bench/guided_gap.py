"""Where the guided search's answer loses to the board's best: its cuts or its parameters.

``bench.guided_quality`` compares answers with references that went through the same fine-tuner (the exhaustive
reference is "every tuple, best fine-tuned") or with the best of the compared methods, all re-measured with
noise. This bench asks the virtual board itself, noise-free (``platform.noise.sigma=0``, averaged over eight draws
of the per-task jitter: ``dse.calibration.truth.noise_free``; what infinitely many re-runs would average to): for
each guided answer, its true FPS; the same answer with its parameters polished
(``dse.calibration.decisions.polish`` on one jitter draw: every value of every parameter, until none gains); and
with its cuts polished too. The best known true FPS of a row is the highest of those, of every option the
decisions bench polished (``bench/results/calibration_decisions.json``) and of the exhaustive reference
(``bench.reference``), each measured noise-free here. Quality = true FPS / best known: the
part the parameters explain is lost by the fine-tuner and the final pick among re-run starts and tuned
configurations, the rest by the exploration.

Run: ``python -m bench.guided_gap [--networks ...] [--precisions ...] [--noise-seeds S ...] [--answer-only]
[OVERRIDES ...]`` (e.g. ``platform.noise.sigma=0.03``); writes bench/results/guided_gap[-<tag>].json (or
``--output``) after every row and prints a summary. About 10 s per search and 10-60 s per polish on 2 cores
(DenseNet-Yolo's cut polish several minutes). ``--compare BEFORE.json AFTER.json`` pairs two such runs of the same
rows and draws (a setting changed; the same noise draws, so the difference is the setting's).
"""
from __future__ import annotations

import argparse
import dataclasses
import functools
import itertools
import json
import statistics
import tempfile
from pathlib import Path

from bench.machine import write_result
from bench.search_quality import NETWORKS, PLATFORM, describe
from dse.workflow.phases import search_setup

RESULTS = Path(__file__).resolve().parent / "results"
DECISIONS = RESULTS / "calibration_decisions.json"
LEVELS = ("answer", "parameters", "cuts")      # the answer; its parameters polished; its cuts and parameters


def known_best(network: str, precision: str, platform: str, overrides: list[str], measure) -> tuple[float, str]:
    """The best true FPS known without this run (the decisions bench's polished options, the exhaustive
    reference; each only where it ran on the same board: platform and non-noise overrides) and where it comes
    from; (0, '') when neither has the row."""
    from bench.reference import load_reference
    from dse.core.configuration import Configuration

    found: list[tuple[float, str]] = []
    decisions = json.loads(DECISIONS.read_text()) if DECISIONS.is_file() else {}
    if decisions.get("platform") == platform and list(decisions.get("overrides") or []) == overrides:
        for row in decisions["rows"]:
            if (row["network"], row["precision"]) == (network, precision):
                found += [(measure(Configuration.from_dict(c)), f"decisions {o}") for o, c in row["configs"].items()]
    ref = load_reference(network, precision, platform, overrides=overrides, verbose=False)
    if ref is not None:
        found.append((measure(Configuration.from_dict(ref["reference"]["config"])), "exhaustive reference"))
    return max(found, default=(0.0, ""))


def one(network: str, precision: str, *, platform: str = PLATFORM, overrides: tuple = (),
        noise_seed: int | None = None, levels: tuple[str, ...] = LEVELS) -> dict:
    from bench.guided_quality import search_costs
    from dse.calibration.truth import board_overrides, noise_free
    from dse.calibration.decisions import polish
    from dse.evaluate import Evaluator
    from dse.search import run_search
    from dse.search.finetune import parameter_caps
    from dse.search.study import Study

    with tempfile.TemporaryDirectory(prefix="bench-gap-") as tmp:
        cfg, _, backend, space, settings, base = search_setup(network, precision, Path(tmp), platform, overrides)
        if noise_seed is not None:
            backend.settings = dataclasses.replace(backend.settings, seed=noise_seed)
        board = board_overrides(overrides)
        true_fps = noise_free(network, precision, Path(tmp), platform, overrides)

        study = Study(Evaluator(backend, seed=int(cfg.seed)), strategy="guided")
        r = run_search(space, study, base, settings.with_(strategy="guided"))
        costs = search_costs([m for _, m in study.asked], backend, backend.settings, study.reruns)
        answer = r.config
        caps = parameter_caps(space, answer.option, settings)
        configs = {"answer": answer}
        one_draw = functools.partial(true_fps, draws=1)     # the polish's climb; its result valued on every draw
        if "parameters" in levels:
            configs["parameters"] = polish(one_draw, answer, caps)
        if "cuts" in levels:
            configs["cuts"] = polish(one_draw, answer, caps, space)
        fps = {k: true_fps(c) for k, c in configs.items()}
        best, source = known_best(network, precision, platform, board, true_fps)
        top = max(fps, key=fps.get)        # the first level that reaches the highest FPS (the levels only rise)
        if fps[top] > best:
            best, source = fps[top], "this answer" if top == "answer" else f"this answer, {top} polished"
    return {"network": network, "precision": precision, "platform": platform, "overrides": list(overrides),
            "noise_seed": noise_seed, "tuples": r.extra["unique_tuples"], "noise": round(r.extra["guided"].extra["noise"], 4),
            "measured": costs["measured"], "board_hours": costs["board_hours"],
            "best_known": round(best, 2), "best_source": source,
            "levels": {k: {"config": describe(c), "streams": list(c.streams), "buffers": c.buffers,
                           "pre": c.pre_threads, "post": c.post_threads, "fps": round(fps[k], 2),
                           "quality": round(fps[k] / best, 4)} for k, c in configs.items()}}


def summary(rows: list[dict]) -> str:
    lines = ["| level | quality >= 0.99 | >= 0.98 | median | worst |", "|---|---|---|---|---|"]
    for level in (k for k in LEVELS if all(k in r["levels"] for r in rows)):
        q = [r["levels"][level]["quality"] for r in rows]
        lines.append(f"| {level} | {sum(x >= 0.99 for x in q)} / {len(q)} | {sum(x >= 0.98 for x in q)} / {len(q)} "
                     f"| {statistics.median(q):.3f} | {min(q):.3f} |")
    hours = [r["board_hours"] for r in rows]
    return "\n".join(lines) + (f"\nsearch: median {statistics.median(r['tuples'] for r in rows)} tuples, "
                               f"{statistics.median(hours):.2f} board hours (sum {sum(hours):.1f})")


def compare(before: dict, after: dict) -> str:
    """Two runs of the same rows and draws (e.g. a setting changed), paired: each answer's true FPS over the best
    known to either run, the mean paired difference with its standard error, and the board hours."""
    def key(r):
        return r["network"], r["precision"], r["noise_seed"]

    a, b = ({key(r): r for r in run["rows"]} for run in (before, after))
    keys = [k for k in a if k in b]
    if len(keys) < 2:
        raise SystemExit(f"--compare: the two runs share {len(keys)} rows (network, precision, noise seed); need 2+")
    best = {k: max(a[k]["best_known"], b[k]["best_known"]) for k in keys}
    qa, qb = ([r[k]["levels"]["answer"]["fps"] / best[k] for k in keys] for r in (a, b))
    diff = [y - x for x, y in zip(qa, qb)]
    se = statistics.stdev(diff) / len(diff) ** 0.5
    lines = ["| run | rows | quality >= 0.99 | mean quality | median tuples | board hours (sum) |",
             "|---|---|---|---|---|---|"]
    for name, q, rows in (("before", qa, a), ("after", qb, b)):
        lines.append(f"| {name} | {len(q)} | {sum(x >= 0.99 for x in q)} | {statistics.mean(q):.4f} | "
                     f"{statistics.median(rows[k]['tuples'] for k in keys)} | "
                     f"{sum(rows[k]['board_hours'] for k in keys):.1f} |")
    lines.append(f"paired quality difference (after - before): {statistics.mean(diff):+.4f} +- {se:.4f} (standard "
                 f"error); after higher in {sum(d > 0.001 for d in diff)}, lower in {sum(d < -0.001 for d in diff)} "
                 f"of {len(diff)}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"), default=None,
                    help="print the paired comparison of two result files of this bench and exit")
    ap.add_argument("--networks", nargs="+", default=list(NETWORKS))
    ap.add_argument("--precisions", nargs="+", default=["fp16", "int8"])
    ap.add_argument("--platform", default=PLATFORM)
    ap.add_argument("--noise-seeds", nargs="+", type=int, default=None, help="one search per noise realization")
    ap.add_argument("--answer-only", action="store_true",
                    help="the answer's quality only: no polish, so the best known is the decisions bench's and the "
                         "exhaustive reference's (or the answer itself where it runs faster)")
    ap.add_argument("--tag", default="", help="suffix of the result file")
    ap.add_argument("--output", type=Path, default=None)
    ap.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. platform.noise.sigma=0.03")
    args = ap.parse_args(argv)
    if args.compare:
        print(compare(*(json.loads(p.read_text()) for p in args.compare)))
        return 0
    out = args.output or RESULTS / f"guided_gap{'-' + args.tag if args.tag else ''}.json"
    rows = []
    for network, precision, seed in itertools.product(args.networks, args.precisions, args.noise_seeds or [None]):
        row = one(network, precision, platform=args.platform, overrides=tuple(args.overrides), noise_seed=seed,
                  levels=LEVELS[:1] if args.answer_only else LEVELS)
        rows.append(row)
        lv = row["levels"]
        print(f"{network:14s} {precision} seed {seed}: answer {lv['answer']['config']} "
              + ", ".join(f"{k} {lv[k]['quality']:.3f}" for k in lv)
              + f" of {row['best_known']} ({row['best_source']})", flush=True)
        write_result(out, {"benchmark": "guided_gap", "params": {"platform": args.platform,
                           "overrides": args.overrides, "noise_seeds": args.noise_seeds,
                           "answer_only": args.answer_only}, "rows": rows})
    print(summary(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
