"""`kchaos bugs`: run the planted-bug matrix in the simulator and print the bug table.

    kchaos bugs                                  # every planted bug, then 200 seeds of the correct cluster
    kchaos bugs --bug raft-vote-not-persisted --sweep 0 --all
    kchaos bugs --list                           # the catalogue, no runs
    kchaos bugs --json > matrix.json
    kchaos bugs --jobs 2 --sweep 20 --write-docs # also rewrite docs/figures.md's bug-matrix table

Each bug runs cells (workload x nemesis profile x seed, every registered workload and fault kind by
default) until its first catch or its budget of simulated time; then the correct cluster runs
`--sweep` seeds. The table (Markdown, or JSON with `--json`) goes to stdout, progress to stderr.
Exit code: 0 every bug caught and no false alarm, 1 otherwise, 254 bad input.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from vocab.errors import UserError


def _seconds(text: str, flag: str, *, positive: bool = True) -> float:
    from harness.test_spec import _duration

    return _duration(text, flag, positive=positive)


def _count(text: str, flag: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise UserError(f"{flag}: expected an integer, got {text!r}") from None
    if value < minimum:
        raise UserError(f"{flag}: must be >= {minimum}, got {value}")
    return value


def config_from(args: argparse.Namespace) -> Any:
    """The MatrixConfig the flags ask for; bad names or values raise UserError (one line)."""
    from harness.bug_matrix import MatrixConfig, default_nemeses
    from harness.plugins import workload_names
    from harness.run_cli import registries
    from node.bugs import BY_NAME, parse_bugs

    known = registries()
    try:
        chosen = parse_bugs(args.bug) if args.bug else None  # "--bug none": the sweep only
    except ValueError as exc:
        raise UserError(f"--bug: {exc}") from None
    bugs = tuple(BY_NAME) if chosen is None else tuple(n for n in BY_NAME if n in chosen.names)  # catalogue order
    ours = workload_names("kraft")  # the planted bugs live in the reference cluster
    workloads = tuple(args.workload) if args.workload else ours
    for name in workloads:
        if name not in ours:
            known_here = ", ".join(ours)
            raise UserError(f"--workload: unknown workload {name!r} for the reference cluster (known: {known_here})")
    if args.nemesis:
        nemeses = []
        for text in args.nemesis:
            kinds = tuple(k.strip() for k in text.split(",") if k.strip() and k.strip() != "none")
            for kind in kinds:
                if kind not in known.nemeses:
                    raise UserError(f"--nemesis: unknown fault kind {kind!r} (known: {', '.join(known.nemeses)})")
            nemeses.append(kinds)
        profiles = tuple(nemeses)
    else:
        profiles = default_nemeses(tuple(known.nemeses))
    jobs = _count(args.jobs, "--jobs", 1) if args.jobs else max(1, min(2, os.cpu_count() or 1))
    return MatrixConfig(
        bugs=bugs,
        workloads=workloads,
        nemeses=profiles,
        seeds=_count(args.seeds, "--seeds", 1),
        budget_s=_seconds(args.budget, "--budget"),
        sweep=_count(args.sweep, "--sweep", 0),
        sweep_from=_count(args.sweep_from, "--sweep-from", 1),
        time_limit_s=_seconds(args.time_limit, "--time-limit"),
        nemesis_interval_s=_seconds(args.nemesis_interval, "--nemesis-interval"),
        nemesis_duration_s=_seconds(args.nemesis_duration, "--nemesis-duration", positive=False),
        recovery_s=_seconds(args.recovery, "--recovery", positive=False),
        jobs=jobs,
        all_catches=args.all,
        keep_all=args.keep_all,
        results=args.results or os.environ.get("KCHAOS_RESULTS", "results"),
    )


def catalogue_markdown() -> str:
    from node.bugs import CATALOGUE

    rows = ["| bug | component | rule broken | reference | guarantee a checker sees broken |", "|---|---|---|---|---|"]
    for bug in CATALOGUE:
        rows.append(f"| `{bug.name}` | {bug.component} | {bug.rule} | {bug.reference} | {bug.guarantee} |")
    return "\n".join(rows) + "\n"


def bugs_command(args: argparse.Namespace) -> int:
    from harness.bug_matrix import Matrix, markdown, to_json

    if args.list:
        print(catalogue_markdown(), end="")
        return 0
    config = config_from(args)

    def say(text: str) -> None:
        if not args.quiet:
            print(f"kchaos bugs: {text}", file=sys.stderr, flush=True)

    shape = f"{len(config.bugs)} planted bugs x {len(config.workloads)} workloads x {len(config.nemeses)} profiles"
    say(
        f"{shape}, up to {config.seeds} seeds and {config.budget_s:g} s simulated each; then {config.sweep} "
        f"correct runs; {config.jobs} jobs; kept runs under {config.results}/"
    )
    result = Matrix(config, say).run()
    if args.json:
        print(json.dumps(to_json(result), indent=2, default=str))
    else:
        print(markdown(result), end="")
    if args.write_docs:
        from harness import docs_tables

        docs_tables.write_table("bug-matrix", markdown(result))
        say(f"wrote the bug-matrix table of {docs_tables.FIGURES}")
    return result.exit_code


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "bugs",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument(
        "--bug", action="append", metavar="NAME", help="a planted bug (repeatable; default: all; none: the sweep only)"
    )
    p.add_argument("--workload", action="append", metavar="NAME", help="a workload (repeatable; default: all)")
    p.add_argument(
        "--nemesis",
        action="append",
        metavar="KINDS",
        help="a nemesis profile, e.g. partition,kill (repeatable; default: all kinds together, then each alone)",
    )
    p.add_argument("--seeds", default="10", help="seeds per workload x nemesis profile (default 10)")
    p.add_argument("--budget", default="300s", help="simulated time a bug may use before it is not caught (300s)")
    p.add_argument("--sweep", default="200", help="seeds of the correct cluster (default 200; 0: none)")
    p.add_argument("--sweep-from", default="1", help="the sweep's first seed (default 1), to split a sweep in parts")
    p.add_argument("--time-limit", default="25s", help="each run's main phase (default 25s)")
    p.add_argument("--nemesis-interval", default="2s", help="time between faults (default 2s)")
    p.add_argument("--nemesis-duration", default="2s", help="how long each fault lasts (default 2s)")
    p.add_argument("--recovery", default="10s", help="recovery window after the heal (default 10s)")
    p.add_argument("--jobs", help="runs in parallel processes (default: min(2, CPUs))")
    p.add_argument("--all", action="store_true", help="run every cell of every bug, not only up to its first catch")
    p.add_argument("--json", action="store_true", help="print JSON instead of the Markdown table")
    p.add_argument("--results", metavar="DIR", help="results root for kept runs (default $KCHAOS_RESULTS or results)")
    p.add_argument("--keep-all", action="store_true", help="keep every run directory (default: catches and alarms)")
    p.add_argument("--list", action="store_true", help="print the catalogue of planted bugs and exit")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.add_argument(
        "--write-docs",
        action="store_true",
        help="also rewrite the bug-matrix table in docs/figures.md (between its markers) with this run's table",
    )
    p.set_defaults(func=bugs_command)
