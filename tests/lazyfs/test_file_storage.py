"""The real node's FileStorage on lazyfs: what it acknowledged as durable survives a power loss, what it
did not does not, and a variant that acknowledges before fsyncing loses acknowledged data."""

from __future__ import annotations

import pytest

from node.protocol.messages import SnapshotId
from node.raft.quorum_state import QuorumStateData
from node.raft.records import RecordBatch
from node.runtime.file_storage import FileStorage, fsync_dir
from tests.lazyfs.conftest import needs_root

pytestmark = [pytest.mark.root, needs_root]


def batches(start: int, count: int, epoch: int = 1) -> tuple[RecordBatch, ...]:
    return tuple(
        RecordBatch(i, epoch, (f"record {i}".encode() * 8,), timestamp_ms=i) for i in range(start, start + count)
    )


def offsets(loaded) -> list[int]:
    return [b.base_offset for b in loaded.batches]


class AcksWithoutFsync(FileStorage):
    """The planted bug: flush() returns (the node then acknowledges) without fdatasync of the new data."""

    def flush(self) -> None:
        self._dirty = False
        if self._dir_dirty:
            fsync_dir(self.log_dir)
            self._dir_dirty = False


def test_flushed_appends_survive_a_power_loss_and_unflushed_ones_do_not(mounted):
    data = mounted.root / "node"
    with FileStorage(data, 1) as s:
        s.load()
        s.append(batches(0, 5))
        s.flush()  # durable: the node may acknowledge offsets 0-4 now
        s.append(batches(5, 3))  # written, never flushed
        assert mounted.status()["unsynced_bytes"] > 0
    # the process is gone (close() syncs nothing); reading back before the power loss still sees all 8
    with FileStorage(data, 1) as s:
        assert offsets(s.load()) == list(range(8))
    # ...but that load fsynced what it read (FileStorage treats what it loads as durable), so append again
    with FileStorage(data, 1) as s:
        s.load()
        s.append(batches(8, 4))

    mounted.power_loss()

    with FileStorage(data, 1) as s:
        loaded = s.load()
    assert offsets(loaded) == list(range(8))
    assert loaded.recovered is None  # a clean cut at the last fsync: nothing torn


def test_quorum_state_and_snapshots_survive_because_they_are_replaced_atomically_and_durably(mounted):
    data = mounted.root / "node"
    first = QuorumStateData(leader_id=1, leader_epoch=3, voted_id=1, applied_offset=0, current_voters=(1, 2, 3))
    second = QuorumStateData(leader_id=-1, leader_epoch=4, voted_id=2, applied_offset=0, current_voters=(1, 2, 3))
    with FileStorage(data, 1) as s:
        s.load()
        s.write_quorum_state(first)
        s.append(batches(0, 4))
        s.flush()
        s.write_snapshot(SnapshotId(4, 1), b"image at 4")
    mounted.power_loss()
    with FileStorage(data, 1) as s:
        loaded = s.load()
        assert loaded.quorum_state == first
        assert loaded.snapshot is not None and loaded.snapshot.data == b"image at 4"
        s.write_quorum_state(second)
    mounted.power_loss()
    with FileStorage(data, 1) as s:
        assert s.load().quorum_state == second


def test_a_storage_that_acknowledges_before_fsync_loses_acknowledged_appends(mounted):
    data = mounted.root / "node"
    with AcksWithoutFsync(data, 1) as s:
        s.load()
        s.append(batches(0, 5))
        s.flush()  # "acknowledged"
    mounted.power_loss()
    with FileStorage(data, 1) as s:
        lost = offsets(s.load())
    assert lost == []  # the segment's name was made durable, its acknowledged contents were not


def test_a_torn_tail_is_cut_back_to_whole_batches_on_load(mounted):
    torn_cuts, extra_batches = 0, 0
    for seed in range(8):
        data = mounted.root / f"node-{seed}"
        with FileStorage(data, 1) as s:
            s.load()
            s.append(batches(0, 3))
            s.flush()
            s.append(batches(3, 6))
        mounted.power_loss(torn_seed=seed)
        with FileStorage(data, 1) as s:
            loaded = s.load()
        got = offsets(loaded)
        assert got == list(range(len(got))) and len(got) >= 3  # the flushed prefix, plus whole batches that made it
        torn_cuts += bool(loaded.recovered and "torn bytes" in loaded.recovered)
        extra_batches += len(got) > 3
    assert torn_cuts and extra_batches  # the seeds tore batches in half and kept some whole ones
