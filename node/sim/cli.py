"""`kchaos sim`: run the deterministic simulator on a seed and print a summary and the trace digest."""

from __future__ import annotations

import argparse
import json
import re
import sys
from typing import Any

from node.raft.config import ConfigError, RaftConfig
from node.sim.faults import DEPRECATED_ALIASES, FaultConfig
from node.sim.network import LinkModel
from node.sim.runner import RunConfig, RunResult, run
from node.sim.workload import WorkloadConfig
from node.sim.world import SimConfig
from vocab.errors import EXIT_INVALID, EXIT_VALID, UserError
from vocab.faults.kinds import FAULT_KINDS

_DURATION = re.compile(r"^(\d+)(ms|s|m|h)?$")
_UNITS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, None: 1000}


def parse_duration(text: str, flag: str) -> int:
    """`600s`, `10m`, `250ms`, or a bare number of seconds -> milliseconds."""
    match = _DURATION.match(text.strip())
    if not match:
        raise UserError(f"{flag}: '{text}' is not a duration like 600s, 10m or 500ms")
    return int(match.group(1)) * _UNITS[match.group(2)]


def parse_delay(text: str) -> tuple[int, int, bool]:
    """`MIN:MAX` (uniform) or `exp:MIN:MAX` (exponential, mean (MIN+MAX)/2), in ms."""
    parts = text.split(":")
    exponential = parts[0] == "exp"
    if exponential:
        parts = parts[1:]
    try:
        lo, hi = (int(p) for p in parts)
    except ValueError:
        raise UserError(f"--delay: '{text}' is not MIN:MAX or exp:MIN:MAX in milliseconds") from None
    if lo < 0 or hi < lo:
        raise UserError(f"--delay: '{text}' needs 0 <= MIN <= MAX")
    return lo, hi, exponential


def parse_faults(text: str) -> tuple[str, ...]:
    kinds = tuple(k.strip() for k in text.split(",") if k.strip() and k.strip() != "none")
    unknown = [k for k in kinds if k not in FAULT_KINDS and k not in DEPRECATED_ALIASES]
    if unknown:
        raise UserError(f"--faults: unknown fault '{unknown[0]}' (choose from {','.join(FAULT_KINDS)})")
    for old, new in DEPRECATED_ALIASES.items():
        if old in kinds:
            print(f"kchaos sim: note: --faults {old} is now called {new}", file=sys.stderr)
    return tuple(dict.fromkeys(DEPRECATED_ALIASES.get(k, k) for k in kinds))


def parse_settings(items: list[str]) -> dict[str, int]:
    settings: dict[str, int] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep:
            raise UserError(f"--set: '{item}' is not KEY=VALUE")
        field_name = RaftConfig.PROPERTY_NAMES.get(key)
        if field_name is None:
            known = ", ".join(sorted(RaftConfig.PROPERTY_NAMES))
            raise UserError(f"--set: unknown setting '{key}' (known: {known})")
        try:
            settings[field_name] = int(value)
        except ValueError:
            raise UserError(f"--set: {key}: '{value}' is not an integer") from None
    return settings


def build_config(args: argparse.Namespace) -> RunConfig:
    if args.voters < 1:
        raise UserError(f"--voters: {args.voters} (need at least 1)")
    if args.observers < 0:
        raise UserError(f"--observers: {args.observers} (must be >= 0)")
    if args.append_interval < 1:
        raise UserError(f"--append-interval: {args.append_interval} (must be >= 1 ms)")
    if not 0.0 <= args.drop <= 1.0:
        raise UserError(f"--drop: {args.drop} is not a probability in [0, 1]")
    lo, hi, exponential = parse_delay(args.delay)
    settings: dict[str, int] = parse_settings(args.set or [])
    if args.no_pre_vote:
        settings["pre_vote"] = False
    try:
        RaftConfig(node_id=1, voter_ids=frozenset({1}), **settings)
    except ConfigError as exc:
        raise UserError(f"--set: {exc}") from None
    sim = SimConfig(
        seed=args.seed,
        voters=args.voters,
        observers=args.observers,
        raft=settings,
        link=LinkModel(drop=args.drop, delay_min_ms=lo, delay_max_ms=hi, exponential=exponential),
        trace_path=args.trace,
    )
    workload = None if args.no_workload else WorkloadConfig(interval_ms=args.append_interval)
    return RunConfig(
        sim=sim,
        workload=workload,
        faults=FaultConfig(kinds=parse_faults(args.faults), buggify=not args.no_buggify),
        duration_ms=parse_duration(args.duration, "--duration"),
        quiet_max_ms=parse_duration(args.quiet, "--quiet"),
    )


