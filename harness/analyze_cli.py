"""`kchaos analyze RUN_DIR`: re-check a stored run with today's checkers.

Rewrites history.parquet, results.json, the counterexample viewers, the plots and report.html;
history.jsonl and test.json stay as they are. Exit code: the verdict's (0 valid, 1 invalid, 2 unknown).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from checkers.registry import CHECKERS
from harness.run_report import analyze_run, checker_summary, verdict_word
from vocab.errors import UserError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "analyze",
        description="Re-check RUN_DIR (results/<test>/<timestamp>, or a latest link): rewrites results.json, "
        "plots and report.html; the history is left untouched. Exit 0 valid, 1 invalid, 2 unknown, 254 error.",
    )
    parser.add_argument("run_dir", metavar="RUN_DIR", type=Path, help="run directory, e.g. results/latest")
    parser.add_argument(
        "--checker",
        action="append",
        choices=sorted(CHECKERS),
        help="run this checker instead of the test's (repeatable)",
    )
    parser.add_argument("--model", help="linearizable: sequential model (default register)")
    parser.add_argument("--timeout", type=float, help="linearizable: seconds before undecided keys are unknown")
    parser.add_argument("--jobs", type=int, help="linearizable: keys checked in parallel (default: all cores)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.jobs is not None and args.jobs < 1:
        raise UserError(f"--jobs {args.jobs}: must be at least 1")
    if args.timeout is not None and args.timeout <= 0:
        raise UserError(f"--timeout {args.timeout}: must be positive")
    linearizable = {k: v for k in ("model", "timeout", "jobs") if (v := getattr(args, k)) is not None}
    analysis = analyze_run(args.run_dir, options={"linearizable": linearizable}, only=args.checker)
    for warning in analysis.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    for verdict in analysis.verdicts:
        for line in checker_summary(verdict):
            print(line)
    print(f"{analysis.run.run_id}: {verdict_word(analysis.valid)[0]} (exit {analysis.exit_code})")
    print(f"report: {analysis.report_path}")
    return analysis.exit_code
