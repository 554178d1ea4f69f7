"""`kchaos suite FILE.toml`: run a suite (harness/suite.py) and print its table of cells x verdicts.

    kchaos suite suites/gate.toml --jobs 2          # runs under results/suites/gate/<timestamp>/
    kchaos suite suites/gate.toml --resume          # continue the latest interrupted one
    kchaos suite suites/gate.toml --gate            # the same as `kchaos gate suites/gate.toml`

Progress (runs and cells done, failures, ETA) goes to stderr, the table to stdout. Exit code: 0 every
cell valid, 1 a cell invalid, 2 a cell unknown (a run crashed, hung or was left out by the budget),
254 bad input. With `--gate`, the release gate's outputs and exit code instead (harness/gate.py).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from vocab.errors import UserError


def add_arguments(p: argparse.ArgumentParser, default_file: str | None = None, seeds_also: str = "") -> None:
    if default_file is None:
        p.add_argument("file", metavar="SUITE.toml", help="the suite file")
    else:
        p.add_argument("file", metavar="SUITE.toml", nargs="?", default=default_file, help=f"(default {default_file})")
    p.add_argument("--jobs", help="runs at once, each in its own process (default: the file's, else min(2, CPUs))")
    p.add_argument("--seeds", help=f"N: seeds 1..N of every cell; A..B: seeds A to B{seeds_also} (default: the file's)")
    p.add_argument("--budget", help="wall time after which no run starts (default: the file's)")
    p.add_argument(
        "--run-timeout", help="wall time after which a run with no verdict is stopped as hung (default: the file's)"
    )
    p.add_argument("--bug", action="append", metavar="NAME", help="switch a planted bug on in every run (repeatable)")
    p.add_argument(
        "--fail-fast",
        action="store_true",
        help="stop at the first invalid run: no run starts after it, runs under way are stopped "
        "(the runs left out make their cells unknown)",
    )
    p.add_argument(
        "--first",
        action="append",
        metavar="CELL[#SEED]",
        help="start these runs before the others (repeatable): a glob over cell ids such as "
        "'registrations/all/*', '#2' for seed 2 only; with --fail-fast, a cell known to fail ends the "
        "suite at once",
    )
    p.add_argument(
        "--failed-first",
        action="store_true",
        help="start the runs that were invalid or unknown in this suite's latest run under --results first "
        "(after --first's)",
    )
    p.add_argument("--results", metavar="DIR", help="results root (default $KCHAOS_RESULTS or results)")
    p.add_argument(
        "--resume",
        nargs="?",
        const="latest",
        metavar="SUITE_DIR",
        help="continue an interrupted suite: its directory, or (no value) the latest of this suite",
    )
    p.add_argument("--junit", metavar="FILE", help="gate: JUnit XML (default <suite dir>/gate-junit.xml)")
    p.add_argument("--summary", metavar="FILE.md", help="gate: summary (default <suite dir>/gate-summary.md, + .html)")
    p.add_argument(
        "--report",
        action="store_true",
        help="then `kchaos report` over the suite's runs (Spark) into <suite dir>/_report",
    )
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("suite", description=__doc__.split("\n\n")[0])
    add_arguments(p)
    p.add_argument("--gate", action="store_true", help="judge the suite against its [gate] thresholds")
    p.set_defaults(func=suite_command)


def spark_report(root: Path, say: Any) -> None:
    """`kchaos report SUITE_DIR`: the Spark reports over the suite's runs (its table and trends). A
    report that fails is said, never a change of the suite's verdict."""
    from reports import cli as report_cli

    parser = argparse.ArgumentParser(add_help=False)
    report_cli.add_arguments(parser)
    try:
        report_cli.run(parser.parse_args([str(root)]))
    except Exception as exc:  # Spark missing or failing: the verdicts stand
        say(f"the Spark report failed: {type(exc).__name__}: {exc}")


def suite_command(args: argparse.Namespace) -> int:
    return run(args, gate=bool(getattr(args, "gate", False)))


def run(args: argparse.Namespace, *, gate: bool) -> int:
    return run_suite(args, gate=gate)[0]


