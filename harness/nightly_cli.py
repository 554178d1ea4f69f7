"""`kchaos nightly`: run the nightly suite as a gate, keep the last N nights, write the trend report.

    kchaos nightly                                   # suites/nightly.toml under results/suites/nightly/
    kchaos nightly suites/gate.toml --keep 30        # any suite file
    kchaos nightly --trend-only                      # the trend of the nights already there

Tonight's gate outputs (JUnit, summary) and the trend report (`trend.md`, `trend.html`,
`trend.json`) go in tonight's suite directory (harness/nightly.py says how regressions are named).
Exit code: the gate's (0 pass, 1 failed, 2 unknown), or 1 when the gate passed but the trend names a
regression; 254 bad input.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from vocab.errors import EXIT_INVALID, EXIT_VALID, UserError

DEFAULT_SUITE = "suites/nightly.toml"


def register(subparsers: Any) -> None:
    from harness.suite_cli import add_arguments

    p = subparsers.add_parser("nightly", description=__doc__.split("\n\n")[0])
    add_arguments(p, default_file=DEFAULT_SUITE)
    p.add_argument("--keep", default="14", help="nights kept, tonight's included (default 14); older ones removed")
    p.add_argument("--trend-only", action="store_true", help="run nothing: the trend of the newest night kept")
    p.set_defaults(func=nightly_command)


def nightly_command(args: argparse.Namespace) -> int:
    from harness import nightly
    from harness.bugs_cli import _count
    from harness.suite import load_suite, suite_dir

    keep = _count(args.keep, "--keep", 1)
    results = args.results or os.environ.get("KCHAOS_RESULTS", "results")
    if args.trend_only:
        name = load_suite(args.file).name
        code = EXIT_VALID
    else:
        from harness.suite_cli import run_suite

        code, root = run_suite(args, gate=True)
        name = root.parent.name
    where = suite_dir(results, name)
    removed = nightly.prune(where, keep)
    found = nightly.nights(where)
    if not found:
        raise UserError(f"{where}: no night of suite {name!r} to report on")
    trend = nightly.trend(found)
    written = nightly.write_trend(trend)
    print(nightly.trend_markdown(trend), end="")
    if not args.quiet:
        gone = f"; removed {len(removed)} older nights" if removed else ""
        found_text = f"{len(trend.regressions)} regressions"
        print(f"kchaos nightly: {len(found)} nights kept{gone}; trend {written[0]} ({found_text})", file=sys.stderr)
    if code == EXIT_VALID and trend.regressions:
        return EXIT_INVALID
    return code
