"""One complete simulator run: start, workload + faults, heal, quiet period, final checks, summary.

This is what `kchaos sim`, the seed sweeps in the tests and the benchmark call. The final checks
complement the per-event invariants with the end-to-end ones: after every fault is healed a leader
exists and every node has caught up with it; every acknowledged append is in every node's committed
log at the offsets it was acknowledged with; each core's own view of its log agrees with its disk.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from node.sim.faults import FaultConfig, FaultInjector
from node.sim.workload import WorkloadConfig
from node.sim.world import SimConfig, Simulation, Violation


@dataclass(frozen=True)
class RunConfig:
    sim: SimConfig = field(default_factory=SimConfig)
    workload: WorkloadConfig | None = field(default_factory=WorkloadConfig)  # None: no client
    faults: FaultConfig = field(default_factory=FaultConfig)
    duration_ms: int = 60_000  # faults and workload run this long
    quiet_max_ms: int = 60_000  # after the final heal: wait at most this long for convergence
    poll_ms: int = 100


@dataclass
class RunResult:
    seed: int
    valid: bool
    violation: Violation | None
    liveness_error: str | None
    digest: str
    summary: dict[str, Any]
    sim: Simulation

    @property
    def failure(self) -> str | None:
        if self.violation is not None:
            return str(self.violation)
        return self.liveness_error


def converged(sim: Simulation) -> bool:
    """A leader exists and every node is up, follows it, and has its whole log and HWM."""
    leader_id = sim.leader()
    if leader_id is None:
        return False
    leader = sim.nodes[leader_id].raft
    end = leader.log_end_offset
    if leader.high_watermark != end:
        return False
    for host in sim.nodes.values():
        raft = host.raft
        if not host.up or host.paused:
            return False
        if host.node_id == leader_id:
            continue
        if raft.epoch != leader.epoch or raft.leader_id != leader_id:
            return False
        if raft.log_end_offset != end or raft.high_watermark != end:
            return False
    return True


def final_checks(sim: Simulation) -> str | None:
    """End-to-end checks after convergence; returns a description of the first failure, if any."""
    committed = sim.checker.committed
    by_offset: dict[int, bytes] = {}
    for batch in committed:
        for i, record in enumerate(batch.records):
            by_offset[batch.base_offset + i] = record
    for op in sim.client.acked:
        for i, record in enumerate(op.records):
            got = by_offset.get(op.base_offset + i)
            if got != record:
                return (
                    f"acknowledged append h={op.handle} ({record!r} at offset {op.base_offset + i}) is not in "
                    f"the committed log (found {got!r})"
                )
        if op.last_offset != op.base_offset + len(op.records) - 1:
            return f"append h={op.handle} acknowledged with offsets {op.base_offset}..{op.last_offset}"
    for node_id, host in sim.nodes.items():
        raft = host.raft
        if raft.batches() != host.disk.batches():
            return f"node {node_id}'s in-memory log differs from the log its actions wrote"
        hwm = raft.high_watermark
        mine = raft.read_committed(0)
        expected = [b for b in committed if b.base_offset < hwm]
        if mine != expected:
            return f"node {node_id}'s committed log (HWM {hwm}) differs from the cluster's committed log"
    return None


def run(config: RunConfig) -> RunResult:
    wall_start = time.perf_counter()
    sim = Simulation(config.sim, config.workload)
    injector = FaultInjector(sim, config.faults)
    sim.start()
    if config.workload is not None:
        sim.start_workload()
    injector.start()
    sim.run_until(config.duration_ms)
    liveness_error = None
    if sim.violation is None:
        injector.stop()
        sim.stop_workload()
        sim.heal_all()
        ok = sim.run_until_true(lambda: converged(sim), config.quiet_max_ms, poll_ms=config.poll_ms)
        if sim.violation is None:
            if not ok:
                liveness_error = describe_unconverged(sim, config.quiet_max_ms)
            else:
                liveness_error = final_checks(sim)
    sim.trace.close()
    wall = time.perf_counter() - wall_start
    valid = sim.violation is None and liveness_error is None
    summary = summarize_run(sim, config, valid, liveness_error, wall)
    summary["buggify"] = dict(sorted(injector.buggify.fired.items())) if injector.buggify is not None else {}
    return RunResult(config.sim.seed, valid, sim.violation, liveness_error, sim.trace.digest, summary, sim)


def describe_unconverged(sim: Simulation, quiet_ms: int) -> str:
    states = []
    for node_id, host in sim.nodes.items():
        raft = host.raft
        if not host.up:
            states.append(f"{node_id}:down")
            continue
        states.append(
            f"{node_id}:{raft.role.value}/e{raft.epoch}/leader{raft.leader_id}/end{raft.log_end_offset}"
            f"/hwm{raft.high_watermark}"
        )
    return f"no stable, caught-up leader {quiet_ms} ms after the final heal ({' '.join(states)})"


def summarize_run(
    sim: Simulation, config: RunConfig, valid: bool, liveness_error: str | None, wall_s: float
) -> dict[str, Any]:
    leader_id = sim.leader()
    sim_s = sim.now / 1000
    checker = sim.checker
    return {
        "seed": config.sim.seed,
        "voters": config.sim.voters,
        "observers": config.sim.observers,
        "faults": list(config.faults.kinds),
        "simulated_s": sim_s,
        "wall_s": round(wall_s, 3),
        "speedup": round(sim_s / wall_s, 1) if wall_s > 0 else None,
        "events": sim.stats.events,
        "trace_lines": sim.trace.count,
        "elections": len(checker.leaders),
        "leaders_per_epoch": {str(e): n for e, n in sorted(checker.leaders.items())},
        "final_leader": leader_id,
        "final_epoch": sim.nodes[leader_id].raft.epoch if leader_id is not None else None,
        "committed_offset": checker.committed_end,
        "committed_batches": len(checker.committed),
        "appends": dict(sim.client.counts),
        "faults_injected": dict(sorted(sim.stats.faults.items())),
        "crashes": sim.stats.crashes,
        "lost_unsynced_writes": sim.stats.lost_unsynced_writes,
        "messages": {"sent": sim.network.sent, "dropped": sim.network.dropped, "redelivered": sim.network.redelivered},
        "verdict": "valid" if valid else "invalid",
        "violation": str(sim.violation) if sim.violation else None,
        "liveness": liveness_error,
        "digest": sim.trace.digest,
    }
