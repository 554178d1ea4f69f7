"""`kchaos`: the single command-line entry point.

Each subcommand lives in the package that owns it and exposes `register(subparsers)`, which adds its
parser and sets `func` (a callable taking the parsed namespace and returning an exit code).
"""

from __future__ import annotations

import argparse
import importlib
import sys

import harness.db  # noqa: F401 - registers the system adapters' own checkers (image-replay) for `check`
from harness.errors import EXIT_ERROR, UserError

# subcommand name -> module that registers it
COMMANDS: dict[str, str] = {
    "run": "harness.run_cli",
    "sim": "node.sim.cli",
    "node": "node.runtime.cli",
    "quorum": "node.runtime.quorum_cli",
    "check": "checkers.cli",
    "report": "reports.cli",
    "admin": "node.client.cli",
    "heal": "harness.heal_cli",
    "doctor": "harness.doctor_cli",
    "analyze": "harness.analyze_cli",
    "results": "harness.results_cli",
    "nemeses": "nemesis.cli",
    "bugs": "harness.bugs_cli",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kchaos",
        description="Chaos-test a KRaft metadata quorum: run it, break it, check the history.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in COMMANDS.values():
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:
                continue  # that part of kraft-chaos is not built yet
            raise
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except UserError as exc:
        print(f"kchaos: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("kchaos: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
