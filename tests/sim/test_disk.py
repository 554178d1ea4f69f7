"""SimDisk: the real FileStorage on SimFS, the asynchronous flush, and the views the invariants read."""

from __future__ import annotations

import random

import pytest

from node.protocol.messages import SnapshotId
from node.raft.quorum_state import QuorumStateData
from node.raft.records import RecordBatch
from node.raft.storage import StorageError
from node.runtime.file_storage import FileStorage
from node.sim.disk import SimDisk


def batch(base: int, epoch: int, n: int = 1) -> RecordBatch:
    return RecordBatch(base, epoch, tuple(f"{base + i}".encode() for i in range(n)))


def opened(**kw) -> SimDisk:
    disk = SimDisk(**kw)
    disk.load()
    return disk


def offsets(batches) -> list[int]:
    return [b.base_offset for b in batches]


def test_kill_keeps_the_page_cache_power_loss_keeps_only_what_was_synced():
    disk = opened()
    disk.append((batch(0, 1), batch(1, 1)))
    disk.flush()
    disk.append((batch(2, 1),))
    disk.crash(lose_unsynced=False)
    assert offsets(disk.batches()) == [0, 1, 2]
    assert offsets(disk.load().batches) == [0, 1, 2]
    disk.append((batch(3, 1),))
    disk.crash(lose_unsynced=True, rng=None)  # rng None: nothing un-synced survives
    assert offsets(disk.load().batches) == [0, 1, 2]  # load() fsynced 2; 3 never was


class NoFsyncOnLoad(FileStorage):
    """A planted bug: start-up hands over what it read without making it durable."""

    def _make_loaded_log_durable(self) -> None:
        pass


def test_load_fsyncs_what_it_returns_and_a_storage_that_does_not_loses_it():
    for factory, survives in ((FileStorage, True), (NoFsyncOnLoad, False)):
        disk = opened(storage_factory=factory)
        disk.append((batch(0, 1),))
        disk.flush()
        disk.append((batch(1, 1),))
        disk.crash(lose_unsynced=False)  # 1 is in the page cache only
        assert offsets(disk.load().batches) == [0, 1]
        assert offsets(disk.durable_batches()) == ([0, 1] if survives else [0])
        disk.crash(lose_unsynced=True)
        assert offsets(disk.load().batches) == ([0, 1] if survives else [0])


def test_an_async_flush_covers_only_the_writes_before_it_started():
    disk = opened()
    disk.append((batch(0, 1),))
    token = disk.begin_flush()
    disk.append((batch(1, 1),))
    assert disk.durable_batches() == []
    disk.complete_flush(token)
    assert offsets(disk.durable_batches()) == [0]
    disk.crash(lose_unsynced=True)
    assert offsets(disk.batches()) == [0]


def test_a_flush_that_never_completes_makes_nothing_durable():
    disk = opened()
    disk.append((batch(0, 1),))
    token = disk.begin_flush()
    disk.crash(lose_unsynced=True)  # the process died before its fsync returned
    disk.complete_flush(token)  # a late completion of a dead process's fsync: ignored
    assert disk.load().batches == ()


def test_a_truncation_is_durable_at_once_and_reported_as_a_durable_loss():
    disk = opened()
    disk.append((batch(0, 1), batch(1, 1), batch(2, 1)))
    disk.flush()
    assert disk.take_durable_truncation() is None
    disk.truncate(1)  # FileStorage fsyncs a truncation before it returns
    assert disk.take_durable_truncation() == 1
    disk.append((batch(1, 2),))
    disk.flush()
    assert disk.take_durable_truncation() is None
    assert [(b.base_offset, b.epoch) for b in disk.durable_batches()] == [(0, 1), (1, 2)]


def test_a_power_loss_keeps_a_prefix_of_the_unsynced_bytes_and_start_up_cuts_the_torn_batch():
    kept, torn = set(), 0
    for seed in range(30):
        disk = opened()
        disk.append((batch(0, 1),))
        disk.flush()  # the segment's name is durable from here on
        disk.append(tuple(batch(i, 1) for i in range(1, 6)))
        disk.crash(lose_unsynced=True, rng=random.Random(seed))
        loaded = disk.load()
        assert offsets(loaded.batches) == list(range(len(loaded.batches)))
        assert disk.load_mismatch(loaded) is None
        kept.add(len(loaded.batches))
        torn += bool(loaded.recovered and "torn bytes" in loaded.recovered)
    assert len(kept) > 2 and torn > 5


def test_quorum_state_and_cluster_id_are_durable_at_once():
    disk = opened()
    disk.write_quorum_state(QuorumStateData(leader_epoch=4, voted_id=2))
    disk.write_cluster_id("abc")
    disk.crash(lose_unsynced=True)
    loaded = disk.load()
    assert loaded.quorum_state == QuorumStateData(leader_epoch=4, voted_id=2)
    assert loaded.cluster_id == "abc"


