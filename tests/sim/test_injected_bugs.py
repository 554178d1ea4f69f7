"""The invariants can fail: cores and disks with deliberate bugs must be caught by the simulator."""

from __future__ import annotations

import pytest

from node.bugs import Bugs
from node.raft.node import RaftNode
from node.raft.quorum_state import Role
from node.runtime.file_storage import LOG_DIR_NAME, FileStorage
from node.sim.disk import DATA_DIR, SimDisk
from node.sim.faults import FaultConfig
from node.sim.invariants import InvariantChecker
from node.sim.runner import RunConfig, converged, run
from node.sim.simfs import SimFS
from node.sim.workload import WorkloadConfig
from node.sim.world import SimConfig, Simulation
from tests.sim.scenarios import InvariantViolated, figure8, wait


class EagerCommitNode(RaftNode):
    """A leader that calls everything it has written committed, without waiting for a majority."""

    def handle(self, now, event):
        out = super().handle(now, event)
        if self.role is Role.LEADER:
            self.high_watermark = max(self.high_watermark, self.log_end_offset)
        return out


class NoFigure8RuleNode(RaftNode):
    """A leader that commits whatever a majority holds, even before an entry of its own epoch.

    (Overrides a private method of the core: the one place that rule lives.)
    """

    def _maybe_advance_leader_hwm(self, now):
        leader = self.state
        offsets = sorted(
            (self._flushed_end if v == self.node_id else leader.voters[v].end_offset for v in self.voters),
            reverse=True,
        )
        candidate = offsets[self.config.majority - 1]
        if candidate > self.high_watermark:
            self._advance_hwm(now, candidate)


class LyingFS(SimFS):
    """fsync that lies: when the process dies, the last two batches it had flushed are gone too."""

    def drop_process(self):
        super().drop_process()
        segments = [
            f for name, f in sorted(self.listing(f"{DATA_DIR}/{LOG_DIR_NAME}").items()) if name.endswith(".log")
        ]
        for f in reversed(segments):
            items, count = f.durable_marks()
            if count > 2:
                cut = f.mark_ends[count - 3]
                self.lost_marks.extend(items[count - 2 : count])
                del f.data[cut:]
                f.synced = cut
                f._cut_marks(cut)
                return


def forgetful_disk(node_id: int) -> SimDisk:
    return SimDisk(node_id, fs=LyingFS())


def test_eager_commit_is_caught_in_a_plain_run():
    result = run(
        RunConfig(
            sim=SimConfig(seed=1, node_factory=EagerCommitNode),
            workload=WorkloadConfig(interval_ms=50),
            duration_ms=5_000,
        )
    )
    assert not result.valid
    assert result.violation is not None
    assert "majority" in result.violation.message or "committed" in result.violation.message
    assert result.summary["verdict"] == "invalid"


def test_eager_commit_is_caught_under_random_faults():
    result = run(
        RunConfig(
            sim=SimConfig(seed=2, voters=3, observers=1, node_factory=EagerCommitNode),
            faults=FaultConfig(kinds=("partition", "kill")),
            duration_ms=10_000,
        )
    )
    assert result.violation is not None


def test_a_follower_keeping_a_deposed_leaders_tail_is_caught_when_it_handles_the_divergence_kafka_6361():
    """Invariant 11. With the planted bug a follower told its log diverges in epoch 1 keeps the deposed
    epoch-2 leader's entries; before the invariant only the end of the run noticed, as a follower that
    never caught up (and in a whole-node run a snapshot hides even that). The correct core passes."""

    def follower_run(*bugs: str):
        raft = {"bugs": Bugs(frozenset(bugs))}
        return run(
            RunConfig(
                sim=SimConfig(seed=4, voters=3, observers=2, raft=raft),
                faults=FaultConfig(kinds=("partition", "kill")),
                duration_ms=20_000,
                quiet_max_ms=30_000,
            )
        )

    violation = follower_run("raft-follower-truncates-to-leader-epoch-end").violation
    assert violation is not None and "divergence not repaired" in violation.message, violation
    assert "still holds entries of epoch 2, above the diverging epoch 1" in violation.message
    assert follower_run().valid


def test_figure8_without_the_own_epoch_rule_is_caught():
    with pytest.raises(InvariantViolated) as stopped:
        figure8(node_factory=NoFigure8RuleNode)
    assert "commit safety" in stopped.value.violation, stopped.value.violation


