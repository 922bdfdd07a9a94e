"""`dse calibrate`: every published anchor the sim reproduces, the simulated value, the error, a summary."""
from __future__ import annotations


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("calibrate", help="compare the sim against the published figures (CALIBRATION.md)",
                              description="Simulate every anchor of CALIBRATION.md the sim can reproduce and "
                                          "print published vs simulated values with the error and a summary.")
    p.add_argument("--platform", default="xavier-agx-sim", help="platform profile (the anchors are for Xavier AGX)")
    p.add_argument("--quick", action="store_true", help="only the 416x416 batch-1 anchors of the main networks")
    p.add_argument("--cache", default=None, help="where analysed zoo networks are cached (Parquet)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--markdown", metavar="FILE", help="also write the table as Markdown")
    p.set_defaults(func=run)


def run(args) -> int:
    from pathlib import Path

    from dse.backends.sim.calibration import CACHE, Networks, anchors, format_table
    from dse.platform import load_platform

    nets = Networks(load_platform(args.platform), cache_dir=Path(args.cache) if args.cache else CACHE, seed=args.seed)
    rows = anchors(nets, quick=args.quick)
    try:
        from rich.console import Console
        from rich.table import Table

        table = Table(title=f"sim calibration on {args.platform}")
        for col in ("group", "anchor", "published", "simulated", "error", "ok"):
            table.add_column(col, justify="right" if col in ("published", "simulated", "error") else "left")
        for a in rows:
            table.add_row(a.group, a.name, f"{a.published:.4g}", f"{a.simulated:.4g}", f"{a.error * 100:+.1f} %",
                          "yes" if a.ok else "[red]no[/red]")
        Console(width=140).print(table)
    except ImportError:  # pragma: no cover
        print(format_table(rows))
    n_ok = sum(a.ok for a in rows)
    print(f"{n_ok} of {len(rows)} anchors within tolerance")
    if args.markdown:
        Path(args.markdown).write_text(format_table(rows) + "\n")
    return 0
