"""`kchaos gate SUITE.toml`: run a suite and judge it against the thresholds of its `[gate]` table.

    kchaos gate suites/gate.toml --junit gate.xml --summary gate.md      # a CI job
    kchaos gate suites/gate.toml --bug raft-vote-not-persisted           # must fail (exit 1)

Writes JUnit XML (a test case per cell and threshold) and a one-page summary (Markdown + HTML), prints
the summary. Exit code: 0 pass, 1 a threshold or checker failed, 2 unknown (a run crashed, hung or
was left out by the budget), 254 bad input.
"""

from __future__ import annotations

import argparse
from typing import Any


def register(subparsers: Any) -> None:
    from harness.suite_cli import add_arguments

    p = subparsers.add_parser("gate", description=__doc__.split("\n\n")[0])
    add_arguments(p)
    p.set_defaults(func=gate_command)


def gate_command(args: argparse.Namespace) -> int:
    from harness.suite_cli import run

    return run(args, gate=True)
