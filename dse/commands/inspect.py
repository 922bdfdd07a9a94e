"""`dse inspect MODEL [--input-shape NAME:1x3x416x416 ...] [--json] [--layers]`: layers, cost and cut points."""
from __future__ import annotations


def add_parser(sub):
    p = sub.add_parser("inspect", help="analyse an ONNX model: layers, MACs, params, feasible cut points",
                       description="Sanitize an ONNX model (static shapes, constants folded) and summarize its "
                                   "layers, cost and feasible pipeline cut points.")
    p.add_argument("model", metavar="MODEL", help="ONNX file, or a zoo network name (see `dse zoo`)")
    p.add_argument("--input-shape", action="append", default=[], metavar="NAME:DIMS",
                   help="static shape for a dynamic input, e.g. input:1x3x416x416 (repeat per input)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--layers", action="store_true", help="also list every layer with its cost and cut feasibility")
    p.set_defaults(func=_inspect)


def _load(model_arg: str, shapes):
    """A file path, else a zoo network name."""
    from pathlib import Path

    from dse.errors import DseError
    from dse.graph.analysis import analyze

    if Path(model_arg).exists() or model_arg.endswith(".onnx"):
        return analyze(model_arg, shapes)
    try:
        from dse.zoo import build_network
    except ImportError:
        raise DseError(f"model file {model_arg!r} not found") from None
    try:
        model = build_network(model_arg)
    except DseError as exc:
        raise DseError(f"{model_arg!r} is neither a model file nor a zoo network: {exc}") from None
    return analyze(model, shapes)


def _inspect(args) -> int:
    import json
    import time

    from dse.graph.model import parse_input_shapes

    shapes = parse_input_shapes(args.input_shape)
    start = time.perf_counter()
    analysis = _load(args.model, shapes)
    seconds = time.perf_counter() - start
    summary = analysis.summary()
    if args.json:
        if args.layers:
            summary["layer_table"] = json.loads(analysis.to_frame().to_json(orient="records"))
        print(json.dumps(summary, indent=2))
        return 0
    _print_rich(analysis, summary, seconds, args.layers)
    return 0


def _shape_text(shape) -> str:
    return "x".join(str(d) for d in shape) if shape else "scalar"


def _print_rich(analysis, summary: dict, seconds: float, show_layers: bool) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    head = Table(title=f"{summary['name'] or 'model'}  ({seconds:.2f} s)", show_header=False, box=None)
    head.add_column(style="bold")
    head.add_column()
    for name, shape in summary["inputs"].items():
        head.add_row("input", f"{name}  {_shape_text(shape)}")
    for name, shape in summary["outputs"].items():
        head.add_row("output", f"{name}  {_shape_text(shape)}")
    head.add_row("opset", ", ".join(f"{d} {v}" for d, v in summary["opset"].items()))
    head.add_row("layers", str(summary["layers"]))
    head.add_row("MACs", f"{summary['macs'] / 1e9:.3f} G")
    head.add_row("params", f"{summary['params_bytes'] / 1e6:.2f} MB")
    head.add_row("feasible cut positions", f"{summary['feasible_count']} of {summary['positions']}")
    for k, n in summary["tuples"].items():
        head.add_row(f"feasible {k}-cut tuples", f"{n:,}")
    head.add_row("digest", summary["digest"][:16])
    console.print(head)

    ops = Table(title="op types")
    ops.add_column("op_type")
    ops.add_column("layers", justify="right")
    ops.add_column("MACs (G)", justify="right")
    macs_by_op: dict[str, int] = {}
    for layer in analysis.layers:
        macs_by_op[layer.op_type] = macs_by_op.get(layer.op_type, 0) + layer.macs
    for op, count in summary["op_types"].items():
        ops.add_row(op, str(count), f"{macs_by_op[op] / 1e9:.4f}")
    console.print(ops)

    if show_layers:
        feasible = set(analysis.feasible_cuts)
        table = Table(title="layers (cut? = a single cut after this layer is feasible)")
        for col in ("#", "name", "op_type", "output", "MACs (M)", "params (KB)", "cut?"):
            table.add_column(col, justify="right" if col in ("#", "MACs (M)", "params (KB)") else "left")
        last = len(analysis.layers) - 1
        for layer in analysis.layers:
            cut = "" if layer.index == last else ("yes" if layer.index in feasible else "no")
            table.add_row(str(layer.index), layer.name, layer.op_type,
                          ", ".join(_shape_text(s) for s in layer.output_shapes),
                          f"{layer.macs / 1e6:.2f}", f"{layer.param_bytes / 1e3:.1f}", cut)
        console.print(table)
