"""`dse config show [OVERRIDES...]`: print the resolved configuration."""


def add_parser(sub):
    p = sub.add_parser("config", help="show the resolved Hydra configuration")
    s = p.add_subparsers(dest="config_command", metavar="ACTION")
    s.required = True
    show = s.add_parser("show", help="print the resolved config (YAML)")
    show.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. benchmark=yolov3 precision=fp16")
    show.set_defaults(func=_show)


def _show(args) -> int:
    """Validated as planning validates a run (every part, against the platform) and, where an override names a
target family's group (multi, dataflow, ...), as that family plans: what this prints, a run accepts."""
    from dse.config import compose_config, to_yaml
    from dse.workflow.plan import config_parts, named_families, plan_family

    cfg = compose_config(args.overrides)
    config_parts(cfg)
    for family in named_families(args.overrides):    # a target family's group named: checked as its target plans
        plan_family(family, {"overrides": list(args.overrides)})
    print(to_yaml(cfg), end="")
    return 0
