"""The `corrupt` fault on real files: every mode lands where FileStorage must notice, and is undone
byte for byte. (The same function on SimFS: tests/sim/test_storage_faults.py; a real node process:
tests/runtime/test_corrupt_real_node.py.)"""

from __future__ import annotations

import random
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.db.kraft import KraftDB
from node.protocol.messages import SnapshotId
from node.raft.records import RecordBatch
from node.raft.storage import StorageError
from node.runtime.corruption import (
    CORRUPT_MODES,
    NothingToCorrupt,
    corrupt_data_dir,
    restore_corruption,
)
from node.runtime.file_storage import LOG_DIR_NAME, FileStorage
from node.runtime.fs import OS_FS
from vocab.db import DBError
from vocab.faults.kinds import FaultNotSupported

SEGMENT_BYTES = 200


def batch(base: int, epoch: int = 1) -> RecordBatch:
    return RecordBatch(base, epoch, (f"record-{base}".encode(), f"value-{base}".encode()))


def build(data_dir: Path, batches: int = 12, snapshot_at: int | None = None, delete: bool = False) -> None:
    """A data dir of several segments, optionally with a snapshot (and the log below it deleted)."""
    with FileStorage(data_dir, 1, segment_bytes=SEGMENT_BYTES) as s:
        s.load()
        s.append(tuple(batch(i) for i in range(0, 2 * batches, 2)))
        s.flush()
        if snapshot_at is not None:
            s.write_snapshot(SnapshotId(snapshot_at, 1), b"image up to %d" % snapshot_at)
            if delete:
                s.delete_before(snapshot_at)


def files(data_dir: Path) -> dict[str, bytes]:
    """Every file's bytes, except the lock file (each opener writes its pid there)."""
    return {
        str(p.relative_to(data_dir)): p.read_bytes()
        for p in sorted(data_dir.rglob("*"))
        if p.is_file() and p.name != ".lock"
    }


def load(data_dir: Path):
    with FileStorage(data_dir, 1, segment_bytes=SEGMENT_BYTES) as s:
        return s.load()


@pytest.mark.parametrize("mode", ["bitflip-log", "truncate-log"])
def test_log_damage_always_refuses_to_start_naming_the_file_and_restores_byte_for_byte(tmp_path, mode):
    pristine = tmp_path / "pristine"
    build(pristine)
    before = files(pristine)
    expected = load(pristine).batches
    hit = set()
    for seed in range(40):
        d = tmp_path / f"seed{seed}"
        shutil.copytree(pristine, d)
        corruption = corrupt_data_dir(OS_FS, d, mode, random.Random(seed))
        damaged = Path(corruption.path)
        assert files(d) != before
        hit.add(damaged.name)
        with pytest.raises(StorageError, match="refusing to start") as refused:
            load(d)
        assert damaged.name in str(refused.value), str(refused.value)
        assert restore_corruption(OS_FS, corruption)
        assert files(d) == before
        assert load(d).batches == expected
        shutil.rmtree(d)
    assert len(hit) > 2  # the damage lands in different segments


@pytest.mark.parametrize("mode", ["bitflip-snapshot", "truncate-snapshot"])
def test_a_damaged_snapshot_the_log_still_covers_is_set_aside_never_loaded(tmp_path, mode):
    build(tmp_path, snapshot_at=8)
    corruption = corrupt_data_dir(OS_FS, tmp_path, mode, random.Random(3))
    loaded = load(tmp_path)
    assert loaded.snapshot is None  # the only snapshot is damaged: the node starts from the log
    assert f"set aside corrupt snapshot file {corruption.path}" in (loaded.recovered or "")
    assert not restore_corruption(OS_FS, corruption)  # renamed by the node: nothing to put back


