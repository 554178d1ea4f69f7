"""`kchaos run`: the default chaos run.

Until the harness's runner, workloads and netns backend exist, a run is the deterministic simulator's
default chaos scenario: 3 voters and 1 observer under partitions, kill -9 / power loss, pauses, clock
skew and disk stalls, with a client appending throughout, the invariants checked after every event
and a final check that every acknowledged append is committed on every node.
"""

from __future__ import annotations

import argparse
import secrets
from typing import Any

from harness.errors import UserError

DEFAULT_FAULTS = "partition,kill,pause,clock,disk"


def run_command(args: argparse.Namespace) -> int:
    from node.sim import cli as sim_cli  # the simulator is the only backend so far

    if args.backend != "sim":
        raise UserError(f"--backend {args.backend}: only 'sim' exists yet (netns, docker and ssh come later)")
    seed = args.seed if args.seed is not None else secrets.randbelow(1 << 31)
    argv = [
        "sim",
        "--seed",
        str(seed),
        "--voters",
        str(args.voters),
        "--observers",
        str(args.observers),
        "--duration",
        args.time_limit,
        "--faults",
        args.nemesis,
    ]
    parser = argparse.ArgumentParser(prog="kchaos")
    sim_cli.register(parser.add_subparsers())
    sim_args = parser.parse_args(argv)
    print(
        f"kchaos run: backend sim, seed {seed}, {args.voters} voters + {args.observers} observers, "
        f"{args.time_limit} of virtual time, faults {args.nemesis}"
    )
    code = sim_cli.run_command(sim_args)
    print(f"verdict: {'valid' if code == 0 else 'INVALID'} (exit {code})")
    return code


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("run", help="run the default chaos run and print the verdict")
    p.add_argument("--backend", default="sim", help="where the cluster runs (today: sim)")
    p.add_argument("--seed", type=int, default=None, help="seed of the run (default: a random one, printed)")
    p.add_argument("--voters", type=int, default=3)
    p.add_argument("--observers", type=int, default=1)
    p.add_argument("--time-limit", default="600s", help="length of the fault phase (virtual time)")
    p.add_argument("--nemesis", default=DEFAULT_FAULTS, help="comma-separated fault kinds")
    p.set_defaults(func=run_command)
