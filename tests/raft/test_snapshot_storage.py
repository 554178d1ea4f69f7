"""Snapshots on both storages: FileStorage (real files, fsync, corrupt files) and SimDisk (what a
power loss keeps), and a node restarting from what they stored."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from node.protocol.messages import SnapshotId
from node.raft.actions import (
    Action,
    AppendBatches,
    DeleteLogBefore,
    Flush,
    LoadSnapshot,
    PersistClusterId,
    PersistQuorumState,
    ResetLog,
    TruncateLog,
    WriteSnapshot,
)
from node.raft.config import RaftConfig
from node.raft.events import Append, CreateSnapshot, FlushCompleted, SnapshotWritten, Start, Tick
from node.raft.node import RaftNode
from node.raft.quorum_state import Role
from node.raft.storage import LoadedSnapshot, RaftStorage, StorageError
from node.runtime.file_storage import FileStorage, encode_snapshot_file, snapshot_name
from node.sim.disk import SimDisk
from tests.raft.helpers import LATE, batch

DATA = b"image-" * 100


def run(node: RaftNode, storage: RaftStorage, now: int, event: object) -> list[Action]:
    """A minimal synchronous runtime: carry out the storage actions and feed back their events."""
    events = [event]
    seen: list[Action] = []
    while events:
        actions = node.handle(now, events.pop(0))  # type: ignore[arg-type]
        seen.extend(actions)
        for action in actions:
            match action:
                case AppendBatches(batches):
                    storage.append(batches)
                case TruncateLog(offset):
                    storage.truncate(offset)
                case Flush(end):
                    storage.flush()
                    events.append(FlushCompleted(end))
                case WriteSnapshot(sid, data):
                    storage.write_snapshot(sid, data)
                    events.append(SnapshotWritten(sid))
                case DeleteLogBefore(offset):
                    storage.delete_before(offset)
                case ResetLog(offset):
                    storage.reset(offset)
                case PersistQuorumState(state):
                    storage.write_quorum_state(state)
                case PersistClusterId(cluster_id):
                    storage.write_cluster_id(cluster_id)
    return seen


def boot(storage: RaftStorage, seed: int = 0) -> tuple[RaftNode, list[Action]]:
    node = RaftNode(RaftConfig(1, frozenset({1})), storage.load(), random.Random(seed))
    out = run(node, storage, 0, Start())
    out += run(node, storage, LATE, Tick())
    assert node.role is Role.LEADER
    return node, out


def fill(node: RaftNode, storage: RaftStorage, appends: int, now: int = LATE) -> None:
    for i in range(appends):
        run(node, storage, now + i, Append(i, (b"k%d" % i, b"v%d" % i)))


# --- FileStorage -------------------------------------------------------------------------------------


def test_file_storage_restart_loads_the_snapshot_first_and_continues_the_log(tmp_path: Path):
    with FileStorage(tmp_path, 1, segment_bytes=200) as storage:
        node, _ = boot(storage)
        fill(node, storage, 10)
        end = node.high_watermark
        out = run(node, storage, LATE + 20, CreateSnapshot(end, DATA))
        assert any(isinstance(a, DeleteLogBefore) for a in out)
        assert storage.segment_paths()[0].name != "00000000000000000000.log"  # old segments deleted
        assert [p.name for p in storage.snapshot_paths()] == [snapshot_name(node.snapshot_id)]
        fill(node, storage, 2, LATE + 30)
        committed_above = node.read_committed(end)
        sid = node.snapshot_id
    with FileStorage(tmp_path, 1) as storage:
        loaded = storage.load()
        assert loaded.snapshot is not None and loaded.snapshot.snapshot_id == sid and loaded.snapshot.data == DATA
        node = RaftNode(RaftConfig(1, frozenset({1})), loaded, random.Random(1))
        out = run(node, storage, 0, Start())
        assert out[0] == LoadSnapshot(sid, DATA)
        assert node.log_start_offset == sid.end_offset and node.high_watermark >= sid.end_offset
        assert node.read_committed(0) == []
        run(node, storage, LATE, Tick())
        assert node.role is Role.LEADER  # its re-election commits the records above the snapshot
        assert node.read_committed(end)[: len(committed_above)] == committed_above


def test_file_storage_reset_restarts_the_log_at_the_snapshot_end(tmp_path: Path):
    with FileStorage(tmp_path, 1, segment_bytes=100) as storage:
        storage.load()
        storage.append(tuple(batch(i * 2, 1, 2) for i in range(6)))
        storage.flush()
        storage.write_snapshot(SnapshotId(40, 2), DATA)
        storage.reset(40)
        assert storage.segment_paths() == [] and storage.end_offset == 40
        storage.append((batch(40, 2, 3),))
        storage.flush()
    with FileStorage(tmp_path, 1) as storage:
        loaded = storage.load()
        assert [b.base_offset for b in loaded.batches] == [40] and loaded.snapshot.snapshot_id == SnapshotId(40, 2)


def test_file_storage_with_only_a_snapshot_appends_at_its_end(tmp_path: Path):
    with FileStorage(tmp_path, 1) as storage:
        storage.load()
        storage.write_snapshot(SnapshotId(7, 1), DATA)
    with FileStorage(tmp_path, 1) as storage:
        assert storage.load().batches == () and storage.end_offset == 7
        storage.append((batch(7, 1),))


def test_file_storage_whose_log_lost_every_record_beside_a_snapshot_appends_at_the_snapshot_end(tmp_path: Path):
    """A power loss can take every unsynced record of a segment while the snapshot (fsynced on its own)
    survives: the empty segment left at offset 0 must not make the log continue at 0."""
    with FileStorage(tmp_path, 1) as storage:
        storage.load()
        storage.append(tuple(batch(i * 2, 1, 2) for i in range(5)))
        storage.flush()
        storage.write_snapshot(SnapshotId(10, 1), DATA)
        (segment,) = storage.segment_paths()
    segment.write_bytes(b"")  # what the power loss left of the segment
    with FileStorage(tmp_path, 1) as storage:
        loaded = storage.load()
        assert loaded.batches == () and storage.end_offset == 10 and storage.segment_paths() == []
        assert loaded.recovered is not None and "removed empty segment" in loaded.recovered
        storage.append((batch(10, 2, 3),))
        storage.flush()
    with FileStorage(tmp_path, 1) as storage:
        assert [b.base_offset for b in storage.load().batches] == [10]


def test_file_storage_keeps_the_two_newest_snapshots_and_drops_unfinished_writes(tmp_path: Path):
    with FileStorage(tmp_path, 1) as storage:
        storage.load()
        for end in (3, 5, 9):
            storage.write_snapshot(SnapshotId(end, 1), DATA)
        assert [p.name for p in storage.snapshot_paths()] == [snapshot_name(SnapshotId(e, 1)) for e in (5, 9)]
        log_dir = storage.log_dir
    (log_dir / (snapshot_name(SnapshotId(12, 1)) + ".tmp")).write_bytes(b"half a snap")
    with FileStorage(tmp_path, 1) as storage:
        loaded = storage.load()
        assert loaded.snapshot.snapshot_id == SnapshotId(9, 1)
        assert "removed unfinished snapshot" in (loaded.recovered or "")
    assert not list(log_dir.glob("*.tmp"))


def corrupt(path: Path) -> None:
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 0xFF
    path.write_bytes(bytes(raw))


def test_corrupt_snapshot_without_a_fallback_refuses_to_start_naming_the_file(tmp_path: Path):
    with FileStorage(tmp_path, 1, segment_bytes=60) as storage:
        storage.load()
        storage.append(tuple(batch(i, 1) for i in range(10)))
        storage.flush()
        storage.write_snapshot(SnapshotId(8, 1), DATA)
        storage.delete_before(8)
        path = storage.snapshot_paths()[0]
    corrupt(path)
    with FileStorage(tmp_path, 1) as storage, pytest.raises(StorageError) as info:
        storage.load()
    message = str(info.value)
    assert str(path) in message and "crc32c mismatch" in message and "refusing to start" in message
    assert "\n" not in message
    assert path.exists()  # nothing was set aside


def test_corrupt_newest_snapshot_falls_back_to_an_older_one_the_log_still_covers(tmp_path: Path):
    with FileStorage(tmp_path, 1) as storage:
        storage.load()
        storage.append(tuple(batch(i, 1) for i in range(10)))
        storage.flush()
        storage.write_snapshot(SnapshotId(4, 1), b"old")
        storage.write_snapshot(SnapshotId(8, 1), b"new")  # the log was not deleted yet
        newest = storage.snapshot_paths()[-1]
    corrupt(newest)
    with FileStorage(tmp_path, 1) as storage:
        loaded = storage.load()
        assert loaded.snapshot.snapshot_id == SnapshotId(4, 1) and loaded.snapshot.data == b"old"
        assert newest.name in (loaded.recovered or "") and "crc32c mismatch" in (loaded.recovered or "")
    assert not newest.exists() and newest.with_name(newest.name + ".corrupt").exists()


def test_snapshot_file_whose_name_disagrees_with_its_content_is_corrupt(tmp_path: Path):
    with FileStorage(tmp_path, 1) as storage:
        storage.load()
        log_dir = storage.log_dir
    (log_dir / snapshot_name(SnapshotId(5, 1))).write_bytes(encode_snapshot_file(SnapshotId(6, 1), DATA))
    with FileStorage(tmp_path, 1) as storage, pytest.raises(StorageError, match="holds snapshot 6-1"):
        storage.load()


def test_file_storage_delete_before_keeps_the_active_segment(tmp_path: Path):
    with FileStorage(tmp_path, 1, segment_bytes=60) as storage:
        storage.load()
        storage.append(tuple(batch(i, 1) for i in range(6)))
        before = storage.segment_paths()
        assert len(before) > 2
        storage.delete_before(6)
        assert storage.segment_paths() == before[-1:] and storage.end_offset == 6


# --- SimDisk -----------------------------------------------------------------------------------------


def opened_sim_disk(**kw) -> SimDisk:
    disk = SimDisk(**kw)
    disk.load()
    return disk


def test_sim_disk_snapshot_is_durable_once_written():
    """SimDisk runs FileStorage, which writes a snapshot by temp file, fsync, rename, directory fsync."""
    disk = opened_sim_disk()
    disk.append((batch(0, 1, 4),))
    disk.flush()
    disk.write_snapshot(SnapshotId(4, 1), DATA)
    assert disk.snapshot == disk.durable_snapshot and disk.snapshot.snapshot_id == SnapshotId(4, 1)
    disk.crash(lose_unsynced=True)
    assert disk.load().snapshot == LoadedSnapshot(SnapshotId(4, 1), DATA)


def test_sim_disk_kill_keeps_unsynced_log_moves():
    disk = opened_sim_disk(segment_bytes=1)  # one batch per segment, so delete_before removes files
    disk.append((batch(0, 1, 2), batch(2, 2, 2)))
    disk.write_snapshot(SnapshotId(2, 1), DATA)
    disk.delete_before(2)
    disk.crash(lose_unsynced=False)
    loaded = disk.load()
    assert [b.base_offset for b in loaded.batches] == [2] and loaded.snapshot.snapshot_id == SnapshotId(2, 1)


def test_sim_disk_log_moves_and_their_epochs():
    disk = opened_sim_disk()
    disk.append((batch(0, 1, 2), batch(2, 2, 2)))
    disk.delete_before(4)
    assert (disk.start_offset, disk.end_offset, disk.last_epoch, disk.batches()) == (4, 4, 2, [])
    disk.write_snapshot(SnapshotId(9, 3), DATA)
    disk.reset(9)
    assert (disk.end_offset, disk.last_epoch) == (9, 3)
    disk.append((batch(9, 3),))
    with pytest.raises(ValueError):
        disk.truncate(8)
    # The snapshot and the reset are durable at once; the append after them is not.
    disk.crash(lose_unsynced=True)
    loaded = disk.load()
    assert loaded.snapshot.snapshot_id == SnapshotId(9, 3) and loaded.batches == ()
    assert (disk.end_offset, disk.last_epoch) == (9, 3)


def test_sim_disk_restart_after_snapshot_install_replays_cleanly():
    disk = SimDisk()
    node, _ = boot(disk)
    fill(node, disk, 5)
    end = node.high_watermark
    run(node, disk, LATE + 10, CreateSnapshot(end, DATA))
    fill(node, disk, 2, LATE + 20)
    disk.crash(lose_unsynced=True)
    again = RaftNode(RaftConfig(1, frozenset({1})), disk.load(), random.Random(3))
    out = run(again, disk, 0, Start())
    assert out[0] == LoadSnapshot(SnapshotId(end, node.epoch), DATA)
    assert again.batches() == disk.batches() and again.log_start_offset == end
