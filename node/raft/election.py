"""Leader election (KIP-595 "Vote Request/Response Handling") and the role transitions.

A voter whose election or fetch timeout fires becomes a candidate: it bumps the epoch, persists its
vote for itself and asks every voter with a VoteRequest; a majority of grants makes it leader, which
writes a LeaderChange record (and, for a new cluster, the clusterId). The `_become_*` methods are
every role change of the node (after Kafka's QuorumState); each goes through `_transition_to`, which
checks the change against `quorum_state.ENTERED_FROM` and lets the old role answer what it held, and
each persists the quorum state before anything else is sent. Which timer fires when is in
`timers.py`; resignation in `end_quorum_epoch.py`.
"""

from __future__ import annotations

from dataclasses import replace

from node.protocol.errors import ErrorCode
from node.protocol.messages import NO_LEADER, VoteRequest, VoteResponse
from node.raft.actions import LeaderChanged, PersistQuorumState, ReadBarrierFailed
from node.raft.base import LAST_EPOCH, RaftNodeBase
from node.raft.quorum_state import (
    NO_ID,
    Candidate,
    Follower,
    Leader,
    Prospective,
    QuorumStateData,
    ReplicaProgress,
    Resigned,
    RoleState,
    Unattached,
    Voted,
    check_transition,
    expect_role,
)
from node.raft.records import ClusterIdMessage, LeaderChangeMessage, RecordBatch, encode_control

# A failed election backs off a random time below ELECTION_BACKOFF_BASE_MS doubled once per retry
# (at most ELECTION_BACKOFF_MAX_DOUBLINGS times, so the shift stays small), capped by
# quorum.election.backoff.max.ms.
ELECTION_BACKOFF_BASE_MS = 50
ELECTION_BACKOFF_MAX_DOUBLINGS = 20


