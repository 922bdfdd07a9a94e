"""Guided exploration against the thesis' search, plain Optuna TPE and random search.

For every network x precision on a virtual board: the guided search (``search.strategy=guided``) and the
default search, each end to end (maximizer, exploration, fine-tuner) with its own evaluator; then random
search and Optuna TPE with the guided search's budget (distinct configurations). Every answer is re-measured
``--repeats`` times with fresh noise; quality = its re-measured mean / the reference's re-measured mean. The
reference is the exhaustive one of ``bench.reference`` where it was computed (every feasible tuple of every
1- and 2-cut option, best fine-tuned, re-measured), else the answer of the four methods with the highest true FPS
(the row says which; the highest re-measured mean of four would be high by luck). True FPS: the same virtual board
with the measurement noise off, averaged over eight draws of the per-task jitter
(``dse.calibration.truth.noise_free``: what infinitely many re-runs would average to); each answer's is recorded,
and ``true_quality`` = true FPS / the reference's, which no re-measurement noise moves. A real backend has no true
FPS (null): there the reference is the highest re-measured mean. Counted per method: unique cut tuples (Table
3.4), distinct engines per PE type and the board hours a real board would spend (the report's model). Anytime
curves: the re-measured FPS of each method's best-so-far configuration against the measurements spent, one plot per
network.

Run: ``python -m bench.guided_quality [--networks yolov4 ...] [--precisions int8 fp16] [--platform ...]
[OVERRIDES...]`` (e.g. ``platform.noise.sigma=0.03``); writes bench/results/guided_quality[-<tag>].json after
every run (the tag defaults to noise-seeds with ``--noise-seeds``) and the plots under
bench/results/guided_anytime[-<tag>]/; ``--markdown`` prints the table.

One run's answer is one draw of the board's noise. ``--noise-seeds S ...`` repeats every run under other noise
realizations (the sim's measurement-noise seed; the network and its weights stay the same, so the reference
holds) and prints each method's spread instead of one draw: what a user can expect, not the luck of seed 0.
"""
from __future__ import annotations

import argparse
import collections
import dataclasses
import itertools
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Sequence

from bench.machine import load_average, write_result
from bench.reference import mean_std, remeasure, remeasure_together
from bench.search_quality import NETWORKS, PLATFORM, THESIS_TUPLES, describe
from dse.calibration.truth import board_overrides, noise_free
from dse.workflow.phases import search_setup

RESULTS = Path(__file__).resolve().parent / "results"
METHODS = ("guided", "default", "random", "optuna-tpe")
TARGET_QUALITY = 0.99
# Table 3.4 (thesis): Yolov4 INT8 took 344 tuples, 61 GPU + 276 DLA engines and 10.1 board hours
TABLE_3_4_YOLOV4_INT8_HOURS = 10.1
REPEAT_ANSWER = 1000     # repeat indices of the answers' re-measurements (fresh noise, never a search's own)
REPEAT_CURVE = 2000


def search_costs(asked, backend, settings, reruns=()) -> dict:
    """Unique tuples, distinct engines per PE type and estimated board hours of what a method asked for
    (``reruns``: its fresh re-runs of configurations it had measured, a board run each and no build)."""
    from dse.report.compare import method_cost

    platform = backend.platform
    frames = settings.sample_size + (settings.warmup or 0)
    cost = method_cost([(None, m) for m in asked], platform, frames, platform.board_costs, reruns)
    tuples = {(m.config.option, m.config.cuts) for m in asked}
    return {"measured": len(asked), "reruns": len(reruns), "unique_tuples": len(tuples), "engines": cost["engines"],
            "board_hours": round(cost["board_hours"], 3)}


def _curve(ev, asked, repeats: int) -> list[list[float]]:
    """[measurements spent, re-measured mean FPS of the best-so-far configuration] at each change of it."""
    out, best, cache = [], None, {}
    for i, m in enumerate(asked, 1):
        if m.ok and (best is None or m.fps > best.fps):
            best = m
            if best.config.hash not in cache:
                fps = remeasure(ev, best.config, repeats, REPEAT_CURVE, strategy="bench")
                cache[best.config.hash] = statistics.mean(fps)
            out.append([i, round(cache[best.config.hash], 2)])
    if asked and out:
        out.append([len(asked), out[-1][1]])
    return out


