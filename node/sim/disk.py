"""A simulated disk: `RaftStorage` in memory, with the page cache / platter split of a real one.

`append` and `truncate` change what the process (and the OS page cache) sees at once; they become
durable only when a flush completes. Writes of the quorum state and the clusterId are atomic and
durable as soon as they are made (temp file + fsync + rename in the real runtime).

`load()` fsyncs what it reads before returning it (`fsync_on_load`): the core treats the loaded log
as durable and acknowledges it to the leader at once, so a storage that returned a page-cache tail
left by a kill -9 without syncing it would let a commit rest on data a power loss can still take.

Two kinds of crash:
- `crash(lose_unsynced=False)`: kill -9 of the process. The OS keeps its page cache, so everything
  written survives, fsynced or not; only the flushes in progress never report back.
- `crash(lose_unsynced=True)`: power loss (LazyFS-style). Of the writes made since the last
  completed flush, a random prefix survives and the rest is gone.

Snapshots and log-start moves (`write_snapshot`, `delete_before`, `reset`) are writes like the
others: visible at once, durable after the next completed flush, lost with the un-synced rest on a
power loss (each one whole or not at all, as a rename is). The simulator must therefore complete a
flush before it reports `SnapshotWritten`.
"""

from __future__ import annotations

import random
from bisect import bisect_right
from dataclasses import dataclass

from node.protocol.messages import SnapshotId
from node.raft.quorum_state import QuorumStateData
from node.raft.records import RecordBatch
from node.raft.storage import LoadedSnapshot, LoadedState, RaftStorage


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
            case _Reset(offset):
                log.clear()
                image.start = offset
                snap = image.snapshot
                image.start_epoch = snap.snapshot_id.epoch if snap and snap.snapshot_id.end_offset == offset else 0
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
    def __init__(self, fsync_on_load: bool = True) -> None:
        self.fsync_on_load = fsync_on_load
        self._view = _Image([])  # what reads see (page cache)
        self._platter = _Image([])  # what survives a power loss
        self._unsynced: list[_Op] = []  # writes since the last completed flush, in order
        self._synced_ops = 0  # ops dropped from the front of _unsynced by completed flushes
        self.quorum_state: QuorumStateData | None = None
        self.cluster_id: str | None = None
        self.flushes = 0
        self.durable_truncated: int | None = None  # lowest offset the durable log lost, for checks

    # --- RaftStorage ---
    def load(self) -> LoadedState:
        if self.fsync_on_load:
            self.flush()
        return LoadedState(self.quorum_state, tuple(self._view.log), self.cluster_id, snapshot=self._view.snapshot)

    def _write(self, op: _Op) -> None:
        _apply(self._view, [op])
        self._unsynced.append(op)

    def append(self, batches: tuple[RecordBatch, ...]) -> None:
        for batch in batches:
            if batch.base_offset != self.end_offset:
                raise ValueError(f"append at {batch.base_offset}, log ends at {self.end_offset}")
            self._write(_Append(batch))

    def truncate(self, offset: int) -> None:
        if offset >= self.end_offset:
            return
        if offset < self._view.start:
            raise ValueError(f"truncate to {offset} below the log start {self._view.start}")
        self._write(_Truncate(offset))

    def write_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        self._write(_Snapshot(LoadedSnapshot(snapshot_id, bytes(data))))

    def delete_before(self, offset: int) -> None:
        if offset > self.end_offset:
            raise ValueError(f"delete before {offset}, beyond the log end {self.end_offset}")
        if offset > self._view.start:
            self._write(_DeleteBefore(offset))

    def reset(self, offset: int) -> None:
        self._write(_Reset(offset))

    def flush(self) -> None:
        self.complete_flush(self.begin_flush())

    def write_quorum_state(self, state: QuorumStateData) -> None:
        self.quorum_state = state

    def write_cluster_id(self, cluster_id: str) -> None:
        self.cluster_id = cluster_id

    # --- asynchronous flush, as the simulator drives it ---
    def begin_flush(self) -> int:
        """Start an fsync; returns a token naming every write made so far."""
        return self._synced_ops + len(self._unsynced)

    def complete_flush(self, token: int) -> None:
        """The fsync started at `token` returned: those writes are durable."""
        count = token - self._synced_ops
        if count <= 0:
            return
        self._note_truncation(_apply(self._platter, self._unsynced[:count]))
        del self._unsynced[:count]
        self._synced_ops = token
        self.flushes += 1

    def crash(self, lose_unsynced: bool = False, rng: random.Random | None = None, keep: int | None = None) -> int:
        """The node died. Returns how many unsynced writes were lost (power loss only): a random
        prefix of them survives (none without `rng`), or exactly the first `keep`."""
        if not lose_unsynced:
            return 0
        if keep is None:
            keep = rng.randint(0, len(self._unsynced)) if rng and self._unsynced else 0
        keep = min(keep, len(self._unsynced))
        self._note_truncation(_apply(self._platter, self._unsynced[:keep]))
        lost = len(self._unsynced) - keep
        self._synced_ops += len(self._unsynced)
        self._unsynced = []
        self._view = self._platter.copy()
        return lost

    def _note_truncation(self, offset: int | None) -> None:
        if offset is not None:
            prev = self.durable_truncated
            self.durable_truncated = offset if prev is None else min(prev, offset)

    def take_durable_truncation(self) -> int | None:
        """The lowest offset the durable log lost since the last call (None: nothing lost)."""
        offset, self.durable_truncated = self.durable_truncated, None
        return offset

    # The log lists of both views, under the names subclasses in tests (lying disks) use.
    @property
    def _log(self) -> list[RecordBatch]:
        return self._view.log

    @_log.setter
    def _log(self, batches: list[RecordBatch]) -> None:
        self._view.log = batches

    @property
    def _durable(self) -> list[RecordBatch]:
        return self._platter.log

    # --- views for invariant checks ---
    @property
    def unsynced_writes(self) -> int:
        """Appends and truncations made since the last completed flush."""
        return len(self._unsynced)

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

    @property
    def durable_snapshot(self) -> LoadedSnapshot | None:
        """The latest snapshot a power loss now would leave."""
        return self._platter.snapshot

    def batches(self) -> list[RecordBatch]:
        return list(self._view.log)

    def durable_batches(self) -> list[RecordBatch]:
        """The log as it would read after a power loss now."""
        return list(self._platter.log)

    def durable_batch_at(self, offset: int) -> RecordBatch | None:
        return batch_at(self._platter.log, offset)

    def batch_at(self, offset: int) -> RecordBatch | None:
        return batch_at(self._view.log, offset)


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
