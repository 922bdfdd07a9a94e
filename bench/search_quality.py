"""Search quality on the virtual Xavier AGX: the proposed method's best FPS against the best known one.

For every network x precision: ``run_search`` (maximizer -> global search of every option -> full search
of the best option -> fine-tuning) and, through the same evaluator cache, an exhaustive sweep
(``dse.search.exhaustive``): every feasible cut tuple of every option with at most ``--max-cuts`` cuts
(while all tuples together stay under ``--cap``; otherwise only the 1-cut and single-stage options),
each at the maximizer's parameters and the option's stream tuple, the best of them fine-tuned like
the proposed method's answer. "Best known" = max(exhaustive, proposed) FPS; the quality ratio is
proposed / best known (and proposed / exhaustive is kept too: above 1 where the proposed method
found a 2-/3-cut configuration the restricted sweep could not see).

Next to it: measurements spent, unique cut tuples (Table 3.4's count), engines built (Table 3.7) and
the selected option against the thesis' Table 3.5.

Run: ``python -m bench.search_quality [--networks yolov4 ...] [--precisions int8 fp16] [OVERRIDES...]``
(e.g. ``search.refine_within=0 search.pipeline_buffers=false --output ...``: the thesis' own search);
writes bench/results/search_quality.json (rewritten after every network, so a cut-short run keeps
what it finished).
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path


from bench.machine import load_average, write_result
from dse.workflow.phases import search_setup

OUT = Path(__file__).resolve().parent / "results" / "search_quality.json"
NETWORKS = ("yolov2", "yolov2-tiny", "yolov3", "yolov3-tiny", "yolov4", "yolov4-tiny", "yolov4-csp", "cspnet",
            "densenet-yolo")
PLATFORM = "xavier-agx-sim"

# Thesis Table 3.4 (tuples measured on the board) and Table 3.5 (selected option, cuts), per precision.
THESIS_TUPLES = {
    "yolov2": {"fp16": 249, "int8": 243}, "yolov2-tiny": {"fp16": 178, "int8": 172},
    "yolov3": {"fp16": 223, "int8": 260}, "yolov3-tiny": {"fp16": 183, "int8": 174},
    "yolov4": {"fp16": 283, "int8": 344}, "yolov4-tiny": {"fp16": 294, "int8": 214},
    "yolov4-csp": {"fp16": 319, "int8": 320}, "cspnet": {"fp16": 308, "int8": 424},
    "densenet-yolo": {"fp16": 386, "int8": 325},
}
THESIS_OPTION = {
    "yolov2": {"fp16": "PND-A (23)", "int8": "PND-A (16)"},
    "yolov2-tiny": {"fp16": "PND-A (11)", "int8": "E"},
    "yolov3": {"fp16": "PND-A (57)", "int8": "PND-A (59)"},
    "yolov3-tiny": {"fp16": "PND-A (5)", "int8": "E"},
    "yolov4": {"fp16": "PND-A (82)", "int8": "PND-A (87)"},
    "yolov4-tiny": {"fp16": "PND-B (30,45)", "int8": "E"},
    "yolov4-csp": {"fp16": "PND-A (80)", "int8": "PND-A (88)"},
    "cspnet": {"fp16": "C (30,35)", "int8": "PND-B (34,106)"},
    "densenet-yolo": {"fp16": "PND-A (95)", "int8": "PND-A (98)"},
}


def describe(config) -> str:
    cuts = ",".join(str(c) for c in config.cuts)
    return f"{config.option}" + (f" ({cuts})" if cuts else "")


def one(network: str, precision: str, *, max_cuts: int = 2, cap: int = 3000, platform: str = PLATFORM,
        overrides: tuple = ()) -> dict:
    """Proposed vs exhaustive for one network and precision."""
    from dse.evaluate import Evaluator
    from dse.search import Study, run_search
    from dse.search.exhaustive import exhaustive_search

    load = load_average()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-engines-") as tmp:
        cfg, analysis, backend, space, settings, base = search_setup(network, precision, Path(tmp), platform,
                                                                     ("search.strategy=proposed", *overrides))
        t_analysis = time.perf_counter() - t0
        ev = Evaluator(backend, seed=int(cfg.seed))
        t1 = time.perf_counter()
        proposed = run_search(space, Study(ev), base, settings)
        t_proposed = time.perf_counter() - t1
        engines = ev.engines_built()
        t2 = time.perf_counter()
        ex_study = Study(ev, "exhaustive")
        ex = exhaustive_search(space, ex_study, base, space.options, proposed.extra["maximize"].extra["bounds"], settings,
                               max_cuts=max_cuts, cap=cap)
        t_ex = time.perf_counter() - t2
    best = proposed.config
    best_known = max(ex.fps, proposed.fps)
    return {
        "network": network, "precision": precision, "platform": platform, "layers": len(analysis.layers),
        "feasible_cuts": len(analysis.feasible_cuts),
        "proposed_fps": proposed.fps, "exhaustive_fps": ex.fps, "best_known_fps": best_known,
        "quality": proposed.fps / best_known if best_known > 0 else None,
        "proposed_over_exhaustive": proposed.fps / ex.fps if ex.fps > 0 else None,
        "measured": proposed.extra["measured"], "unique_tuples": proposed.extra["unique_tuples"],
        "param_points": proposed.extra["param_points"], "engines_built": engines,
        "engines_built_total": sum(engines.values()),
        "thesis_tuples": THESIS_TUPLES.get(network, {}).get(precision),
        "selected": proposed.extra["selected"], "selected_config": describe(best),
        "best_config": best.to_dict(), "thesis_option": THESIS_OPTION.get(network, {}).get(precision),
        "option_fps": {o: r.fps for o, r in proposed.extra["options"].items()},
        "exhaustive_tuples": ex.extra["tuples"], "exhaustive_coverage": ex.extra["coverage"],
        "exhaustive_measured": ex_study.measured, "exhaustive_best": describe(ex.config),
        "seconds": {"analysis": round(t_analysis, 2), "proposed": round(t_proposed, 2),
                    "exhaustive": round(t_ex, 2)},
        "load_avg_start": load, "load_avg_end": load_average(),
    }


def coverage_label(row: dict) -> str:
    """What the sweep a row's reference came from covered, in a table cell: its tuple count and the shorter of the
    swept and the left-out option lists."""
    text = row["exhaustive_coverage"].replace("every feasible cut tuple of ", "")
    swept, _, rest = text.partition(" (")
    tuples, _, left = rest.partition(" tuples)")
    left = left.replace("; not swept: ", "")
    if not left:
        return f"{tuples}: all"
    if len(left.split(", ")) < len(swept.split(", ")):
        return f"{tuples}: all but {left}"
    return f"{tuples}: {swept}"


def markdown(rows: list[dict], thesis_rows: list[dict] | None = None) -> str:
    """Table 1 of BENCHMARKS.md from the result files (``--markdown``)."""
    thesis = {(r["network"], r["precision"]): r for r in thesis_rows or []}
    head = ("| network | prec | proposed FPS | best known FPS | reference sweeps | quality (>= 0.99) | measured "
            "| unique tuples (Table 3.4) | engines GPU/DLA | selected (cuts) | Table 3.5 | reference best "
            "| thesis mode: FPS, quality, tuples, selected |")
    lines = [head, "|" + "---|" * head.count(" | ") + "---|"]
    for r in rows:
        t = thesis.get((r["network"], r["precision"]))
        eng = r["engines_built"]
        mode = (f"{t['proposed_fps']:.1f}, {t['quality']:.3f}, {t['unique_tuples']}, {t['selected_config']}"
                if t else "")
        lines.append(" | ".join([
            f"| {r['network']}", r["precision"].upper(), f"{r['proposed_fps']:.1f}", f"{r['best_known_fps']:.1f}",
            coverage_label(r), f"{r['quality']:.3f} {verdict(targets(r)[0])}",
            str(r["measured"]), f"{r['unique_tuples']} ({r['thesis_tuples']}) {verdict(targets(r)[1])}",
            f"{eng.get('GPU', 0)}/{eng.get('DLA', 0)}", r["selected_config"], str(r["thesis_option"]),
            f"{r['exhaustive_best']} ({r['exhaustive_fps']:.1f})", mode + " |"]))
    q, tu, same = tally(rows)
    lines += ["", f"Quality >= 0.99 in {q}; unique tuples <= Table 3.4 in {tu}; the option of Table 3.5 selected in "
              f"{same}."]
    if thesis:
        lines[-1] += " Thesis mode: {}, {} and {}.".format(*tally(list(thesis.values())))
    return "\n".join(lines)


def targets(row: dict) -> tuple[bool, bool, bool]:
    """Quality >= 0.99, unique tuples <= Table 3.4, and Table 3.5's option selected."""
    return (row["quality"] >= 0.99, row["unique_tuples"] <= (row["thesis_tuples"] or 0),
            row["selected_config"].split(" ")[0] == str(row["thesis_option"]).split(" ")[0])


