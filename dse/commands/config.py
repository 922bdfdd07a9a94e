"""`dse config show [OVERRIDES...]`: print the resolved configuration."""


def add_parser(sub):
    p = sub.add_parser("config", help="show the resolved Hydra configuration")
    s = p.add_subparsers(dest="config_command", metavar="ACTION")
    s.required = True
    show = s.add_parser("show", help="print the resolved config (YAML)")
    show.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. benchmark=yolov3 precision=fp16")
    show.set_defaults(func=_show)


def _show(args) -> int:
    """Validated as planning validates a run (every part, against the platform): what this prints, a run accepts."""
    from dse.config import compose_config, to_yaml
    from dse.workflow.plan import config_parts

    cfg = compose_config(args.overrides)
    config_parts(cfg)
    print(to_yaml(cfg), end="")
    return 0
