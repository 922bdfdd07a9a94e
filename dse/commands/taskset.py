"""`dse taskset`: the schedulability campaign of seed 003 (task sets with per-accelerator variants).

``dse taskset run scenario=gpu-tc sets=1000 seed=0`` composes the config (``config/taskset/apollo-xavier.yaml``;
``table=NAME`` picks another), runs one scenario and writes its campaign and the report under
``results/taskset/<table>/<units>/``; a measured table (``table=zoo-xavier``) is measured first when its config
changed. ``variants``, ``campaign`` and ``report`` are the Snakemake jobs' steps."""

import sys

SHORT_KEYS = ("scenario", "sets", "thresholds", "units", "margin", "solver", "time_limit_s")


def add_parser(sub):
    p = sub.add_parser("taskset", help="task-set schedulability campaign (seed 003): run, campaign, report")
    p.add_argument("action", choices=["run", "variants", "campaign", "report"])
    p.add_argument("args", nargs="*", help="run: KEY=VALUE (scenario, sets, seed, units, thresholds, margin, "
                                           "table, or any Hydra override); variants/campaign/report: the campaign "
                                           "directory")
    p.add_argument("--scenario", help="campaign: the scenario to run")
    p.set_defaults(func=_run, overrides=[])


def hydra_overrides(pairs: list[str]) -> list[str]:
    """``scenario=nvdla`` -> ``taskset.scenario=nvdla``; ``table=NAME`` -> ``taskset=NAME``; the rest as given."""
    from dse.systems.taskset.errors import TasksetError

    out = []
    for pair in pairs:
        if "=" not in pair:
            raise TasksetError(f"expected KEY=VALUE, got {pair!r}; keys: table, seed, {', '.join(SHORT_KEYS)}")
        key, value = pair.split("=", 1)
        if key == "table":
            out.append(f"taskset={value}")
        elif key in SHORT_KEYS:
            out.append(f"taskset.{key}={value}")
        else:
            out.append(pair)
    return out


def _run(args) -> int:
    from dse.core.errors import DseError
    from dse.systems.taskset import jobs as wf

    pairs = [*args.args, *args.overrides]
    if args.action in ("variants", "campaign", "report"):
        if len(pairs) != 1:
            raise DseError(f"taskset {args.action} takes one campaign directory, got {pairs or 'none'}")
        if args.action == "variants":
            wf.measure(pairs[0], _stderr_progress("networks measured"))
        elif args.action == "campaign":
            if not args.scenario:
                raise DseError("taskset campaign needs --scenario")
            wf.run_scenario(pairs[0], args.scenario)
        else:
            print(wf.report(pairs[0]))
        return 0
    tdir, node, changed = wf.prepare(hydra_overrides(pairs), wf.CLI_FAMILY)
    _with_progress(lambda progress: wf.measure_if_stale(tdir, node, changed, progress), "networks measured")
    _with_progress(lambda progress: wf.run_scenario(tdir, node["scenario"], progress))
    print(wf.report(tdir))
    print(f"wrote {tdir}/campaign/{node['scenario']}.parquet, {tdir}/taskset.md, {tdir}/plots/")
    return 0


def _stderr_progress(what: str):
    def progress(done, total):
        print(f"[taskset] {done}/{total} {what}", file=sys.stderr, flush=True)
    return progress


def _with_progress(job, what: str = "task sets"):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn, TimeRemainingColumn

    with Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), TimeRemainingColumn(), transient=True) as bar:
        task = bar.add_task(what, total=None)
        return job(lambda done, total: bar.update(task, completed=done, total=total))
