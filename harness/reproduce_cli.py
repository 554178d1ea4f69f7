"""`kchaos reproduce RUN_DIR [--backend B]`: run a stored test again with the same faults, and compare.

    kchaos reproduce results/latest                   # on the run's own backend
    kchaos reproduce results/latest --backend sim     # a netns/docker run's fault timeline, simulated
    kchaos reproduce results/latest --backend docker
    kchaos reproduce results/latest --backend ssh --inventory vagrant/inventory.toml
    kchaos reproduce results/latest --backend vagrant # on the VMs of `kchaos vagrant up` (--cluster DIR)
    kchaos reproduce results/latest --backend netns --attempts 5  # until one reaches the same verdict

The same seed, workload, cluster shape and options, and the same fault timeline: each nemesis op at
the same offset with the same targets and parameters (see harness/reproduce.py). Prints both runs'
verdicts checker by checker, and whether the reproduction reached the same verdict. Off the simulator
the timing differs from run to run, so a bug with a narrow window may not show every time:
`--attempts N` runs it again, up to N runs, until one reaches the original's verdict. Exit code: the
last run's own (0 valid, 1 invalid, 2 unknown, 254 error), as `kchaos run`.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from harness.test_spec import BACKENDS


def reproduce_command(args: argparse.Namespace) -> int:
    from harness.reproduce import attempts_allowed, keep_trying, plan
    from harness.run_report import verdict_word
    from harness.runner import run_test

    p = plan(args.run_dir, args.backend, args.inventory, args.cluster)
    attempts, why = attempts_allowed(p, args.attempts)
    print(
        f"kchaos reproduce: {p.source} ({p.spec.name}, seed {p.spec.seed}) on {p.spec.backend}",
        file=sys.stderr,
        flush=True,
    )
    for note in [*p.notes, *([why] if why else [])]:
        print(f"kchaos reproduce: {note}", file=sys.stderr)

    def run_one(number: int) -> Any:
        extra: dict[str, Any] = {"reproduces": str(p.source)}
        if attempts > 1:
            extra["attempt"] = number
        return run_test(
            p.spec,
            root=args.results,
            progress=None if not args.no_progress else False,
            extra_test=extra,
            timeline=p.timeline,
        )

    def say(line: str) -> None:
        print(f"kchaos reproduce: {line}", file=sys.stderr, flush=True)

    tries = keep_trying(p, attempts, run_one, say)
    last = tries[-1]
    result = last.result
    if result.error:
        print(f"kchaos reproduce: error: {result.error}", file=sys.stderr)
    if last.comparison is not None:
        for line in last.comparison.lines():
            print(line)
    if attempts > 1:
        print(f"attempts: {last.number} of {attempts}")
    word = verdict_word(result.valid)[0] if result.valid is not None else "error"
    print(f"verdict: {word} (exit {result.exit_code})")
    print(f"run directory: {result.run.path}")
    return result.exit_code


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("reproduce", description=__doc__.splitlines()[0])
    p.add_argument("run_dir", metavar="RUN_DIR", help="a stored run (e.g. results/latest)")
    p.add_argument(
        "--backend",
        choices=(*BACKENDS, "vagrant"),
        help="where to run it (default: where it ran); vagrant: ssh to the VMs of `kchaos vagrant up`",
    )
    p.add_argument("--inventory", metavar="FILE", help="ssh: the hosts to run on (default: the run's own)")
    p.add_argument("--cluster", metavar="DIR", help="vagrant: the VM cluster's directory (default: vagrant/.cluster)")
    p.add_argument(
        "--attempts",
        type=int,
        default=1,
        metavar="N",
        help="off the simulator: run it again, up to N runs, until one reaches the original's verdict (default 1)",
    )
    p.add_argument("--results", metavar="DIR", help="results root (default: $KCHAOS_RESULTS or ./results)")
    p.add_argument("--no-progress", action="store_true", help="no live progress line")
    p.set_defaults(func=reproduce_command)
