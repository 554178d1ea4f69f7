"""KIP-595 "Cluster Bootstrapping": the first leader mints the clusterId; everyone learns it on commit."""

from __future__ import annotations

from node.protocol.errors import ErrorCode
from node.protocol.messages import BeginQuorumEpochRequest, FetchRequest, FetchResponse, VoteRequest
from node.raft.actions import Fatal, PersistClusterId
from node.raft.records import ClusterIdMessage, LeaderChangeMessage, RecordBatch, decode_control, encode_control
from tests.raft.helpers import (
    LATE,
    fetch,
    fetch_response,
    flush,
    make_candidate,
    make_follower,
    make_leader,
    of_type,
    one,
    request,
    sent,
)

OK = int(ErrorCode.NONE)


def control_messages(node):
    return [decode_control(r) for b in node.batches() if b.control for r in b.records]


def test_cluster_bootstrapping_first_leader_writes_cluster_id_record():
    leader, after = make_leader(1)
    messages = control_messages(leader)
    assert isinstance(messages[0], LeaderChangeMessage)
    (minted,) = [m for m in messages if isinstance(m, ClusterIdMessage)]
    assert len(minted.cluster_id) == 22  # Kafka-style: 16 random bytes, base64 without padding
    assert leader.cluster_id is None and not of_type(after, PersistClusterId)  # not committed yet
    out = request(leader, LATE + 1, fetch(2, leader.epoch, leader.log_end_offset, leader.epoch))
    assert one(out, PersistClusterId).cluster_id == minted.cluster_id == leader.cluster_id
    # From now on the leader's requests carry it.
    assert all(s.message.cluster_id == minted.cluster_id for s in sent(out, BeginQuorumEpochRequest))


def test_cluster_bootstrapping_cluster_id_is_seeded_and_deterministic():
    a, _ = make_leader(1, seed=5)
    b, _ = make_leader(1, seed=5)
    c, _ = make_leader(1, seed=6)
    assert control_messages(a) == control_messages(b) != control_messages(c)


def test_cluster_bootstrapping_known_cluster_id_is_not_minted_again():
    leader, _ = make_leader(1, cluster_id="known")
    assert not [m for m in control_messages(leader) if isinstance(m, ClusterIdMessage)]


def test_cluster_bootstrapping_follower_learns_cluster_id_when_committed():
    node, actions = make_follower(2, leader=1, epoch=1)
    records = (
        RecordBatch(
            0, 1, (encode_control(LeaderChangeMessage(1, (1, 2))), encode_control(ClusterIdMessage("cid"))), True
        ),
    )
    out = fetch_response(node, actions, 200, FetchResponse(OK, 1, 1, 0, records=records))
    assert not of_type(out, PersistClusterId) and node.cluster_id is None
    out = flush(node, 210)
    out = fetch_response(node, out, 220, FetchResponse(OK, 1, 1, 2))
    assert one(out, PersistClusterId).cluster_id == "cid" and node.cluster_id == "cid"
    assert sent(out, FetchRequest)[-1].message.cluster_id == "cid"


def test_cluster_bootstrapping_committed_foreign_cluster_id_is_fatal():
    node, actions = make_follower(2, leader=1, epoch=1, cluster_id="mine")
    records = (RecordBatch(0, 1, (encode_control(ClusterIdMessage("theirs")),), True),)
    out = fetch_response(node, actions, 200, FetchResponse(OK, 1, 1, 1, records=records))
    assert "theirs" in one(out, Fatal).reason


def test_cluster_bootstrapping_fetch_and_vote_carry_cluster_id():
    _node, actions = make_candidate(1, cluster_id="cid")
    assert {s.message.cluster_id for s in sent(actions, VoteRequest)} == {"cid"}
    _follower, actions = make_follower(2, cluster_id="cid")
    assert {s.message.cluster_id for s in sent(actions, FetchRequest)} == {"cid"}
    _fresh, actions = make_follower(3)
    assert {s.message.cluster_id for s in sent(actions, FetchRequest)} == {None}