@pytest.mark.parametrize("mode", ["bitflip-snapshot", "truncate-snapshot"])
def test_a_damaged_snapshot_nothing_else_covers_refuses_to_start_and_restores(tmp_path, mode):
    build(tmp_path, snapshot_at=12, delete=True)
    before = files(tmp_path)
    for seed in range(10):
        corruption = corrupt_data_dir(OS_FS, tmp_path, mode, random.Random(seed))
        with pytest.raises(StorageError, match=f"corrupt snapshot file {corruption.path}.*refusing to start"):
            load(tmp_path)
        assert restore_corruption(OS_FS, corruption)
        assert files(tmp_path) == before
    assert load(tmp_path).snapshot.snapshot_id == SnapshotId(12, 1)


def test_each_mode_says_when_there_is_nothing_to_corrupt(tmp_path):
    build(tmp_path, batches=1)
    for mode in CORRUPT_MODES:
        with pytest.raises(NothingToCorrupt, match="nothing to corrupt"):
            corrupt_data_dir(OS_FS, tmp_path, mode, random.Random(0))
    with pytest.raises(NothingToCorrupt, match="nothing to corrupt"):
        corrupt_data_dir(OS_FS, tmp_path / "never-created", "bitflip-log", random.Random(0))
    with pytest.raises(ValueError, match="unknown corrupt mode 'scribble'"):
        corrupt_data_dir(OS_FS, tmp_path, "scribble", random.Random(0))


def test_two_batches_in_one_segment_can_be_bitflipped_but_not_truncated(tmp_path):
    with FileStorage(tmp_path, 1) as s:
        s.load()
        s.append((batch(0), batch(2)))
        s.flush()
    corruption = corrupt_data_dir(OS_FS, tmp_path, "bitflip-log", random.Random(0))
    assert "in the batch at offset 0" in corruption.detail  # never the last batch: that looks torn
    with pytest.raises(NothingToCorrupt, match="1 log segment"):
        corrupt_data_dir(OS_FS, tmp_path, "truncate-log", random.Random(0))


def test_restore_leaves_a_file_alone_once_it_has_changed(tmp_path):
    build(tmp_path)
    corruption = corrupt_data_dir(OS_FS, tmp_path, "bitflip-log", random.Random(1))
    path = Path(corruption.path)
    raw = bytearray(path.read_bytes())
    raw[corruption.position] ^= 0xFF  # someone wrote there since
    path.write_bytes(bytes(raw))
    assert not restore_corruption(OS_FS, corruption)
    assert path.read_bytes() == bytes(raw)


class StoppedBackend:
    """Just what KraftDB.corrupt asks of a real backend: whether the node runs, where its data is."""

    def __init__(self, root: Path, alive: bool = False) -> None:
        self.root, self.alive = root, alive

    def is_alive(self, node: str) -> bool:
        return self.alive

    def data_dir(self, node: str) -> str:
        return str(self.root / node)


def test_kraft_db_corrupts_a_stopped_real_node_and_puts_it_back(tmp_path):
    db = KraftDB(SimpleNamespace(controllers=1, combined=0, brokers=1))
    db.backend, db.run_dir = StoppedBackend(tmp_path), tmp_path  # type: ignore[assignment]
    build(tmp_path / "c1")
    before = files(tmp_path / "c1")
    described = db.corrupt("c1", "truncate-log", random.Random(5))
    assert described["node"] == "c1" and described["mode"] == "truncate-log"
    assert described["file"].startswith(str(tmp_path / "c1" / LOG_DIR_NAME))
    with pytest.raises(StorageError):
        load(tmp_path / "c1")
    db.uncorrupt("c1")
    assert files(tmp_path / "c1") == before
    db.uncorrupt("c1")  # nothing left to put back: a no-op
    with pytest.raises(FaultNotSupported, match="b1: nothing to corrupt"):
        db.corrupt("b1", "bitflip-snapshot", random.Random(0))
    db.backend.alive = True  # type: ignore[attr-defined]
    with pytest.raises(DBError, match="c1 is running"):
        db.corrupt("c1", "bitflip-log", random.Random(0))
