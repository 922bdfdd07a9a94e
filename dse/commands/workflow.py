"""`dse workflow STEP RUN_DIR`: the steps the Snakemake rules call (one library function each)."""

STEPS = ("analyze", "maximize", "explore", "select", "search", "finetune", "clocks", "report", "compare", "layermap-profile",
         "layermap-solve", "layermap-pareto", "layermap-merge", "multi-pareto", "multi-powerfit", "multi-global", "multi-combine",
         "multi-freqtable", "multi-deploy", "multi-report", "dataflow-comap", "dataflow-deploy", "dataflow-report",
         "study-merge", "pareto", "multiapp-profile", "multiapp-search", "multiapp-report")


def add_parser(sub):
    p = sub.add_parser("workflow", help="run one workflow step on a planned run directory (used by the Snakefile)")
    p.add_argument("step", choices=STEPS)
    p.add_argument("run", help="run directory, e.g. results/yolov4/xavier-agx-sim/int8-b1-416")
    p.add_argument("--option", help="mapping option (explore)")
    p.add_argument("--options", help="comma-separated explored options (select)")
    p.add_argument("--method", help="layermap-solve: ga or ilp; multi-combine/-freqtable/-deploy: BS, GB, PR-GB, LC, SOTA, PR")
    p.add_argument("--network", help="multi-pareto, multiapp-profile: the benchmark of one app")
    p.add_argument("--fsm", help="multi-combine/-freqtable/-deploy: the FSM (A, B, ...)")
    p.add_argument("--job", help="dataflow-comap/-deploy: FPS-METHOD-sSEED, e.g. 25-entire-ga-s0")
    p.add_argument("--cpu", help="layermap-solve: CPU configuration, e.g. 2-1-1")
    p.add_argument("--cap", type=float, help="layermap-solve: CPU utilization cap in percent, e.g. 70")
    p.set_defaults(func=_run)


def _run(args) -> int:
    from dse.core.errors import DseError

    if args.step == "analyze":
        from dse.workflow.analyze import analyze_run

        s = analyze_run(args.run)
        print(f"{args.run}: {s['layers']} layers, {len(s['feasible_cuts'])} feasible cut positions")
        return 0
    if args.step == "report":
        from dse.workflow.report import report

        print(report(args.run))
        return 0
    if args.step == "compare":
        from dse.workflow.compare import compare

        compare(args.run)
        return 0
    if args.step == "pareto":
        from dse.systems.pareto.jobs import run

        run(args.run)
        return 0
    if args.step.startswith("multiapp-"):
        from dse.systems.layermap import multiapp_jobs

        if args.step == "multiapp-profile":
            if not args.network:
                raise DseError("workflow multiapp-profile needs --network")
            multiapp_jobs.write_profile(args.run, args.network)
        else:
            {"multiapp-search": multiapp_jobs.search, "multiapp-report": multiapp_jobs.report}[args.step](args.run)
        return 0
    if args.step == "study-merge":
        from dse.workflow.study import merge_study

        print(merge_study(args.run))
        return 0
    if args.step.startswith("dataflow-"):
        from dse.systems.dataflow.jobs import run_step

        run_step(args.step[len("dataflow-"):], args.run, args.job)
        return 0
    if args.step.startswith("multi-"):
        from dse.systems.multi import jobs as multi

        step = args.step[len("multi-"):]
        if step == "pareto":
            if not args.network:
                raise DseError("workflow multi-pareto needs --network")
            multi.pareto(args.run, args.network)
        elif step == "global":
            if not args.method:
                raise DseError("workflow multi-global needs --method GB or SOTA")
            multi.global_mapping(args.run, args.method)
        elif step in ("combine", "freqtable", "deploy"):
            if not (args.fsm and args.method):
                raise DseError(f"workflow multi-{step} needs --fsm and --method")
            getattr(multi, step)(args.run, args.fsm, args.method)
        else:
            {"powerfit": multi.powerfit, "report": multi.report}[step](args.run)
        return 0
    if args.step.startswith("layermap-"):
        from dse.workflow import layermap

        if args.step == "layermap-solve":
            if not (args.method and args.cpu and args.cap):
                raise DseError("workflow layermap-solve needs --method, --cpu and --cap")
            layermap.solve(args.run, args.method, args.cpu, args.cap / 100)
        else:
            {"layermap-profile": layermap.write_profile, "layermap-pareto": layermap.pareto,
             "layermap-merge": layermap.merge}[args.step](args.run)
        return 0
    from dse.workflow import phases

    if args.step == "maximize":
        phases.maximize(args.run)
    elif args.step == "explore":
        if not args.option:
            raise DseError("workflow explore needs --option")
        phases.explore_option(args.run, args.option)
    elif args.step == "select":
        if not args.options:
            raise DseError("workflow select needs --options A,B,...")
        phases.select_option(args.run, args.options.split(","))
    elif args.step == "search":
        phases.search(args.run)
    elif args.step == "finetune":
        phases.finetune(args.run)
    elif args.step == "clocks":
        phases.clocks(args.run)
    return 0
