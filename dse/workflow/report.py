"""Rule `report`: merge the run's measurements, write report.md and the plots."""
from __future__ import annotations

import json
from pathlib import Path

from omegaconf import OmegaConf

from dse.report import plots
from dse.report.tables import DEFAULT_BOARD_COSTS, best_row, cost_row, markdown_table, proposed_rows
from dse.store import merge
from dse.store.atomic import write_text_atomic
from dse.workflow.plan import measurement_context


def report(run: str | Path) -> Path:
    run = Path(run)
    cfg = OmegaConf.load(run / "config.yaml")
    # every measurement goes to the file; the tables and plots describe the proposed method's run
    frame = proposed_rows(merge(sorted((run / "cache").glob("*.parquet")), run / "measurements.parquet",
                                context=measurement_context(cfg)))
    best = OmegaConf.to_container(OmegaConf.load(run / "best.yaml"))
    selected = json.loads((run / "selected.json").read_text())
    searched = json.loads((run / "search.json").read_text())
    refined = searched.get("refined", {})
    costs = OmegaConf.to_container(cfg.platform.get("board_costs") or OmegaConf.create(DEFAULT_BOARD_COSTS))
    b = cfg.benchmark
    cost = cost_row(frame, int(b.sample_size), int(b.warmup), costs)
    base = _base_g(frame)
    plots_dir = run / "plots"
    plots.fps_per_option(frame, plots_dir / "fps_per_option.png")
    plots.trajectory(frame, plots_dir / "trajectory.png")
    gantt = _gantt(run, best, plots_dir / "gantt_best.png")
    lines = [
        f"# {b.name} on {cfg.platform.name} ({cfg.precision.upper()}, batch {cfg.batch}, {b.input_size}x{b.input_size})",
        "",
        "## Best configuration (thesis Table 3.5 row)",
        "",
        markdown_table([best_row(best)]),
        f"Search found {best['search_fps']:.1f} FPS; fine-tuning reached {best['fps']:.1f} FPS."
        + (f" Base(G) (main PE only, 1 stream, 1 thread each, 1 buffer): {base:.1f} FPS,"
           f" gain {100 * (best['fps'] / base - 1):+.0f} %." if base else ""),
        "",
        "## Mapping options (global search, thesis Fig. 3.8)",
        "",
        markdown_table([{"Option": o, "FPS": round(v, 1),
                         "Full search (FPS)": round(refined[o], 1) if o in refined else "",
                         "Selected": "yes" if o == searched["selected"] else ""}
                        for o, v in sorted(selected["option_fps"].items(), key=lambda kv: -kv[1])]),
        f"Options within {100 * float(cfg.search.refine_within):.0f} % of the best after the global phase get a "
        "full (global + local) search; the best of them is fine-tuned.",
        "",
        "## Exploration cost (thesis Table 3.4 row)",
        "",
        markdown_table([cost]),
        (f"Board hours are estimated for a real board ({costs['run_overhead_s']:.0f} s start-up per measurement, "
         f"{b.sample_size} + {b.warmup} frames at the measured FPS, engine builds "
         + ", ".join(f"{k} {v:.0f} s" for k, v in costs["engine_build_s"].items()) + ")."
         if str(cfg.platform.backend) == "sim" else "Board hours are the real measurement and build seconds."),
        "",
        "## Plots",
        "",
        "![FPS per option](plots/fps_per_option.png)",
        "![Search trajectory](plots/trajectory.png)",
        *([f"![Gantt chart of the best configuration](plots/{gantt.name})"] if gantt else []),
        "",
        "Every measurement: `measurements.parquet`; the resolved config: `config.yaml`.",
        "",
    ]
    return write_text_atomic(run / "report.md", "\n".join(lines))


def _base_g(frame) -> float:
    ok = frame[(frame["status"] == "ok") & (frame["strategy"] == "Base(G)")]
    return float(ok["fps"].iloc[0]) if len(ok) else 0.0


def _gantt(run: Path, best: dict, out: Path) -> Path | None:
    """The steady-state schedule of the best configuration (sim backend only: it keeps a trace)."""
    from dse.configuration import Configuration
    from dse.workflow.phases import RunContext

    ctx = RunContext(run)
    backend = ctx.backend
    if not hasattr(backend, "measure_with_trace"):
        return None
    from dse.report.gantt import draw_gantt

    _, res = backend.measure_with_trace(Configuration.from_dict(best["config"]), trace=True)
    if res is None or not getattr(res, "trace", None):
        return None
    return draw_gantt(res.trace, out, title=f"{best['benchmark']}: best configuration")
