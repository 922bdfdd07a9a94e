"""`dse inspect MODEL [--input-shape NAME:1x3x416x416 ...] [--json] [--layers]`: layers, cost and cut points;
with `--dla [--platform P] [--tensorrt V] [--option O --cuts C,...]`: why layers leave the DLA."""
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
    dla = p.add_argument_group("DLA fallback (--dla)")
    dla.add_argument("--dla", action="store_true",
                     help="per layer whether the DLA runs it (and which rule fails), per DLA stage its loadables, "
                          "limits and the GPU fallback and reformat time the virtual board charges")
    dla.add_argument("--platform", default="xavier-agx-sim", help="platform profile whose DLA rules apply "
                                                                   "(default: xavier-agx-sim)")
    dla.add_argument("--tensorrt", metavar="VERSION", help="DLA rules of this TensorRT release instead of the "
                                                          "platform's (e.g. 8.5, 10.3, tensorrt-6)")
    dla.add_argument("--option", help="mapping option whose DLA stages to explain (default: the whole network as "
                                      "one DLA stage)")
    dla.add_argument("--cuts", default="", help="comma-separated cut layer indices for --option, e.g. 40,120")
    dla.add_argument("--precision", default="int8", help="precision of the stages (default: int8)")
    p.set_defaults(func=_inspect)


def _load(model_arg: str, shapes):
    """A file path, else a zoo network name."""
    from pathlib import Path

    from dse.core.errors import DseError
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
    if args.dla:
        return _inspect_dla(args, analysis)
    if args.option or args.cuts or args.tensorrt:
        from dse.core.errors import DseError

        raise DseError("--option, --cuts and --tensorrt explain DLA placement: add --dla")
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


def _dla_explanation(args, analysis):
    from dse.backends.sim import SimBackend
    from dse.core.configuration import PRECISIONS, Configuration
    from dse.report.dla_fallback import explain, require_dla
    from dse.core.errors import DseError, choices_error
    from dse.platform import load_platform

    if args.precision not in PRECISIONS:
        raise choices_error("precision", args.precision, PRECISIONS)
    platform = load_platform(args.platform)
    require_dla(platform)
    if args.tensorrt:
        platform = platform.with_dla_ruleset(args.tensorrt)
    backend = SimBackend(platform, analysis)
    config = None
    if args.cuts and not args.option:
        raise DseError("--cuts needs --option (the mapping option the cuts split the network for)")
    if args.option:
        if args.option not in platform.options:
            raise choices_error(f"option of {platform.name}", args.option, platform.options)
        try:
            cuts = tuple(int(c) for c in args.cuts.split(",") if c.strip())
        except ValueError:
            raise DseError(f"--cuts {args.cuts!r}: expected comma-separated layer indices, e.g. 40,120") from None
        option = platform.options[args.option]
        streams = tuple(max(1, len(s.pes)) if s.pnd else 1 for s in option.stages)
        config = Configuration(benchmark=args.model, platform=platform.name, option=args.option, cuts=cuts,
                               streams=streams, precision=args.precision, input_size=backend.input_size)
    return explain(backend, config=config, precision=args.precision, network=args.model)


def _inspect_dla(args, analysis) -> int:
    import json

    ex = _dla_explanation(args, analysis)
    if args.json:
        print(json.dumps(ex.to_dict(), indent=2))
        return 0
    print_dla(ex, all_layers=args.layers)
    return 0


def print_dla(ex, all_layers: bool = False) -> None:
    """The explanation as tables: failing layers (every layer with ``all_layers``), DLA stages, limits, rewrites."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    where = (f"option {ex.option}, cuts {ex.cuts}" if ex.option else "whole network as one DLA stage on DLA core 0")
    off = [v for v in ex.layers if not v.on_dla]
    console.print(f"[bold]{ex.network}[/bold] on {ex.platform}: DLA rules of {ex.ruleset_label} "
                  f"[{ex.ruleset}], {ex.precision.upper()}; {where}")
    console.print(f"{len(ex.layers) - len(off)} of {len(ex.layers)} layers can run on the DLA")
    rows = ex.layers if all_layers else off
    if rows:
        t = Table(title="layers" if all_layers else "layers the DLA cannot run")
        for col in ("#", "name", "op", "DLA", "rule", "reason"):
            t.add_column(col, justify="right" if col == "#" else "left", overflow="fold")
        for v in rows:
            t.add_row(str(v.index), v.name, v.op, "yes" if v.on_dla else "no", v.check,
                      v.reason or v.note)
        console.print(t)
    st = Table(title="DLA stages (times per frame, as the virtual board charges them)")
    for col in ("stage", "PE", "layers", "loadables", "fallback layers", "fallback ms", "reformat ms", "DLA ms",
                "reasons"):
        st.add_column(col, justify="left" if col in ("PE", "layers", "reasons") else "right", overflow="fold")
    for s in ex.stages:
        st.add_row(str(s.stage), s.pes, f"{s.first}..{s.last}", str(s.loadables), str(s.fallback_layers),
                   f"{s.fallback_ms:.3f}", f"{s.reformat_ms:.3f}", f"{s.dla_ms:.3f}",
                   ", ".join(f"{k} x{n}" for k, n in s.reasons.items()))
    console.print(st)
    lim = ex.limits
    per_core = ", ".join(f"{k}: {n}" for k, n in ex.loadables_per_core.items())
    console.print(f"loadables per core {per_core} (limit {lim['max_dla_loadables_per_core'] or 'none'}); "
                  f"engines on the DLAs {ex.engines_on_dla} (limit {lim['max_dla_engines_total'] or 'none'})")
    if ex.over_limit:
        console.print(f"[red]refused by the SDK: {ex.over_limit}[/red]")
    if ex.rewrites:
        console.print("[bold]rewrites that keep layers on the DLA[/bold]")
        for r in ex.rewrites:
            console.print(f"  - {r}")
