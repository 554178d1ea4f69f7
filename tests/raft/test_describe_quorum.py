"""KIP-595 "DescribeQuorum Request Handling"."""

from __future__ import annotations

from node.protocol.errors import ErrorCode
from node.protocol.messages import DescribeQuorumRequest, ReplicaState
from node.raft.actions import Respond
from tests.raft.helpers import LATE, fetch, make_follower, make_leader, one, request


def test_describe_quorum_only_the_leader_answers():
    node, _ = make_follower(2, leader=1, epoch=3)
    resp = one(request(node, 500, DescribeQuorumRequest()), Respond).message
    assert resp.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (resp.leader_id, resp.leader_epoch) == (1, 3) and resp.current_voters == ()


def test_describe_quorum_voters_and_observers_with_offsets_and_timestamps():
    leader, _ = make_leader(1, cluster_id="c")
    end = leader.log_end_offset
    request(leader, LATE + 100, fetch(2, leader.epoch, end, leader.epoch))
    request(leader, LATE + 200, fetch(7, leader.epoch, 0, 0))
    resp = one(request(leader, LATE + 300, DescribeQuorumRequest()), Respond).message
    assert resp.error_code == ErrorCode.NONE
    assert (resp.leader_id, resp.leader_epoch, resp.high_watermark) == (1, 1, end)
    assert resp.cluster_id == "c" and resp.leader_time_ms == LATE + 300
    voters = {v.replica_id: v for v in resp.current_voters}
    assert voters[1] == ReplicaState(1, end, LATE + 300, LATE + 300)
    assert voters[2] == ReplicaState(2, end, LATE + 100, LATE + 100)
    assert voters[3] == ReplicaState(3, -1, -1, -1)  # never fetched
    (observer,) = resp.observers
    assert (observer.replica_id, observer.log_end_offset, observer.last_fetch_timestamp) == (7, 0, LATE + 200)
    assert observer.last_caught_up_timestamp == -1


def test_describe_quorum_view_matches_request():
    leader, _ = make_leader(1)
    assert leader.describe_quorum(LATE + 5) == one(request(leader, LATE + 5, DescribeQuorumRequest()), Respond).message
