"""Restarting from the quorum-state file (KIP-595 "Quorum State"): votes and epochs survive."""

from __future__ import annotations

from node.protocol.errors import ErrorCode
from node.protocol.messages import FetchRequest, VoteRequest
from node.raft.actions import Respond
from node.raft.events import Start, Tick
from node.raft.quorum_state import QuorumStateData, Role
from tests.raft.helpers import LATE, chain, fetch, grant, make_node, one, request, sent

VOTERS = (1, 2, 3)


LOG = chain((2, 1), (1, 3))


def restarted(node_id, leader_id=-1, epoch=3, voted_id=-1, batches=LOG, **kw):
    qs = QuorumStateData(leader_id=leader_id, leader_epoch=epoch, voted_id=voted_id, current_voters=VOTERS)
    return make_node(node_id, VOTERS, quorum_state=qs, batches=batches, start=False, **kw)


def vote(node, now, candidate, epoch):
    return one(request(node, now, VoteRequest(None, epoch, candidate, 3, 3)), Respond).message


def test_restart_leader_comes_back_resigned_and_cannot_lead_its_old_epoch():
    node = restarted(1, leader_id=1, voted_id=1)
    node.handle(0, Start())
    assert node.role is Role.RESIGNED and node.epoch == 3
    resp = one(request(node, 10, fetch(2, 3, 3, 3)), Respond).message
    assert resp.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER and not resp.records
    assert not vote(node, 20, candidate=2, epoch=3).vote_granted
    out = node.handle(LATE, Tick())
    assert node.role is Role.CANDIDATE and node.epoch == 4
    assert sent(out, VoteRequest)


def test_restart_voter_keeps_its_vote_and_refuses_another_candidate():
    node = restarted(3, voted_id=2)
    node.handle(0, Start())
    assert node.role is Role.VOTED and node.voted_id == 2
    assert not vote(node, 10, candidate=1, epoch=3).vote_granted
    assert vote(node, 11, candidate=2, epoch=3).vote_granted


def test_restart_candidate_reasks_in_the_same_epoch():
    node = restarted(1, voted_id=1)
    out = node.handle(0, Start())
    assert node.role is Role.CANDIDATE and node.epoch == 3
    requests = sent(out, VoteRequest)
    assert {r.destination for r in requests} == {2, 3}
    assert all(r.message.candidate_epoch == 3 for r in requests)
    grant(node, 5, out, 2)
    assert node.role is Role.LEADER and node.epoch == 3


def test_restart_follower_fetches_from_its_leader():
    node = restarted(2, leader_id=3)
    out = node.handle(0, Start())
    assert node.role is Role.FOLLOWER and node.leader_id == 3
    req = sent(out, FetchRequest, to=3)[0].message
    assert (req.current_leader_epoch, req.fetch_offset, req.last_fetched_epoch) == (3, 3, 3)


def test_restart_log_epoch_newer_than_quorum_state_wins():
    node = restarted(2, epoch=1, batches=chain((2, 1), (1, 4)))
    node.handle(0, Start())
    assert node.role is Role.UNATTACHED and node.epoch == 4
    assert not vote(node, 10, candidate=1, epoch=3).vote_granted


def test_restart_fresh_data_dir_is_unattached_in_epoch_zero():
    node = make_node(2, VOTERS)
    assert node.role is Role.UNATTACHED and node.epoch == 0 and node.voted_id == -1
