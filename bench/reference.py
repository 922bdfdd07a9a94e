"""An honest ground truth: the exhaustive reference of one network on the virtual board.

Every feasible cut tuple of every mapping option with at most 2 cuts (and the single-stage option) is
measured once, with no cap, each tuple getting the configuration the guided search measures it at (the
maximizer's bounds, every GPU stage at the maximizer's GPU streams, the search's buffer rule). A single sim measurement
carries about 1 % multiplicative noise, so over tens of thousands of tuples the luckiest sample overstates
its configuration; the reference therefore never trusts a single sample:

1. screen: the ``top`` tuples by single measurement (and each option's best) are re-measured
   ``screen_repeats`` times with fresh noise (repeats 1..5) and ranked by their mean;
2. the best ``finetune_best`` by that mean, and the best of each other option, are fine-tuned
   (``dse.search.finetune``, the run's settings), each from its sweep configuration and from the thesis' stream
   tuple (GPU streams halved over two GPU stages): the fine-tuner is greedy, so where it starts decides where it
   stops, and near-equal starts of different options tune differently (PND-B's streams);
3. final: every screened candidate and every fine-tuned answer is re-measured ``final_repeats`` times on the
   same fresh repeats (101..110: no config has used them) and the best mean wins. The untuned starts stay in
   the pool because the fine-tuner may trade up to ``search.degradation`` FPS for fewer resources;
4. confirm: the winner is re-measured ``final_repeats`` more times (201..210), after it was selected, so its
   ``mean`` carries no winner's curse. That is the number a quality ratio divides by.

Screening and the final comparison run round-robin (``remeasure_together``): on a real board (``host-cpu``) a
drift of the host's speed then falls on every candidate alike; on the sim the numbers are the same either way.

Results: ``bench/results/reference/<platform>/<network>-<precision>.json``, with digests of the model and the
platform / measure config parts so a stale reference (recalibrated sim, changed model) is detected by
``load_reference``.

Run: ``python -m bench.reference [--networks yolov4 yolov4-csp cspnet] [--precisions int8] [--force]``; the host's
CPU: ``python -m bench.reference --platform host-cpu --networks yolov4-tiny --precisions fp32 --top 8
--final-repeats 20 --bounds pre=2,post=2,streams=2,buffers=6 benchmark.input_size=160 benchmark.sample_size=300
benchmark.warmup=50``.
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from bench.machine import load_average, machine_facts, write_result

ROOT = Path(__file__).resolve().parent / "results" / "reference"
PLATFORM = "xavier-agx-sim"
NETWORKS = ("yolov4", "yolov4-csp", "cspnet")
PHASE = "reference"
MAX_CUTS = 2
SCREEN_FIRST = 1          # screening repeats 1..screen_repeats (repeat 0 is the sweep's own sample)
FINAL_FIRST = 101         # final comparison of the candidates and the fine-tuned answers
CONFIRM_FIRST = 201       # the winner's post-selection re-measurement


def remeasure(evaluator_or_backend, config, n: int = 5, first_repeat: int = SCREEN_FIRST, *,
              phase: str = "remeasure", strategy: str = "reference") -> list[float]:
    """FPS of ``config`` over ``n`` fresh-noise re-runs (repeats ``first_repeat`` .. ``first_repeat + n - 1``).

    Accepts an ``Evaluator`` (cached per (hash, repeat)), a ``Study`` (its evaluator) or a bare backend.
    Repeat 0 is what a search saw and selected on, hence biased upward; compare answers on the same repeat
    indices (a failed run counts 0 FPS, like the search's score)."""
    from dse.search.study import score

    target = getattr(evaluator_or_backend, "evaluator", evaluator_or_backend)   # a Study -> its evaluator
    if first_repeat < 1:
        raise ValueError("first_repeat must be >= 1: repeat 0 is the selection's own (biased) sample")
    out = []
    for r in range(first_repeat, first_repeat + n):
        if hasattr(target, "evaluate"):
            m = target.evaluate(config, phase=phase, strategy=strategy, repeat=r)
        else:
            m = target.measure(config, repeat=r)
        out.append(score(m))
    return out


def remeasure_together(evaluator, configs: Sequence, n: int, first_repeat: int, *, strategy: str = "reference",
                       progress: Callable[[str], None] | None = None) -> list[list[float]]:
    """``remeasure`` of several configurations, round-robin: repeat r of each before repeat r + 1 of any. On a
    real host whose speed drifts (another tenant on the VM) the drift then falls on every configuration alike,
    not on whichever was re-run last; on the sim, whose noise depends on (configuration, repeat) only, the
    result is the same as one after another."""
    out: list[list[float]] = [[] for _ in configs]
    t0 = time.perf_counter()
    for i, r in enumerate(range(first_repeat, first_repeat + n), 1):
        for runs, config in zip(out, configs):
            runs += remeasure(evaluator, config, 1, r, strategy=strategy)
        if progress:
            el = time.perf_counter() - t0
            progress(f"  round {i}/{n} of {len(configs)} configurations, ETA {el / i * (n - i) / 60:.1f} min")
    return out


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    values = list(values)
    return (statistics.fmean(values) if values else 0.0,
            statistics.stdev(values) if len(values) > 1 else 0.0)


def describe(option: str, cuts: Sequence[int]) -> str:
    return option + (f" ({','.join(str(c) for c in cuts)})" if cuts else "")


def _digest(obj) -> str:
    from dse.workflow.plan import digest

    return digest(json.dumps(obj, sort_keys=True, default=str))


def _compose(network: str, precision: str, platform: str, overrides: Sequence[str]):
    from dse.config import compose_config
    from dse.workflow.plan import config_parts

    cfg = compose_config([f"benchmark={network}", f"precision={precision}", f"platform={platform}", *overrides])
    parts = config_parts(cfg)[0]
    return cfg, parts


def digests(network: str, precision: str, platform: str = PLATFORM, overrides: Sequence[str] = ()) -> dict:
    """What a reference's numbers depend on besides the search: the model's bytes, the platform part (the sim's
    calibration) and the measure part (sample size, seed, batch)."""
    return _digests(*_compose(network, precision, platform, overrides))


def _digests(cfg, parts) -> dict:
    from dse.network import load_analysis

    return {"model_digest": load_analysis(cfg).digest, "platform_digest": _digest(parts["platform"]),
            "measure_digest": _digest(parts["measure"])}


def path_for(network: str, precision: str, platform: str = PLATFORM, root: Path = ROOT) -> Path:
    return Path(root) / platform / f"{network}-{precision}.json"


def compute_reference(network: str, precision: str, platform: str = PLATFORM, overrides: Sequence[str] = (), *,
                      max_cuts: int = MAX_CUTS, top: int = 20, screen_repeats: int = 5, finetune_best: int = 3,
                      final_repeats: int = 10, progress: Callable[[str], None] | None = print,
                      heartbeat: int = 2000, bounds: Mapping[str, int] | None = None) -> dict:
    """Sweep every feasible tuple of every option with <= ``max_cuts`` cuts (no cap), then screen, fine-tune and
    re-measure as the module docstring says. Returns the JSON-able record (not written).

    ``bounds`` (pre, post, streams, buffers) replace the maximizer's: on a noisy host its single-run steps may
    stop at 1 (a run that happened to be slow), and the sweep would then measure every tuple starved."""
    from dse.workflow.phases import search_setup
    from dse.evaluate import Evaluator
    from dse.search import Study
    from dse.search.exhaustive import feasible_tuples
    from dse.search.finetune import finetune
    from dse.search.params import full_stream_config
    from dse.search.pipeline import maximize_phase
    from dse.search.study import score
    from dse.search.streams import stream_tuple

    say = progress or (lambda _msg: None)
    load = load_average()
    t0 = time.perf_counter()
    seconds: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="bench-reference-") as tmp:
        cfg, analysis, backend, space, settings, base = search_setup(network, precision, Path(tmp), platform,
                                                                     tuple(overrides))
        _, parts = _compose(network, precision, platform, overrides)
        seconds["build"] = time.perf_counter() - t0
        ev = Evaluator(backend, seed=int(cfg.seed))        # no store: nothing persisted, nothing replayed
        study = Study(ev, PHASE)

        t = time.perf_counter()
        bounds_from = "given" if bounds else "maximizer"
        bounds = dict(bounds) if bounds else dict(maximize_phase(space, study, base, settings).extra["bounds"])
        seconds["maximize"] = time.perf_counter() - t

        # -- the sweep ---------------------------------------------------------------------------------
        t = time.perf_counter()
        swept = [o for o in space.options if space.n_cuts(o) <= max_cuts]
        left_out = [o for o in space.options if o not in swept]
        by_n = {n: feasible_tuples(space, n) for n in sorted({space.n_cuts(o) for o in swept})}
        total = sum(len(by_n[space.n_cuts(o)]) for o in swept)
        say(f"{network} {precision}: bounds {bounds}; sweeping {total} tuples of {', '.join(swept)} "
            f"(not swept: {', '.join(left_out) or '-'})")
        samples: list[tuple[float, str, tuple[int, ...]]] = []      # (single FPS, option, cuts)
        configs = {}
        option_stats: dict[str, dict] = {}
        done = 0
        for option in swept:
            t_opt = time.perf_counter()
            template = full_stream_config(space, base, option, (), bounds, settings)   # the guided search's
            tuples = by_n[space.n_cuts(option)]
            best = (-1.0, ())
            failed = 0
            for i, cuts in enumerate(tuples, 1):
                c = template.with_(cuts=tuple(int(x) for x in cuts))
                m = study.measure(c, PHASE)
                fps = score(m)
                failed += not m.ok
                samples.append((fps, option, tuple(cuts)))
                configs[(option, tuple(cuts))] = c
                best = max(best, (fps, tuple(cuts)))
                done += 1
                if heartbeat and i % heartbeat == 0:
                    el = time.perf_counter() - t
                    say(f"  {option}: {i}/{len(tuples)} ({done}/{total} overall, {1000 * el / done:.1f} ms/tuple, "
                        f"ETA sweep {el / done * (total - done) / 60:.1f} min)")
            dt = time.perf_counter() - t_opt
            option_stats[option] = {"cuts": space.n_cuts(option), "streams": list(template.streams),
                                    "tuples": len(tuples), "failed": failed, "best_single_fps": best[0],
                                    "best_cuts": list(best[1]), "seconds": round(dt, 2)}
            say(f"  {option:6s} {len(tuples):6d} tuples in {dt:7.1f} s ({1000 * dt / max(len(tuples), 1):.1f} "
                f"ms/tuple), best single {best[0]:.1f} FPS at {describe(option, best[1])}"
                + (f", {failed} failed" if failed else ""))
        seconds["sweep"] = time.perf_counter() - t
        sweep_measured = ev.measured

        # -- screening: top tuples (and each option's best) re-measured with fresh noise -------------------
        t = time.perf_counter()
        ranked = sorted(samples, key=lambda s: -s[0])
        picked = [(o, c) for _, o, c in ranked[:top]]
        for option, st in option_stats.items():
            if st["best_single_fps"] > 0 and (option, tuple(st["best_cuts"])) not in picked:
                picked.append((option, tuple(st["best_cuts"])))
        single = {(o, c): f for f, o, c in samples}
        candidates = []
        screened = remeasure_together(ev, [configs[key] for key in picked], screen_repeats, SCREEN_FIRST)
        for key, fps in zip(picked, screened):
            c = configs[key]
            mean, std = mean_std(fps)
            candidates.append({"option": key[0], "cuts": list(key[1]), "label": describe(*key),
                               "config_hash": c.hash, "single_fps": single[key], "screen_fps": fps,
                               "screen_mean": mean, "screen_std": std, "config": c})
        candidates.sort(key=lambda d: -d["screen_mean"])
        seconds["screen"] = time.perf_counter() - t
        say(f"  screened {len(candidates)} candidates x {screen_repeats}: best by mean "
            f"{candidates[0]['label']} {candidates[0]['screen_mean']:.1f} (single {candidates[0]['single_fps']:.1f})")

        # -- fine-tuning of the best by mean ---------------------------------------------------------------
        t = time.perf_counter()
        tuned = []
        starts = list(candidates[:finetune_best])
        for c in candidates:        # then the best of each other option (candidates are ranked by mean)
            if all(s["option"] != c["option"] for s in starts):
                starts.append(c)
        for cand in starts:
            halved = cand["config"].with_(streams=stream_tuple(
                space.stages(cand["option"]), bounds["streams"], dla_streams=settings.dla_streams,
                main_pe=space.main_pe))
            for start in dict.fromkeys([cand["config"], halved]):
                ft = finetune(space, study, start, settings)
                tuned.append({"start": cand["label"], "start_streams": list(start.streams),
                              "start_hash": start.hash, "config": ft.config, "config_hash": ft.config.hash,
                              "single_fps": ft.fps, "start_fps": ft.extra["start_fps"], "points": ft.extra["points"]})
        seconds["finetune"] = time.perf_counter() - t

        # -- final: every candidate and tuned answer on the same fresh repeats -----------------------------
        t = time.perf_counter()
        pool: dict[str, dict] = {}
        for kind, entries in (("candidate", candidates), ("finetuned", tuned)):
            for e in entries:
                pool.setdefault(e["config_hash"], {"kind": kind, "config": e["config"]})
        finals = remeasure_together(ev, [p["config"] for p in pool.values()], final_repeats, FINAL_FIRST)
        for p, fps in zip(pool.values(), finals):
            mean, std = mean_std(fps)
            p.update(final_fps=fps, final_mean=mean, final_std=std)
        for e in (*candidates, *tuned):
            p = pool[e["config_hash"]]
            e.update(final_mean=p["final_mean"], final_std=p["final_std"], final_fps=p["final_fps"])
        win_hash = max(pool, key=lambda h: pool[h]["final_mean"])
        winner = pool[win_hash]["config"]
        confirm = remeasure(ev, winner, final_repeats, CONFIRM_FIRST)
        mean, std = mean_std(confirm)
        seconds["final"] = time.perf_counter() - t

        # the luckiest repeat-0 sample of anything measured (what a single-shot search would report)
        firsts = {h: m for (h, r), m in ev.cache.items() if r == 0 and m.ok}
        lucky = max(firsts.values(), key=score)
        best_single, best_single_at = score(lucky), describe(lucky.config.option, lucky.config.cuts)
        ds = {"model_digest": analysis.digest, "platform_digest": _digest(parts["platform"]),
              "measure_digest": _digest(parts["measure"])}
        engines = ev.engines_built()
    seconds["total"] = time.perf_counter() - t0
    coverage = (f"exhaustive over 1- and {max_cuts}-cut options (and the single-stage one): "
                f"{', '.join(sorted(swept))} ({total} tuples)"
                + (f"; not swept: {', '.join(f'{o} ({space.n_cuts(o)} cuts)' for o in left_out)}" if left_out else ""))
    say(f"  reference {describe(winner.option, winner.cuts)} {mean:.1f} +- {std:.1f} FPS (confirm x{final_repeats}); "
        f"luckiest single sample {best_single:.1f} (+{100 * (best_single / mean - 1):.2f} %); "
        f"{ev.measured} measurements in {seconds['total']:.0f} s")

    def strip(d: dict) -> dict:
        return {k: (v.to_dict() if k == "config" else v) for k, v in d.items()}

    return {
        "benchmark": "reference", "network": network, "precision": precision, "platform": platform,
        "overrides": list(overrides), **ds, "search_digest": _digest(parts["search"]),
        "coverage": coverage, "swept_options": sorted(swept), "left_out": left_out,
        "feasible_cuts": len(space.feasible_cuts), "bounds": bounds, "bounds_from": bounds_from,
        "tuples": {o: st["tuples"] for o, st in option_stats.items()}, "tuples_total": total,
        "options": option_stats, "measurements": ev.measured, "sweep_measurements": sweep_measured,
        "engines_built": engines,
        "repeats": {"screen": [SCREEN_FIRST, SCREEN_FIRST + screen_repeats - 1],
                    "final": [FINAL_FIRST, FINAL_FIRST + final_repeats - 1],
                    "confirm": [CONFIRM_FIRST, CONFIRM_FIRST + final_repeats - 1]},
        "top": [strip(c) for c in candidates], "finetuned": [strip(d) for d in tuned],
        "reference": {"label": describe(winner.option, winner.cuts), "config": winner.to_dict(),
                      "config_hash": win_hash, "kind": pool[win_hash]["kind"],
                      "fps": confirm, "mean": mean, "std": std,
                      "selection_fps": pool[win_hash]["final_fps"], "selection_mean": pool[win_hash]["final_mean"]},
        "best_single_fps": best_single, "best_single_at": best_single_at,
        "best_single_overstates": best_single / mean - 1 if mean > 0 else None,
        "noise_sigma": float(parts["platform"].get("noise", {}).get("sigma", 0.0)),
        "wall_seconds": round(seconds["total"], 1), "seconds": {k: round(v, 2) for k, v in seconds.items()},
        "load_avg_start": load, "load_avg_end": load_average(),
    }


