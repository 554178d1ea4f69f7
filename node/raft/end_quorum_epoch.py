"""EndQuorumEpoch (KIP-595) and graceful resignation.

A leader asked to `Resign` stops leading and sends EndQuorumEpoch to the other voters, naming its
preferred successors by how far their logs reached; the first of them starts an election at once,
the others after a backoff that grows with their place in the list.
"""

from __future__ import annotations

from node.protocol.errors import ErrorCode
from node.protocol.messages import EndQuorumEpochRequest, EndQuorumEpochResponse
from node.raft.base import NEVER, RaftNodeBase
from node.raft.quorum_state import Candidate, Follower, Leader, Prospective, Resigned, Unattached, Voted, expect_role


class EndQuorumEpochMixin(RaftNodeBase):
    def _on_resign(self, now: int) -> None:
        self._shutting_down = True
        if isinstance(self.state, Leader):
            self._become_resigned(now)
        elif isinstance(self.state, Candidate):
            self._inflight.clear()
            self.state.backing_off_until = NEVER  # give up this election; never start another
        elif isinstance(self.state, Prospective):
            self._inflight.clear()  # ask for no more pre-votes, fetch no more (_drive); never stand

    def _become_resigned(self, now: int) -> None:
        leader = expect_role(self.state, Leader, "resigning")
        successors = sorted(
            (v for v in self.voters if v != self.node_id),
            key=lambda v: (-leader.voters[v].end_offset, v),
        )
        resigned = Resigned(
            leader.epoch,
            self.node_id,
            now + self._random_election_timeout(),
            tuple(successors),
            unacknowledged=set(successors),
        )
        self._transition_to(resigned)
        self._announce()

    # --- EndQuorumEpoch Request/Response Handling -------------------------------------------------

    def _on_end_quorum_epoch_request(self, now: int, req: EndQuorumEpochRequest) -> EndQuorumEpochResponse:
        def answer(error: ErrorCode) -> EndQuorumEpochResponse:
            return EndQuorumEpochResponse(int(error), self.leader_id, self.epoch)

        if self._cluster_id_mismatch(req.cluster_id):
            return answer(ErrorCode.INVALID_CLUSTER_ID)
        if req.leader_epoch < self.epoch:
            return answer(ErrorCode.FENCED_LEADER_EPOCH)
        # A resigning "leader" outside the voter set (or at an impossible epoch) changes nothing.
        refusal = self._refuse_quorum_request(req.leader_id, req.leader_epoch)
        if refusal is not None:
            return answer(refusal)
        if req.leader_epoch > self.epoch:
            self._maybe_transition_on_epoch(now, req.leader_epoch, req.leader_id)
        elif self.leader_id != req.leader_id:
            self._maybe_transition_on_epoch(now, req.leader_epoch, req.leader_id)
            if self.leader_id != req.leader_id:
                return answer(ErrorCode.INVALID_QUORUM_STATE)  # the leader of this epoch is not known
        if self.node_id not in req.preferred_successors:
            return answer(ErrorCode.INCONSISTENT_VOTER_SET)
        if "raft-end-quorum-epoch-ignored" in self.config.bugs:
            return answer(ErrorCode.NONE)
        position = req.preferred_successors.index(self.node_id)
        if position == 0:
            backoff = 0
        else:
            backoff = min(self.config.retry_backoff_max_ms, self.config.retry_backoff_ms * 2 ** (position - 1))
        match self.state:
            case Follower() as s:
                s.fetch_deadline = min(s.fetch_deadline, now + backoff)
                s.heard_from_leader = False  # the leader is leaving: grant the successors' pre-votes
            case Unattached() | Voted() | Prospective() as s:
                s.election_deadline = min(s.election_deadline, now + backoff)
        if backoff == 0 and isinstance(self.state, Follower | Unattached | Voted | Prospective):
            self._become_candidate(now)  # the leader handed over: stand at once, without pre-votes
        return answer(ErrorCode.NONE)

    def _on_end_quorum_epoch_response(self, now: int, source: int, resp: EndQuorumEpochResponse) -> None:
        if isinstance(self.state, Resigned):
            self.state.unacknowledged.discard(source)
        if not self._shutting_down:
            self._maybe_transition_on_epoch(now, resp.leader_epoch, resp.leader_id)

    def _send_end_quorum_epoch(self, now: int, resigned: Resigned) -> None:
        request = EndQuorumEpochRequest(
            self.cluster_id, self.node_id, self.node_id, resigned.epoch, resigned.preferred_successors
        )
        for voter in sorted(resigned.unacknowledged):
            if self._can_send(now, voter) and self._failures.get(voter, 0) < 3:
                self._send(now, voter, request)
