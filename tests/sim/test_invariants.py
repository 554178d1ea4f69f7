"""Each invariant of `node.sim.invariants` on hand-made states: it passes when it should and fails
when it should."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from node.protocol.errors import ErrorCode
from node.protocol.messages import EpochEndOffset, FetchResponse
from node.raft.events import ResponseReceived
from node.raft.quorum_state import NO_ID, QuorumStateData, Role
from node.raft.records import RecordBatch
from node.sim.cluster import ClusterConfig
from node.sim.cluster_run import settled
from node.sim.disk import SimDisk
from node.sim.invariants import InvariantChecker, InvariantViolation
from node.sim.runner import converged
from node.sim.world import SimConfig, Simulation
from tests.sim.scenarios import wait
from tests.sim.test_disk import diverged_below_a_fetched_snapshot


def batch(base: int, epoch: int, tag: str = "") -> RecordBatch:
    return RecordBatch(base, epoch, (f"{base}{tag}".encode(),))


@dataclass
class View:
    disk: SimDisk
    role: Role = Role.FOLLOWER
    epoch: int = 1
    high_watermark: int = 0
    election_voters: tuple[int, ...] = ()
    voted_id: int = NO_ID
    leader_id: int = NO_ID
    log_start: int | None = None  # the core's log start, when it ran ahead of its disk (a fail-stop)

    @property
    def log_start_offset(self) -> int:
        return self.disk.start_offset if self.log_start is None else self.log_start

    @property
    def log_end_offset(self) -> int:
        return self.disk.end_offset

    @property
    def last_epoch(self) -> int:
        return self.disk.last_epoch


class Cluster:
    def __init__(self, n: int = 3) -> None:
        self.disks = {i: SimDisk(i) for i in range(1, n + 1)}
        for disk in self.disks.values():
            disk.load()
        self.views = {i: View(self.disks[i]) for i in self.disks}
        self.checker = InvariantChecker(tuple(self.disks))

    def append(self, node: int, *batches: RecordBatch, flush: bool = True) -> None:
        disk = self.disks[node]
        prev = disk.last_batch
        for b in batches:
            self.checker.on_append(node, prev, b)
            prev = b
        disk.append(batches)
        if flush:
            disk.flush()

    def check(self, node: int, **changes) -> None:
        view = self.views[node]
        for key, value in changes.items():
            setattr(view, key, value)
        self.checker.after_event(node, view, self.disks[node], self.disks)


def test_a_healthy_history_passes():
    c = Cluster()
    for n in (1, 2, 3):
        c.append(n, batch(0, 1), batch(1, 1))
    c.check(1, role=Role.LEADER, high_watermark=2)
    c.check(2, high_watermark=2)
    c.check(3, high_watermark=1)
    assert c.checker.committed_end == 2
    assert c.checker.leaders == {1: 1}


def test_two_leaders_in_one_epoch():
    c = Cluster()
    c.check(1, role=Role.LEADER, epoch=3)
    c.check(1, role=Role.FOLLOWER, epoch=3)
    with pytest.raises(InvariantViolation, match="two leaders in epoch 3"):
        c.check(2, role=Role.LEADER, epoch=3)


def test_epoch_going_back_even_across_a_restart():
    c = Cluster()
    c.check(1, epoch=5)
    c.checker.on_restart(1)
    with pytest.raises(InvariantViolation, match="epoch went back"):
        c.check(1, epoch=4)


def test_hwm_going_back_within_an_incarnation_but_not_across_restarts():
    c = Cluster()
    for n in (1, 2):
        c.append(n, batch(0, 1), batch(1, 1))
    c.check(1, high_watermark=2)
    c.checker.on_restart(1)
    c.check(1, high_watermark=1)  # fine: a restarted node re-learns its HWM
    with pytest.raises(InvariantViolation, match="high watermark went back"):
        c.check(1, high_watermark=0)


def test_hwm_beyond_log_end():
    c = Cluster()
    c.append(1, batch(0, 1))
    with pytest.raises(InvariantViolation, match="beyond its log end"):
        c.check(1, high_watermark=2)


def test_committed_entry_changed_on_another_node():
    c = Cluster()
    for n in (1, 2):
        c.append(n, batch(0, 2))
    c.append(3, batch(0, 1))  # an older epoch's batch at the same offset
    c.check(1, high_watermark=1)
    with pytest.raises(InvariantViolation, match="committed entry changed"):
        c.check(3, high_watermark=1)


def test_truncating_below_own_hwm():
    c = Cluster()
    for n in (1, 2):
        c.append(n, batch(0, 1), batch(1, 1))
    c.check(1, high_watermark=2)
    c.checker.on_truncate(2, 1)  # node 2's own HWM is 0: allowed
    with pytest.raises(InvariantViolation, match="below its own HWM"):
        c.checker.on_truncate(1, 1)


def test_commit_must_be_durable_on_a_majority():
    c = Cluster()
    c.append(1, batch(0, 1))
    c.append(2, batch(0, 1), flush=False)  # replicated but not fsynced
    with pytest.raises(InvariantViolation, match="durable on only 1 voter"):
        c.check(1, high_watermark=1)


def test_durable_loss_after_commit_is_caught():
    c = Cluster()
    for n in (1, 2):
        c.append(n, batch(0, 1))
    c.check(1, high_watermark=1)
    c.checker.on_durable_loss(c.disks, 0)  # nothing lost yet: fine
    c.disks[2].truncate(0)
    c.disks[2].flush()
    with pytest.raises(InvariantViolation, match="durable on only 1 voter"):
        c.checker.on_durable_loss(c.disks, c.disks[2].take_durable_truncation())


def test_log_matching_same_offset_and_epoch_different_content():
    c = Cluster()
    c.append(1, batch(0, 1))
    with pytest.raises(InvariantViolation, match="log matching"):
        c.append(2, batch(0, 1, tag="other"))


def test_log_matching_same_entry_after_a_different_prefix():
    c = Cluster()
    c.append(1, batch(0, 1), batch(1, 2))
    c.append(2, batch(0, 2, tag="y"))
    with pytest.raises(InvariantViolation, match="predecessor"):
        c.append(2, batch(1, 2))


# --- rule 9: commit safety (no voter lacking a committed entry could still be elected) -------------------


def diverged_follower(*batches: RecordBatch) -> Cluster:
    """Node 2 holds `batches`; what it holds after handling a DivergingEpoch is what rule 11 judges."""
    c = Cluster()
    c.append(2, *batches)
    return c


def repaired(c: Cluster, epoch: int, end_offset: int) -> None:
    c.checker.after_diverging(2, c.views[2], epoch, end_offset)


def test_a_follower_that_truncated_every_later_epoch_has_repaired_the_divergence():
    repaired(diverged_follower(batch(0, 1), batch(1, 1)), 1, 3)  # its epoch 1 ends before the leader's
    repaired(diverged_follower(batch(0, 1), batch(1, 1)), 1, 2)
    repaired(diverged_follower(batch(0, 1)), 3, 5)  # it has no epoch 3: everything after epoch 1 went
    repaired(diverged_follower(batch(0, 1), batch(1, 2)), 0, 2)  # epoch 0: the leader's log start binds


def test_a_follower_that_keeps_a_later_epoch_after_a_divergence_fails_kafka_6361():
    c = diverged_follower(batch(0, 1), batch(1, 1), batch(2, 2))  # a deposed epoch-2 leader's entry at 2
    with pytest.raises(InvariantViolation, match="still holds entries of epoch 2, above the diverging epoch 1"):
        repaired(c, 1, 4)  # the leader's epoch 1 runs to 4: the bug's truncation to min(4, end 3) keeps it


def test_a_follower_that_keeps_the_diverging_epoch_past_the_leaders_end_fails():
    with pytest.raises(InvariantViolation, match="up to offset 3, past the leader's end offset 2 of epoch 1"):
        repaired(diverged_follower(batch(0, 1), batch(1, 1), batch(2, 1)), 1, 2)
    with pytest.raises(InvariantViolation, match="past the leader's end offset 1 of epoch 0"):
        repaired(diverged_follower(batch(0, 1), batch(1, 2)), 0, 1)


def deliver_stale_diverging_answer(sim: Simulation, follower: int, correlation_id: int) -> None:
    """Hand `follower` a copy of a Fetch answer of its leader, in its epoch, as the answer to
    `correlation_id`, whose DivergingEpoch (0, 0) would cut its whole log."""
    raft = sim.raft(follower)
    assert raft.role is Role.FOLLOWER and raft.log_end_offset > 0
    stale = FetchResponse(ErrorCode.NONE, raft.leader_id, raft.epoch, 0, diverging_epoch=EpochEndOffset(0, 0))
    sim._deliver(follower, sim.nodes[follower].incarnation, ResponseReceived(raft.leader_id, correlation_id, stale))


def test_a_stale_copy_of_a_diverging_answer_is_not_judged_the_follower_drops_it():
    """Rule 11 judges the answer a follower acts on. A copy the network delivers again (the `redeliver`
    fault) answers a fetch the follower no longer waits for, and the core drops it unread: a copy whose
    DivergingEpoch would cut the whole log must not count as a divergence left unrepaired."""
    sim = Simulation(SimConfig(seed=1, voters=3))
    sim.start()
    wait(sim, lambda: converged(sim), 30_000, "a leader followed by both voters")
    follower = next(n for n in sim.nodes if n != sim.leader())
    deliver_stale_diverging_answer(sim, follower, 10**6)
    assert sim.violation is None, sim.violation
    assert sim.raft(follower).log_end_offset > 0


def test_a_node_process_answer_is_matched_by_the_process_not_by_the_raft_cores_id():
    """In a whole-node run the network's correlation ids are the process's, which maps each to the Raft
    core's own id while the answer is awaited. A copy under the id the core waits for, which the process
    does not map to it, is still a stale copy (registrations under every fault kind, seed 12, flagged
    the correct cluster until the simulator asked the process). The broker's process also sends
    requests of its own (registration, heartbeats), so its ids and its core's part ways."""
    sim = Simulation(SimConfig(seed=1, cluster=ClusterConfig(controllers=3, brokers=1)))
    sim.start()
    wait(sim, lambda: settled(sim), 60_000, "a settled cluster")
    broker = 4
    leader = sim.raft(broker).leader_id
    raft_id = next(c for c in range(1, 100_000) if sim.raft(broker).awaits(leader, c))
    assert sim.nodes[broker].process.raft_correlation_id(raft_id) != raft_id
    deliver_stale_diverging_answer(sim, broker, raft_id)
    assert sim.violation is None, sim.violation
    assert sim.raft(broker).log_end_offset > 0


