"""KIP-595 "Vote Response Handling" and the note on gridlocked elections."""

from __future__ import annotations

from node.protocol.errors import ErrorCode
from node.protocol.messages import BeginQuorumEpochRequest, VoteRequest, VoteResponse
from node.raft.actions import AppendBatches, PersistQuorumState, SetTimer
from node.raft.events import Tick
from node.raft.quorum_state import Role
from node.raft.records import LeaderChangeMessage, decode_control
from tests.raft.helpers import LATE, answer, grant, index_of, make_candidate, one, sent


def refuse(node, now, actions, voter, error=ErrorCode.NONE, epoch=None):
    req = sent(actions, VoteRequest, to=voter)[-1]
    return answer(node, now, req, VoteResponse(int(error), -1, node.epoch if epoch is None else epoch, False))


def test_vote_response_handling_candidate_persists_own_vote_before_asking():
    node, actions = make_candidate(1)
    assert node.voted_id == 1 and node.epoch == 1
    persist = index_of(actions, PersistQuorumState)
    assert actions[persist].state.voted_id == 1
    assert persist < index_of([a for a in actions if not isinstance(a, SetTimer)], type(sent(actions, VoteRequest)[0]))
    assert {r.destination for r in sent(actions, VoteRequest)} == {2, 3}
    req = sent(actions, VoteRequest)[0].message
    assert (req.candidate_epoch, req.candidate_id) == (1, 1)


def test_vote_response_handling_1_ignored_when_not_candidate():
    node, actions = make_candidate(1)
    grant(node, LATE, actions, 2)
    assert node.role is Role.LEADER
    epoch = node.epoch
    # A late answer from voter 3 changes nothing.
    out = refuse(node, LATE + 1, actions, 3)
    assert node.role is Role.LEADER and node.epoch == epoch
    assert not [a for a in out if isinstance(a, PersistQuorumState)]


def test_vote_response_handling_2_majority_makes_leader():
    node, actions = make_candidate(1, voters=(1, 2, 3, 4, 5))
    grant(node, LATE, actions, 2)
    assert node.role is Role.CANDIDATE  # 2 of 5 is not a majority
    out = grant(node, LATE, actions, 3)
    assert node.role is Role.LEADER and node.leader_id == 1
    persisted = [a.state for a in out if isinstance(a, PersistQuorumState)]
    assert persisted[-1].leader_id == 1 and persisted[-1].leader_epoch == 1


def test_vote_response_handling_3_leader_change_record_appended_with_epoch_and_voters():
    node, actions = make_candidate(1)
    out = grant(node, LATE, actions, 3)
    append = one(out, AppendBatches)
    (batch,) = append.batches
    assert batch.control and batch.epoch == node.epoch and batch.base_offset == 0
    leader_change = decode_control(batch.records[0])
    assert leader_change == LeaderChangeMessage(1, (1, 3))
    # ... and the record is written before BeginQuorumEpoch goes out.
    assert index_of(out, AppendBatches) < out.index(sent(out, BeginQuorumEpochRequest)[0])


def test_vote_response_handling_3_begin_quorum_epoch_sent_to_all_voters():
    node, actions = make_candidate(1, voters=(1, 2, 3, 4, 5))
    grant(node, LATE, actions, 2)
    out = grant(node, LATE, actions, 3)
    begins = sent(out, BeginQuorumEpochRequest)
    assert {b.destination for b in begins} == {2, 3, 4, 5}
    assert all(b.message.leader_id == 1 and b.message.leader_epoch == 1 for b in begins)


def test_vote_response_handling_two_voter_candidate_refused_steps_down_at_once():
    node, actions = make_candidate(1, voters=(1, 2))
    refuse(node, LATE + 5, actions, 2)
    state = node.state
    assert node.role is Role.CANDIDATE and state.backing_off_until is not None
    assert state.backing_off_until < state.election_deadline  # did not wait for the election timeout
    # No more vote requests during the backoff; after it, a new election in a higher epoch.
    quiet = node.handle(state.backing_off_until - 1, Tick()) if state.backing_off_until > LATE + 5 else []
    assert not sent(quiet, VoteRequest)
    out = node.handle(state.backing_off_until, Tick())
    assert node.epoch == 2 and sent(out, VoteRequest)


def test_vote_response_handling_three_voter_candidate_needs_two_refusals():
    node, actions = make_candidate(1)
    refuse(node, LATE, actions, 2)
    assert node.state.backing_off_until is None
    refuse(node, LATE, actions, 3)
    assert node.state.backing_off_until is not None


def test_vote_response_handling_invalid_cluster_id_is_only_a_rejection():
    node, actions = make_candidate(1, voters=(1, 2), cluster_id="abc")
    # The refusing node had not moved to our epoch (it rejected before looking at epochs).
    out = refuse(node, LATE, actions, 2, error=ErrorCode.INVALID_CLUSTER_ID, epoch=0)
    assert node.role is Role.CANDIDATE and not [a for a in out if type(a).__name__ == "Fatal"]
    assert node.state.backing_off_until is not None  # counted as a refusal: 2-voter steps down


def test_vote_response_handling_backoff_bounded_by_election_backoff_max():
    backoffs = 0  # elections that waited out a backoff: the bound below must have been checked
    for seed in range(40):
        max_ms = 300
        node, actions = make_candidate(1, voters=(1, 2), seed=seed, election_backoff_max_ms=max_ms)
        now = LATE
        for _ in range(8):  # repeated failed elections grow the backoff up to its bound
            epoch = node.epoch
            actions = refuse(node, now, actions, 2)
            if node.epoch == epoch:  # a zero backoff starts the next election within the same event
                until = node.state.backing_off_until
                assert now <= until <= now + max_ms
                backoffs += 1
                now = until
                actions = node.handle(now, Tick())
            assert node.role is Role.CANDIDATE and node.epoch == epoch + 1
    assert backoffs >= 40 * 8 // 2, backoffs


def test_vote_response_handling_election_timeout_then_backoff_then_new_epoch():
    node, _actions = make_candidate(1)
    deadline = node.state.election_deadline
    node.handle(deadline, Tick())
    assert node.state.backing_off_until is not None and node.epoch == 1
    out = node.handle(node.state.backing_off_until, Tick())
    assert node.epoch == 2 and {r.destination for r in sent(out, VoteRequest)} == {2, 3}


def test_vote_response_handling_larger_epoch_in_response_steps_down():
    node, actions = make_candidate(1)
    req = sent(actions, VoteRequest, to=2)[0]
    answer(node, LATE, req, VoteResponse(int(ErrorCode.FENCED_LEADER_EPOCH), 3, 4, False))
    assert node.role is Role.FOLLOWER and node.epoch == 4 and node.leader_id == 3
