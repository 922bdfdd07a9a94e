"""`dse export jedi|trtexec RESULT`: write a found configuration for JEDI or as per-stage trtexec commands."""
from __future__ import annotations

import argparse
from pathlib import Path

from dse.core.errors import DseError
from dse.store.atomic import write_text_atomic


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("export", help="export a configuration as a JEDI config or trtexec commands",
                              description="Export a found configuration (best.yaml, or a JSON of a configuration) "
                                          "so it runs with JEDI or trtexec.")
    p.add_argument("format", choices=("jedi", "trtexec"))
    p.add_argument("result", type=Path, help="best.yaml (with a 'config' key) or a configuration JSON")
    p.add_argument("-o", "--output", type=Path, default=None, help="file to write (default: stdout)")
    p.add_argument("--layers", type=int, default=None,
                   help="layer count of the network (jedi cut_points end with the last layer; default: from the "
                        "result's n_layers, else analysed from the benchmark)")
    p.add_argument("--onnx", default="model.onnx", help="onnx_file_path written in the JEDI config")
    p.add_argument("--stage-dir", default="stages", help="directory of the stage_<k>.onnx files (trtexec)")
    p.add_argument("--engine-dir", default="engines", help="where trtexec saves the engines")
    p.add_argument("--platform", default=None, help="platform profile (default: the configuration's platform)")
    p.set_defaults(func=run)


def _analysis(config):
    """The analysed network of the configuration's benchmark, or None when it is not one of config/."""
    from dse.config import compose_config, group_choices
    from dse.network import load_analysis

    if config.benchmark not in group_choices("benchmark"):
        return None
    return load_analysis(compose_config([f"benchmark={config.benchmark}", f"benchmark.input_size={config.input_size}",
                                         f"batch={config.batch}"]))


def _dla_notes(config, platform, analysis) -> dict | None:
    """What the DLA rules expect of each DLA stage (None without the network, a DLA or a cost model, or for a
    configuration the board refuses: the export says why)."""
    if analysis is None or platform.dla_rules is None or platform.cost is None:
        return None
    from dse.backends.sim import SimBackend
    from dse.report.dla_fallback import explain, trtexec_notes

    try:
        return trtexec_notes(explain(SimBackend(platform, analysis), config=config))
    except DseError:
        return None


def run(args: argparse.Namespace) -> int:
    import sys

    from dse.platform.checks import check_cuts
    from dse.platform import load_platform
    from dse.report.export import jedi_config, load_result, trtexec_script

    config, doc = load_result(args.result)
    platform = load_platform(args.platform or config.platform)
    analysis = _analysis(config)
    if analysis is None:
        print(f"note: benchmark {config.benchmark!r} is not in config/benchmark: its cuts are not checked",
              file=sys.stderr)
    else:
        reason = check_cuts(config, analysis)
        if reason:
            raise DseError(f"{args.result}: {reason}")
    if args.format == "jedi":
        if args.layers:
            n_layers = args.layers
        elif isinstance(doc.get("n_layers"), int):
            n_layers = int(doc["n_layers"])
        elif analysis is not None:
            n_layers = len(analysis.layers)
        else:
            raise DseError(f"the layer count of {config.benchmark!r} is unknown: give --layers N")
        bench = {}
        if analysis is not None:
            from dse.config import compose_config

            bench = compose_config([f"benchmark={config.benchmark}"]).benchmark
        text = jedi_config(config, platform, n_layers=n_layers, onnx_path=args.onnx,
                           sample_size=int(bench.get("sample_size", 5000)) if bench else None,
                           application=str(bench.get("application", "yolo")) if bench else "yolo")
    else:
        model = str(doc.get("model") or config.benchmark)
        text = trtexec_script(config, platform, model=model, stage_dir=args.stage_dir, engine_dir=args.engine_dir,
                              stage_notes=_dla_notes(config, platform, analysis))
    if args.output:
        write_text_atomic(args.output, text)
        print(f"wrote {args.output}")
    else:
        print(text, end="")
    return 0
