"""`dse measure`: measure one configuration on the configured platform's backend (sim by default)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from dse.core.errors import DseError


def _int_list(text: str, what: str) -> tuple[int, ...]:
    text = (text or "").strip()
    if text in ("", "-"):
        return ()
    try:
        return tuple(int(x) for x in text.replace(" ", "").split(",") if x)
    except ValueError:
        raise DseError(f"--{what} must be comma-separated integers (e.g. 87 or 30,45), got {text!r}") from None


GANTT_FORMATS = (".png", ".svg", ".pdf")   # what matplotlib writes that a report shows


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "measure", help="measure one configuration (FPS, latency, utilization, power)",
        description="Measure one pipelined configuration. Positional Hydra overrides pick the benchmark, "
                    "platform, precision, batch, input size: e.g. benchmark=yolov4 precision=int8 batch=4.")
    p.add_argument("overrides", nargs="*", help="Hydra overrides key=value")
    p.add_argument("--option", default="E", help="mapping option of the platform (E, A, PND-A, ...)")
    p.add_argument("--cuts", default="", help="cut points, comma-separated (last layer of every stage but the last)")
    p.add_argument("--streams", default="", help="streams per stage, comma-separated (default: 1 per stage)")
    p.add_argument("--pre", type=int, default=1, help="pre-processing threads")
    p.add_argument("--post", type=int, default=1, help="post-processing threads")
    p.add_argument("--buffers", type=int, default=1, help="frames in flight between pre- and post-processing")
    p.add_argument("--power-mode", help="nvpmodel power mode of the platform (MAXN, MODE_15W, ...; sim)")
    p.add_argument("--gpu-mhz", help="GPU clock, a level of the power mode (sim)")
    p.add_argument("--dla-mhz", help="DLA clock, a level of the power mode (sim)")
    p.add_argument("--cpu-mhz", help="CPU clock, a level of the power mode (sim)")
    p.add_argument("--json", action="store_true", help="print the measurement as JSON")
    p.add_argument("--gantt", metavar="PNG", help="draw the simulated steady-state schedule (sim backend)")
    p.set_defaults(func=run)


def run(args) -> int:
    from dse.backends import backend_from_config
    from dse.backends.base import RUNS_MODEL, TRACE, supports, window_frames
    from dse.config import compose_config
    from dse.network import load_analysis
    from dse.workflow.phases import base_configuration

    if args.gantt and Path(args.gantt).is_dir():   # before measuring: a refused output writes nothing
        raise DseError(f"{args.gantt} is a directory: give a file path to write to")
    if args.gantt and Path(args.gantt).suffix.lower() not in GANTT_FORMATS:
        raise DseError(f"--gantt {args.gantt}: the file's extension names the image format; valid: "
                       f"{', '.join(GANTT_FORMATS)}")
    cfg = compose_config(args.overrides)
    cuts = _int_list(args.cuts, "cuts")
    streams = _int_list(args.streams, "streams") or (1,) * (len(cuts) + 1)
    analysis = load_analysis(cfg)
    backend = backend_from_config(cfg, analysis)
    config = base_configuration(backend.settings, backend.platform.name, analysis).with_(
        option=args.option, cuts=cuts, streams=streams, buffers=args.buffers, pre_threads=args.pre,
        post_threads=args.post, extra={k: v for k, v in (("power_mode", args.power_mode), ("gpu_mhz", args.gpu_mhz),
                                                         ("dla_mhz", args.dla_mhz), ("cpu_mhz", args.cpu_mhz)) if v})
    if args.gantt and not supports(backend, TRACE):
        raise DseError(f"--gantt needs a simulated schedule; backend {backend.name!r} does not keep one")
    if supports(backend, RUNS_MODEL) and backend.check(config) is None:   # minutes on a real board: say so first
        print(f"measuring on {backend.platform.name} ({backend.name}): {config.option} cuts {list(config.cuts)} "
              f"streams {list(config.streams)}: {window_frames(backend.settings.sample_size, config)} frames after "
              "the warm-up", file=sys.stderr, flush=True)
    if supports(backend, TRACE):
        m, res = backend.measure_with_trace(config, trace=bool(args.gantt))
    else:
        m, res = backend.measure(config), None
    if args.gantt and res is not None:
        from dse.report.gantt import draw_gantt

        draw_gantt(res.trace, args.gantt, title=f"{config.benchmark} {config.precision} {config.option} "
                                                 f"cuts={list(config.cuts)} streams={list(config.streams)}: "
                                                 f"{m.fps:.1f} FPS")
    if args.json:
        print(json.dumps(m.to_dict(), indent=1, sort_keys=True))
    elif not m.ok:   # one line on stderr, exit 1: the board refused or failed (exit 2 is for bad input)
        print(f"{m.status}: {m.reason}", file=sys.stderr)
    else:
        _print(m)
    return 0 if m.ok else 1


def _print(m) -> None:
    c = m.config
    print(f"{c.benchmark} on {c.platform}: option {c.option} cuts {list(c.cuts)} streams {list(c.streams)} "
          f"pre {c.pre_threads} post {c.post_threads} buffers {c.buffers} {c.precision} batch {c.batch} "
          f"{c.input_size}x{c.input_size}" + "".join(f" {k} {v}" for k, v in c.extra))
    util = " ".join(f"{k} {v:.0%}" for k, v in m.util.items())
    print(f"{m.fps:.1f} FPS  latency p50 {m.latency_ms_p50:.2f} ms p99 {m.latency_ms_p99:.2f} ms  util {util}")
    power = ("power not measured" if m.power_w is None
             else f"power {m.power_w:.1f} W  energy {m.energy_j_per_frame * 1000:.1f} mJ/frame")
    print(f"{power}  stage ms "
          f"{[round(s, 3) for s in m.stage_ms]}  DLA loadables {m.dla_loadables}  fallback layers {m.fallback_layers}")
