"""The answers of a stored ``bench.guided_quality`` result, re-measured in more paired rounds: is a gap real.

On a noisy host (``host-cpu``: 5-15 % from run to run) the bench's own re-measurement of the answers cannot resolve
a 1 % gap; each row keeps its answers' configurations, so they can be judged again later on as many round-robin
rounds as it takes (repeat r of every answer before repeat r + 1 of any), with fresh repeats the bench never used.
Per row and method: the runs, their mean, quality = mean / the best mean, and the paired quality (run-by-run
ratios to the best answer's run of the same round, +- standard error), next to the stored ones.

Run: ``python -m bench.guided_rejudge bench/results/guided_quality-host-cpu-1.json [--rounds 40] [--tag T]``;
writes bench/results/guided_rejudge-<tag>.json (the tag defaults to the stored file's); ``--markdown --tag T``
prints a stored pooled judge's table, measuring nothing.

``--reference`` judges instead every answer of several stored files (one network, precision, platform and overrides,
e.g. many host-cpu draws) against the stored exhaustive reference (``bench.reference``): the distinct answers, the
reference's configuration and the reference's best of each mapping option are re-measured together, and each
answer's quality is its paired ratio to the reference's configuration. On a noisy host this tells whether the draws'
answers reach the best mapping, not only whether they beat the other method's answer of the same draw.
``python -m bench.guided_rejudge bench/results/guided_quality-host-cpu-?.json --reference --methods guided
--rounds 30 --tag host-cpu-pool``. ``--reference-root ROOT`` takes the reference stored under ROOT instead (one
computed with ``bench.reference --root ROOT``, e.g. with other ``--bounds``).
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from collections.abc import Sequence
from pathlib import Path

from bench.guided_quality import RESULTS, describe_dict, paired_quality
from bench.guided_replay import row_setup
from bench.machine import load_average, made_on, write_result
from bench.reference import remeasure_together

REPEAT_REJUDGE = 3000   # repeat indices: fresh noise, none of the bench's own (answers 1000, curves 2000)


def rejudge(row: dict, rounds: int) -> dict:
    """The row's answers (the methods that stored a configuration) re-measured together in ``rounds`` rounds."""
    from dse.core.configuration import Configuration
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


def judge_pool(rows: list[dict], files: list[str], methods: Sequence[str] | None, rounds: int, ref: dict) -> dict:
    """Every distinct answer of ``rows`` (of ``methods``; ``files`` names each row's source), the reference ``ref``'s
    configuration and its best of each other option, re-measured together in ``rounds`` rounds on the rows' board
    (one setup: the caller checks); quality = paired ratio to the reference configuration's runs."""
    from dse.core.configuration import Configuration
    from dse.evaluate import Evaluator

    row = rows[0]
    entries: dict[str, dict] = {}        # config hash -> what it is and who answered it

    def add(config: dict, who: str) -> None:
        c = Configuration.from_dict(config)
        entries.setdefault(c.hash, {"config": c, "label": describe_dict(config), "answered_by": []})
        entries[c.hash]["answered_by"].append(who)

    add(ref["reference"]["config"], "reference")
    by_option: dict[str, dict] = {}
    for cand in ref["top"] + ref["finetuned"]:
        option = cand["config"]["option"]
        if option != ref["reference"]["config"]["option"] and \
                cand["final_mean"] > by_option.get(option, {}).get("final_mean", -1):
            by_option[option] = cand
    for option, cand in by_option.items():
        add(cand["config"], f"reference's best {option}")
    for file, r in zip(files, rows):
        for m, v in r["methods"].items():
            if "config" in v and (not methods or m in methods):
                add(v["config"], f"{file} {m}")
    configs = [e["config"] for e in entries.values()]
    with tempfile.TemporaryDirectory(prefix="bench-engines-") as tmp:
        cfg, backend, *_ = row_setup(row, Path(tmp))
        load = load_average()
        runs = remeasure_together(Evaluator(backend, seed=int(cfg.seed)), configs, rounds, REPEAT_REJUDGE,
                                  strategy="bench", progress=lambda msg: print(msg, flush=True))
    ref_runs = runs[0]
    ref_mean = statistics.fmean(ref_runs)
    answers = [{"label": e["label"], "answered_by": e["answered_by"], "config": e["config"].to_dict(), "runs": r,
                "mean": round(statistics.fmean(r), 3), "quality": round(statistics.fmean(r) / ref_mean, 4),
                "paired": paired_quality(r, ref_runs)} for e, r in zip(entries.values(), runs)]
    return {"network": row["network"], "precision": row["precision"], "platform": row["platform"],
            "overrides": row["overrides"], "rounds": rounds, "stored": files,
            "reference_coverage": ref["coverage"], "reference_stored_mean": ref["reference"]["mean"],
            "load_avg_start": load, "load_avg_end": load_average(), "answers": answers}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("stored", type=Path, nargs="*",
                    help="bench/results/guided_quality*.json whose rows keep their answers (one without --reference)")
    ap.add_argument("--rounds", type=int, default=40, help="round-robin rounds (one run of every answer each)")
    ap.add_argument("--tag", default="", help="suffix of the result file (default: the stored file's)")
    ap.add_argument("--reference", action="store_true",
                    help="judge every answer of the stored files against the stored exhaustive reference")
    ap.add_argument("--methods", nargs="+", default=None, help="with --reference: only these methods' answers")
    ap.add_argument("--reference-root", type=Path, default=None, metavar="ROOT",
                    help="with --reference: the reference stored under ROOT (bench.reference --root) instead of "
                         "bench/results/reference")
    ap.add_argument("--markdown", action="store_true",
                    help="print the table of the stored pooled judge bench/results/guided_rejudge-<tag>.json")
    args = ap.parse_args(argv)
    if args.markdown:
        print(markdown(json.loads((RESULTS / f"guided_rejudge-{args.tag or 'pool'}.json").read_text())))
        return 0
    if not args.stored:
        ap.error("name the stored bench/results/guided_quality*.json to judge")
    if args.reference_root is not None and not args.reference:
        ap.error("--reference-root names the reference of --reference; give both")
    if args.rounds < 2:
        ap.error(f"--rounds {args.rounds}: a paired standard error needs at least 2")
    if args.reference:
        return _main_pool(ap, args)
    if len(args.stored) > 1:
        ap.error(f"{len(args.stored)} stored files: re-judging row by row takes one (pool several with --reference)")
    (path,) = args.stored
    stored = json.loads(path.read_text())["rows"]
    rows = [r for r in stored if sum("config" in v for v in r["methods"].values()) >= 2]
    if not rows:
        ap.error(f"{path}: no row keeps two answers' configurations (a row without them cannot be re-judged)")
    tag = args.tag or path.stem.removeprefix("guided_quality").lstrip("-") or "default"
    out = RESULTS / f"guided_rejudge-{tag}.json"
    results = []
    for row in rows:
        results.append(rejudge(row, args.rounds))
        print(f"{row['network']:14s} {row['precision']}: " + "; ".join(
            f"{m} {v['quality']:.4f} paired {v['paired']} (stored {v['stored_quality']}, {v['stored_paired']})"
            for m, v in results[-1]["methods"].items()), flush=True)
        write_result(out, {"benchmark": "guided_rejudge", "stored": str(path), "rows": results})
    return 0


