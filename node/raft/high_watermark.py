"""The high watermark (KIP-595's commit index) and what a committed offset decides.

The leader advances it to the offset a majority of voters hold durably, but only once an entry of its
own epoch is among them; followers take the leader's, capped at their own log end. Passing an
offset completes or fails the appends below it and applies committed control records (clusterId).
"""

from __future__ import annotations

from node.protocol.errors import ErrorCode
from node.raft.actions import AppendCompleted, AppendFailed, Fatal, HighWatermarkAdvanced, PersistClusterId
from node.raft.base import RaftNodeBase
from node.raft.quorum_state import Leader, expect_role
from node.raft.records import ClusterIdMessage, ControlMessage, CorruptBatchError, RecordBatch, decode_control
from node.raft.waiting import WrittenAppend


def control_messages(batch: RecordBatch) -> list[ControlMessage]:
    """The control messages of a batch this version understands; malformed ones are skipped (every
    replica holds the same bytes, so every replica skips the same records)."""
    out = []
    for record in batch.records:
        try:
            message = decode_control(record)
        except CorruptBatchError:
            continue
        if message is not None:
            out.append(message)
    return out


class HighWatermarkMixin(RaftNodeBase):
    def _maybe_advance_leader_hwm(self, now: int) -> None:
        leader = expect_role(self.state, Leader, "advancing the leader's high watermark")
        offsets = sorted(
            (self._flushed_end if v == self.node_id else leader.voters[v].end_offset for v in self.voters),
            reverse=True,
        )
        candidate = offsets[self.config.majority - 1]
        # Never commit in an epoch before an entry of that epoch is committed (the Figure-8 rule).
        own_epoch = candidate > leader.epoch_start_offset
        if "raft-hwm-before-leader-change-committed" in self.config.bugs:  # KAFKA-12619
            own_epoch = True
        if own_epoch and candidate > self.high_watermark:
            self._advance_hwm(now, candidate)

    def _update_follower_hwm(self, now: int, leader_hwm: int) -> None:
        new = min(leader_hwm, self.log.end_offset)
        if new > self.high_watermark:
            self._advance_hwm(now, new)

    def _advance_hwm(self, now: int, hwm: int) -> None:
        self.high_watermark = hwm
        self._out.append(HighWatermarkAdvanced(hwm))
        self._maybe_complete_barriers()
        self._apply_committed_control_records()
        self._resolve_written_appends(now)
        if isinstance(self.state, Leader):
            self._complete_parked_fetches(now, expired_only=False)

    def _resolve_written_appends(self, now: int) -> None:
        """An append is decided once the high watermark passes it: committed if the log still holds
        its batch (same base offset and epoch), otherwise certainly not (another entry was committed
        in its place). Truncation alone decides nothing: a later leader could still commit it."""
        while self._written and self._written[0].last_offset < self.high_watermark:
            item = self._written.popleft()
            if item.base_offset < self.log.start_offset:
                self._resolve_under_snapshot(item)
                continue
            batch = self.log.batch_at(item.base_offset)
            if batch.epoch == item.epoch:  # (offset, epoch) names one entry: it is ours
                self.metrics_state.committed(now, now - item.received_ms)
                self._out.append(AppendCompleted(item.handle, item.base_offset, item.last_offset))
            else:
                self._out.append(
                    AppendFailed(
                        item.handle,
                        int(ErrorCode.NOT_LEADER_OR_FOLLOWER),
                        f"offset {item.base_offset} was committed with epoch {batch.epoch}, not {item.epoch}",
                    )
                )

    def _resolve_under_snapshot(self, item: WrittenAppend) -> None:
        """An append whose offsets a fetched snapshot now covers: the log that would tell is gone.
        Epochs never go down along the log, so an epoch above the snapshot's (the epoch of its last
        record) certainly lost. Otherwise the outcome is unknown and no answer is given: the
        caller's own timeout reports it as possibly applied."""
        epoch = self.log.start_epoch
        if item.epoch > epoch:
            self._out.append(
                AppendFailed(
                    item.handle,
                    int(ErrorCode.NOT_LEADER_OR_FOLLOWER),
                    f"offset {item.base_offset} is under a snapshot whose last epoch is {epoch} < {item.epoch}",
                )
            )

    def _apply_committed_control_records(self) -> None:
        bases = self.log.control_bases
        while self._control_applied < len(bases) and bases[self._control_applied] < self.high_watermark:
            batch = self.log.batch_at(bases[self._control_applied])
            self._control_applied += 1
            for message in control_messages(batch):
                if isinstance(message, ClusterIdMessage):
                    if self.cluster_id is None:
                        self.cluster_id = message.cluster_id
                        self._out.append(PersistClusterId(message.cluster_id))
                    elif self.cluster_id != message.cluster_id:
                        self._out.append(
                            Fatal(
                                f"the metadata log commits clusterId {message.cluster_id}, "
                                f"but this node's data dir belongs to cluster {self.cluster_id}"
                            )
                        )

    def _log_has_cluster_id(self) -> bool:
        return any(
            isinstance(message, ClusterIdMessage)
            for base in self.log.control_bases
            for message in control_messages(self.log.batch_at(base))
        )