def _progress(network: str, precision: str, method: str, run, seconds: float) -> None:
    """One line per finished search (stderr): a real board's row takes many minutes, and a run cut short by its
    time limit still shows what each search answered and spent."""
    study, answer, extra = run
    print(f"  {network} {precision} {method}: {extra['selected']} at {answer.fps:.1f} FPS after "
          f"{len(study.asked)} measurements, {seconds:.0f} s", file=sys.stderr, flush=True)


def _round(x: float | None, digits: int = 3) -> float | None:
    return None if x is None else round(x, digits)


def board_setup(network: str, precision: str, workdir: Path, platform: str, overrides: tuple,
                noise_seed: int | None = None) -> tuple:
    """``search_setup`` (config, backend, space, settings, base) under another draw of the board's noise where
    ``noise_seed`` is given; the seed of weights and searches stays."""
    cfg, _, backend, space, settings, base = search_setup(network, precision, workdir, platform, overrides)
    if noise_seed is not None:
        backend.settings = dataclasses.replace(backend.settings, seed=noise_seed)
    return cfg, backend, space, settings, base


def end_to_end(method: str, space, backend, base, settings, seed: int) -> tuple:
    """(study, ``run_search`` result, row fields) of the guided or the thesis' ("default") search end to end."""
    from dse.evaluate import Evaluator
    from dse.search import run_search
    from dse.search.study import Study

    study = Study(Evaluator(backend, seed=seed), strategy=method)
    r = run_search(space, study, base, settings.with_(strategy="guided" if method == "guided" else "proposed"))
    extra = {"selected": describe(r.config), "search_tuples": r.extra["unique_tuples"]}
    if method == "guided":      # what its races assumed (their re-runs follow from it) and the batches the re-run
        extra["noise"] = round(r.extra["guided"].extra["noise"], 4)       # budget refused them
        extra["batches_refused"] = r.extra["guided"].extra["batches_refused"] + r.extra["finetune"].extra["batches_refused"]
    return study, r, extra


