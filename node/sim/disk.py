"""A simulated disk: the real `FileStorage` on a `SimFS`, plus the views the invariant checks read.

Every node's storage in the simulator is the `FileStorage` the real runtime uses (segments, CRCs,
quorum-state replaced by temp file + fsync + rename + directory fsync, start-up recovery) on an
in-memory filesystem (`node.sim.simfs.SimFS`) with a page cache and a platter per file and per
directory entry. A storage bug (a missing fsync or directory fsync, a skipped CRC check) therefore
has the same consequences in the simulator as on a real disk.

The filesystem outlives the process. `crash()` is kill -9 (the page cache survives) or, with
`lose_unsynced`, a power loss: un-fsynced data and un-dir-fsynced names are forgotten, except that
with an `rng` a random prefix of a file's un-synced appends survives (a torn tail, which `FileStorage`
must cut away at start-up). `load()` opens the data dir as a starting process does (lock,
meta.properties, recovery) and reads it; it fsyncs what it returns, because the core acknowledges a
loaded log at once.

Flushes are asynchronous, as in the real runtime (fsync in a worker thread): `begin_flush()` runs
`FileStorage.flush()` with its fsyncs recorded, `complete_flush(token)` applies them when the
simulated fsync returns; writes made after the flush began are not covered. Everything else
(truncation, quorum-state, cluster id, snapshots, segment deletion) fsyncs synchronously, as
`FileStorage` does, so it is durable as soon as it is made.

Views for the checks: the log and snapshot as the process sees them (`batches()`, `batch_at`,
`end_offset`, `snapshot`; kept in step with the writes), and as a power loss now would leave them
(`durable_batch_at`, `durable_batches()`, `durable_snapshot`), read from SimFS's durable state. Each
batch and snapshot written is labelled with the byte range `FileStorage` put it in (a SimFS mark), so
the durable view needs no parsing and is not fooled by the `corrupt` fault; whether a node detects
damage is checked when it restarts. `expected_log()` / `expected_snapshot()` are what a restart must
load, and `load()` remembers them for `load_mismatch()`.
"""

from __future__ import annotations

import random
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from node.bugs import NO_BUGS, Bugs
from node.protocol.messages import SnapshotId
from node.raft.quorum_state import QuorumStateData
from node.raft.records import RecordBatch
from node.raft.storage import LoadedSnapshot, LoadedState, RaftStorage, StorageError
from node.runtime.file_storage import (
    LOG_DIR_NAME,
    QUORUM_STATE_NAME,
    FileStorage,
    decode_quorum_state,
    segment_base,
    snapshot_id_of,
    snapshot_name,
)
from node.sim.simfs import SimFile, SimFS

DATA_DIR = "/kraft"  # every host's data dir on its own SimFS
SIM_SEGMENT_BYTES = 16 << 10  # small, so that runs roll, delete and truncate across segments
StorageFactory = Callable[..., FileStorage]  # (data_dir, node_id, *, segment_bytes, fs, bugs) -> FileStorage


@dataclass(frozen=True, slots=True)
class _Append:
    batch: RecordBatch


@dataclass(frozen=True, slots=True)
class _Truncate:
    offset: int


@dataclass(frozen=True, slots=True)
class _DeleteBefore:
    offset: int


@dataclass(frozen=True, slots=True)
class _Reset:
    offset: int


@dataclass(frozen=True, slots=True)
class _Snapshot:
    snapshot: LoadedSnapshot


_Op = _Append | _Truncate | _DeleteBefore | _Reset | _Snapshot


@dataclass(slots=True)
class _Image:
    """One view of the disk: the log (from `start`, after a record of `start_epoch`) and the latest
    snapshot."""

    log: list[RecordBatch]
    start: int = 0
    start_epoch: int = 0
    snapshot: LoadedSnapshot | None = None

    @property
    def end_offset(self) -> int:
        return self.log[-1].next_offset if self.log else self.start

    def copy(self) -> _Image:
        return _Image(list(self.log), self.start, self.start_epoch, self.snapshot)


