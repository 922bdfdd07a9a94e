"""`dse zoo list|build`: the network zoo and the Darknet cfg -> ONNX converter on the command line."""
from __future__ import annotations

import argparse


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("zoo", help="list zoo networks, build ONNX from a zoo name or a Darknet .cfg",
                                   description="The network zoo (thesis Table 3.3 plus tiny test networks) "
                                               "and the Darknet .cfg -> ONNX converter.")
    sub = parser.add_subparsers(dest="zoo_command", metavar="ACTION")
    sub.required = True

    p_list = sub.add_parser("list", help="table of zoo networks")
    p_list.add_argument("--nodes", action="store_true",
                        help="also count the ONNX nodes of each network (builds the graphs, no weights)")
    p_list.set_defaults(func=_list)

    p_build = sub.add_parser("build", help="write the ONNX model of a zoo network or a .cfg file")
    p_build.add_argument("name", metavar="NAME", help="zoo network name or path to a Darknet .cfg")
    p_build.add_argument("--input-size", type=int, default=None,
                         help="input width=height (default: the zoo default, or the cfg's [net] size)")
    p_build.add_argument("--batch", type=int, default=1, help="static batch size (default 1)")
    p_build.add_argument("--seed", type=int, default=0, help="seed of the random weights (default 0)")
    p_build.add_argument("--weights", default=None, help="Darknet .weights file instead of random weights")
    p_build.add_argument("-o", "--output", default=None, help="output path (default NAME.onnx)")
    p_build.set_defaults(func=_build)


def _list(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from dse.zoo import ZOO, network_layers

    table = Table(title="dse network zoo")
    table.add_column("name", no_wrap=True)
    for column in ("label", "description", "input", "preprocess", "layers (thesis)"):
        table.add_column(column)
    if args.nodes:
        table.add_column("ONNX nodes", justify="right")
    for entry in ZOO.values():
        row = [entry.name, entry.label, entry.description, str(entry.input_size), entry.preprocess,
               "-" if entry.layers is None else str(entry.layers)]
        if args.nodes:
            row.append(str(network_layers(entry.name)))
        table.add_row(*row)
    Console().print(table)
    return 0


def _build(args: argparse.Namespace) -> int:
    from pathlib import Path

    from dse.zoo import build_network, save_network

    model = build_network(args.name, input_size=args.input_size, batch=args.batch, seed=args.seed,
                          weights=args.weights)
    output = Path(args.output) if args.output else Path(f"{Path(args.name).stem}.onnx")
    save_network(model, output)
    dims = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    print(f"wrote {output} ({len(model.graph.node)} nodes, input {'x'.join(map(str, dims))}, "
          f"{output.stat().st_size / 1e6:.1f} MB)")
    return 0
