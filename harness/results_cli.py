"""`kchaos results list`: the runs in the results store, newest first, with their verdicts."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from harness import store
from vocab.errors import UserError

VERDICT_STYLES = {
    "valid": "green",
    "invalid": "bold red",
    "unknown": "yellow",
    "incomplete": "dim",
    "unreadable": "red",
}


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("results", description="the results store: list runs and their verdicts")
    actions = parser.add_subparsers(dest="results_action", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="list runs, newest first: test, time, verdict, ops, path")
    listing.add_argument(
        "--root",
        type=Path,
        help=f"results root (default ${store.ENV_ROOT}, else ./{store.DEFAULT_ROOT})",
    )
    listing.add_argument("--test", metavar="NAME", help="only runs of this test")
    listing.add_argument("--limit", type=int, metavar="N", help="at most N runs")
    listing.set_defaults(func=list_command)


def _shown_path(path: Path) -> str:
    """Relative to the working directory when the run is under it (what a user pastes into `analyze`),
    else absolute: a path climbing out with `..` is harder to read than the absolute one."""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return str(path)
    return str(path) if rel.startswith("..") else rel


def list_command(args: argparse.Namespace) -> int:
    if args.limit is not None and args.limit < 1:
        raise UserError(f"--limit {args.limit}: must be at least 1")
    root = store.results_root(args.root)
    runs = store.list_runs(root, test=args.test, limit=args.limit)
    console = Console()
    if not console.is_terminal:
        console = Console(width=200)  # piped: do not cut paths at 80 columns
    if not runs:
        which = f" of test {args.test!r}" if args.test else ""
        console.print(f"no runs{which} under {root}")
        return 0
    table = Table(title=f"runs under {root}")
    for column in ("test", "started (UTC)", "verdict", "ops"):
        table.add_column(column, justify="right" if column == "ops" else "left", no_wrap=True)
    table.add_column("path", overflow="fold")
    for run in runs:
        started = run.started_at.strftime("%Y-%m-%d %H:%M:%S") if run.started_at else "?"
        verdict = run.verdict
        table.add_row(
            escape(run.test),
            started,
            f"[{VERDICT_STYLES[verdict]}]{verdict}[/]",
            "" if run.ops is None else str(run.ops),
            escape(_shown_path(run.path)),
        )
    console.print(table)
    for run in runs:
        if run.problem:
            console.print(f"[red]unreadable[/] {escape(run.problem)}")
    return 0
