"""BeginQuorumEpoch (KIP-595): a new leader tells the voters it won.

The leader sends it to every voter that has not fetched from it yet in its epoch; a voter receiving
it becomes that leader's follower (or refuses a second leader of one epoch).
"""

from __future__ import annotations

from node.protocol.errors import ErrorCode
from node.protocol.messages import NO_LEADER, BeginQuorumEpochRequest, BeginQuorumEpochResponse
from node.raft.actions import Fatal
from node.raft.base import RaftNodeBase
from node.raft.quorum_state import Follower, Leader


class BeginQuorumEpochMixin(RaftNodeBase):
    def _on_begin_quorum_epoch_request(self, now: int, req: BeginQuorumEpochRequest) -> BeginQuorumEpochResponse:
        # Checked first: a non-voter (anyone who can connect) must not stop this node with a foreign
        # clusterId; only an elected voter's does (KIP-595 "Cluster Bootstrapping").
        refusal = self._refuse_quorum_request(req.leader_id, req.leader_epoch)
        if refusal is not None:
            return BeginQuorumEpochResponse(int(refusal), self.leader_id, self.epoch)
        if self._cluster_id_mismatch(req.cluster_id):
            self._out.append(
                Fatal(
                    f"elected leader {req.leader_id} belongs to cluster {req.cluster_id}, "
                    f"but this node's cluster is {self.cluster_id}"
                )
            )
            return BeginQuorumEpochResponse(int(ErrorCode.INVALID_CLUSTER_ID), self.leader_id, self.epoch)
        if req.leader_epoch < self.epoch and "raft-begin-epoch-accepts-older-epoch" not in self.config.bugs:
            return BeginQuorumEpochResponse(int(ErrorCode.FENCED_LEADER_EPOCH), self.leader_id, self.epoch)
        if req.leader_epoch == self.epoch and self.leader_id not in (NO_LEADER, req.leader_id):
            # Two leaders claim one epoch: refuse the conflicting one.
            return BeginQuorumEpochResponse(int(ErrorCode.INVALID_QUORUM_STATE), self.leader_id, self.epoch)
        if not (isinstance(self.state, Follower) and self.epoch == req.leader_epoch):
            self._become_follower(now, req.leader_epoch, req.leader_id)
        return BeginQuorumEpochResponse(int(ErrorCode.NONE), self.leader_id, self.epoch)

    def _on_begin_quorum_epoch_response(self, now: int, source: int, resp: BeginQuorumEpochResponse) -> None:
        if self._maybe_transition_on_epoch(now, resp.leader_epoch, resp.leader_id):
            return
        if isinstance(self.state, Leader) and resp.leader_epoch == self.epoch:
            if resp.error_code == ErrorCode.NONE:
                self.state.unendorsed.discard(source)
            else:
                self._back_off(now, source)

    def _send_begin_quorum_epoch(self, now: int, leader: Leader) -> None:
        """A new leader tells every voter that has not fetched from it yet."""
        request = BeginQuorumEpochRequest(self.cluster_id, self.node_id, leader.epoch)
        for voter in sorted(leader.unendorsed):
            if self._can_send(now, voter):
                self._send(now, voter, request)