def figure8(leader_epoch_entry_durable: bool = True, follower_has_it: bool = True) -> Cluster:
    """Raft's Figure 8 on three voters: nodes 1 and 2 hold X (offset 0, epoch 1); node 3 holds a
    LeaderChange of epoch 2 at offset 0 that never spread; node 1 leads epoch 3 and has written its own
    LeaderChange at offset 1 (fsynced or not), which node 2 has fetched and fsynced, or not yet."""
    c = Cluster()
    c.append(1, batch(0, 1))
    c.append(1, batch(1, 3), flush=leader_epoch_entry_durable)
    c.append(2, batch(0, 1), *([batch(1, 3)] if follower_has_it else []))
    c.append(3, batch(0, 2))
    return c


def test_commit_safety_passes_once_the_leaders_epoch_entry_is_durable_on_a_majority():
    c = figure8()
    c.check(1, role=Role.LEADER, epoch=3, high_watermark=2)  # X and the LeaderChange: node 3 can win no vote
    assert c.checker.committed_end == 2


def test_commit_safety_fails_when_x_is_committed_before_the_leaders_epoch_entry():
    c = figure8(follower_has_it=False)  # node 2 fetched X alone (one batch per fetch)
    with pytest.raises(InvariantViolation, match=r"commit safety: batch \[0..1\) epoch 1 is committed, but node 3"):
        c.check(1, role=Role.LEADER, epoch=3, high_watermark=1)  # KAFKA-12619: X before the LeaderChange


