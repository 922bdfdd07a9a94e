"""`dse partition MODEL --cuts 52,134 -o DIR [--check]`: write one ONNX model per pipeline stage."""
from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "partition", help="cut a network into pipeline stages (one ONNX model per stage)",
        description="Cut a network at the given layers into stage models stage_<k>.onnx plus partition.json. "
                    "A cut c ends a stage after layer c (see `dse inspect` for layers and feasible cuts).")
    p.add_argument("model", help="ONNX file, or a zoo network name (see `dse zoo`)")
    p.add_argument("--cuts", required=True, type=_cuts,
                   help="comma-separated last layer of every stage but the last, e.g. 52,134")
    p.add_argument("--input-shape", action="append", default=[], metavar="NAME:DIMS",
                   help="fix a dynamic input, e.g. images:1x3x416x416 (repeatable)")
    p.add_argument("--input-size", type=int, default=None, help="input size for a zoo network (default: its own)")
    p.add_argument("-o", "--output", required=True, type=Path, help="directory for the stage models")
    p.add_argument("--check", action="store_true",
                   help="compare the whole model and the chained stages (Polygraphy's Comparator, ONNX Runtime) on "
                        "seeded random input; fail unless every network output matches within --atol")
    p.add_argument("--atol", type=float, default=1e-5, help="max abs difference allowed by --check (default 1e-5)")
    p.add_argument("--seed", type=int, default=0, help="seed of the --check input (default 0)")
    p.set_defaults(func=run)
    return p


def _cuts(text: str) -> tuple[int, ...]:
    text = text.strip()
    if not text:
        return ()
    try:
        return tuple(int(t) for t in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated layer indices like 52,134, got {text!r}") from None


def _load(args):
    from dse.graph.analysis import analyze
    from dse.graph.model import parse_input_shapes

    shapes = parse_input_shapes(args.input_shape)
    source = args.model
    if not Path(source).exists() and not source.endswith(".onnx"):
        from dse.zoo import build_network

        source = build_network(source, input_size=args.input_size)
    return analyze(source, shapes)


def run(args) -> int:
    from rich.console import Console
    from rich.table import Table

    from dse.graph.partition import check_partition, partition, write_partition

    console = Console()
    analysis = _load(args)
    stages = partition(analysis, args.cuts)
    diffs = check_partition(analysis, stages, seed=args.seed, atol=args.atol) if args.check else None
    manifest = write_partition(stages, args.output, digest=getattr(analysis, "digest", ""))

    table = Table(title=f"{len(stages)} stage(s), cuts {list(args.cuts)}")
    for col in ("stage", "layers", "inputs", "outputs", "MMACs"):
        table.add_column(col, justify="right" if col in ("stage", "MMACs") else "left")
    for s in stages:
        table.add_row(str(s.index), f"{s.first_layer}-{s.last_layer} ({s.n_layers})",
                      _tensors(s.inputs, s.shapes), _tensors(s.outputs, s.shapes), f"{s.macs / 1e6:,.1f}")
    console.print(table)
    if diffs is not None:
        worst = max(diffs.values(), default=0.0)
        console.print(f"check: {len(diffs)} network output(s) match, max abs diff {worst:.3g} <= {args.atol:g}",
                      soft_wrap=True)
    console.print(f"wrote {len(stages)} stage model(s) and {manifest}", soft_wrap=True, highlight=False)
    return 0


def _tensors(names, shapes) -> str:
    return "\n".join(f"{n} {'x'.join(str(d) for d in shapes.get(n, []))}" for n in names)
