"""``python3 -m dse.board measure --config cfg.json``: print one JSON result line on stdout."""
from __future__ import annotations

import argparse
import json
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m dse.board", description="dse board agent (TensorRT)")
    sub = parser.add_subparsers(dest="command")
    m = sub.add_parser("measure", help="run one configuration and print its JSON result")
    m.add_argument("--config", required=True, help="agent config JSON file ('-' for stdin)")
    sub.add_parser("versions", help="print the Python/numpy/TensorRT versions as JSON")
    args = parser.parse_args(argv)
    from dse.board import agent

    if args.command == "versions":
        print(json.dumps(agent.versions()))
        return 0
    if args.command != "measure":
        parser.print_help()
        return 2
    try:
        text = sys.stdin.read() if args.config == "-" else open(args.config).read()
        cfg = json.loads(text)
    except (OSError, ValueError) as exc:
        print(json.dumps(agent.failed("cannot read agent config %s: %s" % (args.config, exc))))
        return 1
    result = agent.measure(cfg)
    print(json.dumps(result, sort_keys=True))
    return 0 if result.get("status") == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