def test_commit_safety_judges_what_survives_a_power_loss():
    """Node 2 holds the new epoch's entry, node 1's copy is not fsynced: committing X alone is unsafe,
    since after a power loss node 1 would vote for node 3, whose epoch-2 LeaderChange beats X."""
    c = figure8(leader_epoch_entry_durable=False)
    with pytest.raises(InvariantViolation, match=r"could still be elected by voters \[1, 3\]"):
        c.check(1, role=Role.LEADER, epoch=3, high_watermark=1)
    safe = figure8(leader_epoch_entry_durable=True)
    safe.check(1, role=Role.LEADER, epoch=3, high_watermark=1)  # both copies durable: node 3 cannot win


def test_commit_safety_ignores_a_lagging_voter_that_cannot_win():
    c = Cluster()
    for n in (1, 2):
        c.append(n, batch(0, 1), batch(1, 1))
    c.append(3, batch(0, 1))  # behind, same epoch: it loses every vote to nodes 1 and 2
    c.check(1, role=Role.LEADER, high_watermark=2)
    assert c.checker.committed_end == 2


# --- rule 10: election safety across crashes (votes are durable) ------------------------------------


def test_a_leader_elected_with_durable_votes_passes():
    c = Cluster()
    c.disks[1].write_quorum_state(QuorumStateData(leader_id=1, leader_epoch=2, voted_id=1))
    c.disks[2].write_quorum_state(QuorumStateData(leader_epoch=2, voted_id=1))
    c.check(1, role=Role.LEADER, epoch=2, election_voters=(1, 2))
    c.disks[1].write_quorum_state(QuorumStateData(leader_id=1, leader_epoch=3, voted_id=1))
    c.disks[3].write_quorum_state(QuorumStateData(leader_id=1, leader_epoch=3))  # its leader, no vote: fine
    c.check(1, role=Role.LEADER, epoch=3, election_voters=(1, 3))
    c.disks[2].write_quorum_state(QuorumStateData(leader_id=2, leader_epoch=4, voted_id=2))
    c.disks[3].write_quorum_state(QuorumStateData(leader_epoch=5))  # moved on: it cannot vote in 4 any more
    c.check(2, role=Role.LEADER, epoch=4, election_voters=(2, 3))