def forgetful_cluster(seed: int = 1) -> tuple[Simulation, int, int, int]:
    """3 voters on lying disks: node `lagger` is cut off while the other two commit, then the
    follower among the two crashes and forgets what it had flushed."""
    sim = Simulation(SimConfig(seed=seed, voters=3, disk_factory=forgetful_disk))
    sim.start()
    wait(sim, lambda: converged(sim), 30_000, "a first leader")
    leader = sim.leader()
    assert leader is not None
    follower, lagger = (n for n in sim.nodes if n != leader)
    sim.isolate([[leader, follower]])
    for i in range(10):
        sim.submit_append(leader, (f"v{i}".encode(),))
    wait(sim, lambda: sim.raft(leader).high_watermark >= sim.raft(leader).log_end_offset > 10, 5_000, "commits")
    sim.kill(follower)
    return sim, leader, follower, lagger


def test_a_disk_that_forgets_flushed_data_is_caught_by_the_durability_check():
    sim, *_ = forgetful_cluster()
    assert sim.violation is not None
    assert "durable on only 1 voter" in sim.violation.message


def test_a_disk_that_forgets_flushed_data_loses_commits_visibly(monkeypatch):
    """Without the durability check, the loss still surfaces as a changed committed entry."""
    monkeypatch.setattr(InvariantChecker, "_check_durable_majority", lambda *a, **k: None)
    sim, leader, follower, lagger = forgetful_cluster()
    assert sim.violation is None
    sim.kill(leader)
    sim.isolate([[follower, lagger]])
    sim.restart(follower)
    sim.run_for(20_000)
    for i in range(5):
        if sim.violation is None and (new := sim.leader()) is not None:
            sim.submit_append(new, (f"w{i}".encode(),))
        sim.run_for(2_000)
    assert sim.violation is not None
    assert "committed entry changed" in sim.violation.message or "below its own HWM" in sim.violation.message


class NoFsyncOnLoad(FileStorage):
    """A planted storage bug: start-up hands over what it read without making it durable."""

    def _make_loaded_log_durable(self) -> None:
        pass


def restart_with_page_cache_tail(fsync_on_load: bool) -> Simulation:
    """A follower is killed (-9) while a replicated batch is still un-fsynced in its page cache,
    restarts, and acknowledges that batch; then it loses power."""
    factory = FileStorage if fsync_on_load else NoFsyncOnLoad
    sim = Simulation(
        SimConfig(
            seed=2, voters=3, disk_latency_ms=(40, 60), disk_factory=lambda n: SimDisk(n, storage_factory=factory)
        )
    )
    sim.start()
    wait(sim, lambda: converged(sim), 30_000, "a first leader")
    leader = sim.leader()
    assert leader is not None
    follower, _other = (n for n in sim.nodes if n != leader)
    sim.isolate([[leader, follower]])
    end = sim.raft(leader).log_end_offset
    sim.submit_append(leader, (b"p",))
    disk = sim.node(follower).disk
    wait(sim, lambda: disk.end_offset > end and disk.unsynced_writes > 0, 5_000, "the follower copying the batch")
    sim.kill(follower)  # the page cache keeps the batch, un-fsynced
    sim.restart(follower)
    sim.run_until_true(lambda: sim.raft(leader).high_watermark > end, 5_000)
    sim.kill(follower, lose_unsynced=True, keep_unsynced=0)
    return sim


def test_a_storage_that_loads_an_unsynced_tail_without_fsync_is_caught():
    """The core treats what storage loads as durable; a storage that does not fsync on load lets a
    commit rest on page-cache data (the simulator found this one in the 500-seed sweep)."""
    sim = restart_with_page_cache_tail(fsync_on_load=False)
    assert sim.violation is not None
    assert "durable on only 1 voter" in sim.violation.message


def test_a_storage_that_fsyncs_on_load_is_safe_in_the_same_scenario():
    sim = restart_with_page_cache_tail(fsync_on_load=True)
    assert sim.violation is None, sim.violation
    assert sim.checker.committed_end > 0


def test_a_core_that_cannot_start_on_its_disk_is_a_violation_and_stays_down():
    """A process that dies at start-up on what its own disk holds (e.g. a log it cannot load) is named
    as such, and the node stays down: before, it counted as up without a core and every later event
    raised AttributeError far from the cause."""
    started: list[int] = []

    def factory(config, loaded, rng, cluster_id_factory):
        started.append(config.node_id)
        if config.node_id == 2 and started.count(2) > 1:
            raise ValueError("append of epoch 8 after epoch 9")
        return RaftNode(config, loaded, rng, cluster_id_factory)

    sim = Simulation(SimConfig(seed=1, voters=3, node_factory=factory))
    sim.start()
    wait(sim, lambda: sim.leader() is not None, 10_000, "a leader")
    sim.kill(2)
    sim.restart(2)
    assert not sim.node(2).up and sim.node(2).core is None
    assert sim.violation is not None
    assert sim.violation.message == "node 2 raised ValueError: append of epoch 8 after epoch 9 starting up"