def one(network: str, precision: str, *, platform: str = PLATFORM, overrides: tuple = (), repeats: int = 5,
        noise_seed: int | None = None, methods: Sequence[str] = METHODS, curve_repeats: int | None = None) -> dict:
    from bench.reference import load_reference
    from dse.core.configuration import Configuration
    from dse.evaluate import Evaluator
    from dse.search.optuna_search import optuna_search
    from dse.search.random_search import random_search
    from dse.search.study import Study

    load = load_average()
    with tempfile.TemporaryDirectory(prefix="bench-engines-") as tmp:
        cfg, backend, space, settings, base = board_setup(network, precision, Path(tmp), platform, overrides,
                                                          noise_seed)
        seed = int(cfg.seed)
        runs, seconds, bounds = {}, {}, None
        t = time.perf_counter()
        for method in [m for m in ("guided", "default") if m in methods]:
            study, r, extra = end_to_end(method, space, backend, base, settings, seed)
            runs[method] = (study, r.measurement, extra)
            bounds = r.extra["maximize"].extra["bounds"]
            seconds[method] = round(time.perf_counter() - t, 2)
            t = time.perf_counter()
            _progress(network, precision, method, runs[method], seconds[method])
        budget = len(runs["guided"][0].asked) if "guided" in runs else None
        options = list(settings.options or space.options)
        for method in [m for m in ("random", "optuna-tpe") if m in methods]:
            study = Study(Evaluator(backend, seed=seed), strategy=method)
            if method == "random":
                r2 = random_search(space, study, base, options, bounds, settings, budget, seed=seed)
            else:
                r2 = optuna_search(space, study, base, options, bounds, settings, budget, sampler="tpe", seed=seed)
            runs[method] = (study, r2.measurement, {"selected": describe(r2.config)})
            seconds[method] = round(time.perf_counter() - t, 2)
            t = time.perf_counter()
            _progress(network, precision, method, runs[method], seconds[method])
        ev = Evaluator(backend, seed=seed)        # re-measurements: fresh repeats of every answer
        sim = backend.name == "sim"       # a real backend has no truth to ask but its own noisy runs
        true_fps = noise_free(network, precision, Path(tmp), platform, overrides) if sim else lambda config: None
        # noise changes no configuration's true FPS, so a reference computed at another noise level still holds;
        # its configuration is re-measured here with the answers (same repeats, the run's own noise)
        ref = load_reference(network, precision, platform, overrides=board_overrides(overrides))
        ref_config = Configuration.from_dict(ref["reference"]["config"]) if ref is not None else None
        configs = [answer.config for _, answer, _ in runs.values()] + ([ref_config] if ref_config else [])
        remeasured = remeasure_together(ev, configs, repeats, REPEAT_ANSWER, strategy="bench")  # answers, reference
        rows = {}
        for (method, (study, answer, extra)), fps in zip(runs.items(), remeasured):
            asked = [m for _, m in study.asked]
            rows[method] = {**search_costs(asked, backend, backend.settings, study.reruns), **extra,
                            "by_phase": dict(collections.Counter(phase for phase, _ in study.asked)),
                            "answer_fps": answer.fps, "remeasured": fps, "mean": round(statistics.mean(fps), 3),
                            "true_fps": _round(true_fps(answer.config)),
                            "config": answer.config.to_dict(),
                            "curve": _curve(ev, asked, curve_repeats or max(2, repeats // 2))}
        if ref is not None:
            fps = ref_runs = remeasured[-1]
            reference = {"source": "exhaustive (bench.reference): " + ref["coverage"],
                         "mean": round(statistics.mean(fps), 3), "stored_mean": ref["reference"]["mean"],
                         "true_fps": _round(true_fps(ref_config)),
                         "config": describe_dict(ref["reference"]["config"])}
        else:
            top = max(rows, key=lambda k: (rows[k]["true_fps"], rows[k]["mean"]) if sim else rows[k]["mean"])
            by = "true FPS" if sim else "re-measured mean"
            reference = {"source": f"best answer of the compared methods by {by} ({top})",
                         "mean": rows[top]["mean"], "true_fps": rows[top]["true_fps"], "config": rows[top]["selected"]}
            ref_runs = rows[top]["remeasured"]
        for row in rows.values():
            row["quality"] = round(row["mean"] / reference["mean"], 4) if reference["mean"] else None
            row["paired"] = paired_quality(row["remeasured"], ref_runs)
            row["true_quality"] = (round(row["true_fps"] / reference["true_fps"], 4)
                                   if sim and reference["true_fps"] else None)
    return {"network": network, "precision": precision, "platform": platform, "overrides": list(overrides),
            "noise_seed": noise_seed, "thesis_tuples": THESIS_TUPLES.get(network, {}).get(precision), "budget": budget,
            "reference": reference, "methods": rows, "seconds": seconds, "load_avg_start": load,
            "load_avg_end": load_average()}


def paired_quality(runs: Sequence[float], reference: Sequence[float]) -> list[float] | None:
    """[mean, standard error] of run-by-run ratios to the reference's runs of the same round (``remeasure_together``
    runs repeat r of every answer before repeat r + 1): on a host whose speed drifts, a slow round slows both sides of
    its ratio, so this tells a real gap from drift with fewer runs than the two means do."""
    ratios = [a / b for a, b in zip(runs, reference) if b]
    if len(ratios) < 2:
        return None
    mean, std = mean_std(ratios)
    return [round(mean, 4), round(std / len(ratios) ** 0.5, 4)]


def describe_dict(config: dict) -> str:
    from dse.core.configuration import Configuration

    return describe(Configuration.from_dict(config))


def plot(rows: list[dict], out_dir: Path) -> list[Path]:
    """One anytime plot per network: re-measured FPS of the best-so-far configuration vs measurements."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for network in dict.fromkeys(r["network"] for r in rows):
        mine = [r for r in rows if r["network"] == network]
        fig, axes = plt.subplots(1, len(mine), figsize=(5.5 * len(mine), 3.6), squeeze=False)
        for ax, r in zip(axes[0], mine):
            for method, row in r["methods"].items():
                xs, ys = zip(*row["curve"]) if row["curve"] else ((), ())
                ax.step(xs, ys, where="post", label=f"{method} ({row['unique_tuples']} tuples)")
            ax.axhline(r["reference"]["mean"], color="grey", ls=":", label="reference")
            ax.set(title=f"{network} {r['precision'].upper()}", xlabel="measurements", ylabel="re-measured FPS")
            ax.legend(fontsize=7)
        fig.tight_layout()
        path = out_dir / f"{network}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths


def markdown(rows: list[dict]) -> str:
    head = ("| network | prec | reference (FPS) | guided: quality, tuples, GPU/DLA engines, board h | default | "
            "random | Optuna TPE | guided tuples <= 1/4 Table 3.4 | quality >= 0.99 |")
    lines = [head, "|" + "---|" * head.count(" | ") + "---|"]
    for r in rows:
        cells = []
        for m in METHODS:
            x = r["methods"].get(m)
            if x is None:
                cells.append("-")
                continue
            e = x["engines"]
            cells.append(f"{x['quality']:.3f}, {x['unique_tuples']}, {e.get('GPU', 0)}/{e.get('DLA', 0)}, "
                         f"{x['board_hours']:.2f}")
        g = r["methods"].get("guided")
        quarter = (r["thesis_tuples"] or 0) / 4
        targets = (["met" if g["unique_tuples"] <= quarter else "missed",
                    "met" if g["quality"] >= TARGET_QUALITY else "missed"] if g else ["-", "-"])
        lines.append(" | ".join([f"| {r['network']}", r["precision"].upper(),
                                 f"{r['reference']['mean']:.1f} ({'exhaustive' if r['reference']['source'].startswith('exh') else 'best compared'})",
                                 *cells, *targets]) + " |")
    pairs = [(r, r["methods"]["guided"]) for r in rows if "guided" in r["methods"]]
    guided = [g for _, g in pairs]
    met_q = sum(g["quality"] >= TARGET_QUALITY for g in guided)
    met_t = sum(g["unique_tuples"] <= (r["thesis_tuples"] or 0) / 4 for r, g in pairs)
    met_true = sum((g.get("true_quality") or 0) >= TARGET_QUALITY for g in guided)
    lines.append("")
    lines.append(f"Guided: quality >= {TARGET_QUALITY} in {met_q}/{len(guided)} runs (true, noise-free FPS: "
                 f"{met_true}/{len(guided)}); tuples <= 1/4 of Table 3.4 in {met_t}/{len(guided)}. Each cell: quality "
                 "(re-measured mean / reference), unique tuples, engines built GPU/DLA, estimated board hours.")
    return "\n".join(lines)


def summary(results: dict[str, dict]) -> str:
    """One line per stored bench (tag) and method: runs at quality >= 0.99 (re-measured and true, noise-free FPS),
    median and least quality, median tuples, measurements and board hours, over its network x precision rows."""
    lines = ["| bench | method | quality >= 0.99 (true FPS) | median / least quality | median tuples | "
             "median measured | median board h |", "|---|---|---|---|---|---|---|"]
    for tag, result in results.items():
        rows = result["rows"]
        for m in [m for m in METHODS if all(m in r["methods"] for r in rows)]:
            x = [r["methods"][m] for r in rows]
            q = [v["quality"] for v in x]
            true = sum((v.get("true_quality") or 0) >= TARGET_QUALITY for v in x)
            lines.append(f"| {tag} | {m} | {sum(v >= TARGET_QUALITY for v in q)}/{len(q)} ({true}/{len(q)}) | "
                         f"{statistics.median(q):.3f} / {min(q):.3f} | "
                         f"{statistics.median(v['unique_tuples'] for v in x):g} | "
                         f"{statistics.median(v['measured'] for v in x):g} | "
                         f"{statistics.median(v['board_hours'] for v in x):.2f} |")
    return "\n".join(lines)


def spread(rows: list[dict]) -> str:
    """Per network x precision and method, over the noise realizations: quality (min / median / max and how
    many reach the target), unique tuples and board hours (median and max)."""
    lines = ["| network | prec | method | realizations | quality min / median / max | quality >= 0.99 | "
             "tuples median / max | board h median / max |", "|---|---|---|---|---|---|---|---|"]
    for key in dict.fromkeys((r["network"], r["precision"]) for r in rows):
        mine = [r for r in rows if (r["network"], r["precision"]) == key]
        for m in [m for m in METHODS if all(m in r["methods"] for r in mine)]:
            q = [r["methods"][m]["quality"] for r in mine]
            t = [r["methods"][m]["unique_tuples"] for r in mine]
            h = [r["methods"][m]["board_hours"] for r in mine]
            met = sum(x >= TARGET_QUALITY for x in q)
            lines.append(f"| {key[0]} | {key[1].upper()} | {m} | {len(mine)} | {min(q):.3f} / "
                         f"{statistics.median(q):.3f} / {max(q):.3f} | {met}/{len(q)} | "
                         f"{statistics.median(t):g} / {max(t)} | {statistics.median(h):.2f} / {max(h):.2f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--networks", nargs="+", default=list(NETWORKS))
    ap.add_argument("--precisions", nargs="+", default=["fp16", "int8"])
    ap.add_argument("--platform", default=PLATFORM)
    ap.add_argument("--repeats", type=int, default=5, help="fresh-noise re-measurements of every answer")
    ap.add_argument("--curve-repeats", type=int, default=None,
                    help="re-measurements of each best-so-far configuration of the anytime curves (default: half of "
                         "--repeats, at least 2); fewer where many answer repeats judge a noisy host")
    ap.add_argument("--tag", default="", help="suffix of the result file and plot folder (e.g. noise3)")
    ap.add_argument("--noise-seeds", nargs="+", type=int, default=None,
                    help="repeat every run under these noise realizations (the sim's noise seed) and print the spread")
    ap.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS),
                    help="a subset (e.g. guided default where a board's time is short; random and optuna-tpe need "
                         "guided)")
    ap.add_argument("--markdown", action="store_true", help="print the table from the result file, measure nothing")
    ap.add_argument("--summary", nargs="+", metavar="TAG",
                    help="print one summary table of the stored results of these tags, measure nothing")
    ap.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. platform.noise.sigma=0.03")
    args = ap.parse_args(argv)
    if {"random", "optuna-tpe"} & set(args.methods) and "guided" not in args.methods:
        ap.error(f"--methods {' '.join(args.methods)}: random and optuna-tpe spend the guided search's budget; "
                 "add guided")
    tag = args.tag or ("noise-seeds" if args.noise_seeds else "")   # never over the one-draw table
    suffix = f"-{tag}" if tag else ""
    out = RESULTS / f"guided_quality{suffix}.json"
    if args.summary:
        print(summary({t: json.loads((RESULTS / f"guided_quality-{t}.json").read_text()) for t in args.summary}))
        return 0
    if args.markdown:
        rows = json.loads(out.read_text())["rows"]
        print(spread(rows) if any(r.get("noise_seed") is not None for r in rows) else markdown(rows))
        return 0
    rows = []
    params = {"platform": args.platform, "overrides": args.overrides, "repeats": args.repeats,
              "curve_repeats": args.curve_repeats,
              "noise_seeds": args.noise_seeds, "methods": args.methods}
    for network, precision, noise_seed in itertools.product(args.networks, args.precisions,
                                                            args.noise_seeds or [None]):
        row = one(network, precision, platform=args.platform, overrides=tuple(args.overrides),
                  repeats=args.repeats, noise_seed=noise_seed, methods=args.methods, curve_repeats=args.curve_repeats)
        rows.append(row)
        g = row["methods"]
        draw = "" if noise_seed is None else f" (noise seed {noise_seed})"
        print(f"{network:14s} {precision}{draw}: " + "; ".join(
            f"{m} {g[m]['quality']:.3f} (paired {g[m]['paired']}, true {_round(g[m]['true_quality'], 3)}; "
            f"{g[m]['unique_tuples']} tuples, {g[m]['measured']} measured)"
            for m in g) + f"  [{row['reference']['source'][:20]}] {row['seconds']}", flush=True)
        write_result(out, {"benchmark": "guided_quality", "params": params, "rows": rows})
        if args.noise_seeds is None:
            plot(rows, RESULTS / f"guided_anytime{suffix}")
    if args.noise_seeds is not None:
        print(spread(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