def _apply(image: _Image, ops: list[_Op]) -> int | None:
    """Apply writes in order; returns the lowest offset a truncation removed data from, if any.

    Deleting below a snapshot or resetting the log for one is not a loss: the snapshot holds it."""
    lowest: int | None = None
    log = image.log
    for op in ops:
        match op:
            case _Append(batch):
                log.append(batch)
            case _Truncate(offset) if image.end_offset > offset:
                truncate_batches(log, offset)
                lowest = offset if lowest is None else min(lowest, offset)
            case _DeleteBefore(offset):
                keep = next((i for i, b in enumerate(log) if b.next_offset > offset), len(log))
                if keep:
                    image.start_epoch = log[keep - 1].epoch
                    del log[:keep]
                image.start = log[0].base_offset if log else max(image.start, offset)
                image.start_epoch = _epoch_before(image.snapshot, image.start, image.start_epoch)
            case _Reset(offset):
                log.clear()
                image.start = offset
                image.start_epoch = _epoch_before(image.snapshot, offset, 0)
            case _Snapshot(snapshot) if _newer(snapshot.snapshot_id, image.snapshot):
                image.snapshot = snapshot
    return lowest


def _newer(snapshot_id: SnapshotId, than: LoadedSnapshot | None) -> bool:
    return than is None or snapshot_id.end_offset > than.snapshot_id.end_offset


def truncate_batches(log: list[RecordBatch], offset: int) -> None:
    """Drop every batch holding an offset >= `offset` from a list ordered by base offset."""
    while log and log[-1].next_offset > offset:
        if log[-1].base_offset < offset:
            raise ValueError(f"truncate to {offset} inside batch at {log[-1].base_offset}")
        log.pop()