def test_a_vote_not_durable_when_its_leader_is_elected_fails():
    c = Cluster()
    c.disks[1].write_quorum_state(QuorumStateData(leader_id=1, leader_epoch=2, voted_id=1))
    c.disks[2].write_quorum_state(QuorumStateData(leader_epoch=2))  # the epoch, but no votedId
    with pytest.raises(
        InvariantViolation, match="election safety: node 1 was elected in epoch 2 with the vote of node 2"
    ):
        c.check(1, role=Role.LEADER, epoch=2, election_voters=(1, 2))


def elected_by_1_and_2() -> Cluster:
    """Node 1 elected in epoch 2 with node 2's vote, both durable."""
    c = Cluster()
    c.disks[1].write_quorum_state(QuorumStateData(leader_id=1, leader_epoch=2, voted_id=1))
    c.disks[2].write_quorum_state(QuorumStateData(leader_epoch=2, voted_id=1))
    c.check(1, role=Role.LEADER, epoch=2, election_voters=(1, 2))
    return c


def test_a_voter_restarting_with_its_vote_or_in_a_later_epoch_passes():
    c = elected_by_1_and_2()
    c.checker.on_restart(2)
    c.check(2, epoch=2, voted_id=1, role=Role.VOTED)  # remembers it
    c.checker.on_restart(2)
    c.check(2, epoch=3, role=Role.UNATTACHED)  # a later epoch: it cannot vote in epoch 2 any more
    c.checker.on_restart(3)
    c.check(3, epoch=2, role=Role.UNATTACHED)  # node 3 did not elect node 1


