"""`dse workflow STEP RUN_DIR`: the steps the Snakemake rules call (one library function each)."""

STEPS = ("analyze",)


def add_parser(sub):
    p = sub.add_parser("workflow", help="run one workflow step on a planned run directory (used by the Snakefile)")
    p.add_argument("step", choices=STEPS)
    p.add_argument("run", help="run directory, e.g. results/yolov4/xavier-agx-sim/int8-b1-416")
    p.set_defaults(func=_run)


def _run(args) -> int:
    if args.step == "analyze":
        from dse.workflow.analyze import analyze_run

        s = analyze_run(args.run)
        print(f"{args.run}: {s['layers']} layers, {len(s['feasible_cuts'])} feasible cut positions")
    return 0
