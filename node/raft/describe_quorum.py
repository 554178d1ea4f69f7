"""DescribeQuorum (KIP-595): the leader's view of every replica's progress, for tools."""

from __future__ import annotations

from node.protocol.errors import ErrorCode
from node.protocol.messages import DescribeQuorumResponse, ReplicaState
from node.raft.base import RaftNodeBase
from node.raft.quorum_state import Leader, ReplicaProgress


class DescribeQuorumMixin(RaftNodeBase):
    def describe_quorum(self, now: int) -> DescribeQuorumResponse:
        if not isinstance(self.state, Leader):
            if "raft-describe-quorum-answered-by-non-leader" in self.config.bugs:  # its own, possibly stale, view
                return DescribeQuorumResponse(int(ErrorCode.NONE), self.leader_id, self.epoch, self.high_watermark)
            return DescribeQuorumResponse(
                int(ErrorCode.NOT_LEADER_OR_FOLLOWER), self.leader_id, self.epoch, self.high_watermark
            )
        leader = self.state

        def replica(p: ReplicaProgress) -> ReplicaState:
            if p.replica_id == self.node_id:
                return ReplicaState(p.replica_id, self.log.end_offset, now, now)
            return ReplicaState(p.replica_id, p.end_offset, p.last_fetch_ms, p.last_caught_up_ms)

        return DescribeQuorumResponse(
            int(ErrorCode.NONE),
            self.node_id,
            self.epoch,
            self.high_watermark,
            tuple(replica(leader.voters[v]) for v in self.voters),
            tuple(replica(leader.observers[o]) for o in sorted(leader.observers)),
            cluster_id=self.cluster_id,
            leader_time_ms=now,
        )
