"""`kchaos`: the single command-line entry point.

Each subcommand lives in the package that owns it and exposes `register(subparsers)`, which adds its
parser and sets `func` (a callable taking the parsed namespace and returning an exit code). Only the
chosen command's module is imported: `kchaos --help` and a command that needs no pandas, Spark,
matplotlib or simulator start in a fraction of a second (the others list themselves from `COMMANDS`).

A bad flag, argument or command is one line on stderr and exit 254, like every other user error.
"""

from __future__ import annotations

import importlib
import sys
from typing import NamedTuple

from vocab.errors import EXIT_ERROR, OneLineParser, UserError


class Command(NamedTuple):
    module: str  # the module whose `register(subparsers)` adds the command
    summary: str  # its line in `kchaos --help` (the module itself registers a description only)


COMMANDS: dict[str, Command] = {
    "run": Command("harness.run_cli", "run a chaos test end to end and print the verdict"),
    "sim": Command(
        "node.sim.cli",
        "run the deterministic simulator (virtual time, seeded faults, invariants after every event)",
    ),
    "node": Command("node.runtime.cli", "run a node of the reference KRaft metadata quorum"),
    "quorum": Command("node.runtime.quorum_cli", "describe the metadata quorum (like kafka-metadata-quorum.sh)"),
    "check": Command("checkers.cli", "check a history (linearizability, transactional anomalies, committed loss, ...)"),
    "report": Command("reports.cli", "Spark reports over many runs: latency, availability, commit loss, trends"),
    "admin": Command(
        "node.client.cli", "administer a cluster: topics, configs, ACLs, brokers (like Kafka's admin tools)"
    ),
    "reproduce": Command(
        "harness.reproduce_cli", "run a stored test again with the same seed and fault timeline, and compare"
    ),
    "image": Command("harness.image_cli", "build the Docker image of the node for --backend docker (cached)"),
    "heal": Command("harness.heal_cli", "remove namespaces, rules and processes a killed run left behind"),
    "doctor": Command("harness.doctor_cli", "check this machine can run the netns backend; says what to install"),
    "analyze": Command(
        "harness.analyze_cli", "re-check a stored run with today's checkers and rewrite its results and report"
    ),
    "results": Command("harness.results_cli", "the results store: list runs and their verdicts"),
    "nemeses": Command(
        "nemesis.cli", "print the fault catalogue: kinds, modes, parameters, which backends support them"
    ),
    "vagrant": Command(
        "harness.backends.vagrant_inventory", "VM clusters: `kchaos vagrant inventory` for --backend ssh"
    ),
    "bugs": Command(
        "harness.bugs_cli", "run the planted-bug matrix in the simulator and print which runs catch each bug"
    ),
    "suite": Command(
        "harness.suite_cli", "run a suite: workloads x nemeses x clusters x backends x seeds, in parallel, resumable"
    ),
    "gate": Command(
        "harness.gate_cli", "release gate: run a suite, judge it against thresholds, JUnit XML and exit code"
    ),
    "fuzz": Command("harness.fuzz_cli", "fuzz the node's listeners and files and the harness's inputs (budget, seed)"),
    "nightly": Command(
        "harness.nightly_cli", "nightly runs: the nightly suite as a gate, the last N nights kept, a trend report"
    ),
}

# Modules a command needs beside its own: `check` judges histories with the system adapters' own
# checkers too (image-replay), which register themselves on import.
ALSO_IMPORT: dict[str, tuple[str, ...]] = {"check": ("harness.db",)}


def build_parser(command: str | None = None) -> OneLineParser:
    """The `kchaos` parser with `command` (if one of COMMANDS) fully registered and every other
    command as a stub that only lists itself."""
    parser = OneLineParser(
        prog="kchaos",
        description="Chaos-test a KRaft metadata quorum: run it, break it, check the history.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, spec in COMMANDS.items():
        if name == command:
            for extra in ALSO_IMPORT.get(name, ()):
                importlib.import_module(extra)
            importlib.import_module(spec.module).register(sub)
        else:
            sub.add_parser(name, help=spec.summary, add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    command = argv[0] if argv and argv[0] in COMMANDS else None
    parser = build_parser(command)
    if not argv:
        print("kchaos: error: a command is required (kchaos --help lists them)", file=sys.stderr)
        return EXIT_ERROR
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):  # a command whose subcommand was left out
        print(f"kchaos {command}: error: a subcommand is required (kchaos {command} --help)", file=sys.stderr)
        return EXIT_ERROR
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