def format_summary(result: RunResult) -> str:
    s = result.summary
    lines = [
        f"seed {s['seed']}: {s['voters']} voters, {s['observers']} observers, faults: "
        f"{','.join(s['faults']) or 'none'}",
        f"simulated {s['simulated_s']:.1f} s in {s['wall_s']:.2f} s wall ({s['speedup']}x), {s['events']} events",
        f"elections: {s['elections']} (final leader {s['final_leader']} in epoch {s['final_epoch']})",
        "leaders per epoch: " + (" ".join(f"{e}:{n}" for e, n in s["leaders_per_epoch"].items()) or "none"),
        f"committed: offset {s['committed_offset']} ({s['committed_batches']} batches)",
        "appends: " + " ".join(f"{k}={v}" for k, v in s["appends"].items()),
        "faults: "
        + (" ".join(f"{k}={v}" for k, v in s["faults_injected"].items()) or "none")
        + f" (lost un-fsynced writes: {s['lost_unsynced_writes']})",
        "targeted faults (buggify): " + (" ".join(f"{k}={v}" for k, v in s["buggify"].items()) or "none"),
        f"messages: {s['messages']['sent']} sent, {s['messages']['dropped']} dropped"
        + (f", {s['messages']['redelivered']} delivered again" if s["messages"].get("redelivered") else ""),
        f"invariants: {s['verdict']}",
    ]
    if s["violation"]:
        lines.append(f"FIRST VIOLATION: {s['violation']}")
    if s["liveness"]:
        lines.append(f"FAILED: {s['liveness']}")
    lines.append(f"trace digest: sha256:{s['digest']}")
    return "\n".join(lines)


def run_command(args: argparse.Namespace) -> int:
    config = build_config(args)
    try:
        result = run(config)
    except ValueError as exc:  # a fault kind this simulator cannot do
        raise UserError(f"--faults: {exc}") from None
    except OSError as exc:
        raise UserError(f"--trace: cannot write {args.trace}: {exc.strerror}") from None
    if args.json:
        print(json.dumps(result.summary, indent=2, sort_keys=True))
    else:
        print(format_summary(result))
    if not result.valid:
        print(f"replay with: kchaos sim {replay_flags(args)}", file=sys.stderr)
        return EXIT_INVALID
    return EXIT_VALID


def replay_flags(args: argparse.Namespace) -> str:
    parts: list[Any] = [
        f"--seed {args.seed}",
        f"--voters {args.voters}",
        f"--observers {args.observers}",
        f"--duration {args.duration}",
        f"--faults {args.faults or 'none'}",
        f"--drop {args.drop}",
        f"--delay {args.delay}",
    ]
    parts += [f"--set {item}" for item in args.set or []]
    if args.no_buggify:
        parts.append("--no-buggify")
    if args.no_workload:
        parts.append("--no-workload")
    if args.no_pre_vote:
        parts.append("--no-pre-vote")
    return " ".join(parts) + " --trace trace.jsonl"


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "sim",
        description="Run a KRaft quorum in the deterministic simulator. Same seed and flags, same trace digest.",
    )
    p.add_argument("--seed", type=int, default=0, help="the one seed every random choice derives from")
    p.add_argument("--voters", type=int, default=3)
    p.add_argument("--observers", type=int, default=0)
    p.add_argument("--duration", default="60s", help="fault/workload phase in virtual time (600s, 10m, 500ms)")
    p.add_argument("--quiet", default="60s", help="after the final heal, wait at most this long to converge")
    p.add_argument("--faults", default="", help=f"comma-separated fault kinds to inject: {','.join(FAULT_KINDS)}")
    p.add_argument(
        "--no-buggify", action="store_true", help="no targeted faults (struck at what a node just did; on by default)"
    )
    p.add_argument("--drop", type=float, default=0.0, help="per-message drop probability on every link")
    p.add_argument("--delay", default="1:5", help="network delay MIN:MAX ms (uniform) or exp:MIN:MAX")
    p.add_argument("--append-interval", type=int, default=20, help="ms between client appends")
    p.add_argument("--no-workload", action="store_true", help="run without the built-in append client")
    p.add_argument(
        "--set", action="append", metavar="KEY=VALUE", help="a quorum.* setting, e.g. quorum.fetch.timeout.ms=3000"
    )
    p.add_argument(
        "--no-pre-vote",
        action="store_true",
        help="KIP-595 elections without KIP-996 pre-votes (a timed-out voter bumps the epoch at once)",
    )
    p.add_argument("--trace", metavar="FILE", help="write the trace as JSON lines (its sha256 is the digest)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=run_command)
