"""`dse calibrate`: every published anchor the sim reproduces, the simulated value, the error, a summary per split
(fit / held-out) and kind (throughput / ranking); ``--decisions`` adds the option choices of Table 3.5."""
from __future__ import annotations

BEGIN, END = "<!-- dse calibrate: begin -->", "<!-- dse calibrate: end -->"


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("calibrate", help="compare the sim against the published figures (CALIBRATION.md)",
                              description="Simulate every anchor of CALIBRATION.md the sim can reproduce and "
                                          "print published vs simulated values with the error, and a summary for "
                                          "the fit and the held-out half of the anchors.")
    p.add_argument("--platform", default="xavier-agx-sim", help="platform profile (the anchors are for Xavier AGX)")
    p.add_argument("--quick", action="store_true", help="only the 416x416 batch-1 anchors of the main networks")
    p.add_argument("--decisions", action="store_true",
                   help="also search and fine-tune every option of the 18 Table 3.5 rows (about 10 min) and add "
                        "the option choices as ranking anchors, with the decisions table")
    p.add_argument("--cache", default=None, help="where analysed zoo networks are cached (Parquet)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--markdown", metavar="FILE",
                   help=f"also write the tables as Markdown; a FILE holding the lines {BEGIN} and {END} keeps "
                        "everything outside them")
    p.set_defaults(func=run)


def run(args) -> int:
    from pathlib import Path

    from dse.backends.sim.calibration import CACHE, Networks, anchors, assign_splits, format_table, split_summary
    from dse.platform import load_platform

    nets = Networks(load_platform(args.platform), cache_dir=Path(args.cache) if args.cache else CACHE, seed=args.seed)
    rows = anchors(nets, quick=args.quick)
    tables = []
    if args.decisions:
        from dse.backends.sim.decisions import decide_all, decisions_table, ranking_anchors

        decisions = decide_all(args.platform, seed=args.seed, progress=lambda s: print(f"deciding {s}", flush=True))
        rows += assign_splits(ranking_anchors(decisions))
        tables.append("### Decisions (Table 3.5)\n\n" + decisions_table(decisions))
    try:
        from rich.console import Console
        from rich.table import Table

        table = Table(title=f"sim calibration on {args.platform}")
        for col in ("group", "anchor", "split", "published", "simulated", "error", "ok"):
            table.add_column(col, justify="right" if col in ("published", "simulated", "error") else "left")
        for a in rows:
            table.add_row(a.group, a.name, a.split, f"{a.published:.4g}", f"{a.simulated:.4g}",
                          f"{a.error * 100:+.1f} %", "yes" if a.ok else "[red]no[/red]")
        Console(width=150).print(table)
    except ImportError:  # pragma: no cover
        print(format_table(rows))
    print(f"{sum(a.ok for a in rows)} of {len(rows)} anchors within tolerance")
    for line in split_summary(rows):
        print(line)
    if tables:
        print("\n\n".join(tables))
    if args.markdown:
        write_markdown(Path(args.markdown), "\n\n".join(["### Anchors\n\n" + format_table(rows), *tables]))
    return 0


def write_markdown(path, block: str) -> None:
    """The generated block alone, or between the markers of an existing page (the prose around it is kept)."""
    from dse.store.atomic import write_text_atomic

    text = path.read_text() if path.exists() else ""
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = f"{head}{BEGIN}\n{block}\n{END}{rest.split(END, 1)[1]}"
    else:
        text = block + "\n"
    write_text_atomic(path, text)
