"""`kchaos fuzz --budget 10m --seed N`: the long fuzz run (docs/trust/fuzzing.md).

Prints the inputs tried per target, the refusals, every distinct finding with the seed and input
number that replays it, and the seed; exits 1 when anything broke the contract, 0 otherwise.
"""

from __future__ import annotations

import argparse
import secrets
from typing import Any

from vocab.errors import UserError


def fuzz_command(args: argparse.Namespace) -> int:
    from harness.fuzz.runner import TARGETS, Report, run
    from harness.test_spec import _duration

    budget = _duration(args.budget, "--budget", positive=True)
    targets = tuple(args.target) if args.target else TARGETS
    unknown = [t for t in targets if t not in TARGETS]
    if unknown:
        raise UserError(f"--target {unknown[0]}: unknown (one of {', '.join(TARGETS)})")
    seed = args.seed if args.seed is not None else secrets.randbelow(1 << 31)
    if args.inputs is not None and args.inputs <= 0:
        raise UserError(f"--inputs must be > 0, got {args.inputs}")
    print(f"kchaos fuzz: seed {seed}, budget {args.budget}, targets {', '.join(targets)}", flush=True)

    def progress(report: Report) -> None:
        print(f"... {report.inputs} inputs, {len(report.findings)} findings, {report.seconds:.0f} s", flush=True)

    report = run(seed, budget_s=budget, max_inputs=args.inputs, targets=targets, progress=progress)
    for line in report.lines():
        print(line)
    if args.real_node:
        from harness.fuzz.real_node import fuzz_real_node

        for line in fuzz_real_node(seed, args.real_node):
            print(line)
    return 1 if report.findings else 0


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("fuzz", help="fuzz the node's listeners and files and the harness's inputs")
    p.add_argument("--budget", default="10m", help="how long to run (30s, 10m, 1h); default 10m")
    p.add_argument("--seed", type=int, default=None, help="the run's seed (printed; replays the run)")
    p.add_argument("--inputs", type=int, default=None, help="stop after this many inputs")
    p.add_argument("--target", action="append", help="only this target (repeatable)")
    p.add_argument(
        "--real-node", type=int, default=0, metavar="N", help="then N frames against a real node process on loopback"
    )
    p.set_defaults(func=fuzz_command)
