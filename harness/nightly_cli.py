"""`kchaos nightly`: run the nightly suite as a gate, keep the last N nights, write the trend report.

    kchaos nightly                                   # suites/nightly.toml under results/suites/nightly/
    kchaos nightly suites/gate.toml --keep 30        # any suite file
    kchaos nightly --trend-only                      # the trend of the nights already there
    kchaos nightly suites/soak.toml --seeds next     # the file's count of seeds, after any kept night's

Tonight's gate outputs (JUnit, summary) and the trend report (`trend.md`, `trend.html`,
`trend.json`) go in tonight's suite directory (harness/nightly.py says how regressions are named).
With `--fuzz 20m`, the fuzzer (`kchaos fuzz`, every target) runs after the suite, seeded by the night's
timestamp, its lines in `<night>/fuzz.txt`. Exit code: the gate's (0 pass, 1 failed, 2 unknown), or 1
when the gate passed but the trend names a regression or the fuzzer a finding; 254 bad input.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path
from typing import Any

from vocab.errors import EXIT_INVALID, EXIT_VALID, UserError

DEFAULT_SUITE = "suites/nightly.toml"


def register(subparsers: Any) -> None:
    from harness.suite_cli import add_arguments

    p = subparsers.add_parser("nightly", description=__doc__.split("\n\n")[0])
    add_arguments(
        p,
        default_file=DEFAULT_SUITE,
        seeds_also="; next: the file's count of seeds, after the highest seed of any night kept",
    )
    p.add_argument("--keep", default="14", help="nights kept, tonight's included (default 14); older ones removed")
    p.add_argument("--trend-only", action="store_true", help="run nothing: the trend of the newest night kept")
    p.add_argument(
        "--fuzz",
        metavar="DURATION",
        help="after the suite, `kchaos fuzz` for DURATION with a seed from tonight's timestamp (its lines in "
        "<night>/fuzz.txt); a finding fails the night",
    )
    p.add_argument(
        "--fuzz-inputs",
        type=int,
        default=None,
        metavar="N",
        help="with --fuzz: stop after N inputs if the budget has not ended it first",
    )
    p.add_argument(
        "--fuzz-real-node",
        type=int,
        default=0,
        metavar="N",
        help="with --fuzz: then N frames to a real node process and N as its voters 2 and 3",
    )
    p.set_defaults(func=nightly_command)


def nightly_command(args: argparse.Namespace) -> int:
    from harness import nightly
    from harness.bugs_cli import _count
    from harness.suite import load_suite, suite_dir

    keep = _count(args.keep, "--keep", 1)
    results = args.results or os.environ.get("KCHAOS_RESULTS", "results")
    fuzz_budget = _fuzz_options(args)
    fuzz_findings = 0
    if args.trend_only:
        name = load_suite(args.file).name
        code = EXIT_VALID
    else:
        from harness.suite_cli import run_suite

        if args.seeds == "next":
            suite = load_suite(args.file)
            args.seeds = nightly.next_seeds(suite_dir(results, suite.name), len(suite.seeds))
            if not args.quiet:
                print(f"kchaos nightly: --seeds next: seeds {args.seeds}", file=sys.stderr)
        code, root = run_suite(args, gate=True)
        name = root.parent.name
        if fuzz_budget is not None:
            fuzz_findings = fuzz_night(root, fuzz_budget, args.fuzz_inputs, args.fuzz_real_node, quiet=args.quiet)
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
    if code == EXIT_VALID and (trend.regressions or fuzz_findings):
        return EXIT_INVALID
    return code


def _fuzz_options(args: argparse.Namespace) -> float | None:
    """The --fuzz budget in seconds (None: no fuzzing tonight); bad combinations are user errors."""
    from harness.test_spec import _duration

    if args.fuzz_real_node < 0:
        raise UserError(f"--fuzz-real-node must be >= 0, got {args.fuzz_real_node}")
    if args.fuzz_inputs is not None and args.fuzz_inputs <= 0:
        raise UserError(f"--fuzz-inputs must be > 0, got {args.fuzz_inputs}")
    if args.fuzz is None:
        for flag, given in (("--fuzz-real-node", args.fuzz_real_node), ("--fuzz-inputs", args.fuzz_inputs)):
            if given:
                raise UserError(f"{flag} needs --fuzz")
        return None
    if args.trend_only:
        raise UserError("--fuzz does not apply with --trend-only (it runs after tonight's suite)")
    return _duration(args.fuzz, "--fuzz", positive=True)


def fuzz_night(night: Path, budget_s: float, max_inputs: int | None, real_node: int, quiet: bool) -> int:
    """`kchaos fuzz` after the suite, every target, seeded by the night's timestamp so the seed in
    fuzz.txt names the run; returns its distinct findings."""
    from harness.fuzz.runner import TARGETS
    from harness.fuzz_cli import fuzz_and_report

    seed = int(re.sub(r"\D", "", night.name) or "0") % (1 << 31)
    path = night / "fuzz.txt"
    with path.open("w", encoding="utf-8") as out:

        def say(line: str) -> None:
            out.write(line + "\n")
            out.flush()
            if not quiet and not line.startswith("..."):
                print(line, flush=True)

        say(f"kchaos nightly --fuzz: seed {seed}, budget {budget_s:.0f} s, targets {', '.join(TARGETS)}")
        findings = fuzz_and_report(seed, budget_s, max_inputs, TARGETS, real_node, say)
        say(f"{findings} distinct findings" + (" (replay each with the command in its line)" if findings else ""))
    print(f"kchaos nightly: fuzz {path} ({findings} findings)", file=sys.stderr)
    return findings
