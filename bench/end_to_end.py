"""End to end: wall time, peak memory and disk of the default exploration (``snakemake --cores 2``), cold and warm.

A fresh directory holds symlinks to the repository's Snakefile, workflow/ and config/ (as a user's checkout
would), so "cold" starts with no results, no measurement cache and no engines. "Warm" reruns the same command in
the same directory: every output is up to date, so Snakemake only checks them. Peak memory is ``ru_maxrss`` from
``os.wait4`` on the snakemake process: the largest resident set of that process or any of its (waited)
descendants, i.e. the biggest single job, not a sum over the tree. The run directory's size and its answer (the
best configuration without the model digest) are recorded too.

Budgets (2 cores): run directory <= 5 MB, peak RSS <= 400 MB, cold <= 15 s, warm <= 2 s. The VM drifts by several
percent between runs, so a change is claimed by ``--baseline CHECKOUT --baseline-python PYTHON``: the same runs of
another checkout (e.g. ``git worktree add /tmp/main main`` with its own environment) alternated with this one's,
``--pairs`` times, and the ratios of their medians.

Run: ``python -m bench.end_to_end [--cores 2] [--overrides '[benchmark=yolov4]'] [--keep DIR]
[--baseline DIR --baseline-python PATH --pairs 2]``; writes bench/results/end_to_end.json.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from bench.machine import load_average, write_result

REPO = Path(__file__).resolve().parents[1]
OUT = Path(__file__).resolve().parent / "results" / "end_to_end.json"
BUDGETS = {"cold_s": 15.0, "warm_s": 2.0, "peak_rss_mib": 400 * 1e6 / 2**20, "run_dir_mb": 5.0}


def workdir(path: Path, repo: Path = REPO) -> Path:
    for name in ("Snakefile", "workflow", "config"):
        os.symlink(repo / name, path / name)
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


def tree_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def answer(best: Path) -> dict:
    """The run's answer: the best configuration, without the model digest (the one field allowed to change)."""
    config = yaml.safe_load(best.read_text())["config"]
    config.pop("model_digest", None)
    return config


def cold_and_warm(python: str, repo: Path, cores: int, overrides: str | None, keep: Path | None) -> dict:
    """One cold and one warm run of ``python -m snakemake`` on ``repo``'s workflow in a fresh directory."""
    cmd = [python, "-m", "snakemake", "--cores", str(cores)]
    if overrides:
        cmd += ["--config", f"overrides={overrides}"]
    if keep:
        shutil.rmtree(keep, ignore_errors=True)
        keep.mkdir(parents=True)
    wd = workdir(keep or Path(tempfile.mkdtemp(prefix="bench-e2e-")), repo)
    try:
        out = {"command": " ".join(cmd[2:])}
        for kind in ("cold", "warm"):
            r = timed_run(cmd, wd)
            if r["rc"] != 0:
                raise SystemExit(f"{kind} run of {repo} failed ({r['rc']}): see {r['log']}\n"
                                 + Path(r["log"]).read_text()[-3000:])
            out[kind] = r
        reports = sorted((wd / "results").rglob("report.md"))
        out["reports"] = [str(p.relative_to(wd)) for p in reports]
        out["run_dir_mb"] = round(tree_bytes(reports[0].parent) / 1e6, 3) if reports else None
        out["results_mb"] = round(tree_bytes(wd / "results") / 1e6, 3)
        out["answer"] = answer(reports[0].parent / "best.yaml") if reports else None
        return out
    finally:
        if not keep:
            shutil.rmtree(wd, ignore_errors=True)


def confirm_answers(answers: list[dict], repeats: int) -> list[dict]:
    """Each distinct answer re-measured on this checkout's board with fresh noise (repeats CONFIRM_FIRST ...),
    beside its noise-free true FPS: answers that differ only by a noise draw score alike here."""
    from bench.reference import CONFIRM_FIRST, remeasure
    from dse.calibration.truth import noise_free
    from dse.core.configuration import Configuration
    from dse.workflow.phases import search_setup

    first = answers[0]
    with tempfile.TemporaryDirectory(prefix="bench-e2e-confirm-") as tmp:
        _, analysis, backend, *_ = search_setup(first["benchmark"], first["precision"], Path(tmp), first["platform"])
        true = noise_free(first["benchmark"], first["precision"], Path(tmp), first["platform"], ())
        out = []
        for a in answers:
            config = Configuration.from_dict({**a, "model_digest": analysis.digest})
            fps = remeasure(backend, config, repeats, CONFIRM_FIRST)
            out.append({"answer": a, "fps_mean": round(statistics.mean(fps), 2),
                        "fps_std": round(statistics.stdev(fps), 2) if len(fps) > 1 else 0.0,
                        "true_fps": round(true(config), 2)})
    return out


def summary(runs: list[dict]) -> dict:
    """Medians over runs of the budgeted figures."""
    return {"cold_s": statistics.median(r["cold"]["wall_s"] for r in runs),
            "warm_s": statistics.median(r["warm"]["wall_s"] for r in runs),
            "peak_rss_mib": max(max(r["cold"]["max_rss_mib"], r["warm"]["max_rss_mib"]) for r in runs),
            "run_dir_mb": max(r["run_dir_mb"] or 0.0 for r in runs)}