def test_appends_that_leave_a_gap_and_use_before_load_are_refused():
    disk = SimDisk()
    with pytest.raises(RuntimeError, match="load"):
        disk.append((batch(0, 1),))
    disk.load()
    with pytest.raises(ValueError):
        disk.append((batch(3, 1),))


def test_a_new_segment_survives_a_power_loss_only_after_the_flush_that_syncs_its_name():
    disk = opened(segment_bytes=100)
    disk.append(tuple(batch(i, 1, n=3) for i in range(0, 9, 3)))
    disk.flush()
    names = disk.fs.listdir(disk.log_dir)
    assert sum(n.endswith(".log") for n in names) == 3
    disk.append((batch(9, 1, n=3),))  # rolls again: a fourth segment, its name not yet durable
    assert offsets(disk.durable_batches()) == [0, 3, 6]
    disk.flush()
    assert offsets(disk.durable_batches()) == [0, 3, 6, 9]
    for i in range(4):
        assert disk.durable_batch_at(3 * i + 1) == batch(3 * i, 1, n=3)
    assert disk.durable_batch_at(12) is None


class NoDirFsyncOnRoll(FileStorage):
    """A planted bug: a new segment's directory entry is never fsynced by flush()."""

    def _roll(self, base_offset):
        seg = super()._roll(base_offset)
        self._dir_dirty = False
        return seg


def test_without_the_directory_fsync_a_flushed_segment_is_not_durable():
    disk = opened(segment_bytes=100, storage_factory=NoDirFsyncOnRoll)
    disk.append(tuple(batch(i, 1, n=3) for i in range(0, 9, 3)))
    disk.flush()
    assert offsets(disk.durable_batches()) == []  # even the first segment's name was never synced
    disk.crash(lose_unsynced=True)
    assert disk.load().batches == ()


def test_snapshots_are_durable_at_once_and_the_durable_view_follows_their_files():
    disk = opened(segment_bytes=60)
    disk.append(tuple(batch(i, 1, n=2) for i in range(0, 8, 2)))
    disk.flush()
    disk.write_snapshot(SnapshotId(4, 1), b"image up to 4")
    assert disk.durable_snapshot == disk.snapshot and disk.snapshot.snapshot_id == SnapshotId(4, 1)
    disk.delete_before(4)
    assert disk.take_durable_truncation() is None  # the deleted segments are below the snapshot
    assert disk.durable_batch_at(5) == batch(4, 1, n=2)
    disk.crash(lose_unsynced=True)
    loaded = disk.load()
    assert loaded.snapshot.snapshot_id == SnapshotId(4, 1)
    assert offsets(loaded.batches) == [4, 6]


def test_load_mismatch_names_a_batch_the_storage_did_not_hand_back():
    class DropsTheLastBatch(FileStorage):
        def load(self):
            loaded = super().load()
            return type(loaded)(loaded.quorum_state, loaded.batches[:-1], loaded.cluster_id)

    disk = opened(storage_factory=DropsTheLastBatch)
    disk.append((batch(0, 1), batch(1, 1)))
    disk.flush()
    disk.crash()
    loaded = disk.load()
    assert disk.load_mismatch(loaded) == (
        "loaded 1 batches, but the disk holds 2 whole batches it was given; first difference at batch #1: "
        "loaded nothing, written (1, 1) (offset, epoch)"
    )
    disk.crash()
    assert SimDisk(fs=disk.fs).load_mismatch(SimDisk(fs=disk.fs).load()) is None


def test_a_second_process_cannot_open_the_same_disk():
    disk = opened()
    with pytest.raises(StorageError, match="in use by another process \\(pid 1001"):
        FileStorage(disk.data_dir, 1, fs=disk.fs)


def diverged_below_a_fetched_snapshot() -> SimDisk:
    """A follower's log reaches offset 2 in epoch 2 (its own uncommitted tail); the leader's snapshot
    ends at 2 in epoch 3. The snapshot is written (durable at once), then a power loss comes before
    the ResetLog that installing it would send: the disk holds both (issue 24, config-register seed 11)."""
    disk = opened()
    disk.append((batch(0, 1), batch(1, 2)))
    disk.flush()
    disk.write_snapshot(SnapshotId(2, 3), b"the leader's image up to 2")
    disk.crash(lose_unsynced=True)
    return disk


def test_deleting_a_log_up_to_the_snapshot_end_starts_it_after_the_snapshots_epoch():
    disk = diverged_below_a_fetched_snapshot()
    loaded = disk.load()
    assert loaded.snapshot.snapshot_id == SnapshotId(2, 3) and offsets(loaded.batches) == [0, 1]
    assert disk.last_epoch == 2  # the files as they are: the diverged batch is still there
    disk.delete_before(2)  # what the core asks at start-up: every batch is below the snapshot
    assert (disk.start_offset, disk.end_offset, disk.last_epoch) == (2, 2, 3)  # not the deleted batch's 2