class SimDisk(RaftStorage):
    """See the module docstring. `storage_factory` lets a test run a FileStorage with a planted bug."""

    def __init__(
        self,
        node_id: int = 1,
        *,
        segment_bytes: int = SIM_SEGMENT_BYTES,
        storage_factory: StorageFactory = FileStorage,
        fs: SimFS | None = None,
        data_dir: str = DATA_DIR,
        bugs: Bugs = NO_BUGS,
    ) -> None:
        self.node_id = node_id
        self.bugs = bugs  # planted storage bugs (node/bugs.py) the FileStorage runs with
        self.segment_bytes = segment_bytes
        self.storage_factory = storage_factory
        self.fs = fs if fs is not None else SimFS()
        self.data_dir = Path(data_dir)
        self.log_dir = self.data_dir / LOG_DIR_NAME
        self.storage: FileStorage | None = None  # while a process has the data dir open
        self.flushes = 0
        self.starts = 0
        self._view = _Image([])  # what reads see (page cache)
        self._pending: dict[int, list[Any]] = {}  # flush token -> its recorded fsyncs
        self._tokens = 0
        self._listed_at = -1  # SimFS.dir_version the durable listing below was taken at
        self._durable_bases: list[int] = []
        self._durable_segments: list[SimFile] = []
        self._durable_snapshots: list[SimFile] = []  # newest first
        self._expected: tuple[list[RecordBatch], LoadedSnapshot | None] | None = None

    # --- RaftStorage ---
    def load(self) -> LoadedState:
        """Open the data dir as a starting process does and read it (StorageError / OSError as the
        real node would see them)."""
        if self.storage is not None:
            raise RuntimeError("the data dir is already open (crash() or close() first)")
        self.starts += 1
        self.fs.pid = 1000 + self.starts
        self._expected = (self.expected_log(), self.expected_snapshot())
        storage = self.storage_factory(
            self.data_dir, self.node_id, segment_bytes=self.segment_bytes, fs=self.fs, bugs=self.bugs
        )
        try:
            loaded = storage.load()
        except BaseException:
            storage.close()
            raise
        self.storage = storage
        self._view = _image(list(loaded.batches), loaded.snapshot)
        return loaded

    def load_mismatch(self, loaded: LoadedState) -> str | None:
        """How what `load()` returned differs from what this disk wrote and kept, or None."""
        if self._expected is None:
            return None
        log, snapshot = self._expected
        if list(loaded.batches) != log:
            got = [(b.base_offset, b.epoch) for b in loaded.batches]
            want = [(b.base_offset, b.epoch) for b in log]
            first = next(
                (i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b), min(len(got), len(want))
            )
            return (
                f"loaded {len(got)} batches, but the disk holds {len(want)} whole batches it was given; first "
                f"difference at batch #{first}: loaded {got[first] if first < len(got) else 'nothing'}, "
                f"written {want[first] if first < len(want) else 'nothing'} (offset, epoch)"
            )
        if loaded.snapshot != snapshot:
            got_id = loaded.snapshot.snapshot_id if loaded.snapshot else None
            want_id = snapshot.snapshot_id if snapshot else None
            return f"loaded snapshot {got_id}, but the newest whole snapshot on disk is {want_id}"
        return None

    def _storage(self) -> FileStorage:
        if self.storage is None:
            raise RuntimeError("the disk is not open: load() first")
        return self.storage

    def append(self, batches: tuple[RecordBatch, ...]) -> None:
        """One batch at a time, so that each one is labelled with where the write that ended it stopped."""
        storage = self._storage()
        fs = self.fs
        for batch in batches:
            fs.last_write = None
            storage.append((batch,))
            written = fs.last_write
            assert written is not None, f"FileStorage wrote nothing for the batch at offset {batch.base_offset}"
            written[0].add_mark(written[1], batch)
        self._view.log.extend(batches)

    def truncate(self, offset: int) -> None:
        if offset >= self.end_offset:
            return
        if offset < self._view.start:
            raise ValueError(f"truncate to {offset} below the log start {self._view.start}")
        self._storage().truncate(offset)
        _apply(self._view, [_Truncate(offset)])

    def write_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        self._storage().write_snapshot(snapshot_id, data)
        snapshot = LoadedSnapshot(snapshot_id, bytes(data))
        f = self.fs.file_at(self.log_dir / snapshot_name(snapshot_id))
        f.add_mark(len(f.data), snapshot)
        _apply(self._view, [_Snapshot(snapshot)])

    def delete_before(self, offset: int) -> None:
        if offset > self.end_offset:
            raise ValueError(f"delete before {offset}, beyond the log end {self.end_offset}")
        if offset > self._view.start:
            self._storage().delete_before(offset)
            _apply(self._view, [_DeleteBefore(offset)])

    def reset(self, offset: int) -> None:
        self._storage().reset(offset)
        _apply(self._view, [_Reset(offset)])

    def flush(self) -> None:
        """A synchronous flush (a clean shutdown's last one)."""
        self._storage().flush()
        self.flushes += 1

    def write_quorum_state(self, state: QuorumStateData) -> None:
        self._storage().write_quorum_state(state)

    def write_cluster_id(self, cluster_id: str) -> None:
        self._storage().write_cluster_id(cluster_id)

    # --- asynchronous flush, as the simulator drives it ---
    def begin_flush(self) -> int:
        """Start an fsync of everything written so far; returns its token."""
        storage = self._storage()
        self.fs.begin_deferred()
        try:
            storage.flush()
        finally:
            syncs = self.fs.end_deferred()
        self._tokens += 1
        self._pending[self._tokens] = syncs
        return self._tokens

    def complete_flush(self, token: int) -> None:
        """The fsync started at `token` returned: what it covered is durable."""
        syncs = self._pending.pop(token, None)
        if syncs is not None:
            self.fs.apply_syncs(syncs)
            self.flushes += 1

    # --- the process goes away ---
    def close(self) -> None:
        """A clean exit: the files are closed (nothing more is made durable)."""
        if self.storage is not None:
            self.storage.close()
        self._gone()
        self.fs.drop_process()

    def crash(self, lose_unsynced: bool = False, rng: random.Random | None = None, keep: int | None = None) -> int:
        """The node died: kill -9, or with `lose_unsynced` a power loss (a torn tail of random length
        with `rng`; `keep=0`: nothing un-synced survives). Returns how many written batches and
        snapshots the page cache held that are gone."""
        if keep not in (None, 0):
            raise ValueError("keep must be None (a random torn tail with rng) or 0 (nothing un-synced survives)")
        self._gone()
        if not lose_unsynced:
            self.fs.drop_process()
            lost = 0
        else:
            lost = self.fs.power_loss(rng if keep is None else None)
        self._view = _image(self.expected_log(), self.expected_snapshot())
        return lost

    def _gone(self) -> None:
        self.storage = None
        self._pending.clear()

    def take_durable_truncation(self) -> int | None:
        """The lowest offset the durable log lost since the last call (None: nothing lost). Batches a
        durable snapshot covers do not count: deleting the log below a snapshot loses nothing."""
        lost = self.fs.take_lost_marks()
        if not lost:
            return None
        snapshot = self.durable_snapshot
        covered = snapshot.snapshot_id.end_offset if snapshot is not None else 0
        offsets = [b.base_offset for b in lost if isinstance(b, RecordBatch) and b.next_offset > covered]
        return min(offsets) if offsets else None

    # --- what the files hold, from SimFS's marks ---
    def expected_log(self) -> list[RecordBatch]:
        """Every whole batch the segment files hold now, in order: what a start-up must load."""
        found = []
        for name, node in self.fs.listing(self.log_dir).items():
            base = segment_base(name)
            if base is not None and isinstance(node, SimFile):
                found.append((base, node))
        log: list[RecordBatch] = []
        for _, f in sorted(found, key=_first):
            log.extend(f.mark_items)
        return log

    def expected_snapshot(self) -> LoadedSnapshot | None:
        """The newest snapshot file held whole now."""
        for f in _snapshot_files(self.fs.listing(self.log_dir)):
            if f.mark_ends and f.mark_ends[-1] == len(f.data):
                return f.mark_items[-1]
        return None

    def _durable_listing(self) -> None:
        if self._listed_at == self.fs.dir_version:
            return
        found = []
        entries = self.fs.durable_listing(self.log_dir)
        for name, node in entries.items():
            base = segment_base(name)
            if base is not None and isinstance(node, SimFile):
                found.append((base, node))
        found.sort(key=_first)
        self._durable_bases = [b for b, _ in found]
        self._durable_segments = [f for _, f in found]
        self._durable_snapshots = _snapshot_files(entries)
        self._listed_at = self.fs.dir_version

    @property
    def unsynced_writes(self) -> int:
        """Files in the log dir with un-synced content, plus 1 if its names are not all durable."""
        now = self.fs.listing(self.log_dir)
        durable = self.fs.durable_listing(self.log_dir)
        names_dirty = now.keys() != durable.keys() or any(durable[n] is not v for n, v in now.items())
        return sum(1 for v in now.values() if isinstance(v, SimFile) and v.dirty) + int(names_dirty)

    @property
    def durable_snapshot(self) -> LoadedSnapshot | None:
        """The latest snapshot a power loss now would leave."""
        self._durable_listing()
        for f in self._durable_snapshots:
            items, count = f.durable_marks()
            if count:
                return items[count - 1]
        return None

    def durable_batches(self) -> list[RecordBatch]:
        """The log as it would read after a power loss now."""
        self._durable_listing()
        log: list[RecordBatch] = []
        for f in self._durable_segments:
            items, count = f.durable_marks()
            log.extend(items[:count])
        return log

    def durable_batch_at(self, offset: int) -> RecordBatch | None:
        self._durable_listing()
        i = bisect_right(self._durable_bases, offset) - 1
        if i < 0:
            return None
        items, count = self._durable_segments[i].durable_marks()
        j = bisect_right(items, offset, hi=count, key=_base) - 1
        if j < 0:
            return None
        batch = items[j]
        return batch if offset < batch.next_offset else None

    def durable_tail(self) -> tuple[int, int]:
        """(last epoch, end offset) of the log a power loss now would leave: what the node would offer
        as its log in a VoteRequest after restarting (its durable snapshot's when that reaches further)."""
        self._durable_listing()
        snapshot = self.durable_snapshot
        tail = (snapshot.snapshot_id.epoch, snapshot.snapshot_id.end_offset) if snapshot is not None else (0, 0)
        for f in reversed(self._durable_segments):
            items, count = f.durable_marks()
            if count:
                last = items[count - 1]
                return max(tail, (last.epoch, last.next_offset))
        return tail

    def durable_quorum_state(self) -> QuorumStateData | None:
        """The quorum-state a start after a power loss now would read: the default (epoch 0, no vote)
        when there is no file, None when the file would not parse (the node then refuses to start)."""
        f = self.fs.durable_listing(self.log_dir).get(QUORUM_STATE_NAME)
        if not isinstance(f, SimFile):
            return QuorumStateData()
        try:
            return decode_quorum_state(f.durable_content(), QUORUM_STATE_NAME)
        except StorageError:
            return None

    # --- the process's view ---
    @property
    def end_offset(self) -> int:
        return self._view.end_offset

    @property
    def start_offset(self) -> int:
        return self._view.start

    @property
    def last_batch(self) -> RecordBatch | None:
        return self._view.log[-1] if self._view.log else None

    @property
    def last_epoch(self) -> int:
        return self._view.log[-1].epoch if self._view.log else self._view.start_epoch

    @property
    def snapshot(self) -> LoadedSnapshot | None:
        """The latest snapshot written (durable or not)."""
        return self._view.snapshot

    def batches(self) -> list[RecordBatch]:
        return list(self._view.log)

    def batch_at(self, offset: int) -> RecordBatch | None:
        return batch_at(self._view.log, offset)


