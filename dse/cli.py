"""The `dse` command line: one sub-command per module in `dse/commands/` (each defines `add_parser`)."""
from __future__ import annotations

import argparse
import atexit
import importlib
import os
import sys

from dse.core.errors import DseError

COMMANDS = ("config", "zoo", "inspect", "partition", "measure", "calibrate", "export", "multi", "taskset", "workflow")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dse", description="Design-space exploration of pipelined DNN inference on heterogeneous SoCs.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMANDS:
        module_name = f"dse.commands.{name}"
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:  # a command whose module is not in this build
            if exc.name == module_name:
                continue
            raise
        module.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # Hydra overrides may follow the options (`dse measure --option A benchmark=yolov4`)
        if hasattr(args, "overrides") and all("=" in e and not e.startswith("-") for e in extra):
            args.overrides = [*args.overrides, *extra]
        else:
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        return int(args.func(args) or 0)
    except DseError as exc:   # one line, whatever a library put into the message (a YAML parser's caret lines)
        print("error: " + "; ".join(line.strip() for line in str(exc).splitlines() if line.strip()), file=sys.stderr)
        return 2
    except OSError as exc:  # an unwritable, read-only or full location, a missing file: one line, not a traceback
        where = f" {exc.filename}" if exc.filename else ""
        print(f"error: cannot access{where}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def run() -> None:
    """The process entry (`dse`, `python -m dse`): `main`, then exit without the interpreter's teardown. pyarrow's
    thread pools can abort a process while it is torn down after Parquet I/O ("terminate called without an active
    exception", exit 134; apache/arrow#34314, seen once in CI), failing a job whose outputs were all written (every
    output is written atomically and closed before `main` returns). Exit handlers (board leases) still run."""
    code = main()
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    run()
