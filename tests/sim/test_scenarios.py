"""Targeted scenarios from issue 2 against the real RaftNode core, in the simulator."""

from __future__ import annotations

import pytest

from node.raft import actions as act
from node.raft.quorum_state import Role
from node.sim.network import LinkModel
from node.sim.runner import converged
from node.sim.workload import WorkloadConfig
from node.sim.world import SimConfig, Simulation
from tests.sim.scenarios import figure8, leader_among, settle, wait, zombie_leader


def test_figure8_old_epoch_entry_is_not_committed_by_a_majority_alone():
    out = figure8()
    sim = out.sim
    assert sim.violation is None, sim.violation
    # (c): X@e1 was on a majority, but the leader's own-epoch entry was not: HWM stayed at x.
    assert out.hwm_when_old_entry_on_majority <= out.x
    # (d): the scenario really happened: the later leader's entry replaced X at offset x ...
    committed_x = sim.checker.committed_batch(out.x)
    assert committed_x is not None and committed_x.epoch == out.overwriting_epoch != out.old_epoch
    # ... and X was never acknowledged to its client.
    assert not isinstance(sim.append_results.get(out.append_handle), act.AppendCompleted)
    settle(sim)
    assert sim.violation is None, sim.violation


def test_zombie_leader_steps_down_and_does_not_commit():
    out = zombie_leader()
    sim = out.sim
    assert sim.violation is None, sim.violation
    fetch_timeout = sim.node(out.old_leader).config.fetch_timeout_ms
    # Fetches from a majority are checked per fetch-timeout window: at most two windows pass.
    assert out.stepped_down_at - out.partitioned_at <= 2 * fetch_timeout + 100
    assert out.hwm_while_isolated == out.old_hwm
    assert sim.raft(out.new_leader).epoch > out.old_epoch
    assert not isinstance(sim.append_results.get(out.append_handle), act.AppendCompleted)
    settle(sim)
    assert b"zombie" not in [r for b in sim.committed_log() for r in b.records]


@pytest.mark.parametrize("seed", range(12))
def test_two_of_three_voters_elect_a_leader_despite_split_votes(seed):
    sim = Simulation(SimConfig(seed=seed, voters=3, start_stagger_ms=0))
    sim.start([1, 2])  # voter 3 never comes up
    wait(sim, lambda: sim.leader() is not None, 60_000, "a leader with 2 of 3 voters")
    leader = sim.leader()
    assert leader in (1, 2)
    other = 3 - leader
    wait(sim, lambda: sim.raft(other).leader_id == leader, 10_000, "the other voter following")
    assert sim.violation is None


def test_split_votes_happen_and_are_resolved():
    """Across seeds, some 2-of-3 elections need more than one epoch: the backoff breaks the tie."""
    contested = 0
    for seed in range(20):
        slow = LinkModel(delay_min_ms=100, delay_max_ms=300)  # slow votes make collisions likely
        sim = Simulation(SimConfig(seed=seed, voters=3, start_stagger_ms=0, link=slow))
        sim.start([1, 2])
        wait(sim, lambda s=sim: s.leader() is not None, 60_000, "a leader with 2 of 3 voters")
        if sim.raft(sim.leader()).epoch > 1:
            contested += 1
    assert contested >= 3


def test_back_to_back_leader_failures():
    sim = Simulation(SimConfig(seed=3, voters=5), WorkloadConfig(interval_ms=50))
    sim.start()
    sim.start_workload()
    wait(sim, lambda: sim.leader() is not None, 30_000, "a first leader")
    sim.run_for(2_000)
    epochs, leaders = [], []
    for _ in range(2):
        leader = sim.leader()
        assert leader is not None
        epoch = sim.raft(leader).epoch
        epochs.append(epoch)
        leaders.append(leader)
        sim.kill(leader)
        # the next leader dies the moment it is elected
        wait(sim, lambda e=epoch: leader_among(sim, sim.nodes, e) is not None, 30_000, "a successor")
    third = sim.leader()
    assert third is not None and third not in leaders
    wait(sim, lambda: sim.client.counts["ok"] > 0 and sim.raft(third).high_watermark > 0, 10_000, "progress")
    acked_before = sim.client.counts["ok"]
    sim.run_for(5_000)
    assert sim.client.counts["ok"] > acked_before  # 3 of 5 voters keep committing
    sim.stop_workload()
    settle(sim)
    assert sim.violation is None, sim.violation
    assert sorted(set(sim.checker.leaders)) == sorted(sim.checker.leaders)
    assert sim.raft(sim.leader()).epoch > epochs[-1] > epochs[0]


def test_crash_loses_an_unfsynced_tail_that_was_never_acknowledged():
    sim = Simulation(SimConfig(seed=4, voters=3, disk_latency_ms=(40, 60)))
    sim.start()
    wait(sim, lambda: converged(sim), 30_000, "a first leader")
    leader = sim.leader()
    assert leader is not None
    end = sim.raft(leader).log_end_offset
    others = [n for n in sim.nodes if n != leader]
    sim.isolate([others])  # nobody copies the tail before the crash
    handles = [sim.submit_append(leader, (f"tail{i}".encode(),)) for i in range(3)]
    wait(sim, lambda: sim.node(leader).disk.end_offset > end, 1_000, "the leader writing the tail")
    assert sim.node(leader).disk.unsynced_writes > 0
    sim.kill(leader, lose_unsynced=True, keep_unsynced=0)
    assert sim.stats.lost_unsynced_writes > 0
    assert sim.node(leader).disk.end_offset == end  # the tail is gone from its disk
    wait(sim, lambda: leader_among(sim, others) is not None, 30_000, "a new leader")
    settle(sim)
    for handle in handles:
        assert not isinstance(sim.append_results.get(handle), act.AppendCompleted)
    committed = [r for b in sim.committed_log() for r in b.records]
    assert not any(r.startswith(b"tail") for r in committed)


def test_observer_started_late_replicates_the_whole_committed_log():
    sim = Simulation(SimConfig(seed=5, voters=3, observers=1), WorkloadConfig(interval_ms=20))
    sim.start([1, 2, 3])
    sim.start_workload()
    sim.run_until(10_000)
    sim.stop_workload()
    assert sim.client.counts["ok"] > 100
    sim.restart(4)
    wait(sim, lambda: converged(sim), 30_000, "the observer catching up")
    observer = sim.raft(4)
    assert observer.role is not Role.LEADER
    assert observer.read_committed(0) == sim.committed_log()
    assert observer.high_watermark == sim.checker.committed_end
    assert sim.violation is None