def _image(log: list[RecordBatch], snapshot: LoadedSnapshot | None) -> _Image:
    """The process's view of a log read back from the files."""
    if log:
        start = log[0].base_offset
    else:
        start = snapshot.snapshot_id.end_offset if snapshot is not None else 0
    return _Image(log, start, _epoch_before(snapshot, start, 0), snapshot)


def _epoch_before(snapshot: LoadedSnapshot | None, start: int, otherwise: int) -> int:
    """The epoch of the record before a log that starts at `start`: the snapshot's when it ends
    there, else `otherwise`. The snapshot is the authority on its last record. A log that reached
    the snapshot's end in another epoch diverged from the leader's (a crash came after a fetched
    snapshot was written and before the ResetLog that follows it); the node's core starts its log
    after the snapshot's epoch (`RaftLog(..., sid.end_offset, sid.epoch)`), whatever the deleted
    batches held."""
    if snapshot is not None and snapshot.snapshot_id.end_offset == start:
        return snapshot.snapshot_id.epoch
    return otherwise


def _snapshot_files(entries: dict[str, Any]) -> list[SimFile]:
    """The snapshot files among directory entries, newest first."""
    found = []
    for name, node in entries.items():
        sid = snapshot_id_of(name)
        if sid is not None and isinstance(node, SimFile):
            found.append(((sid.end_offset, sid.epoch), node))
    found.sort(key=_first, reverse=True)
    return [f for _, f in found]


def _first(pair: tuple[Any, Any]) -> Any:
    return pair[0]


def _base(batch: RecordBatch) -> int:
    return batch.base_offset


def batch_at(log: list[RecordBatch], offset: int) -> RecordBatch | None:
    """The batch holding `offset` in a list ordered by base offset, or None."""
    for i in range(len(log) - 1, max(len(log) - 5, -1), -1):  # the checks mostly look near the end
        if log[i].base_offset <= offset:
            return log[i] if offset < log[i].next_offset else None
    i = bisect_right(log, offset, key=_base) - 1
    if i >= 0 and offset < log[i].next_offset:
        return log[i]
    return None
