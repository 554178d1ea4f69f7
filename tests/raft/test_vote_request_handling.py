"""KIP-595 "Vote Request Handling": the numbered checks a voter makes before granting a vote."""

from __future__ import annotations

from node.protocol.errors import ErrorCode
from node.protocol.messages import VoteRequest, VoteResponse
from node.raft.actions import PersistQuorumState, Respond
from node.raft.events import Tick
from node.raft.quorum_state import QuorumStateData, Role
from tests.raft.helpers import chain, index_of, make_leader, make_node, one, request, sent


def vote(node, now, candidate=2, epoch=1, last_epoch=0, last_offset=0, cluster_id=None):
    actions = request(node, now, VoteRequest(cluster_id, epoch, candidate, last_epoch, last_offset))
    return actions, one(actions, Respond).message


def test_vote_request_handling_1_rejects_mismatched_cluster_id():
    node = make_node(1, cluster_id="abc")
    _, resp = vote(node, 10, cluster_id="xyz")
    assert resp.error_code == ErrorCode.INVALID_CLUSTER_ID and not resp.vote_granted
    assert node.epoch == 0 and node.voted_id == -1


def test_vote_request_handling_1_accepts_null_cluster_id_from_a_new_node():
    node = make_node(1, cluster_id="abc")
    _, resp = vote(node, 10, cluster_id=None)
    assert resp.vote_granted


def test_vote_request_handling_2_rejects_when_larger_epoch_known():
    node = make_node(1, quorum_state=QuorumStateData(leader_epoch=5, current_voters=(1, 2, 3)))
    actions, resp = vote(node, 10, epoch=4)
    assert not resp.vote_granted and resp.leader_epoch == 5
    assert not [a for a in actions if isinstance(a, PersistQuorumState)]


def test_vote_request_handling_3_regrants_same_candidate_only():
    node = make_node(1)
    _, first = vote(node, 10, candidate=2)
    _, again = vote(node, 11, candidate=2)
    _, other = vote(node, 12, candidate=3)
    assert first.vote_granted and again.vote_granted
    assert not other.vote_granted
    assert node.voted_id == 2


def test_vote_request_handling_3_candidate_refuses_others_in_its_epoch():
    node = make_node(1)
    node.handle(10_000, Tick())
    assert node.role is Role.CANDIDATE and node.epoch == 1
    _, resp = vote(node, 10_001, candidate=2, epoch=1)
    assert not resp.vote_granted and node.voted_id == 1


def test_vote_request_handling_4_1_candidate_not_a_voter_is_refused_and_changes_nothing():
    # Issue 24: as Kafka's validateVoterOnlyRequest, not the KIP's text (which took the epoch bump):
    # with a static voter set that bump only let any client push the quorum's epoch to the int32 limit.
    node = make_node(1)
    actions, resp = vote(node, 10, candidate=9, epoch=4)
    assert not resp.vote_granted and resp.error_code == ErrorCode.INCONSISTENT_VOTER_SET
    assert node.role is Role.UNATTACHED and node.epoch == 0
    assert not sent(actions, VoteRequest) and not [a for a in actions if isinstance(a, PersistQuorumState)]


def test_vote_request_handling_4_2_log_up_to_date_rule_epoch_wins_over_length():
    node = make_node(1, batches=chain((3, 1), (1, 2)))  # ends at offset 4, epoch 2
    _, longer_older = vote(node, 10, candidate=2, epoch=3, last_epoch=1, last_offset=50)
    assert not longer_older.vote_granted
    assert node.epoch == 3 and node.role is Role.UNATTACHED  # epoch accepted, vote withheld
    _, shorter_newer = vote(node, 11, candidate=3, epoch=3, last_epoch=2 + 1, last_offset=1)
    assert shorter_newer.vote_granted


def test_vote_request_handling_4_2_log_up_to_date_rule_same_epoch_compares_offsets():
    for last_offset, granted in ((3, False), (4, True), (5, True)):
        node = make_node(1, batches=chain((3, 1), (1, 2)))
        _, resp = vote(node, 10, candidate=2, epoch=3, last_epoch=2, last_offset=last_offset)
        assert resp.vote_granted is granted, last_offset


def test_vote_request_handling_4_2_vote_persisted_before_response():
    node = make_node(1)
    actions, resp = vote(node, 10, candidate=3, epoch=2)
    assert resp.vote_granted
    persists = [a for a in actions if isinstance(a, PersistQuorumState)]
    assert persists[-1].state.voted_id == 3 and persists[-1].state.leader_epoch == 2
    assert index_of(actions, PersistQuorumState) < index_of(actions, Respond)
    last_persist = max(i for i, a in enumerate(actions) if isinstance(a, PersistQuorumState))
    assert last_persist < index_of(actions, Respond)


def test_vote_request_handling_larger_epoch_makes_leader_step_down_and_vote():
    leader, _ = make_leader(1)
    _, resp = vote(leader, 10_100, candidate=2, epoch=leader.epoch + 1, last_epoch=1, last_offset=99)
    assert resp.vote_granted and leader.role is Role.VOTED and leader.epoch == 2


def test_vote_request_handling_observer_never_votes():
    node = make_node(7, voters=(1, 2, 3))
    _, resp = vote(node, 10, candidate=2, epoch=1)
    assert not resp.vote_granted


def test_vote_request_handling_response_carries_epoch_and_leader():
    leader, _ = make_leader(1)
    _, resp = vote(leader, 10_100, candidate=2, epoch=leader.epoch)
    assert resp == VoteResponse(int(ErrorCode.NONE), 1, leader.epoch, False)


def test_vote_request_handling_refused_larger_epoch_keeps_the_election_timer():
    """A candidate with a stale log that keeps bumping the epoch must not hold off the voters that
    could win: learning an epoch is not a reason to restart the election timeout."""
    node = make_node(1, batches=chain((2, 1), (1, 3)))
    deadline = node.state.election_deadline
    for step, epoch in enumerate(range(4, 8)):
        _, resp = vote(node, 100 + step, candidate=2, epoch=epoch, last_epoch=1, last_offset=9)
        assert not resp.vote_granted and node.role is Role.UNATTACHED
        assert node.state.election_deadline == deadline
    node.handle(deadline, Tick())
    assert node.role is Role.CANDIDATE and node.epoch == 8


def test_vote_request_handling_granting_a_vote_restarts_the_election_timer():
    node = make_node(1)
    before = node.state.election_deadline
    vote(node, 500, candidate=2, epoch=1)
    assert node.role is Role.VOTED and node.state.election_deadline > before
