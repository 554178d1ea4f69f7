"""Linearizable reads: a read barrier completes once a majority fetched after it arrived.

Such fetches prove that no other leader was elected in between, so the high watermark the barrier
returns is not stale. A leader answers none before an entry of its own epoch is committed.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

from node.protocol.errors import ErrorCode
from node.raft.actions import ReadBarrierCompleted, ReadBarrierFailed
from node.raft.base import NEVER, RaftNodeBase
from node.raft.quorum_state import Leader


@dataclass(slots=True)
class Barrier:
    handle: Hashable
    fetch_seq: int  # fetches numbered above this arrived after the barrier


class ReadBarrierMixin(RaftNodeBase):
    def _on_read_barrier(self, now: int, handle: Hashable) -> None:
        if not isinstance(self.state, Leader):
            self._out.append(ReadBarrierFailed(handle, int(ErrorCode.NOT_LEADER_OR_FOLLOWER), "not the leader"))
            return
        self._barriers.append(Barrier(handle, self._fetch_seq))
        # Parked fetches arrived before the barrier and cannot confirm it: answer them now so that the
        # followers' next fetches (which can) come at once instead of after fetch_max_wait_ms.
        self._complete_parked_fetches(now, expired_only=False)
        self._maybe_complete_barriers()

    def _maybe_complete_barriers(self) -> None:
        leader = self.state
        if not self._barriers or not isinstance(leader, Leader):
            return
        if self.high_watermark <= leader.epoch_start_offset:
            return  # nothing of this epoch is committed yet: our view may be behind the last leader's
        confirmations = sorted((seq for voter, seq in leader.fetch_seq.items() if voter != self.node_id), reverse=True)
        needed = self.config.majority - 1
        if needed == 0:
            confirmed_seq = NEVER
        elif len(confirmations) >= needed:
            confirmed_seq = confirmations[needed - 1]  # a majority fetched after every barrier below this
        else:
            return
        keep = []
        for barrier in self._barriers:
            if barrier.fetch_seq < confirmed_seq:
                self._out.append(ReadBarrierCompleted(barrier.handle, self.high_watermark))
            else:
                keep.append(barrier)
        self._barriers = keep