def run_suite(args: argparse.Namespace, *, gate: bool) -> tuple[int, Path]:
    """Run (or resume) the suite, print its table or gate summary; the exit code and the suite root."""
    from harness import suite as suites
    from harness.bugs_cli import _count
    from harness.test_spec import _duration

    results = args.results or os.environ.get("KCHAOS_RESULTS", "results")
    seeds: Any = None
    if args.seeds:
        ranged = suites.seed_range(args.seeds, "--seeds")
        seeds = list(ranged) if ranged is not None else _count(args.seeds, "--seeds", 1)
    bugs = list(args.bug or [])
    resume_root: Path | None = None
    meta: dict[str, Any] = {}
    if args.resume:
        if args.resume == "latest":  # the suite's own name (its file may be named otherwise)
            target = suites.suite_dir(results, suites.load_suite(args.file).name) / "latest"
        else:
            target = Path(args.resume)
        resume_root, meta = suites.open_suite_root(target)
        if not bugs:
            bugs = list(meta.get("bugs", []))
        elif sorted(bugs) != sorted(meta.get("bugs", [])):
            raise UserError(f"--resume {resume_root}: it ran with bugs {meta.get('bugs', [])}, not {bugs}")
    if seeds is None and meta.get("seeds"):  # a resumed suite keeps the seeds it started with
        seeds = meta["seeds"]
    suite = suites.load_suite(args.file, bugs=bugs, seeds=seeds)
    suites.preflight(suite)
    if args.budget:
        suite.budget_s = _duration(args.budget, "--budget", positive=True)
    if args.run_timeout:
        suite.run_timeout_s = _duration(args.run_timeout, "--run-timeout", positive=True)
    suite.fail_fast = bool(getattr(args, "fail_fast", False))
    suite.first = suites.check_first(getattr(args, "first", None) or (), suite)
    want_failed_first = bool(getattr(args, "failed_first", False))
    failed_first = suites.failed_last_time(results, suite) if want_failed_first else ()
    suite.first += failed_first
    gate_config = None
    if gate:
        from harness.gate import gate_config as parse_gate

        gate_config = parse_gate(suite.gate, suite.where)
    jobs = _count(args.jobs, "--jobs", 1) if args.jobs else suite.jobs or max(1, min(2, os.cpu_count() or 1))

    def say(text: str) -> None:
        if not args.quiet:
            print(f"kchaos {'gate' if gate else 'suite'}: {text}", file=sys.stderr, flush=True)

    if resume_root is not None:
        if meta.get("name") != suite.name:
            raise UserError(f"--resume {resume_root}: a run of suite {meta.get('name')!r}, not {suite.name!r}")
        root, suite_id, done = resume_root, str(meta.get("id")), suites.read_journal(resume_root)
        unknown_cells = sorted({r.cell for r in done.values()} - {c.id for c in suite.cells})
        if unknown_cells:
            raise UserError(f"--resume {resume_root}: cell {unknown_cells[0]} is not in {args.file} any more")
    else:
        root, suite_id = suites.new_suite_root(results, suite)
        suites.write_suite_meta(root, suite, suite_id, jobs)
        done = {}
    bug_text = f", planted bugs {', '.join(suite.bugs)}" if suite.bugs else ""
    budget = f", budget {suite.budget_s:g} s" if suite.budget_s else ""
    say(
        f"suite {suite_id}: {len(suite.cells)} cells x {len(suite.seeds)} seeds = {len(suite.runs())} runs, "
        f"{jobs} jobs{budget}{bug_text}; runs under {root}"
    )
    if want_failed_first:
        say(f"failed first: {', '.join(failed_first)}" if failed_first else "failed first: none failed last time")
    result = suites.SuiteRunner(suite, root, suite_id, jobs=jobs, say=say, done=done).run()
    if args.report:
        spark_report(root, say)
    if gate_config is None:
        print(suites.table_markdown(result), end="")
        return result.exit_code, root
    from harness import gate as gates

    verdict = gates.evaluate(result, gate_config)
    junit = Path(args.junit) if args.junit else root / "gate-junit.xml"
    summary = Path(args.summary) if args.summary else root / "gate-summary.md"
    gates.write_outputs(verdict, junit, summary)
    print(gates.summary_markdown(verdict), end="")
    say(f"{verdict.verdict} (exit {verdict.exit_code}); JUnit {junit}, summary {summary} and .html")
    return verdict.exit_code, root
