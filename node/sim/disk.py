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
"""

from __future__ import annotations

import random
from bisect import bisect_right
from dataclasses import dataclass

from node.raft.quorum_state import QuorumStateData
from node.raft.records import RecordBatch
from node.raft.storage import LoadedState, RaftStorage


@dataclass(frozen=True, slots=True)
class _Append:
    batch: RecordBatch


@dataclass(frozen=True, slots=True)
class _Truncate:
    offset: int


_Op = _Append | _Truncate


def _apply(log: list[RecordBatch], ops: list[_Op]) -> int | None:
    """Apply writes in order; returns the lowest offset a truncation removed data from, if any."""
    lowest: int | None = None
    for op in ops:
        if isinstance(op, _Append):
            log.append(op.batch)
        elif log and log[-1].next_offset > op.offset:
            truncate_batches(log, op.offset)
            lowest = op.offset if lowest is None else min(lowest, op.offset)
    return lowest


def truncate_batches(log: list[RecordBatch], offset: int) -> None:
    """Drop every batch holding an offset >= `offset` from a list ordered by base offset."""
    while log and log[-1].next_offset > offset:
        if log[-1].base_offset < offset:
            raise ValueError(f"truncate to {offset} inside batch at {log[-1].base_offset}")
        log.pop()


class SimDisk(RaftStorage):
    def __init__(self, fsync_on_load: bool = True) -> None:
        self.fsync_on_load = fsync_on_load
        self._log: list[RecordBatch] = []  # what reads see (page cache)
        self._durable: list[RecordBatch] = []  # what survives a power loss
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
        return LoadedState(self.quorum_state, tuple(self._log), self.cluster_id)

    def append(self, batches: tuple[RecordBatch, ...]) -> None:
        for batch in batches:
            if batch.base_offset != self.end_offset:
                raise ValueError(f"append at {batch.base_offset}, log ends at {self.end_offset}")
            self._log.append(batch)
            self._unsynced.append(_Append(batch))

    def truncate(self, offset: int) -> None:
        if offset >= self.end_offset:
            return
        truncate_batches(self._log, offset)
        self._unsynced.append(_Truncate(offset))

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
        self._note_truncation(_apply(self._durable, self._unsynced[:count]))
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
        self._note_truncation(_apply(self._durable, self._unsynced[:keep]))
        lost = len(self._unsynced) - keep
        self._synced_ops += len(self._unsynced)
        self._unsynced = []
        self._log = list(self._durable)
        return lost

    def _note_truncation(self, offset: int | None) -> None:
        if offset is not None:
            prev = self.durable_truncated
            self.durable_truncated = offset if prev is None else min(prev, offset)

    def take_durable_truncation(self) -> int | None:
        """The lowest offset the durable log lost since the last call (None: nothing lost)."""
        offset, self.durable_truncated = self.durable_truncated, None
        return offset

    # --- views for invariant checks ---
    @property
    def unsynced_writes(self) -> int:
        """Appends and truncations made since the last completed flush."""
        return len(self._unsynced)

    @property
    def end_offset(self) -> int:
        return self._log[-1].next_offset if self._log else 0

    @property
    def last_batch(self) -> RecordBatch | None:
        return self._log[-1] if self._log else None

    @property
    def last_epoch(self) -> int:
        return self._log[-1].epoch if self._log else 0

    def batches(self) -> list[RecordBatch]:
        return list(self._log)

    def durable_batches(self) -> list[RecordBatch]:
        """The log as it would read after a power loss now."""
        return list(self._durable)

    def durable_batch_at(self, offset: int) -> RecordBatch | None:
        return batch_at(self._durable, offset)

    def batch_at(self, offset: int) -> RecordBatch | None:
        return batch_at(self._log, offset)


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
