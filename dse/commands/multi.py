"""`dse multi export CASE_DIR --fsm A --method PR -o DIR`: a finished multi-network case (target `multi`) as a
JEDI configuration with one instance per app and the frequency table as a clock-setting script (both untested
on hardware)."""


def add_parser(sub):
    p = sub.add_parser("multi", help="multi-network results (target multi): export to a board")
    p.add_argument("action", choices=["export"])
    p.add_argument("case_dir", help="e.g. results/multi/ch4-alpha/xavier-agx-sim")
    p.add_argument("--fsm", required=True)
    p.add_argument("--method", default="PR")
    p.add_argument("--scenario", help="for LC (a mapping per scenario): which scenario's mapping")
    p.add_argument("-o", "--output", required=True, help="directory for jedi.cfg and dvfs.sh")
    p.add_argument("--board", help="the real board's platform profile, whose clock_control files dvfs.sh writes "
                                   "(default: the case's platform without '-sim', e.g. xavier-agx)")
    p.set_defaults(func=_run)


def _run(args) -> int:
    from pathlib import Path

    import pandas as pd

    from dse.platform.modes import clock_control
    from dse.core.errors import DseError
    from dse.systems.multi.export import dvfs_script, jedi_multi
    from dse.systems.multi.networks import network_backend
    from dse.platform import load_platform
    from dse.store.atomic import write_text_atomic
    from dse.systems.multi.case_dir import load_result, load_settings

    table_path = Path(args.case_dir) / "freqtable" / f"{args.fsm}-{args.method}.parquet"
    if not table_path.is_file():
        raise DseError(f"{table_path} not found: run `snakemake --cores 2 multi` for this case first")
    case, seed, result = load_result(args.case_dir, args.fsm, args.method)
    _, platform, _ = load_settings(args.case_dir)
    analyses = {n: (network_backend(n, platform, case.settings, seed)[0], platform) for n in case.settings.networks}
    out = Path(args.output)
    board = load_platform(args.board or str(platform["name"]).removesuffix("-sim"))
    control = clock_control(board)
    if control is None:
        raise DseError(f"platform {board.name} has no clock_control section (the sysfs files that set its clocks): "
                       "name a board profile that has one with --board")
    jedi = jedi_multi(case, result, analyses, scenario=args.scenario)
    dvfs = dvfs_script(pd.read_parquet(table_path), control)
    write_text_atomic(out / "jedi.cfg", jedi)
    write_text_atomic(out / "dvfs.sh", dvfs)
    (out / "dvfs.sh").chmod(0o755)
    print(f"wrote {out / 'jedi.cfg'} and {out / 'dvfs.sh'} (untested on hardware)")
    return 0
