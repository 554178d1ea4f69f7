"""Pre-vote (KIP-996): ask the voters whether they would elect this node before bumping the epoch.

Without it, a voter that loses touch with the leader becomes a candidate at once: it bumps the epoch
on every election timeout, and when it comes back its higher epoch makes the healthy leader step down.
With it, the voter first becomes *prospective*: same epoch, nothing persisted, a VoteRequest with
PreVote set (VoteRequest v2) to every voter. A voter grants a pre-vote when the prospective's log is
at least as up to date as its own and it has not heard from a leader within the fetch timeout (a
follower fetching from a live leader refuses; a leader refuses). Only a majority of grants makes the
node a candidate, which bumps the epoch and asks for real votes (`election.py`). A prospective that
knew a leader keeps fetching from it: the first successful Fetch, like a BeginQuorumEpoch, makes it
that leader's follower again.
"""

from __future__ import annotations

from node.protocol.errors import ErrorCode
from node.protocol.messages import NO_LEADER, VoteRequest, VoteResponse
from node.raft.base import RaftNodeBase
from node.raft.quorum_state import Candidate, Follower, Leader, Prospective, Resigned, expect_role


class PreVoteMixin(RaftNodeBase):
    def _start_election(self, now: int) -> None:
        """An election or fetch timeout fired (or a failed candidacy backed off): stand, through a
        round of pre-votes when they are on and there is anybody to ask."""
        if not self.is_voter:
            return
        if self._epoch_exhausted():
            self._postpone_election(now)
            return
        if self.config.pre_vote and len(self.voters) > 1:
            self._become_prospective(now)
        else:
            self._become_candidate(now)

    def _become_prospective(self, now: int) -> None:
        old = self.state
        leader = old.leader_id if isinstance(old, Follower | Prospective) else NO_LEADER
        retries = old.retries if isinstance(old, Candidate | Prospective) else 0
        known_leader = self.leader_id
        prospective = Prospective(
            old.epoch, leader, retries, now + self._random_election_timeout(), granted={self.node_id}
        )
        self._transition_to(prospective)
        # Nothing is persisted: the epoch and the vote of the quorum-state file still hold.
        if leader != known_leader:
            self._announce()  # a leader (or a resigned one) that stepped down: nobody leads now

    # --- Pre-vote Request Handling ------------------------------------------------------------------

    def _on_pre_vote_request(self, now: int, req: VoteRequest) -> VoteResponse:
        """After the checks every VoteRequest gets (clusterId, voter, fenced epoch). Grants change no
        state and persist nothing; only a newer epoch is taken on, as from any message."""
        if req.candidate_epoch > self.epoch:
            self._become_unattached(now, req.candidate_epoch)
        if isinstance(self.state, Prospective) and req.candidate_id == self.state.leader_id:
            self._leader_stepped_down(self.state)  # a leader does not ask for pre-votes
        if isinstance(self.state, Prospective) and req.candidate_id in self.state.rejected:
            # It refused us while it still followed the leader; asking for pre-votes shows it no longer
            # does: ask it again now rather than when this round expires (an election timeout later).
            self.state.rejected.discard(req.candidate_id)
            self.state.backing_off = False
        match self.state:
            case Leader() | Resigned():
                return self._vote_response(ErrorCode.NONE, False)
            case Follower(heard_from_leader=True, fetch_deadline=deadline) if now < deadline:
                return self._vote_response(ErrorCode.NONE, False)  # the leader is alive
        up_to_date = (req.last_offset_epoch, req.last_offset) >= (self.log.last_epoch, self.log.end_offset)
        return self._vote_response(ErrorCode.NONE, up_to_date)

    # --- Pre-vote Response Handling -----------------------------------------------------------------

    def _on_pre_vote_response(self, now: int, source: int, resp: VoteResponse) -> None:
        prospective = expect_role(self.state, Prospective, "counting pre-votes")
        if resp.vote_granted and resp.error_code == ErrorCode.NONE and resp.leader_epoch == self.epoch:
            prospective.granted.add(source)
            if len(prospective.granted) >= self.config.majority:
                self._become_candidate(now)
            return
        prospective.rejected.add(source)
        if len(prospective.rejected) > len(self.voters) - self.config.majority:
            # This round cannot succeed: ask nobody more until the next one (the Fetch to the leader
            # goes on: its answer is what brings this node back).
            prospective.backing_off = True

    def _pre_vote_round_expired(self, now: int, prospective: Prospective) -> None:
        """No majority in an election timeout: ask everyone again (still in the same epoch). Answers
        to the last round's pre-votes are dropped; a Fetch to the leader stays in flight."""
        for voter in [v for v in self._inflight if v != prospective.leader_id]:
            del self._inflight[voter]
        prospective.granted = {self.node_id}
        prospective.rejected = set()
        prospective.backing_off = False
        prospective.election_deadline = now + self._random_election_timeout()

    def _leader_stepped_down(self, prospective: Prospective) -> None:
        """The leader this prospective fetches from says it no longer leads (it restarted, or
        resigned): ask it for a pre-vote like any voter. Skipping it, a prospective whose other
        voters were down waited for them while the old leader, behind, asked it for pre-votes in
        vain: no majority either way until a third voter came back (soak seed 91, 8 s)."""
        prospective.leader_id = NO_LEADER
        self._announce()

    # --- What a prospective sends ---------------------------------------------------------------------

    def _send_pre_votes(self, now: int, prospective: Prospective) -> None:
        request = VoteRequest(
            self.cluster_id, prospective.epoch, self.node_id, self.log.last_epoch, self.log.end_offset, pre_vote=True
        )
        leader = prospective.leader_id
        for voter in () if prospective.backing_off else self.voters:
            if (
                voter not in (self.node_id, leader)  # the leader would refuse: it is fetched from instead
                and voter not in prospective.granted
                and voter not in prospective.rejected
                and self._can_send(now, voter)
            ):
                self._send(now, voter, request)
        if leader != NO_LEADER:
            self._send_fetch(now, leader)
