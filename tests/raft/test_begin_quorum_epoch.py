"""KIP-595 "BeginQuorumEpoch Request Handling" and "BeginQuorumEpoch Response Handling"."""

from __future__ import annotations

from node.protocol.errors import ErrorCode
from node.protocol.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    FetchRequest,
    VoteRequest,
)
from node.raft.actions import Fatal, PersistQuorumState, Respond
from node.raft.events import RequestFailed, Tick
from node.raft.quorum_state import QuorumStateData, Role
from tests.raft.helpers import LATE, answer, fetch, make_leader, make_node, one, request, sent


def begin(node, now, leader=1, epoch=1, cluster_id=None):
    actions = request(node, now, BeginQuorumEpochRequest(cluster_id, leader, epoch))
    return actions, one(actions, Respond).message


def test_begin_quorum_epoch_accepts_larger_epoch_and_fetches_from_leader():
    node = make_node(2)
    actions, resp = begin(node, 50, leader=3, epoch=4)
    assert resp.error_code == ErrorCode.NONE and (resp.leader_id, resp.leader_epoch) == (3, 4)
    assert node.role is Role.FOLLOWER and node.leader_id == 3 and node.epoch == 4
    persisted = one(actions, PersistQuorumState).state
    assert (persisted.leader_id, persisted.leader_epoch) == (3, 4)
    (req,) = sent(actions, FetchRequest)
    assert req.destination == 3 and req.message.current_leader_epoch == 4


def test_begin_quorum_epoch_accepts_equal_epoch_after_voting_for_another():
    node = make_node(2)
    request(node, 10, VoteRequest(None, 4, 3, 0, 0))
    assert node.role is Role.VOTED
    _, resp = begin(node, 20, leader=1, epoch=4)
    assert resp.error_code == ErrorCode.NONE and node.leader_id == 1
    assert node.voted_id == 3  # the vote of epoch 4 is kept on disk


def test_begin_quorum_epoch_rejects_conflicting_leader_in_same_epoch():
    node = make_node(2)
    begin(node, 10, leader=1, epoch=4)
    actions, resp = begin(node, 20, leader=3, epoch=4)
    assert resp.error_code == ErrorCode.INVALID_QUORUM_STATE
    assert node.leader_id == 1 and not [a for a in actions if isinstance(a, PersistQuorumState)]


def test_begin_quorum_epoch_rejects_smaller_epoch_with_fenced_leader_epoch():
    node = make_node(2, quorum_state=QuorumStateData(leader_epoch=6, current_voters=(1, 2, 3)))
    _, resp = begin(node, 10, leader=1, epoch=5)
    assert resp.error_code == ErrorCode.FENCED_LEADER_EPOCH and resp.leader_epoch == 6
    assert node.role is Role.UNATTACHED


def test_begin_quorum_epoch_inconsistent_cluster_id_is_fatal():
    node = make_node(2, cluster_id="mine")
    actions, resp = begin(node, 10, leader=1, epoch=1, cluster_id="theirs")
    assert resp.error_code == ErrorCode.INVALID_CLUSTER_ID
    assert "theirs" in one(actions, Fatal).reason and node.role is not Role.FOLLOWER


def test_begin_quorum_epoch_sent_until_endorsed():
    leader, after = make_leader(1)
    first = {s.destination: s for s in sent(after, BeginQuorumEpochRequest)}
    assert set(first) == {2, 3}
    answer(leader, LATE, first[2], BeginQuorumEpochResponse(int(ErrorCode.NONE), 1, leader.epoch))
    # Voter 3 never answers: after the request timeout it is asked again; voter 2 is not.
    retried = []
    now = LATE
    for _ in range(5):
        now += 1_000
        retried += request(leader, now, fetch(2, leader.epoch, leader.log_end_offset, leader.epoch))  # keeps it leader
        retried += leader.handle(now, Tick())
    assert leader.role is Role.LEADER
    assert {s.destination for s in sent(retried, BeginQuorumEpochRequest)} == {3}


def test_begin_quorum_epoch_resent_after_failed_delivery():
    leader, after = make_leader(1)
    req = sent(after, BeginQuorumEpochRequest, to=3)[0]
    leader.handle(LATE + 1, RequestFailed(3, req.correlation_id))
    out = leader.handle(LATE + 1_000, Tick())
    assert sent(out, BeginQuorumEpochRequest, to=3)


def test_begin_quorum_epoch_endorsement_inferred_from_fetch():
    leader, _after = make_leader(1)
    request(leader, LATE + 1, fetch(3, leader.epoch, 0, 0))
    assert leader.state.unendorsed == {2}
    out = []
    for t in range(1, 6):
        out += request(leader, LATE + 1_000 * t, fetch(3, leader.epoch, leader.log_end_offset, leader.epoch))
        out += leader.handle(LATE + 1_000 * t, Tick())
    assert leader.role is Role.LEADER and sent(out, BeginQuorumEpochRequest, to=2)
    assert not sent(out, BeginQuorumEpochRequest, to=3)


def test_begin_quorum_epoch_fenced_response_makes_leader_follow_newer_leader():
    leader, after = make_leader(1)
    req = sent(after, BeginQuorumEpochRequest, to=2)[0]
    answer(leader, LATE + 1, req, BeginQuorumEpochResponse(int(ErrorCode.FENCED_LEADER_EPOCH), 3, 5))
    assert leader.role is Role.FOLLOWER and leader.leader_id == 3 and leader.epoch == 5
