"""Leaky ReLU on the DLA: the thesis' nine networks with their original Darknet activation, explored on the
TensorRT 8.5 Xavier profile, against the ReLU versions the thesis retrained for TensorRT 6 (Sec. 3.6, L748).

Per network (INT8, the default search ``run_search``, one process per run):
- ``relu-trt6``: the zoo network on ``xavier-agx-sim`` (TensorRT 6 DLA rules, the thesis' setting);
- ``leaky-trt85``: ``NAME-leaky`` on ``xavier-agx-jp5-sim`` (TensorRT 8.5 rules: leaky ReLU, Resize, Slice on the DLA,
  16 loadables per core instead of 4 DLA engines);
- ``leaky-trt6`` (with ``--variants``): ``NAME-leaky`` on TensorRT 6 rules, what the thesis avoided by retraining.
The answer's FPS is re-measured over 5 fresh-noise re-runs (``bench.reference.remeasure``); per DLA stage of the
answer: loadables, fallback layers and why (``dse.report.dla_fallback``). Both profiles share the TensorRT 6 timing
calibration: only the decisions the DLA rules make differ.

Run: ``python -m bench.dla_fallback [--networks yolov4 ...] [--variants relu-trt6 leaky-trt85 leaky-trt6]``; writes
bench/results/dla_fallback.json (rewritten after every run) and prints the Markdown table for BENCHMARKS.md.
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from bench.machine import write_result
from bench.reference import remeasure
from bench.search_quality import NETWORKS, describe
from dse.workflow.phases import search_setup

OUT = Path(__file__).resolve().parent / "results" / "dla_fallback.json"
VARIANTS = {"relu-trt6": ("xavier-agx-sim", ""), "leaky-trt85": ("xavier-agx-jp5-sim", "-leaky"),
            "leaky-trt6": ("xavier-agx-sim", "-leaky")}


def one(network: str, variant: str, precision: str = "int8", repeats: int = 5, reference: dict | None = None) -> dict:
    """One exploration; ``reference`` (the relu-trt6 answer) is re-measured on this board too, so a difference
    in FPS splits into what the rules allow and what the search found."""
    from dse.report.dla_fallback import explain
    from dse.evaluate import Evaluator
    from dse.search import Study, run_search

    platform, suffix = VARIANTS[variant]
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-engines-") as tmp:
        cfg, analysis, backend, space, settings, base = search_setup(network, precision, Path(tmp), platform,
                                                                     ("search.strategy=proposed",
                                                                      f"benchmark.model={network}{suffix}",
                                                                      f"benchmark.name={network}{suffix}"))
        ev = Evaluator(backend, seed=int(cfg.seed))
        result = run_search(space, Study(ev), base, settings)
        best = result.config
        fps = remeasure(ev, best, n=repeats)
        ref_fps = None
        if reference is not None:
            from dse.core.configuration import Configuration

            ref = Configuration.from_dict({**reference, "platform": backend.platform.name,
                                           "model_digest": best.model_digest})
            ref_fps = statistics.fmean(remeasure(ev, ref, n=repeats))
        whole = explain(backend, precision=precision)
        ex = explain(backend, config=best)
    return {
        "network": network, "variant": variant, "platform": platform, "model": f"{network}{suffix}",
        "ruleset": ex.ruleset, "precision": precision, "selected": describe(best), "best_config": best.to_dict(),
        "fps_mean": statistics.fmean(fps), "fps_runs": fps, "search_fps": result.fps,
        "relu_answer_fps_here": ref_fps,
        "unique_tuples": result.extra["unique_tuples"], "option_fps": {o: r.fps for o, r in result.extra["options"].items()},
        "whole_network_dla_layers": sum(v.on_dla for v in whole.layers), "layers": len(whole.layers),
        "whole_network_loadables": whole.stages[0].loadables, "whole_network_reasons": whole.reason_counts,
        "stages": [{"stage": s.stage, "pes": s.pes, "layers": f"{s.first}..{s.last}", "loadables": s.loadables,
                    "fallback_layers": s.fallback_layers, "fallback_ms": s.fallback_ms, "reformat_ms": s.reformat_ms,
                    "reasons": s.reasons} for s in ex.stages],
        "seconds": time.perf_counter() - t0,
    }


def markdown(rows: list[dict]) -> str:
    by = {(r["network"], r["variant"]): r for r in rows}
    variants = [v for v in VARIANTS if any(r["variant"] == v for r in rows)]
    head = ["Network"] + [f"{v}: option (FPS)" for v in variants] + [
        "relu-trt6's answer on each other board (FPS)"] + [f"{v}: DLA stages (loadables, fallback: why)"
                                                                       for v in variants[:2]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for net in dict.fromkeys(r["network"] for r in rows):
        cells = [net]
        for v in variants:
            r = by.get((net, v))
            cells.append(f"{r['selected']} ({r['fps_mean']:.1f})" if r else "")
        cells.append(", ".join(f"{v} {by[(net, v)]['relu_answer_fps_here']:.1f}" for v in variants
                               if (net, v) in by and by[(net, v)]["relu_answer_fps_here"] is not None))
        for v in variants[:2]:
            r = by.get((net, v))
            cells.append("; ".join(f"{s['pes'].replace('|', '+')} {s['loadables']} ld, {s['fallback_layers']} fb"
                                   + (": " + ", ".join(f"{k} x{n}" for k, n in s["reasons"].items()) if s["reasons"]
                                      else "") for s in r["stages"]) or "no DLA stage" if r else "")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--networks", nargs="+", default=list(NETWORKS))
    ap.add_argument("--variants", nargs="+", default=["relu-trt6", "leaky-trt85"], choices=list(VARIANTS))
    ap.add_argument("--output", type=Path, default=OUT)
    args = ap.parse_args(argv)
    rows = []
    for net in args.networks:
        reference = None
        for variant in args.variants:
            row = one(net, variant, reference=reference)
            if variant == "relu-trt6":
                reference = row["best_config"]
            rows.append(row)
            print(f"{net:14s} {variant:12s} {row['selected']:18s} {row['fps_mean']:7.1f} FPS "
                  f"({row['seconds']:.0f} s)", flush=True)
            write_result(args.output, {"command": "python -m bench.dla_fallback " + " ".join(argv or []), "rows": rows})
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