def load_reference(network: str, precision: str, platform: str = PLATFORM, *, overrides: Sequence[str] = (),
                   root: Path = ROOT, verify: bool = True, verbose: bool = True) -> dict | None:
    """The stored reference, or None when it is missing or stale: the model, the platform part (the sim's
    calibration) or the measure part changed since it was computed. ``verify`` also re-measures the reference
    configuration on its first confirm repeat and asks for the stored FPS to the last digit (the sim is seeded):
    a change of the sim's code that no config part shows is caught too (one measurement, plus the build). A real
    board's (``host-cpu``) holds on the host that measured it (CPU model and usable cores) while the digests do."""
    path = path_for(network, precision, platform, root)
    if not path.is_file():
        if verbose:
            print(f"reference {network} {precision} on {platform}: missing ({path})")
        return None
    data = json.loads(path.read_text())
    why = _staleness(data, network, precision, platform, overrides, verify)
    if why:
        if verbose:
            print(f"reference {network} {precision} on {platform}: stale ({path}): {why}")
        return None
    return data


def _staleness(data: dict, network: str, precision: str, platform: str, overrides: Sequence[str],
               verify: bool) -> str:
    """Why a stored reference no longer holds ('' when it does)."""
    cfg, parts = _compose(network, precision, platform, overrides)
    now = _digests(cfg, parts)
    changed = [k for k, v in now.items() if data.get(k) != v]
    if changed:
        return "; ".join(f"{k} {data.get(k)} -> {now[k]}" for k in changed)
    if parts["platform"].get("backend") != "sim":
        # a real board's runs never repeat to the digit: it holds on the host that measured it
        here, then = machine_facts(), data.get("machine", {})
        moved = [k for k in ("cpu_model", "usable_cores") if then.get(k) != here[k]]
        return "; ".join(f"measured on another host: {k} {then.get(k)} -> {here[k]}" for k in moved)
    if not verify:
        return ""
    from dse.workflow.phases import search_setup
    from dse.core.configuration import Configuration

    ref = data["reference"]
    config = Configuration.from_dict(ref["config"])
    first = int(data.get("repeats", {}).get("confirm", [CONFIRM_FIRST])[0])
    with tempfile.TemporaryDirectory(prefix="bench-reference-") as tmp:
        backend = search_setup(network, precision, Path(tmp), platform, tuple(overrides))[2]
        (fps,) = remeasure(backend, config, 1, first)
    stored = float(ref["fps"][0])
    if abs(fps - stored) > 1e-6 * max(abs(stored), 1.0):
        return (f"the sim now measures {fps:.3f} FPS for {ref['label']} at repeat {first}, the reference stored "
                f"{stored:.3f}: the simulator changed (code or calibration)")
    return ""