class ElectionMixin(RaftNodeBase):
    # --- Role transitions -------------------------------------------------------------------------

    def _persist(self, leader_id: int, voted_id: int) -> None:
        self.quorum_state = QuorumStateData(
            leader_id=leader_id,
            leader_epoch=self.state.epoch,
            voted_id=voted_id,
            applied_offset=self.quorum_state.applied_offset,
            current_voters=self.voters,
        )
        self._out.append(PersistQuorumState(self.quorum_state))

    def _transition_to(self, new: RoleState) -> None:
        """Every role change: check it is one the node makes (else IllegalStateError, before anything
        is touched), let the old role answer what it still holds, and take the new role."""
        check_transition(self.state, new)
        self._leave_role()
        self.state = new

    def _leave_role(self) -> None:
        """Answer what the old role still holds; its state object (parked Fetches, barriers, unwritten
        appends, a snapshot copy) goes with it."""
        old = self.state
        if isinstance(old, Leader):
            for parked in old.parked:
                self._respond_fetch_error(parked.reply_to, parked.correlation_id, ErrorCode.NOT_LEADER_OR_FOLLOWER)
            self._fail_pending(old, ErrorCode.NOT_LEADER_OR_FOLLOWER, "leadership lost before the append was written")
            for barrier in old.barriers:
                self._out.append(
                    ReadBarrierFailed(barrier.handle, int(ErrorCode.NOT_LEADER_OR_FOLLOWER), "leadership lost")
                )
        # Requests of the old role are moot; their answers will be ignored.
        self._inflight.clear()
        self._backoff_until.clear()
        self._failures.clear()

    def _announce(self) -> None:
        self._out.append(LeaderChanged(self.state.epoch, self.leader_id))

    def _become_unattached(self, now: int, epoch: int) -> None:
        # Learning a newer epoch is not hearing from a leader or granting a vote: a voter that had
        # no leader keeps its election timer (as Raft and Kafka's QuorumState do). Resetting it let
        # a disruptive candidate with a stale log, bumping the epoch faster than the others' election
        # timeout, keep every other voter from ever starting an election it could win.
        match self.state:
            case (
                Unattached(election_deadline=deadline)
                | Voted(election_deadline=deadline)
                | Prospective(election_deadline=deadline)
            ):
                pass
            case Candidate(backing_off_until=until, election_deadline=deadline):
                deadline = until if until is not None else deadline
            case _:
                deadline = now + self._random_election_timeout()
        self._transition_to(Unattached(epoch, deadline))
        self._persist(NO_ID, NO_ID)
        self._announce()

    def _become_voted(self, now: int, epoch: int, candidate_id: int) -> None:
        self._transition_to(Voted(epoch, candidate_id, now + self._random_election_timeout()))
        self._persist(NO_ID, candidate_id)
        if "raft-vote-not-persisted" in self.config.bugs:  # the vote lives in memory only
            self._out[-1] = PersistQuorumState(replace(self.quorum_state, voted_id=NO_ID))
        self._announce()

    def _become_follower(self, now: int, epoch: int, leader_id: int) -> None:
        voted = self.quorum_state.voted_id if epoch == self.quorum_state.leader_epoch else NO_ID
        self._transition_to(Follower(epoch, leader_id, now + self.config.fetch_timeout_ms))
        self._persist(leader_id, voted)
        self._announce()
        self._election_finished(now)

    def _become_candidate(self, now: int) -> None:
        if not self.is_voter:
            return
        if self._epoch_exhausted():  # the next epoch would not fit the wire's int32
            self._postpone_election(now)
            return
        retries = self.state.retries + 1 if isinstance(self.state, Candidate | Prospective) else 1
        candidate = Candidate(
            self.state.epoch + 1,
            retries=retries,
            election_deadline=now + self._random_election_timeout(),
            granted={self.node_id},
        )
        self._transition_to(candidate)
        if self._election_started_ms is None:
            self._election_started_ms = now
        # KIP-595: the vote for itself is persisted before any VoteRequest leaves.
        self._persist(NO_ID, self.node_id)
        self._announce()
        self._maybe_win_election(now)

    def _become_leader(self, now: int) -> None:
        candidate = expect_role(self.state, Candidate, "winning an election")
        granted = tuple(sorted(candidate.granted))
        epoch = candidate.epoch
        start = self.log.end_offset
        progress = {v: ReplicaProgress(v) for v in self.voters}
        leader = Leader(
            epoch=epoch,
            epoch_start_offset=start,
            voters=progress,
            observers={},
            unendorsed={v for v in self.voters if v != self.node_id},
            granted=granted,
            check_quorum_deadline=now + self.config.fetch_timeout_ms,
        )
        self._transition_to(leader)
        self._persist(self.node_id, self.node_id)
        self._announce()
        self._election_finished(now)
        # The LeaderChange control record lets the high watermark advance without client writes;
        # the first leader of a cluster also writes the clusterId (KIP-595 "Cluster Bootstrapping").
        control = [encode_control(LeaderChangeMessage(self.node_id, granted))]
        # Above a snapshot the ClusterId record is gone but the cluster certainly has one: never mint.
        if self.cluster_id is None and self.log.start_offset == 0 and not self._log_has_cluster_id():
            control.append(encode_control(ClusterIdMessage(self._cluster_id_factory(self.rng))))
        self._write_batch(RecordBatch(start, epoch, tuple(control), control=True, timestamp_ms=now))

    def _election_finished(self, now: int) -> None:
        if self._election_started_ms is not None:
            self.metrics_state.record_election(now, now - self._election_started_ms)
            self._election_started_ms = None

    def _maybe_transition_on_epoch(self, now: int, epoch: int, leader_id: int, source: int | None = None) -> bool:
        """Learn of a newer epoch (or of the leader of ours) from any message (from `source`, when the
        caller knows it). True if it changed (or if the message is to be ignored: an epoch past the
        last one is no news worth taking)."""
        if epoch > self.epoch and epoch > LAST_EPOCH:
            return True
        if leader_id not in self.config.voter_ids:
            leader_id = NO_LEADER  # only a voter leads: a claimed leader outside the set is unknown
        if epoch > self.epoch:
            if leader_id != NO_LEADER and leader_id != self.node_id:
                self._become_follower(now, epoch, leader_id)
            else:
                self._become_unattached(now, epoch)
            return True
        if (
            isinstance(self.state, Unattached)
            and leader_id == self.state.lost_leader != NO_LEADER
            and source is not None
            and source != leader_id
        ):
            return False  # hearsay of the leader this observer just lost: only its own answer counts
        if (
            epoch == self.epoch
            and leader_id not in (NO_LEADER, self.node_id)
            and (
                isinstance(self.state, Unattached | Voted | Candidate)
                or (isinstance(self.state, Prospective) and self.state.leader_id == NO_LEADER)
            )
        ):
            self._become_follower(now, epoch, leader_id)
            return True
        return False

    # --- Vote Request Handling --------------------------------------------------------------------

    def _vote_response(self, error: ErrorCode, granted: bool) -> VoteResponse:
        return VoteResponse(int(error), self.leader_id, self.epoch, granted)

    def _on_vote_request(self, now: int, req: VoteRequest) -> VoteResponse:
        # 1. clusterId must match the cached one when both are known.
        if self._cluster_id_mismatch(req.cluster_id):
            return self._vote_response(ErrorCode.INVALID_CLUSTER_ID, False)
        # 2. A larger epoch than the candidate's is known: reject.
        if req.candidate_epoch < self.epoch and "raft-vote-older-epoch-granted" not in self.config.bugs:
            return self._vote_response(ErrorCode.FENCED_LEADER_EPOCH, False)
        # 4.1 A candidate outside the voter set (or a negative id, or an epoch past the last one) is
        # refused and changes nothing, as Kafka's validateVoterOnlyRequest does. (The KIP's text lets
        # the epoch bump through; with a static voter set that only lets any client push the quorum's
        # epoch, up to the int32 limit, so the bump is refused too.)
        refusal = self._refuse_quorum_request(req.candidate_id, req.candidate_epoch)
        if refusal is not None:
            return self._vote_response(refusal, False)
        if req.pre_vote:
            return self._on_pre_vote_request(now, req)  # KIP-996 (pre_vote.py)
        # 4. A larger epoch: move to it first (a leader or candidate steps down here).
        if req.candidate_epoch > self.epoch:
            campaigning = isinstance(self.state, Candidate | Prospective)
            self._become_unattached(now, req.candidate_epoch)
            if campaigning and "raft-candidate-outbids-higher-epoch" in self.config.bugs:
                self._become_candidate(now)  # stands above the epoch it just learned, votes for itself
                return self._vote_response(ErrorCode.NONE, False)
        if isinstance(self.state, Candidate) and req.candidate_epoch == self.epoch:
            self._split_vote(now, self.state, req)
        # 3. Already voted in this epoch: only the same candidate gets the vote again.
        match self.state:
            case Voted(voted_id=voted) if "raft-vote-granted-twice-in-epoch" not in self.config.bugs:
                return self._vote_response(ErrorCode.NONE, voted == req.candidate_id)
            case Candidate() | Leader() | Follower() | Resigned():
                return self._vote_response(ErrorCode.NONE, False)
            case Prospective(leader_id=leader):
                # Standing for the next epoch changes nothing in this one: its vote, or its leader, holds.
                qs = self.quorum_state
                voted = qs.voted_id if qs.leader_epoch == self.epoch else NO_ID
                if voted != NO_ID or leader != NO_LEADER:
                    return self._vote_response(ErrorCode.NONE, voted == req.candidate_id)
        # 4.2 The candidate's log must be at least as up-to-date as ours.
        behind = (req.last_offset_epoch, req.last_offset) < (self.log.last_epoch, self.log.end_offset)
        if behind and "raft-vote-skips-log-up-to-date-check" not in self.config.bugs:
            return self._vote_response(ErrorCode.NONE, False)
        self._become_voted(now, req.candidate_epoch, req.candidate_id)  # persisted before granting
        return self._vote_response(ErrorCode.NONE, True)

    def _split_vote(self, now: int, candidate: Candidate, rival: VoteRequest) -> None:
        """A rival candidate in our epoch: each voted for itself, so neither gets the other's vote, and
        with the other voters down nobody wins before an election timeout. Of the two, the one whose
        log is ahead (on a tie, the lower id) stands again at once, in the next epoch, where the rival
        can vote for it; the other keeps waiting. Ending a candidacy early only moves a timeout."""
        ours = (self.log.last_epoch, self.log.end_offset)
        theirs = (rival.last_offset_epoch, rival.last_offset)
        if candidate.backing_off_until is None and (
            ours > theirs or (ours == theirs and self.node_id < rival.candidate_id)
        ):
            self._election_failed(now)
            candidate.backing_off_until = now

    # --- Vote Response Handling -------------------------------------------------------------------

    def _on_vote_response(self, now: int, source: int, resp: VoteResponse) -> None:
        outbid = isinstance(self.state, Candidate) and resp.leader_epoch > self.epoch and resp.leader_id == NO_LEADER
        if self._maybe_transition_on_epoch(now, resp.leader_epoch, resp.leader_id):
            if outbid and "raft-candidate-outbids-higher-epoch" in self.config.bugs:
                self._become_candidate(now)
            return
        if isinstance(self.state, Prospective):
            self._on_pre_vote_response(now, source, resp)  # KIP-996 (pre_vote.py)
            return
        # 1. Only a candidate cares. The correlation id already tied this answer to this candidacy
        # (in-flight requests are dropped on every role change), so an answer carrying an older epoch
        # is a refusal made before the voter looked at epochs (INVALID_CLUSTER_ID, not a voter).
        if not isinstance(self.state, Candidate):
            return
        candidate = self.state
        # 2. Count the vote (in memory only: after a restart it is simply asked for again).
        if resp.vote_granted and resp.error_code == ErrorCode.NONE and resp.leader_epoch == self.epoch:
            candidate.granted.add(source)
            self._maybe_win_election(now)
        else:
            # INVALID_CLUSTER_ID in a Vote is only a rejection (the inconsistent node may be alone).
            candidate.rejected.add(source)
            if len(candidate.rejected) > len(self.voters) - self.config.majority:
                # The election cannot be won any more (e.g. a refused 2-voter candidate): back off now.
                self._election_failed(now)

    def _maybe_win_election(self, now: int) -> None:
        candidate = expect_role(self.state, Candidate, "counting votes")
        majority = self.config.majority
        if "raft-election-majority-off-by-one" in self.config.bugs:  # n // 2, not n // 2 + 1
            majority = len(self.voters) // 2
        if len(candidate.granted) >= majority:
            self._become_leader(now)

    def _election_failed(self, now: int) -> None:
        candidate = expect_role(self.state, Candidate, "failing an election")
        if candidate.backing_off_until is not None:
            return
        cap = self.config.election_backoff_max_ms
        doublings = min(candidate.retries, ELECTION_BACKOFF_MAX_DOUBLINGS)
        window = min(cap, ELECTION_BACKOFF_BASE_MS * (1 << doublings))
        candidate.backing_off_until = now + self.rng.randint(0, window)
        self._inflight.clear()

    # --- What a candidate sends -------------------------------------------------------------------

    def _send_vote_requests(self, now: int, candidate: Candidate) -> None:
        request = VoteRequest(self.cluster_id, candidate.epoch, self.node_id, self.log.last_epoch, self.log.end_offset)
        for voter in self.voters:
            if (
                voter != self.node_id
                and voter not in candidate.granted
                and voter not in candidate.rejected
                and self._can_send(now, voter)
            ):
                self._send(now, voter, request)