def markdown(result: dict) -> str:
    """A pooled judge's answers, best first: configuration, mean FPS, paired quality to the reference."""
    lines = ["| answered by | configuration (streams, buffers, pre/post) | mean FPS | paired quality +- s.e. |",
             "|---|---|---:|---:|"]
    for a in sorted(result["answers"], key=lambda a: -a["paired"][0]):
        c = a["config"]
        cuts = f" ({','.join(map(str, c['cuts']))})" if c["cuts"] else ""
        label = ", ".join(a["answered_by"])
        lines.append(f"| {'**' + label + '**' if 'reference' in a['answered_by'] else label} | {c['option']}{cuts} "
                     f"s{c['streams']} b{c['buffers']} {c['pre_threads']}/{c['post_threads']} | {a['mean']:.1f} | "
                     f"{a['paired'][0]:.3f} +- {a['paired'][1]:.3f} |")
    lines += ["", f"{result['network']} {result['precision'].upper()} on {result['platform']} "
              f"({' '.join(result['overrides'])}), {result['rounds']} round-robin rounds; {made_on(result['machine'])} "
              f"(load {result['load_avg_start'][0]} -> {result['load_avg_end'][0]})."]
    return "\n".join(lines)


def _main_pool(ap: argparse.ArgumentParser, args) -> int:
    from bench.reference import ROOT, load_reference

    rows, files = [], []
    for path in args.stored:
        for r in json.loads(path.read_text())["rows"]:
            if any("config" in v and (not args.methods or m in args.methods) for m, v in r["methods"].items()):
                rows.append(r)
                files.append(path.stem.removeprefix("guided_quality").lstrip("-") or path.stem)
    if not rows:
        ap.error("no stored row keeps an answer's configuration" + (f" of {args.methods}" if args.methods else ""))
    setups = {(r["network"], r["precision"], r["platform"], tuple(r["overrides"]), r.get("noise_seed")) for r in rows}
    if len(setups) != 1:
        ap.error(f"--reference pools the answers of one board setup; the rows hold {len(setups)}: "
                 + "; ".join(f"{n} {p} on {pl} {list(o)} noise seed {s}" for n, p, pl, o, s in sorted(setups)))
    row = rows[0]
    root = args.reference_root or ROOT
    ref = load_reference(row["network"], row["precision"], row["platform"], overrides=row["overrides"], root=root)
    if ref is None:
        ap.error(f"no fresh reference for {row['network']} {row['precision']} on {row['platform']} "
                 f"{row['overrides']} under {root}: run python -m bench.reference first")
    result = judge_pool(rows, files, args.methods, args.rounds, ref)
    out = RESULTS / f"guided_rejudge-{args.tag or 'pool'}.json"
    write_result(out, {"benchmark": "guided_rejudge_pool", **result})
    for a in sorted(result["answers"], key=lambda a: -a["quality"]):
        print(f"paired {a['paired']}, quality {a['quality']:.4f}, mean {a['mean']:7.2f}  {a['label']:40s} "
              f"{', '.join(a['answered_by'])}", flush=True)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