def add_baseline_args(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--baseline", type=Path, default=None, help="another checkout to measure beside this one")
    ap.add_argument("--baseline-python", default=None, help="the interpreter of the baseline's environment")


def sides_of(args, ap: argparse.ArgumentParser) -> dict[str, tuple[str, Path]]:
    """{side: (python, checkout)}: this checkout, after the baseline's where one is given."""
    if (args.baseline is None) != (args.baseline_python is None):
        ap.error("--baseline and --baseline-python go together")
    this = {"this": (sys.executable, REPO)}
    return {"baseline": (args.baseline_python, args.baseline.resolve()), **this} if args.baseline else this


LABELS = {"cold_s": "cold run, s", "warm_s": "warm run (nothing to do), s", "peak_rss_mib": "peak RSS of any job, MiB",
          "run_dir_mb": "run directory, MB"}


def markdown(result: dict) -> str:
    """The BENCHMARKS.md table of a stored result: each budgeted figure, this checkout's and the baseline's."""
    this, base = result["summary"]["this"], result["summary"].get("baseline")
    head = "| figure | this checkout | budget | met |" + (" baseline | ratio |" if base else "")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for k, label in LABELS.items():
        row = f"| {label} | {this[k]:g} | {result['budgets'][k]:g} | {'met' if result['met'][k] else '**missed**'} |"
        if base:
            row += f" {base[k]:g} | {result['ratio'][k]} |"
        lines.append(row)
    if base:
        lines.append(f"\nSame answer (option, cuts, streams, buffers, threads) as the baseline: "
                     f"{'yes' if result['same_answer'] else 'no'}.")
    for c in result.get("answers_confirmed", []):
        a = c["answer"]
        lines.append(f"- {a['option']} cuts {a['cuts']} streams {a['streams']} buffers {a['buffers']} threads "
                     f"{a['pre_threads']}/{a['post_threads']}: {c['fps_mean']} +- {c['fps_std']} FPS re-measured, "
                     f"true {c['true_fps']}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--overrides", default=None, help="Hydra overrides for --config overrides=... (default: none)")
    ap.add_argument("--keep", type=Path, default=None, help="run in this directory (emptied first) and keep it")
    add_baseline_args(ap)
    ap.add_argument("--pairs", type=int, default=1, help="alternated (baseline, this) pairs with --baseline")
    ap.add_argument("--confirm", type=int, default=10,
                    help="fresh-noise re-runs of each answer where this checkout's and the baseline's differ")
    ap.add_argument("--output", type=Path, default=OUT)
    ap.add_argument("--markdown", action="store_true", help="print the table of the stored result and stop")
    args = ap.parse_args(argv)
    if args.markdown:
        import json

        print(markdown(json.loads(args.output.read_text())))
        return 0
    sides = sides_of(args, ap)
    runs: dict[str, list[dict]] = {side: [] for side in sides}
    for _ in range(args.pairs if args.baseline else 1):
        for side, (python, repo) in sides.items():
            r = cold_and_warm(python, repo, args.cores, args.overrides, args.keep)
            runs[side].append(r)
            print(f"{side}: cold {r['cold']['wall_s']} s (peak RSS {r['cold']['max_rss_mib']} MiB), warm "
                  f"{r['warm']['wall_s']} s, run directory {r['run_dir_mb']} MB, load {r['cold']['load_avg_start']}",
                  flush=True)
    result = {"benchmark": "end_to_end", "command": runs["this"][0]["command"], "cores": args.cores,
              "overrides": args.overrides, "budgets": BUDGETS, "runs": runs,
              "summary": {side: summary(rs) for side, rs in runs.items()}}
    this = result["summary"]["this"]
    result["met"] = {k: this[k] <= BUDGETS[k] for k in BUDGETS}
    if args.baseline:
        base = result["summary"]["baseline"]
        result["ratio"] = {k: round(this[k] / base[k], 3) if base[k] else None for k in BUDGETS}
        result["same_answer"] = all(r["answer"] == runs["baseline"][0]["answer"] for rs in runs.values() for r in rs)
        result["baseline"] = str(args.baseline)
        if not result["same_answer"] and args.overrides is None:
            distinct = [a for i, a in enumerate(r["answer"] for rs in runs.values() for r in rs)
                        if a not in [r["answer"] for rs in runs.values() for r in rs][:i]]
            result["answers_confirmed"] = confirm_answers(distinct, args.confirm)
            for c in result["answers_confirmed"]:
                print(f"answer {c['answer']['option']} {c['answer']['cuts']} {c['answer']['streams']}: "
                      f"{c['fps_mean']} +- {c['fps_std']} FPS over {args.confirm} fresh runs, true {c['true_fps']}")
    for k, limit in BUDGETS.items():
        line = f"{k}: {this[k]:g} (budget {limit:g}: {'met' if result['met'][k] else 'missed'})"
        if args.baseline:
            line += f"; baseline {result['summary']['baseline'][k]:g}, ratio {result['ratio'][k]}"
        print(line)
    write_result(args.output, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