def tally(rows: list[dict]) -> list[str]:
    """How many rows meet each of ``targets``, as "k/n"."""
    return [f"{sum(met)}/{len(rows)}" for met in zip(*map(targets, rows))]


def verdict(met: bool) -> str:
    return "met" if met else "**missed**"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--networks", nargs="+", default=list(NETWORKS))
    ap.add_argument("--precisions", nargs="+", default=["fp16", "int8"])
    ap.add_argument("--platform", default=PLATFORM)
    ap.add_argument("--max-cuts", type=int, default=2, help="exhaustive: options with at most this many cuts")
    ap.add_argument("--cap", type=int, default=3000, help="exhaustive: most cut tuples over all options")
    ap.add_argument("--output", type=Path, default=OUT)
    ap.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. search.refine_within=0 "
                                                   "search.pipeline_buffers=false (the thesis' search)")
    ap.add_argument("--markdown", action="store_true",
                    help="print BENCHMARKS.md table 1 from --output and search_quality_thesis.json, measure nothing")
    args = ap.parse_args(argv)
    if args.markdown:
        thesis = OUT.with_name("search_quality_thesis.json")
        print(markdown(json.loads(args.output.read_text())["rows"],
                       json.loads(thesis.read_text())["rows"] if thesis.exists() else None))
        return 0

    rows = []
    params = {"max_cuts": args.max_cuts, "cap": args.cap, "platform": args.platform, "overrides": args.overrides}
    for network in args.networks:
        for precision in args.precisions:
            row = one(network, precision, max_cuts=args.max_cuts, cap=args.cap, platform=args.platform,
                      overrides=tuple(args.overrides))
            rows.append(row)
            print(f"{network:14s} {precision}: proposed {row['proposed_fps']:.1f} / best known "
                  f"{row['best_known_fps']:.1f} = {row['quality']:.3f}; {row['unique_tuples']} tuples "
                  f"(thesis {row['thesis_tuples']}), {row['measured']} measured, "
                  f"{row['engines_built_total']} engines; {row['selected_config']} (thesis "
                  f"{row['thesis_option']}); exhaustive {row['exhaustive_best']} {row['seconds']} "
                  f"load {row['load_avg_start']}", flush=True)
            write_result(args.output, {"benchmark": "search_quality", "params": params, "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
