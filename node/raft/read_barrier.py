"""Linearizable reads: a read barrier completes once the leader commits an entry no voter could have
received before the barrier arrived.

Counting Fetches that are *processed* after the barrier is not enough: a leader frozen by SIGSTOP
thaws with Fetches in its sockets that were sent before it froze, perhaps before another leader was
elected and committed writes, and it may process them after a read that arrived later. A Fetch
whose offset passes an entry the leader had not yet shipped to anyone when the barrier arrived was
sent after the barrier arrived. So a barrier waits for the high watermark to pass the first such
entry; when the log holds none and no append waits to be written, the leader appends a `ReadMarker`
control record to be that entry.
The majority that acknowledged it was still in our epoch after the read arrived, so no other leader
had been elected before it (etcd's ReadIndex gets the same proof from heartbeats the leader sends).
A burst of reads shares one marker, and reads between writes need none.
"""

from __future__ import annotations

from collections.abc import Hashable

from node.protocol.errors import ErrorCode
from node.raft.actions import ReadBarrierCompleted, ReadBarrierFailed
from node.raft.base import RaftNodeBase
from node.raft.quorum_state import Leader
from node.raft.records import ReadMarkerMessage, RecordBatch, encode_control
from node.raft.waiting import Barrier


class ReadBarrierMixin(RaftNodeBase):
    def _on_read_barrier(self, now: int, handle: Hashable) -> None:
        leader = self.state
        if not isinstance(leader, Leader):
            self._out.append(ReadBarrierFailed(handle, int(ErrorCode.NOT_LEADER_OR_FOLLOWER), "not the leader"))
            return
        if "raft-read-barrier-counts-late-fetches" in self.config.bugs:
            leader.barriers.append(Barrier(handle, leader.epoch_start_offset))  # no marker: Fetches confirm it
            self._maybe_complete_barriers()
            return
        if self.config.majority == 1:
            floor = leader.epoch_start_offset  # no other voter, so no other leader: our own commit suffices
        else:
            floor = max(leader.shipped_end, leader.epoch_start_offset)
            # An append waiting for the flush is written at `floor` and unshipped until then: it is
            # the entry to wait for. A marker written first would take the offset promised to it
            # (`append_end_offset`), on which the controller builds its working state (issue 24).
            if self.log.end_offset <= floor and not leader.pending:
                records = (encode_control(ReadMarkerMessage()),)
                marker = RecordBatch(self.log.end_offset, leader.epoch, records, control=True, timestamp_ms=now)
                self._write_batch(marker)  # also answers the parked Fetches, so followers take it at once
        leader.barriers.append(Barrier(handle, floor))
        self._maybe_complete_barriers()

    def _maybe_complete_barriers(self) -> None:
        leader = self.state
        if not isinstance(leader, Leader) or not leader.barriers:
            return
        late_fetches = "raft-read-barrier-counts-late-fetches" in self.config.bugs
        keep = []
        for barrier in leader.barriers:
            if late_fetches and len(barrier.heard) < self.config.majority - 1:
                keep.append(barrier)
            elif self.high_watermark > barrier.floor:
                self._out.append(ReadBarrierCompleted(barrier.handle, self.high_watermark))
            else:
                keep.append(barrier)
        leader.barriers = keep

    def _barriers_hear_fetch(self, leader: Leader, voter: int) -> None:
        """Planted bug only: count a voter's Fetch for every read waiting, however old the Fetch is."""
        for barrier in leader.barriers:
            barrier.heard.add(voter)
        self._maybe_complete_barriers()
