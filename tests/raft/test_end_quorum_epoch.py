"""KIP-595 "EndQuorumEpoch": graceful resignation, preferred successors and their backoff."""

from __future__ import annotations

import pytest

from node.protocol.errors import ErrorCode
from node.protocol.messages import EndQuorumEpochRequest, EndQuorumEpochResponse, VoteRequest
from node.raft.actions import PersistQuorumState, Respond
from node.raft.events import Resign, Tick
from node.raft.quorum_state import QuorumStateData, Role
from tests.raft.helpers import LATE, answer, fetch, index_of, make_follower, make_leader, make_node, one, request, sent

VOTERS = (1, 2, 3, 4, 5)


def end_epoch(node, now, successors, leader=1, epoch=1):
    actions = request(node, now, EndQuorumEpochRequest(None, leader, leader, epoch, tuple(successors)))
    return actions, one(actions, Respond).message


def test_end_quorum_epoch_preferred_successors_ordered_by_replicated_offset():
    leader, _ = make_leader(1, voters=VOTERS)
    end = leader.log_end_offset
    now = LATE + 10
    # Voter 4 is fully caught up, 2 has nothing, 5 has an unknown position, 3 is at the log end too.
    request(leader, now, fetch(4, leader.epoch, end, leader.epoch))
    request(leader, now, fetch(2, leader.epoch, 0, 0))
    request(leader, now, fetch(3, leader.epoch, end, leader.epoch))
    out = leader.handle(now + 1, Resign())
    assert leader.role is Role.RESIGNED
    ends = sent(out, EndQuorumEpochRequest)
    assert {e.destination for e in ends} == {2, 3, 4, 5}
    message = ends[0].message
    assert message.preferred_successors == (3, 4, 2, 5)
    assert (message.leader_id, message.replica_id, message.leader_epoch) == (1, 1, leader.epoch)


def test_end_quorum_epoch_first_successor_becomes_candidate_immediately():
    node, _ = make_follower(2, leader=1, epoch=1)
    actions, resp = end_epoch(node, 200, successors=(2, 3))
    assert resp.error_code == ErrorCode.NONE
    assert node.role is Role.CANDIDATE and node.epoch == 2
    # The vote for itself is persisted before the VoteRequests leave.
    persist = max(i for i, a in enumerate(actions) if isinstance(a, PersistQuorumState))
    assert actions[persist].state.voted_id == 2
    assert persist < actions.index(sent(actions, VoteRequest)[0])


@pytest.mark.parametrize(("position", "expected"), [(1, 100), (2, 200), (3, 250)])
def test_end_quorum_epoch_successor_n_waits_min_retry_backoff_max_and_doubling(position, expected):
    successors = [3, 4, 5, 1]
    successors.insert(position, 2)
    node, _ = make_follower(2, leader=1, epoch=1, voters=VOTERS, retry_backoff_ms=100, retry_backoff_max_ms=250)
    now = 500
    end_epoch(node, now, successors)
    node.handle(now + expected - 1, Tick())
    assert node.role is Role.FOLLOWER
    out = node.handle(now + expected, Tick())
    assert node.role is Role.CANDIDATE and node.epoch == 2 and sent(out, VoteRequest)


def test_end_quorum_epoch_not_in_successors_is_inconsistent_voter_set():
    node, _ = make_follower(2, leader=1, epoch=1)
    _, resp = end_epoch(node, 200, successors=(3,))
    assert resp.error_code == ErrorCode.INCONSISTENT_VOTER_SET
    assert node.role is Role.FOLLOWER


def test_end_quorum_epoch_smaller_epoch_rejected():
    node = make_node(2, quorum_state=QuorumStateData(leader_id=3, leader_epoch=4, current_voters=(1, 2, 3)))
    _, resp = end_epoch(node, 200, successors=(2, 3), leader=1, epoch=3)
    assert resp.error_code == ErrorCode.FENCED_LEADER_EPOCH and resp.leader_epoch == 4
    assert node.role is Role.FOLLOWER and node.leader_id == 3


def test_end_quorum_epoch_conflicting_leader_of_same_epoch_rejected():
    node, _ = make_follower(2, leader=3, epoch=4)
    _, resp = end_epoch(node, 200, successors=(2,), leader=1, epoch=4)
    assert resp.error_code == ErrorCode.INVALID_QUORUM_STATE
    assert node.role is Role.FOLLOWER and node.leader_id == 3


def test_end_quorum_epoch_response_fenced_ignored_while_shutting_down():
    leader, _ = make_leader(1)
    out = leader.handle(LATE + 1, Resign())
    req = sent(out, EndQuorumEpochRequest, to=2)[0]
    answer(leader, LATE + 3, req, EndQuorumEpochResponse(int(ErrorCode.FENCED_LEADER_EPOCH), 3, 9))
    assert leader.role is Role.RESIGNED and leader.epoch == 1


def test_end_quorum_epoch_resigned_leader_sends_to_each_voter_until_acknowledged():
    leader, _ = make_leader(1)
    out = leader.handle(LATE + 1, Resign())
    ends = {e.destination: e for e in sent(out, EndQuorumEpochRequest)}
    assert set(ends) == {2, 3}
    answer(leader, LATE + 2, ends[2], EndQuorumEpochResponse(int(ErrorCode.NONE), -1, leader.epoch))
    again = leader.handle(LATE + 5_000, Tick())  # the request to 3 timed out: back off, then resend
    again += leader.handle(LATE + 5_100, Tick())
    assert {e.destination for e in sent(again, EndQuorumEpochRequest)} == {3}
    assert leader.role is Role.RESIGNED  # a shutting-down node never starts an election


def test_end_quorum_epoch_voted_node_gets_the_successor_backoff():
    node = make_node(2)
    request(node, 10, VoteRequest(None, 1, 1, 0, 0))
    assert node.role is Role.VOTED
    actions, resp = end_epoch(node, 20, successors=(3, 2), leader=1, epoch=1)
    assert resp.error_code == ErrorCode.NONE and node.role is Role.FOLLOWER
    node.handle(20 + 20, Tick())  # retry_backoff_ms * 2^0 with the default 20 ms
    assert node.role is Role.CANDIDATE
    assert index_of(actions, Respond) >= 0
