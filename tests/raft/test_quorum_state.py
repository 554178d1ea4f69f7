"""The persisted QuorumStateMessage and the roles of KIP-595 ("Quorum State", "State Machine")."""

from __future__ import annotations

from node.protocol.messages import BeginQuorumEpochRequest, VoteRequest
from node.raft.actions import LeaderChanged, PersistQuorumState
from node.raft.events import Tick
from node.raft.quorum_state import QuorumStateData, Role
from tests.raft.helpers import LATE, make_candidate, make_leader, make_node, of_type, request


def persisted(actions) -> QuorumStateData:
    return of_type(actions, PersistQuorumState)[-1].state


def test_quorum_state_candidate_persists_its_own_vote():
    _node, actions = make_candidate(2, voters=(3, 1, 2))
    assert persisted(actions) == QuorumStateData(-1, 1, 2, 0, (1, 2, 3))


def test_quorum_state_voted_persists_vote_without_leader():
    node = make_node(1)
    out = request(node, 5, VoteRequest(None, 2, 3, 0, 0))
    assert persisted(out) == QuorumStateData(-1, 2, 3, 0, (1, 2, 3))
    assert node.role is Role.VOTED and node.quorum_state == persisted(out)


def test_quorum_state_follower_persists_leader_and_keeps_vote_of_same_epoch():
    node = make_node(1)
    request(node, 5, VoteRequest(None, 2, 3, 0, 0))
    out = request(node, 6, BeginQuorumEpochRequest(None, 3, 2))
    assert persisted(out) == QuorumStateData(3, 2, 3, 0, (1, 2, 3))
    out = request(node, 7, BeginQuorumEpochRequest(None, 2, 3))
    assert persisted(out) == QuorumStateData(2, 3, -1, 0, (1, 2, 3))  # a new epoch has no vote yet


def test_quorum_state_leader_persists_itself():
    _, after = make_leader(1)
    assert QuorumStateData(1, 1, 1, 0, (1, 2, 3)) in [a.state for a in of_type(after, PersistQuorumState)]


def test_quorum_state_every_role_change_is_announced():
    node, actions = make_candidate(1)
    assert of_type(actions, LeaderChanged)[-1] == LeaderChanged(1, -1)
    out = request(node, LATE + 1, BeginQuorumEpochRequest(None, 3, 4))
    assert of_type(out, LeaderChanged)[-1] == LeaderChanged(4, 3)


def test_quorum_state_epoch_never_goes_back():
    node = make_node(1)
    request(node, 5, BeginQuorumEpochRequest(None, 2, 7))
    for message in (BeginQuorumEpochRequest(None, 3, 6), VoteRequest(None, 5, 3, 9, 99)):
        out = request(node, 6, message)
        assert node.epoch == 7 and not of_type(out, PersistQuorumState)


def test_quorum_state_observer_never_becomes_candidate():
    observer = make_node(9, voters=(1, 2, 3))
    for t in range(1, 10):
        observer.handle(t * LATE, Tick())
    assert observer.role is Role.UNATTACHED and observer.epoch == 0 and not observer.is_voter


def test_quorum_state_metrics_name_the_role():
    leader, _ = make_leader(1)
    metrics = leader.metrics(LATE)
    assert metrics["current-state"] == "leader" and metrics["current-leader"] == 1
    assert metrics["current-epoch"] == 1 and metrics["current-vote"] == 1
    assert make_node(9, voters=(1, 2, 3)).metrics(0)["current-state"] == "observer"
    candidate, _ = make_candidate(1)
    assert candidate.metrics(LATE)["current-state"] == "candidate"
