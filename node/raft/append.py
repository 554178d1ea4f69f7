"""The leader's write path: appends grouped into one batch, one write and one fsync at a time.

An `Append` waits while a flush is in flight; when it completes, every waiting append goes out as
one batch. Each is answered once the high watermark passes it (`high_watermark.py`).
"""

from __future__ import annotations

import bisect
from collections.abc import Hashable

from node.protocol.errors import ErrorCode
from node.raft.actions import AppendBatches, AppendFailed, Flush
from node.raft.base import NEVER, RaftNodeBase
from node.raft.quorum_state import Leader, expect_role
from node.raft.records import MAX_BATCH_BYTES, RecordBatch
from node.raft.waiting import PendingAppend, WrittenAppend

# The bytes a batch adds to its records (header and framing), counted against MAX_BATCH_BYTES.
BATCH_OVERHEAD_BYTES = 64


class AppendMixin(RaftNodeBase):
    def _on_append(self, now: int, handle: Hashable, records: tuple[bytes, ...]) -> None:
        leader = self.state
        if not isinstance(leader, Leader):
            self._out.append(AppendFailed(handle, int(ErrorCode.NOT_LEADER_OR_FOLLOWER), "not the leader"))
            return
        if not records:
            self._out.append(AppendFailed(handle, int(ErrorCode.INVALID_REQUEST), "no records"))
            return
        size = sum(4 + len(r) for r in records)
        if size + BATCH_OVERHEAD_BYTES > MAX_BATCH_BYTES or len(records) > self.config.append_max_records:
            self._out.append(
                AppendFailed(handle, int(ErrorCode.MESSAGE_TOO_LARGE), f"{len(records)} records, {size} bytes")
            )
            return
        leader.pending.append(PendingAppend(handle, tuple(records), size, now))
        if not self._flush_in_flight:
            self._write_pending(now)

    def _write_pending(self, now: int) -> None:
        """Group every waiting append into one batch, one write and one fsync."""
        pending = expect_role(self.state, Leader, "writing appends").pending
        if not pending:
            return
        records: list[bytes] = []
        size = 0
        group: list[PendingAppend] = []
        while pending:
            nxt = pending[0]
            if group and (
                size + nxt.size + BATCH_OVERHEAD_BYTES > MAX_BATCH_BYTES
                or len(records) + len(nxt.records) > self.config.append_max_records
            ):
                break
            pending.popleft()
            group.append(nxt)
            records.extend(nxt.records)
            size += nxt.size
        base = self.log.end_offset
        offset = base
        for item in group:
            last = offset + len(item.records) - 1
            self._remember_written(WrittenAppend(item.handle, offset, last, self.epoch, item.received_ms))
            offset = last + 1
        self.metrics_state.appended(now, len(records))
        self._write_batch(RecordBatch(base, self.epoch, tuple(records), timestamp_ms=now))

    def _remember_written(self, written: WrittenAppend) -> None:
        """Keep the written appends in order of their last offset, the order the high watermark
        decides them in. Arrival order is not that order once this node leads again after a
        truncation: appends of its old epoch still wait beyond the offsets its new ones take, and
        queued first they held back every answer of the new epoch (a soak run, config-append seed
        11: writes committed for 10 s and none was acknowledged)."""
        if self._written and self._written[-1].last_offset >= written.last_offset:
            bisect.insort(self._written, written, key=lambda w: w.last_offset)
        else:
            self._written.append(written)

    def _write_batch(self, batch: RecordBatch) -> None:
        self.log.append(batch)
        self._out.append(AppendBatches((batch,)))
        self._request_flush()
        if isinstance(self.state, Leader):
            self._complete_parked_fetches(self._now, expired_only=False)

    def _request_flush(self) -> None:
        if not self._flush_in_flight and self.log.end_offset > self._flushed_end:
            self._flush_in_flight = True
            self._out.append(Flush(self.log.end_offset))

    def _on_flush_completed(self, now: int, end_offset: int) -> None:
        self._flush_in_flight = False
        self._flushed_end = max(self._flushed_end, min(end_offset, self._flush_cap, self.log.end_offset))
        self._flush_cap = NEVER
        if isinstance(self.state, Leader):
            self._maybe_advance_leader_hwm(now)
            if self.state.pending:
                self._write_pending(now)
            else:
                self._request_flush()
        else:
            self._request_flush()

    def _fail_pending(self, leader: Leader, error: ErrorCode, message: str) -> None:
        """Answer the appends a leader never wrote (it is leaving the role)."""
        while leader.pending:
            item = leader.pending.popleft()
            self._out.append(AppendFailed(item.handle, int(error), message))