def summary(rows: list[dict]) -> str:
    """The BENCHMARKS.md table of the references (``--markdown``)."""
    head = ("| network | prec | tuples swept | measurements | wall s (load 1-min start/end) | reference (streams, "
            "buffers, pre/post threads) | re-measured FPS, mean +- std (n fresh repeats) | luckiest single sample "
            "(overstates) | best single sample of the sweep |")
    lines = [head, "|" + "---|" * head.count(" | ") + "---|"]
    for r in rows:
        ref, c = r["reference"], r["reference"]["config"]
        sweep_best = max(r["options"].values(), key=lambda st: st["best_single_fps"])
        sweep_opt = next(o for o, st in r["options"].items() if st is sweep_best)
        load = f"{r['load_avg_start'][0]}/{r['load_avg_end'][0]}" if r.get("load_avg_start") else "-"
        lines.append(
            f"| {r['network']} | {r['precision'].upper()} | {r['tuples_total']} | {r['measurements']} "
            f"| {r['wall_seconds']:.0f} ({load}) | {ref['label']}, s{c['streams']}, b{c['buffers']}, "
            f"{c['pre_threads']}/{c['post_threads']} | {ref['mean']:.1f} +- {ref['std']:.1f} ({len(ref['fps'])}) "
            f"| {r['best_single_fps']:.1f} at {r['best_single_at']} (+{100 * r['best_single_overstates']:.1f} %) "
            f"| {sweep_best['best_single_fps']:.1f} at {describe(sweep_opt, sweep_best['best_cuts'])} |")
    return "\n".join(lines)


