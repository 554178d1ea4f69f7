"""Each invariant of `node.sim.invariants` on hand-made states: it passes when it should and fails
when it should."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from node.raft.quorum_state import Role
from node.raft.records import RecordBatch
from node.sim.disk import SimDisk
from node.sim.invariants import InvariantChecker, InvariantViolation


def batch(base: int, epoch: int, tag: str = "") -> RecordBatch:
    return RecordBatch(base, epoch, (f"{base}{tag}".encode(),))


@dataclass
class View:
    disk: SimDisk
    role: Role = Role.FOLLOWER
    epoch: int = 1
    high_watermark: int = 0

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
        c.append(n, batch(0, 1))
    c.append(3, batch(0, 2))  # another epoch's batch at the same offset
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