def test_a_voter_restarting_without_its_vote_fails():
    c = elected_by_1_and_2()
    c.checker.on_restart(2)
    with pytest.raises(InvariantViolation, match=r"node 2 restarted in epoch 2 with votedId -1 .* its vote for node 1"):
        c.check(2, epoch=2, voted_id=NO_ID, role=Role.UNATTACHED)


def test_a_node_restarting_on_a_snapshot_its_diverged_log_reaches_agrees_with_its_disk():
    """Issue 24 (config-register seed 11): the log check after Start compared the core's log (after
    the snapshot's epoch 3) with the disk model's (after the deleted diverged batch's epoch 2)."""
    disk = diverged_below_a_fetched_snapshot()
    sim = Simulation(SimConfig(seed=1, voters=1, disk_factory=lambda _: disk))
    sim.restart(1)
    assert sim.violation is None, sim.violation
    log = sim.raft(1).log
    assert (log.start_offset, log.last_epoch) == (disk.start_offset, disk.last_epoch) == (2, 3)


# --- a fail-stop part way through an event (the core ran ahead of its disk) ---------------------------


def diverged_follower_reset_fails(core_log_start: int) -> tuple[Cluster, View]:
    """Soak seed 207 in small: nodes 1 and 2 committed [X (offset 0, epoch 1), Y (offset 1, epoch 3)];
    node 3 holds X and its own uncommitted Z (offset 1, epoch 2) from a term it led alone. Told to fetch
    the leader's snapshot (end 2), node 3 installs it: its core's log starts at `core_log_start` with
    the HWM at 2, but the ResetLog fails on a disk error, so the disk still holds X and Z."""
    c = Cluster()
    for n in (1, 2):
        c.append(n, batch(0, 1), batch(1, 3))
    c.append(3, batch(0, 1), batch(1, 2))
    c.check(1, role=Role.LEADER, epoch=3, high_watermark=2)
    c.check(3, epoch=3, high_watermark=1)  # X: node 3 knew it committed before the snapshot
    c.checker.on_snapshot(3, 2)
    c.checker.on_reset(3, 2)  # the world tells the checker, then the disk raises
    view = c.views[3]
    view.high_watermark, view.log_start = 2, core_log_start
    return c, view


def test_a_fail_stop_in_a_log_reset_does_not_judge_the_old_log_by_the_snapshots_hwm():
    """Soak seed 207: the core's HWM (the snapshot's end) speaks of its new log, not of the old one."""
    c, view = diverged_follower_reset_fails(core_log_start=2)
    c.checker.on_fail_stop(3, view, c.disks[3], c.disks)
    assert c.checker.committed_batch(1) == batch(1, 3)
    c.check(1, role=Role.LEADER, epoch=3, high_watermark=2)  # the pending snapshot (end 2) is within the commit


def test_a_fail_stop_still_judges_a_core_that_claims_its_own_diverged_log_committed():
    """The other verdict: a core whose log still starts at 0 and holds Z below its HWM 2 claims Z
    committed, which the fail-stop hook still catches."""
    c, view = diverged_follower_reset_fails(core_log_start=0)
    with pytest.raises(InvariantViolation, match=r"committed entry changed: node 3 has batch \[1..2\) epoch 2"):
        c.checker.on_fail_stop(3, view, c.disks[3], c.disks)
