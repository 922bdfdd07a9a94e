"""Does the virtual board's measurement window favour some mapping options? (issues 22 and 14)

The sim runs a configuration for ``max_sim_frames`` (600) frames after a warm-up and extrapolates their FPS to
the sample. Two ends of that window are not the steady state a real board's 5,000-frame run is dominated by:
- its end: if nothing is admitted after the measured frames, the last ones drain through an emptying pipeline,
  faster than in the steady state (the shipped profiles admit more, ``sim.full_window``, since this bench);
- its start: with many buffers per interface, the queues fill over hundreds of frames, longer than the warm-up.
Both weigh ``sample / 600`` times more in the sim than on the board. For every Table 3.5 row, each option's
configuration that the decisions bench polished (``bench/results/calibration_decisions.json``) is measured
noise-free (the per-task jitter on, ``DRAWS`` draws averaged) in four windows, all after the workflow's warm-up:
- drained: 600 frames, nothing admitted after them;
- full: 600 frames, the frames the pipeline holds admitted after them (``sim.full_window``);
- steady: full, a 1,500-frame warm-up and 3,000 frames;
- board: the whole sample, drained at its end: what ``dse.runtime.pipeline`` times on a board.
Per row: each option's bias (drained / steady - 1, full / steady - 1) and both 600-frame windows against the board
one, the best option in each window, and Table 3.5's option's gap to the best. The configurations stay the
decisions bench's; polishing in another window may find others (not done here).

Run: ``python -m bench.sim_window [--networks ...] [--decisions PATH] [--output PATH]`` (about 20 s per row on
2 cores).
"""
from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

from bench.calibration_decisions import polished_rows
from bench.machine import write_result

RESULTS = Path(__file__).resolve().parent / "results"
DRAWS = 4
DRAINED = ("++platform.sim.full_window=false",)
FULL = ("++platform.sim.full_window=true",)
STEADY = (*FULL, "benchmark.warmup=1500", "platform.sim.max_sim_frames=3000", "benchmark.sample_size=3000")
BOARD = (*DRAINED, "platform.sim.max_sim_frames=1000000")
WINDOWS = {"drained": DRAINED, "full": FULL, "steady": STEADY, "board": BOARD}


def _over(fps: dict[str, dict[str, float]], window: str, against: str) -> dict[str, float]:
    """Per option, how far ``window`` reads over ``against`` (ratio - 1)."""
    return {o: round(v / fps[against][o] - 1, 4) for o, v in fps[window].items()}


def row(network: str, precision: str, published: str, configs: dict, platform: str) -> dict:
    from dse.core.configuration import Configuration
    from dse.workflow.phases import search_setup

    fps: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="dse-window-") as tmp:
        for window, overrides in WINDOWS.items():
            _, analysis, board, *_ = search_setup(network, precision, Path(tmp) / window, platform,
                                                  ("platform.noise.sigma=0", *overrides))
            fps[window] = {o: round(statistics.mean(board.measure(Configuration.from_dict({**c, "model_digest": analysis.digest}), repeat=r).fps
                                                    for r in range(DRAWS)), 2) for o, c in configs.items()}
    best = {w: max(v, key=v.get) for w, v in fps.items()}
    return {"network": network, "precision": precision, "published": published, "fps": fps,
            "bias": _over(fps, "drained", "steady"), "full_bias": _over(fps, "full", "steady"),
            "to_board": {w: _over(fps, w, "board") for w in ("drained", "full")},
            "best": best,
            "published_ratio": {w: round(v[published] / v[best[w]], 4) if published in v else None
                                for w, v in fps.items()}}


def markdown(rows: list[dict]) -> str:
    options = list(dict.fromkeys(o for r in rows for o in r["bias"]))
    lines = ["| network | prec | Table 3.5 | bias per option, % (drained / steady - 1; full / steady - 1) | best: "
             "drained, full, steady, board | Table 3.5's option / best: drained, full, steady, board |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        bias = ", ".join(f"{o} {100 * r['bias'][o]:+.1f}; {100 * r['full_bias'][o]:+.1f}" for o in options
                         if o in r["bias"])
        ratio = ", ".join("-" if r["published_ratio"][w] is None else f"{r['published_ratio'][w]:.3f}"
                          for w in WINDOWS)
        lines.append(f"| {r['network']} | {r['precision'].upper()} | {r['published']} | {bias} | "
                     f"{', '.join(r['best'][w] for w in WINDOWS)} | {ratio} |")
    for w in WINDOWS:
        close = sum((r["published_ratio"][w] or 0) >= 0.97 for r in rows)
        same = sum(r["best"][w] == r["published"] for r in rows)
        lines.append(f"\n{w} window: the best option is Table 3.5's in {same} of {len(rows)} rows; Table 3.5's "
                     f"option within 3 % of the best in {close}.")
    for o in options:
        b = [r["bias"][o] for r in rows if o in r["bias"]]
        f = [r["full_bias"][o] for r in rows if o in r["bias"]]
        lines.append(f"- {o}: bias median {100 * statistics.median(b):+.1f} %, max {100 * max(b):+.1f} %; ending "
                     f"full: median {100 * statistics.median(f):+.1f} %, max {100 * max(f):+.1f} %")
    for w in ("drained", "full"):
        err = [abs(r["to_board"][w][o]) for r in rows for o in r["to_board"][w]]
        lines.append(f"- the {w} window against the whole sample (|{w} / board - 1|): median "
                     f"{100 * statistics.median(err):.1f} %, max {100 * max(err):.1f} %")
    return "\n".join(lines)


def main(argv=None) -> int:
    args, platform, decided = polished_rows(__doc__, RESULTS / "sim_window.json", argv)
    rows = []
    for r in decided:
        rows.append(row(r["network"], r["precision"], r["published"], r["configs"], platform))
        print(f"{r['network']} {r['precision']}: best {rows[-1]['best']}", flush=True)
    print(markdown(rows))
    write_result(args.output, {"decisions": str(args.decisions), "platform": platform, "draws": DRAWS,
                               "windows": {w: list(o) for w, o in WINDOWS.items()}, "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
