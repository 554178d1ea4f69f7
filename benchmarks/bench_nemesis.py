"""What the nemesis's simulator faults do, measured: prints figures, asserts nothing.

    python benchmarks/bench_nemesis.py [--part clock|targeted|all] [--seeds N]

- clock: one clock fault held for two minutes of virtual time on the followers (or the leader, or every
  voter) of a 3-voter quorum with a client appending every 50 ms, the leader killed 10 s in: elections
  per minute, the failover time (kill to the next acknowledged append), the share of one-second
  windows without an acknowledged append, and invariant violations (must be 0: KRaft uses no leases).
  Clock faults change only when a node's timers fire (its clock is the one its core reads, never
  backwards), so they show when a timer must detect a failure.
- targeted: cores with a bug planted in the window a targeted fault (node.sim.buggify) aims at, run
  over N seeds with random faults (partitions and kills; for Figure 8 also power losses and disk
  stalls), with and without the targeted faults: how many seeds catch the bug.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from node.sim.faults import FaultConfig
from node.sim.runner import RunConfig, run
from node.sim.workload import WorkloadConfig
from node.sim.world import SimConfig, Simulation

WINDOW_MS = 120_000
KILL_AFTER_MS = 10_000  # the leader is killed this long after the clock fault starts (restarted 5 s later)
Apply = Callable[[Simulation, int], None]

CLOCK_CASES: list[tuple[str, str, Apply]] = [
    ("no clock fault", "followers", lambda sim, n: None),
    ("rate x2", "followers", lambda sim, n: sim.skew(n, rate=2.0)),
    ("rate x0.5", "followers", lambda sim, n: sim.skew(n, rate=0.5)),
    ("rate x0.5", "leader", lambda sim, n: sim.skew(n, rate=0.5)),
    ("bump +60 s", "followers", lambda sim, n: sim.skew(n, jump_ms=60_000)),
    ("bump -5 s", "followers", lambda sim, n: sim.skew(n, jump_ms=-5_000)),
    ("bump -60 s", "followers", lambda sim, n: sim.skew(n, jump_ms=-60_000)),
    ("bump -60 s", "leader", lambda sim, n: sim.skew(n, jump_ms=-60_000)),
    ("bump +60 s, reset 5 s later", "followers", lambda sim, n: bump_then_reset(sim, n, 60_000, 5_000)),
    ("strobe 10 s every 500 ms", "followers", lambda sim, n: sim.strobe_clock(n, 10_000, 500, WINDOW_MS)),
    ("strobe 10 s every 500 ms", "all", lambda sim, n: sim.strobe_clock(n, 10_000, 500, WINDOW_MS)),
]


def bump_then_reset(sim: Simulation, node: int, delta_ms: int, after_ms: int) -> None:
    sim.skew(node, jump_ms=delta_ms)
    sim.queue.after(after_ms, sim.reset_clock, node)


def clock_case(apply: Apply, who: str, seeds: range) -> tuple[float, float, float, int]:
    """Mean elections/min over the window, mean failover (ms from the leader's kill to the next
    acknowledged append), mean share of unavailable seconds, violations."""
    elections = failover = unavailable = 0.0
    violations = 0
    for seed in seeds:
        sim = Simulation(SimConfig(seed=seed, voters=3), WorkloadConfig(interval_ms=50))
        sim.start()
        sim.start_workload()
        sim.run_until_true(lambda sim=sim: sim.leader() is not None, 30_000)
        sim.run_for(5_000)
        leader = sim.leader()
        assert leader is not None
        followers = [n for n in sim.nodes if n != leader]
        targets = {"leader": [leader], "followers": followers, "all": list(sim.nodes)}[who]
        t0, e0, acked0 = sim.now, len(sim.checker.leaders), len(sim.client.acked)
        for node in targets:
            apply(sim, node)
        sim.run_for(KILL_AFTER_MS)
        killed_at = sim.now
        current = sim.leader()
        if current is not None:
            sim.kill(current)
            sim.queue.after(5_000, sim.restart, current)
        sim.run_until(t0 + WINDOW_MS)
        violations += sim.violation is not None
        elections += (len(sim.checker.leaders) - e0) / (WINDOW_MS / 60_000)
        acks = [op.completed_ms for op in sim.client.acked[acked0:]]
        after = [t for t in acks if t > killed_at]
        failover += (min(after) if after else t0 + WINDOW_MS) - killed_at
        seconds_with_ack = {t // 1000 for t in acks}
        windows = range(t0 // 1000 + 1, (t0 + WINDOW_MS) // 1000)
        unavailable += sum(1 for w in windows if w not in seconds_with_ack) / len(windows)
    n = len(seeds)
    return elections / n, failover / n, unavailable / n, violations


def clock_part(seeds: range) -> None:
    print(
        f"a clock fault held {WINDOW_MS // 1000} s (virtual), the leader killed {KILL_AFTER_MS // 1000} s in; "
        f"3 voters, appends every 50 ms, {len(seeds)} seeds"
    )
    print(f"{'fault':<30} {'on':<10} {'elections/min':>13} {'failover ms':>11} {'unavailable':>11} {'violations':>10}")
    for name, who, apply in CLOCK_CASES:
        per_min, failover, unavailable, violations = clock_case(apply, who, seeds)
        print(f"{name:<30} {who:<10} {per_min:>13.2f} {failover:>11.0f} {unavailable:>10.1%} {violations:>10}")


def targeted_part(seeds: range) -> None:
    from node.bugs import Bugs
    from tests.sim.test_buggify import LazyCandidateNode, LazyVoteNode

    figure8 = {"raft": {"bugs": Bugs(frozenset({"raft-hwm-before-leader-change-committed"}))}}
    cases: list[tuple[str, dict, tuple[str, ...], int]] = [
        ("LazyVoteNode", {"node_factory": LazyVoteNode}, ("partition", "kill"), 100),
        ("LazyCandidateNode", {"node_factory": LazyCandidateNode}, ("partition", "kill"), 100),
        # KAFKA-12619: Figure 8 needs the `elected-behind` isolation and its disk stall
        ("hwm-before-leader-change", figure8, ("partition", "kill", "lose_unsynced", "disk_stall"), 20),
    ]
    print(f"planted bugs caught over {len(seeds)} seeds (30 s of random faults each)")
    print(f"{'core':<26} {'random faults only':>18} {'+ targeted faults':>18} {'wall s':>7}  faults")
    for name, sim_options, kinds, interval_ms in cases:
        counts = []
        start = time.perf_counter()
        for targeted in (False, True):
            caught = 0
            for seed in seeds:
                result = run(
                    RunConfig(
                        sim=SimConfig(seed=seed, **sim_options),
                        workload=WorkloadConfig(interval_ms=interval_ms),
                        faults=FaultConfig(kinds=kinds, buggify=targeted),
                        duration_ms=30_000,
                        quiet_max_ms=30_000,
                    )
                )
                caught += result.violation is not None
            counts.append(caught)
        wall = time.perf_counter() - start
        n = len(seeds)
        print(f"{name:<26} {counts[0]:>12}/{n:<5} {counts[1]:>12}/{n:<5} {wall:>7.1f}  {','.join(kinds)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("clock", "targeted", "all"), default="all")
    parser.add_argument("--seeds", type=int, default=0, help="seeds per case (default: 5 clock, 100 targeted)")
    args = parser.parse_args()
    if args.part in ("clock", "all"):
        clock_part(range(args.seeds or 5))
    if args.part in ("targeted", "all"):
        targeted_part(range(args.seeds or 100))


if __name__ == "__main__":
    main()
