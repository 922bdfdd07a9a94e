"""`dse calibrate`: every published anchor of the platform's board that the sim reproduces (Xavier AGX:
CALIBRATION.md; TX2: seed 001 Table 2), the simulated value, the error, a summary per split (fit / held-out) and
kind (throughput / ranking); ``--decisions`` adds the option choices of Table 3.5 (Xavier)."""
from __future__ import annotations

BEGIN, END = "<!-- dse calibrate: begin -->", "<!-- dse calibrate: end -->"


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("calibrate", help="compare the sim against the published figures (CALIBRATION.md)",
                              description="Simulate every anchor of CALIBRATION.md the sim can reproduce and "
                                          "print published vs simulated values with the error, and a summary for "
                                          "the fit and the held-out half of the anchors.")
    p.add_argument("--platform", default="xavier-agx-sim",
                   help="platform profile; its board picks the anchors: Xavier AGX (CALIBRATION.md, thesis Ch. 3-4) "
                        "or TX2 (tx2-sim: seed 001 Table 2, 27 rows of throughput and energy)")
    p.add_argument("--quick", action="store_true", help="only the 416x416 batch-1 anchors of the main networks")
    p.add_argument("--decisions", action="store_true",
                   help="also search, fine-tune and polish every option of the 18 Table 3.5 rows (about 3 h on "
                        "one core) and add the option choices as ranking anchors, with the decisions table")
    p.add_argument("--cache", default=None, help="where analysed zoo networks are cached (Parquet)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--set", action="append", default=[], metavar="PATH=VALUE",
                   help="change one value of the platform profile first, e.g. cost.gpu.peak_gmacs.fp16=5400 "
                        "(repeatable; the same as the override platform.PATH=VALUE of a pipeline run, which is "
                        "also accepted)")
    p.add_argument("--fit", nargs="*", metavar="PATH", default=None,
                   help="fit these profile values (default: the board's fitted values: on Xavier the peak rates and "
                        "overheads of dse.calibration.fit, on TX2 dse.calibration.tx2.FITTED; PATH+PATH ties values "
                        "that move together) to the fit half of the anchors and report both halves before and after")
    p.add_argument("--fit-evaluations", type=int, default=150, metavar="N",
                   help="anchor evaluations the fit may spend (default 150)")
    p.add_argument("--fit-anchors", choices=("quick", "all"), default="quick",
                   help="anchors evaluated inside the fit: quick (~3 s each, default) or all (~30 s each); the "
                        "report after the fit always uses the set chosen by --quick")
    p.add_argument("--fit-out", metavar="FILE",
                   help="write the fitted values as a YAML list of overrides platform.PATH=VALUE (for --set, or a "
                        "pipeline run's overrides)")
    p.add_argument("--markdown", metavar="FILE",
                   help=f"also write the tables as Markdown; a FILE holding the lines {BEGIN} and {END} keeps "
                        "everything outside them")
    p.set_defaults(func=run)


def run(args) -> int:
    from pathlib import Path

    from dse.calibration.anchor_sets import anchor_set
    from dse.calibration.anchors import CACHE, assign_splits, format_table, split_summary
    from dse.core.errors import DseError

    cache = Path(args.cache) if args.cache else CACHE
    sets = [s.strip() for s in args.set]
    profile = platform_profile(args.platform, sets)
    overrides = [platform_override(s) for s in sets]      # the same changes for the searches of --decisions
    anchors_of = anchor_set(args.platform, profile)
    if args.decisions and not anchors_of.decisions:
        raise DseError(f"--decisions: the Table 3.5 option choices are Xavier AGX figures; platform "
                       f"{args.platform} is calibrated against {anchors_of.source}")
    print(f"anchors: {anchors_of.source}")

    def evaluate(d: dict, quick: bool) -> list:
        return anchors_of.evaluate(d, quick, cache, args.seed)

    tables = []
    rows = None
    if args.fit is not None:
        from dse.calibration.fit import fit, fit_table

        same_set = args.quick == (args.fit_anchors == "quick")   # the fit's anchors are the report's
        result = fit(profile, lambda d: evaluate(d, args.fit_anchors == "quick"), args.fit or anchors_of.fit_parameters,
                     max_evaluations=args.fit_evaluations,
                     progress=_fit_progress(args.fit_evaluations))
        before = result.before if same_set else evaluate(profile, args.quick)
        print("before the fit:")
        for line in split_summary(before):
            print(f"  {line}")
        result.apply(profile)
        tables.append("### Fit\n\n" + fit_table(result) + "\n\nBefore the fit:\n\n"
                      + "\n".join(f"- {line}" for line in split_summary(before)))
        print(fit_table(result))
        overrides += result.overrides()
        print("overrides: " + " ".join(result.overrides()))
        if args.fit_out:
            from dse.store.atomic import write_text_atomic

            write_text_atomic(Path(args.fit_out), "".join(f"- {o}\n" for o in result.overrides()))
        if same_set:
            rows = result.after
    if rows is None:
        rows = evaluate(profile, args.quick)
    if args.decisions:
        from dse.calibration.decisions import decide_all, decisions_table, ranking_anchors

        decisions = decide_all(args.platform, seed=args.seed, overrides=overrides,
                               progress=lambda s: print(f"deciding {s}", flush=True))
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


def _fit_progress(budget: int):
    """A line every 10 evaluations on stderr (each evaluation simulates every fit anchor: seconds)."""
    import sys

    def report(n: int, loss: float) -> None:
        if n % 10 == 1 or n == budget:
            print(f"[fit] {n} of at most {budget} evaluations, best loss {loss:.5f}", file=sys.stderr, flush=True)
    return report


def platform_override(change: str) -> str:
    """``PATH=VALUE`` (or ``platform.PATH=VALUE``) as a Hydra override of the platform; a leading ``+`` adds a key the
    profile does not have yet (``+cost.gpu.channel_atom_by_precision.fp16=256``)."""
    change = change.strip()
    add = "+" if change.startswith("+") else ""
    return f"{add}platform.{change.removeprefix(add).removeprefix('platform.')}"


def platform_profile(name: str, sets: list[str]) -> dict:
    """The composed profile as a plain dict, with ``PATH=VALUE`` changes applied through Hydra (so a typo in a
    path or a value of the wrong type is refused with the config system's own error)."""
    from omegaconf import OmegaConf

    from dse.config import compose_config, group_choices
    from dse.core.errors import DseError, choices_error

    if name not in group_choices("platform"):
        raise choices_error("platform", name, group_choices("platform"))
    bad = [s for s in sets if "=" not in s or not s.split("=", 1)[0].strip()]
    if bad:
        raise DseError(f"--set {bad[0]!r}: expected PATH=VALUE, e.g. cost.gpu.peak_gmacs.fp16=5400")
    cfg = compose_config([f"platform={name}", *(platform_override(s) for s in sets)])
    return OmegaConf.to_container(cfg.platform, resolve=True)


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
