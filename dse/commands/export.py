"""`dse export jedi|trtexec RESULT`: write a found configuration for JEDI or as per-stage trtexec commands."""
from __future__ import annotations

import argparse
from pathlib import Path


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


def _layers(config, doc: dict, given: int | None) -> int:
    if given:
        return given
    for key in ("n_layers", "layers"):
        if isinstance(doc.get(key), int):
            return int(doc[key])
    from dse.config import compose_config
    from dse.network import load_analysis

    cfg = compose_config([f"benchmark={config.benchmark}", f"benchmark.input_size={config.input_size}",
                          f"batch={config.batch}"])
    return len(load_analysis(cfg).layers)


def run(args: argparse.Namespace) -> int:
    from dse.platform import load_platform
    from dse.report.export import jedi_config, load_result, trtexec_script

    config, doc = load_result(args.result)
    platform = load_platform(args.platform or config.platform)
    if args.format == "jedi":
        bench = {}
        try:
            from dse.config import compose_config

            bench = compose_config([f"benchmark={config.benchmark}"]).benchmark
        except Exception:  # a benchmark outside config/: defaults
            pass
        text = jedi_config(config, platform, n_layers=_layers(config, doc, args.layers), onnx_path=args.onnx,
                           sample_size=int(bench.get("sample_size", 5000)) if bench else None,
                           application=str(bench.get("application", "yolo")) if bench else "yolo")
    else:
        model = str(doc.get("model") or config.benchmark)
        text = trtexec_script(config, platform, model=model, stage_dir=args.stage_dir, engine_dir=args.engine_dir)
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text)
        print(f"wrote {args.output}")
    else:
        print(text, end="")
    return 0