def _bounds(text: str) -> dict[str, int]:
    keys = ("pre", "post", "streams", "buffers")
    try:
        got = {k.strip(): int(v) for k, v in (item.split("=") for item in text.split(","))}
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected pre=P,post=Q,streams=S,buffers=B (integers)") from None
    if sorted(got) != sorted(keys) or min(got.values()) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give each of {', '.join(keys)} once, each >= 1")
    return got


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--networks", nargs="+", default=list(NETWORKS))
    ap.add_argument("--precisions", nargs="+", default=["int8"])
    ap.add_argument("--platform", default=PLATFORM)
    ap.add_argument("--force", action="store_true", help="recompute even when a fresh reference is stored")
    ap.add_argument("--root", type=Path, default=ROOT, help="results folder (<root>/<platform>/<net>-<prec>.json)")
    ap.add_argument("--top", type=int, default=20, help="tuples re-measured after the sweep")
    ap.add_argument("--screen-repeats", type=int, default=5, help="fresh runs of each screened tuple")
    ap.add_argument("--final-repeats", type=int, default=10,
                    help="round-robin rounds of the final comparison, and the winner's confirming runs")
    ap.add_argument("--bounds", type=_bounds, default=None, metavar="pre=P,post=Q,streams=S,buffers=B",
                    help="the sweep's parameter bounds instead of the maximizer's (a noisy host)")
    ap.add_argument("--markdown", action="store_true", help="print the summary of the stored references only")
    ap.add_argument("overrides", nargs="*", help="Hydra overrides (e.g. benchmark.sample_size=200)")
    args = ap.parse_args(argv)

    from dse.core.errors import DseError

    rows, failed = [], []
    for network in args.networks:
        for precision in args.precisions:
            path = path_for(network, precision, args.platform, args.root)
            if args.markdown:
                if path.is_file():
                    rows.append(json.loads(path.read_text()))
                continue
            try:
                if not args.force:
                    stored = load_reference(network, precision, args.platform, overrides=args.overrides,
                                            root=args.root)
                    if stored is not None:
                        print(f"reference {network} {precision}: up to date ({path})", flush=True)
                        rows.append(stored)
                        continue
                row = compute_reference(network, precision, args.platform, tuple(args.overrides), top=args.top,
                                        bounds=args.bounds, screen_repeats=args.screen_repeats,
                                        final_repeats=args.final_repeats,
                                        progress=lambda msg: print(msg, flush=True))
            except DseError as exc:     # one bad network (or config) must not cost the others their hour
                print(f"reference {network} {precision}: FAILED: {exc}", flush=True)
                failed.append(f"{network}-{precision}")
                continue
            write_result(path, row)
            print(f"wrote {path}", flush=True)
            rows.append(row)
    if rows:
        print(summary(rows))
    if failed:
        print(f"failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
