"""Pre-vote (KIP-996): epochs in a 600 s simulated run, with and without it. Prints figures; asserts
nothing (tests/sim/test_pre_vote.py holds the bounds). Every figure is a count from a seeded
simulation, so it is the same on any machine; CPU seconds are printed for the cost.

1. One voter of three cut off from the others for the whole run, then healed: its epoch when the
   partition heals, and whether its return cost the healthy leader its leadership.
2. The simulator's random fault mix (partition, kill, pause, clock, with its targeted faults) and a
   client appending every 20 ms, several seeds: the final epoch, elections, committed offset.
3. The leader of 3 voters killed, 30 seeds: how long until the next leader is elected (what the
   pre-vote round costs a real failover).

    python benchmarks/bench_pre_vote.py [--duration 600] [--seeds 1,2,3]
"""

from __future__ import annotations

import argparse
import statistics
import time

from node.sim.faults import FaultConfig
from node.sim.runner import RunConfig, converged, run
from node.sim.workload import WorkloadConfig
from node.sim.world import SimConfig, Simulation
from tests.sim.scenarios import leader_among, partitioned_voter, wait

FAULTS = ("partition", "kill", "pause", "clock")


def partitioned(duration_s: int, seed: int) -> None:
    print(f"\n1. one voter of 3 cut off for {duration_s} s, then healed (seed {seed})")
    print(f"{'pre-vote':<9} {'epoch before':>12} {'its epoch at heal':>17} {'epoch after':>11}", end=" ")
    print(f"{'leader kept':>11} {'cpu s':>6}")
    for pre_vote in (False, True):
        cpu = time.process_time()
        out = partitioned_voter(seed=seed, cut_ms=duration_s * 1000, pre_vote=pre_vote)
        cpu = time.process_time() - cpu
        kept = "yes" if (out.leader_after, out.epoch_after) == (out.leader, out.epoch) else "no"
        print(
            f"{'on' if pre_vote else 'off':<9} {out.epoch:>12} {out.voter_epoch_at_heal:>17} {out.epoch_after:>11} "
            f"{kept:>11} {cpu:>6.1f}"
        )


def fault_mix(duration_s: int, seeds: list[int]) -> None:
    print(f"\n2. {','.join(FAULTS)} + targeted faults, appends every 20 ms, {duration_s} s per run")
    print(f"{'seed':>4} {'pre-vote':<9} {'final epoch':>11} {'elections':>9} {'committed':>9}", end=" ")
    print(f"{'invariants':>10} {'cpu s':>6}")
    for seed in seeds:
        for pre_vote in (False, True):
            config = RunConfig(
                sim=SimConfig(seed=seed, voters=3, raft={"pre_vote": pre_vote}),
                workload=WorkloadConfig(interval_ms=20),
                faults=FaultConfig(kinds=FAULTS),
                duration_ms=duration_s * 1000,
            )
            cpu = time.process_time()
            s = run(config).summary
            cpu = time.process_time() - cpu
            print(
                f"{seed:>4} {'on' if pre_vote else 'off':<9} {s['final_epoch']:>11} {s['elections']:>9} "
                f"{s['committed_offset']:>9} {s['verdict']:>10} {cpu:>6.1f}"
            )


def failover_ms(seed: int, pre_vote: bool) -> int:
    sim = Simulation(SimConfig(seed=seed, voters=3, raft={"pre_vote": pre_vote}))
    sim.start()
    wait(sim, lambda: converged(sim), 30_000, "a first leader")
    sim.run_for(1_000 + seed * 37)  # somewhere in the leader's fetch cycle
    old = sim.leader()
    assert old is not None
    epoch, killed_at = sim.raft(old).epoch, sim.now
    sim.kill(old)
    others = [n for n in sim.nodes if n != old]
    wait(sim, lambda: leader_among(sim, others, epoch) is not None, 30_000, "a new leader")
    return sim.now - killed_at


def failover(seeds: int) -> None:
    print(f"\n3. the leader of 3 voters killed, {seeds} seeds: ms until the next leader is elected")
    print(f"{'pre-vote':<9} {'median':>7} {'max':>6}")
    for pre_vote in (False, True):
        times = [failover_ms(seed, pre_vote) for seed in range(seeds)]
        print(f"{'on' if pre_vote else 'off':<9} {statistics.median(times):>7.0f} {max(times):>6}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=int, default=600, help="simulated seconds per run")
    parser.add_argument("--seeds", default="1,2,3", help="seeds of the fault-mix runs")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    partitioned(args.duration, seeds[0])
    fault_mix(args.duration, seeds)
    failover(30)


if __name__ == "__main__":
    main()
