"""`kchaos heal [RUN_DIR]`: remove what a killed run left behind, as listed in its ledger.

Only what the ledger names is touched (namespaces, links, packet-filter tables and rules, processes
whose PID still has the recorded start time, temp dirs, mounts), so running it twice is a no-op.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from harness.backends.ledger import LEDGER_NAME, Ledger, LedgerError, heal
from vocab.errors import EXIT_ERROR, UserError

DEFAULT_RUN_DIR = "results/latest"


def resolve_ledger(target: str) -> Path | None:
    """The ledger file for a run dir (symlinks followed) or a ledger path; None if the dir has none."""
    path = Path(target)
    if not path.exists():
        raise UserError(f"{target}: no such run directory or ledger file")
    path = path.resolve()
    if path.is_file():
        return path
    ledger = path / LEDGER_NAME
    return ledger if ledger.is_file() else None


def heal_command(args: argparse.Namespace) -> int:
    ledger_path = resolve_ledger(args.run_dir)
    if ledger_path is None:
        print(f"nothing to heal: {args.run_dir} has no {LEDGER_NAME}")
        return 0
    try:
        ledger = Ledger.load(ledger_path)
    except LedgerError as exc:
        raise UserError(str(exc)) from None
    outstanding = ledger.outstanding()
    if not outstanding:
        print(f"nothing to heal: every resource in {ledger_path} is already removed")
        return 0
    if ledger.owner_alive() and not args.force:
        raise UserError(
            f"{ledger_path}: its run is still going (pid {ledger.header['owner_pid']}); "
            "stop it first, or pass --force to remove its resources anyway"
        )
    if os.geteuid() != 0 and not all(e.kind.startswith("ssh_") for e in outstanding):  # ssh: undone remotely
        raise UserError(f"{ledger_path}: {len(outstanding)} resource(s) to remove; heal needs root")
    report = heal(ledger_path)
    for what in report.removed:
        print(f"removed {what}")
    for what in report.failed:
        print(f"kchaos heal: could not remove {what}", file=sys.stderr)
    gone = len(report.already_gone)
    print(f"healed {ledger_path}: removed {len(report.removed)}, already gone {gone}, failed {len(report.failed)}")
    return 0 if report.ok else EXIT_ERROR


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("heal", description="remove namespaces, rules and processes a killed run left behind")
    p.add_argument(
        "run_dir",
        nargs="?",
        default=DEFAULT_RUN_DIR,
        metavar="RUN_DIR",
        help=f"a run directory or its {LEDGER_NAME} (default: {DEFAULT_RUN_DIR})",
    )
    p.add_argument("--force", action="store_true", help="heal even if the run that wrote the ledger still runs")
    p.set_defaults(func=heal_command)
