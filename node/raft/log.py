"""The node's in-memory view of the replicated log and its epoch -> start-offset cache.

The runtime keeps the durable copy (see `storage`); this view is what the handlers reason about.
Batches are whole units: a leader writes one batch per group of appends, followers copy batches
unchanged, so every truncation point the protocol produces is a batch boundary.

After a snapshot the log starts at the snapshot's end offset (`start_offset`) and remembers the
epoch of the record just before it (`start_epoch`, the snapshot's epoch): an empty log still knows
its last offset and epoch, for votes, fetches and the epoch cache.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

from node.raft.records import RecordBatch, encoded_size


@dataclass(frozen=True, slots=True)
class OffsetAndEpoch:
    offset: int
    epoch: int


class LogError(AssertionError):
    """A caller broke the log's rules: a bug in the state machine, never bad input."""


class RaftLog:
    def __init__(
        self, batches: tuple[RecordBatch, ...] | list[RecordBatch] = (), start_offset: int = 0, start_epoch: int = 0
    ):
        self.start_offset = start_offset
        self.start_epoch = start_epoch  # epoch of the record at start_offset - 1 (0 when none)
        self._batches: list[RecordBatch] = []
        self._bases: list[int] = []
        self._sizes: list[int] = []
        # epoch cache: parallel lists of epochs and the offset each one starts at
        self._epochs: list[int] = []
        self._epoch_starts: list[int] = []
        self.control_bases: list[int] = []
        self._end = start_offset  # the last batch's next offset (read on every event: kept, not computed)
        for batch in batches:
            self.append(batch)

    # --- reads ---
    @property
    def end_offset(self) -> int:
        return self._end if self._batches else self.start_offset

    @property
    def last_epoch(self) -> int:
        return self._epochs[-1] if self._epochs else self.start_epoch

    def __len__(self) -> int:
        return len(self._batches)

    def batches(self) -> list[RecordBatch]:
        return list(self._batches)

    def batch_index(self, offset: int) -> int:
        """Index of the batch holding `offset` (which must be inside the log)."""
        i = bisect_right(self._bases, offset) - 1
        if i < 0 or offset >= self.end_offset:
            raise LogError(f"offset {offset} outside the log [{self.start_offset}, {self.end_offset})")
        return i

    def epoch_at(self, offset: int) -> int:
        return self._batches[self.batch_index(offset)].epoch

    def batch_at(self, offset: int) -> RecordBatch:
        return self._batches[self.batch_index(offset)]

    def read(self, offset: int, max_bytes: int, below: int | None = None) -> list[RecordBatch]:
        """Whole batches from `offset` (a batch boundary) up to `max_bytes` (at least one batch).

        With `below`, only batches ending before that offset (e.g. the high watermark) are returned.
        """
        if offset >= self.end_offset:
            return []
        i = self.batch_index(offset)
        if self._bases[i] != offset:
            raise LogError(f"read from offset {offset} inside batch at {self._bases[i]}")
        out: list[RecordBatch] = []
        total = 0
        for j in range(i, len(self._batches)):
            batch = self._batches[j]
            if below is not None and batch.next_offset > below:
                break
            if out and total + self._sizes[j] > max_bytes:
                break
            out.append(batch)
            total += self._sizes[j]
        return out

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        """The largest epoch <= `epoch` in this log and the offset where it ends (Kafka's
        OffsetsForLeaderEpoch): the start of the next epoch, or the log end."""
        i = bisect_right(self._epochs, epoch) - 1
        if i < 0:
            # Below every epoch held: the epoch before the log start ends there, if it is not too new.
            if self.start_offset > 0 and self.start_epoch <= epoch:
                return OffsetAndEpoch(self.start_offset, self.start_epoch)
            return OffsetAndEpoch(self.start_offset, 0)
        end = self._epoch_starts[i + 1] if i + 1 < len(self._epochs) else self.end_offset
        return OffsetAndEpoch(end, self._epochs[i])

    def epoch_entries(self) -> list[OffsetAndEpoch]:
        """The epoch cache: each epoch with its start offset."""
        return [OffsetAndEpoch(o, e) for e, o in zip(self._epochs, self._epoch_starts)]

    def is_boundary(self, offset: int) -> bool:
        """True if `offset` is the log end or the base offset of a batch in the log."""
        if offset == self.end_offset:
            return True
        if not self.start_offset <= offset < self.end_offset:
            return False
        return self._bases[self.batch_index(offset)] == offset

    # --- writes ---
    def append(self, batch: RecordBatch) -> None:
        if batch.base_offset != self.end_offset:
            raise LogError(f"append at {batch.base_offset}, log ends at {self.end_offset}")
        if batch.epoch < self.last_epoch:
            raise LogError(f"append of epoch {batch.epoch} after epoch {self.last_epoch}")
        if batch.epoch > self.last_epoch or not self._epochs:
            self._epochs.append(batch.epoch)
            self._epoch_starts.append(batch.base_offset)
        self._batches.append(batch)
        self._bases.append(batch.base_offset)
        self._sizes.append(encoded_size(batch))
        self._end = batch.next_offset
        if batch.control:
            self.control_bases.append(batch.base_offset)

    def truncate(self, offset: int) -> None:
        """Drop every record at or after `offset`, which must be a batch boundary."""
        if offset >= self.end_offset:
            return
        if offset < self.start_offset:
            raise LogError(f"truncate to {offset} below log start {self.start_offset}")
        i = self.batch_index(offset)
        if self._bases[i] != offset:
            raise LogError(f"truncate to {offset} inside batch at {self._bases[i]}")
        del self._batches[i:], self._bases[i:], self._sizes[i:]
        self._end = offset
        while self._epoch_starts and self._epoch_starts[-1] >= offset:
            self._epochs.pop()
            self._epoch_starts.pop()
        while self.control_bases and self.control_bases[-1] >= offset:
            self.control_bases.pop()

    def drop_before(self, offset: int) -> None:
        """Advance the log start to `offset` (a batch boundary, at most the log end): a snapshot now
        covers every record below it."""
        if offset <= self.start_offset:
            return
        if not self.is_boundary(offset):
            raise LogError(f"log start {offset} is not a batch boundary in [{self.start_offset}, {self.end_offset}]")
        i = len(self._batches) if offset == self.end_offset else self.batch_index(offset)
        epoch = self._batches[i - 1].epoch
        del self._batches[:i], self._bases[:i], self._sizes[:i]
        # The epoch cache keeps the epoch running at the new start, now starting there.
        j = bisect_right(self._epoch_starts, offset) - 1
        del self._epochs[: max(j, 0)], self._epoch_starts[: max(j, 0)]
        if self._epoch_starts and self._epoch_starts[0] < offset:
            if self._batches:
                self._epoch_starts[0] = offset
                self._epochs[0] = self._batches[0].epoch
            else:
                self._epochs.clear()
                self._epoch_starts.clear()
        self.control_bases = [b for b in self.control_bases if b >= offset]
        self.start_offset = offset
        self.start_epoch = epoch

    def reset(self, offset: int, epoch: int) -> None:
        """Drop every record: the log restarts empty at `offset`, after a record of epoch `epoch`."""
        self._batches.clear()
        self._bases.clear()
        self._sizes.clear()
        self._epochs.clear()
        self._epoch_starts.clear()
        self.control_bases.clear()
        self.start_offset = offset
        self.start_epoch = epoch
