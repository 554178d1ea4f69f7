"""`kchaos fuzz --budget 10m --seed N`: the long fuzz run (docs/trust/fuzzing.md).

Prints the inputs tried per target, the refusals, every distinct finding with the `--replay` key that
reaches it again, and the seed; exits 1 when anything broke the contract, 0 otherwise.
`kchaos fuzz --replay TARGET:SEED:INPUT` replays one finding in a second or so and prints its input,
the node's state after it and the traceback.
"""

from __future__ import annotations

import argparse
import secrets
from collections.abc import Callable
from typing import Any

from vocab.errors import UserError


def fuzz_command(args: argparse.Namespace) -> int:
    from harness.fuzz.runner import TARGETS
    from harness.test_spec import _duration

    if args.replay is not None:
        options = {"--budget": args.budget, "--seed": args.seed, "--inputs": args.inputs, "--target": args.target}
        given = [flag for flag, value in options.items() if value is not None] + ["--real-node"] * bool(args.real_node)
        if given:
            raise UserError(f"--replay replays one episode: {given[0]} does not apply to it")
        return replay_command(args.replay)
    budget = _duration(args.budget or "10m", "--budget", positive=True)
    targets = tuple(args.target) if args.target else TARGETS
    unknown = [t for t in targets if t not in TARGETS]
    if unknown:
        raise UserError(f"--target {unknown[0]}: unknown (one of {', '.join(TARGETS)})")
    seed = args.seed if args.seed is not None else secrets.randbelow(1 << 31)
    if args.inputs is not None and args.inputs <= 0:
        raise UserError(f"--inputs must be > 0, got {args.inputs}")
    print(f"kchaos fuzz: seed {seed}, budget {args.budget or '10m'}, targets {', '.join(targets)}", flush=True)
    findings = fuzz_and_report(seed, budget, args.inputs, targets, args.real_node, lambda line: print(line, flush=True))
    return 1 if findings else 0


def fuzz_and_report(
    seed: int,
    budget_s: float,
    max_inputs: int | None,
    targets: tuple[str, ...],
    real_node: int,
    say: Callable[[str], None],
) -> int:
    """The long run (and, with `real_node` > 0, the two real-node parts), each line given to `say` as it
    comes; returns how many distinct findings broke the contract. `kchaos nightly --fuzz` uses it too."""
    from harness.fuzz.runner import Report, run

    def progress(report: Report) -> None:
        say(f"... {report.inputs} inputs, {len(report.findings)} findings, {report.seconds:.0f} s")

    report = run(seed, budget_s=budget_s, max_inputs=max_inputs, targets=targets, progress=progress)
    for line in report.lines():
        say(line)
    findings = len(report.findings)
    if real_node:
        from harness.fuzz.real_node import fuzz_real_node
        from harness.fuzz.real_voters import fuzz_real_voters

        for real in (fuzz_real_node(seed, real_node), fuzz_real_voters(seed, real_node)):
            for line in real.lines:
                say(line)
            findings += len(real.findings)
    return findings


def replay_command(text: str) -> int:
    """Replay one episode to the key's input: exit 1 with the finding shown, 0 if it did not recur."""
    import traceback

    from harness.fuzz.runner import ReplayKey, replay

    try:
        key = ReplayKey.parse(text)
    except ValueError as exc:
        raise UserError(f"--replay: {exc}") from None
    print(f"kchaos fuzz: replaying the {key.target} episode of seed {key.seed} to input {key.input}", flush=True)
    seen = replay(key)
    if seen.finding is None:
        print(f"no finding: inputs 1-{seen.at} of the episode kept the contract (the last one below)")
    else:
        earlier = f" (before input {key.input})" if seen.at < key.input else ""
        print(f"FINDING at input {seen.at}{earlier}: {seen.finding}")
    print("input:")
    print("\n".join(f"  {line}" for line in seen.input))
    print(f"after it: {seen.state}")
    cause = seen.finding.__cause__ if seen.finding is not None else None
    if cause is not None:
        print("traceback:")
        print("".join(traceback.format_exception(cause)).rstrip())
    return 0 if seen.finding is None else 1


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("fuzz", help="fuzz the node's listeners and files and the harness's inputs")
    p.add_argument("--budget", default=None, help="how long to run (30s, 10m, 1h); default 10m")
    p.add_argument("--seed", type=int, default=None, help="the run's seed (printed; replays the run)")
    p.add_argument("--inputs", type=int, default=None, help="stop after this many inputs")
    p.add_argument("--target", action="append", help="only this target (repeatable)")
    p.add_argument(
        "--real-node",
        type=int,
        default=0,
        metavar="N",
        help="then N frames to a real node process on loopback, and N more as its voters 2 and 3",
    )
    p.add_argument(
        "--replay",
        metavar="TARGET:SEED:INPUT",
        help="replay one finding, as a run printed it: its input, the node's state after it, the traceback",
    )
    p.set_defaults(func=fuzz_command)
