"""KIP-996 Pre-Vote: a timed-out voter asks for pre-votes before it bumps the epoch.

Named after the KIP's parts: the prospective state, pre-vote request handling (the voter's side)
and pre-vote response handling (the prospective's side), and leaving the prospective state.
"""

from __future__ import annotations

from node.protocol.errors import ErrorCode
from node.protocol.messages import (
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchResponse,
    VoteRequest,
    VoteResponse,
)
from node.raft.actions import LeaderChanged, PersistQuorumState
from node.raft.events import Tick
from node.raft.quorum_state import QuorumStateData, Role
from tests.raft.helpers import (
    LATE,
    answer,
    chain,
    fetch,
    fetch_response,
    flush_all,
    make_follower,
    make_node,
    of_type,
    request,
    sent,
)

PRE_VOTE = {"pre_vote": True}


def pre_vote(candidate: int, epoch: int, last_epoch: int = 0, last_offset: int = 0) -> VoteRequest:
    return VoteRequest(None, epoch, candidate, last_epoch, last_offset, pre_vote=True)


def granted(actions: list) -> bool:
    (response,) = [a.message for a in actions if isinstance(getattr(a, "message", None), VoteResponse)]
    assert response.error_code == ErrorCode.NONE, response
    return response.vote_granted


def make_pre_vote_leader(node_id: int = 1):
    """A leader of epoch 1 elected the KIP-996 way: a pre-vote, then a vote, from node 2."""
    node = make_node(node_id, **PRE_VOTE)
    actions = node.handle(LATE, Tick())
    actions = answer(node, LATE, sent(actions, VoteRequest, to=2)[-1], VoteResponse(0, -1, 0, True))
    actions = answer(node, LATE, sent(actions, VoteRequest, to=2)[-1], VoteResponse(0, -1, 1, True))
    assert node.role is Role.LEADER and node.epoch == 1, node.role
    flush_all(node, LATE, actions)
    return node


def live_follower(node_id: int = 2, leader: int = 1, epoch: int = 1, at: int = 200):
    """A voter following `leader` that fetched from it successfully at `at` (the leader is alive)."""
    node, actions = make_follower(node_id, leader, epoch, now=at - 100, **PRE_VOTE)
    actions = fetch_response(node, actions, at, FetchResponse(int(ErrorCode.NONE), leader, epoch, 0))
    return node, actions


def prospective_after_fetch_timeout(node_id: int = 3, leader: int = 1, epoch: int = 4):
    node, actions = make_follower(node_id, leader, epoch, **PRE_VOTE)
    actions = node.handle(LATE, Tick())
    assert node.role is Role.PROSPECTIVE, node.role
    return node, actions


# --- the prospective state ------------------------------------------------------------------------


def test_prospective_neither_bumps_the_epoch_nor_persists_a_vote():
    node = make_node(1, quorum_state=QuorumStateData(leader_epoch=3, current_voters=(1, 2, 3)), **PRE_VOTE)
    actions = node.handle(LATE, Tick())
    assert node.role is Role.PROSPECTIVE and node.epoch == 3
    assert of_type(actions, PersistQuorumState) == [] and node.voted_id == -1
    requests = sent(actions, VoteRequest)
    assert sorted(r.destination for r in requests) == [2, 3]
    assert all(r.message.pre_vote and r.message.candidate_epoch == 3 for r in requests)
    assert node.metrics(LATE)["current-state"] == "prospective"


def test_a_follower_whose_fetch_timeout_fires_becomes_prospective_and_keeps_fetching_from_its_leader():
    node, actions = prospective_after_fetch_timeout(3, leader=1, epoch=4)
    assert node.epoch == 4 and node.leader_id == 1
    assert [r.destination for r in sent(actions, VoteRequest)] == [2]  # the leader is fetched from, not asked
    assert [r.destination for r in sent(actions, FetchRequest)] == [1]
    assert of_type(actions, LeaderChanged) == []  # it still knows the leader it followed


def test_without_pre_vote_the_same_timeout_bumps_the_epoch_at_once():
    node, _ = make_follower(3, 1, 4, pre_vote=False)
    node.handle(LATE, Tick())
    assert node.role is Role.CANDIDATE and node.epoch == 5


# --- pre-vote request handling (the voter) --------------------------------------------------------


def test_a_follower_fetching_from_a_live_leader_rejects_a_pre_vote():
    node, _ = live_follower(2, leader=1, epoch=1)
    actions = request(node, 300, pre_vote(3, 1))
    assert not granted(actions)
    assert node.role is Role.FOLLOWER and node.epoch == 1 and of_type(actions, PersistQuorumState) == []


def test_a_voter_that_lost_its_leader_grants_a_pre_vote_and_changes_nothing():
    node = make_node(2, quorum_state=QuorumStateData(leader_epoch=1, current_voters=(1, 2, 3)), **PRE_VOTE)
    actions = request(node, 300, pre_vote(3, 1))
    assert granted(actions)
    assert node.role is Role.UNATTACHED and node.epoch == 1 and node.voted_id == -1
    assert of_type(actions, PersistQuorumState) == []


def test_a_follower_that_never_reached_its_leader_grants_a_pre_vote():
    node, _ = make_follower(2, 1, 1, **PRE_VOTE)  # learnt of the leader, never fetched from it
    assert granted(request(node, 300, pre_vote(3, 1)))


def test_a_follower_whose_fetch_timeout_passed_grants_a_pre_vote():
    node, _ = live_follower(2, leader=1, epoch=1)  # fetched at 200 ms: live until 2200 ms
    assert granted(request(node, 2_200, pre_vote(3, 1)))


def test_a_follower_grants_pre_votes_once_its_leader_resigns():
    node, _ = live_follower(2, leader=1, epoch=1)
    request(node, 300, EndQuorumEpochRequest(None, 1, 1, 1, (3, 2)))
    assert granted(request(node, 310, pre_vote(3, 1)))


def test_a_leader_rejects_a_pre_vote_and_keeps_its_epoch():
    leader = make_pre_vote_leader(1)
    epoch = leader.epoch
    actions = request(leader, LATE + 10, pre_vote(3, epoch, last_epoch=epoch, last_offset=leader.log_end_offset))
    assert not granted(actions)
    assert leader.role is Role.LEADER and leader.epoch == epoch


def test_a_pre_vote_from_a_log_behind_ours_is_rejected():
    node = make_node(2, batches=chain((2, 1)), quorum_state=QuorumStateData(leader_epoch=1), **PRE_VOTE)
    assert not granted(request(node, 300, pre_vote(3, 1, last_epoch=1, last_offset=1)))
    assert granted(request(node, 300, pre_vote(3, 1, last_epoch=1, last_offset=2)))


def test_a_pre_vote_from_an_older_epoch_is_fenced():
    node = make_node(2, quorum_state=QuorumStateData(leader_epoch=5), **PRE_VOTE)
    actions = request(node, 300, pre_vote(3, 4))
    (response,) = [a.message for a in actions if isinstance(getattr(a, "message", None), VoteResponse)]
    assert response.error_code == ErrorCode.FENCED_LEADER_EPOCH and not response.vote_granted


# --- pre-vote response handling (the prospective) ---------------------------------------------------


def test_a_majority_of_pre_votes_makes_a_candidate_that_bumps_the_epoch_and_asks_for_real_votes():
    node = make_node(1, quorum_state=QuorumStateData(leader_epoch=3), **PRE_VOTE)
    actions = node.handle(LATE, Tick())
    req = sent(actions, VoteRequest, to=2)[-1]
    after = answer(node, LATE + 5, req, VoteResponse(int(ErrorCode.NONE), -1, 3, True))
    assert node.role is Role.CANDIDATE and node.epoch == 4
    persisted = of_type(after, PersistQuorumState)
    assert persisted and persisted[0].state.voted_id == 1 and persisted[0].state.leader_epoch == 4
    votes = sent(after, VoteRequest)
    assert sorted(v.destination for v in votes) == [2, 3] and not any(v.message.pre_vote for v in votes)


def test_a_majority_of_rejections_waits_for_the_next_round_in_the_same_epoch():
    node = make_node(1, quorum_state=QuorumStateData(leader_epoch=3), **PRE_VOTE)
    actions = node.handle(LATE, Tick())
    for voter in (2, 3):
        req = sent(actions, VoteRequest, to=voter)[-1]
        answer(node, LATE + 5, req, VoteResponse(int(ErrorCode.NONE), -1, 3, False))
    assert node.role is Role.PROSPECTIVE and node.epoch == 3
    assert sent(node.handle(LATE + 10, Tick()), VoteRequest) == []  # nobody asked again in this round
    again = node.handle(LATE + 2_001, Tick())  # past any election timeout: a new round
    assert sorted(r.destination for r in sent(again, VoteRequest)) == [2, 3]
    assert node.role is Role.PROSPECTIVE and node.epoch == 3


def test_a_prospective_never_standing_keeps_its_epoch_however_long_it_is_cut_off():
    node = make_node(1, quorum_state=QuorumStateData(leader_epoch=3), **PRE_VOTE)
    for now in range(LATE, LATE + 600_000, 100):  # ten minutes of unanswered pre-votes and timeouts
        node.handle(now, Tick())
    assert node.role is Role.PROSPECTIVE and node.epoch == 3


# --- leaving the prospective state ----------------------------------------------------------------


def test_a_successful_fetch_from_the_leader_makes_a_prospective_its_follower_again():
    node, actions = prospective_after_fetch_timeout(3, leader=1, epoch=4)
    after = fetch_response(node, actions, LATE + 5, FetchResponse(int(ErrorCode.NONE), 1, 4, 0))
    assert node.role is Role.FOLLOWER and node.leader_id == 1 and node.epoch == 4
    assert sent(after, FetchRequest, to=1)  # and it goes on fetching


def test_begin_quorum_epoch_makes_a_prospective_a_follower():
    node = make_node(2, quorum_state=QuorumStateData(leader_epoch=3), **PRE_VOTE)
    node.handle(LATE, Tick())
    assert node.role is Role.PROSPECTIVE
    request(node, LATE + 5, BeginQuorumEpochRequest(None, 3, 3))
    assert node.role is Role.FOLLOWER and node.leader_id == 3 and node.epoch == 3


def test_a_rejoining_voter_rejected_by_the_quorum_follows_the_leader_in_the_same_epoch():
    # Node 3 was cut off from leader 1 in epoch 4. Back, its pre-vote is refused by node 2 (which
    # fetches from the live leader), and the leader answers its Fetch: no new epoch anywhere.
    leader = make_pre_vote_leader(1)
    epoch = leader.epoch
    voter2, _ = live_follower(2, leader=1, epoch=epoch, at=LATE)
    rejoining, actions = prospective_after_fetch_timeout(3, leader=1, epoch=epoch)
    ask = sent(actions, VoteRequest, to=2)[-1]
    refusal = request(voter2, LATE + 1, ask.message)
    assert not granted(refusal)
    answer(rejoining, LATE + 2, ask, refusal[-1].message)
    assert rejoining.role is Role.PROSPECTIVE and rejoining.epoch == epoch
    fetch_req = sent(actions, FetchRequest, to=1)[-1]
    leader_actions = request(leader, LATE + 3, fetch_req.message, reply_to=3)
    answer(rejoining, LATE + 4, fetch_req, leader_actions[-1].message)
    assert rejoining.role is Role.FOLLOWER and rejoining.leader_id == 1
    assert leader.role is Role.LEADER and {leader.epoch, voter2.epoch, rejoining.epoch} == {epoch}


def test_a_fetch_from_a_prospective_counts_for_the_leader_like_any_voters():
    leader = make_pre_vote_leader(1)
    actions = request(leader, LATE + 1, fetch(3, leader.epoch, 0, 0), reply_to=3)
    assert leader.role is Role.LEADER and isinstance(actions[-1].message, FetchResponse)


def test_a_single_voter_needs_no_pre_votes():
    node = make_node(1, voters=(1,), **PRE_VOTE)
    node.handle(LATE, Tick())
    assert node.role is Role.LEADER and node.epoch == 1


def test_refused_by_a_majority_a_prospective_keeps_fetching_and_follows_the_leader_that_answers():
    # Five voters: the three others refuse (they fetch from the live leader 1); the Fetch to the
    # leader stays in flight through the refusals, and its answer ends the prospective state.
    node, _ = make_follower(3, 1, 4, voters=(1, 2, 3, 4, 5), **PRE_VOTE)
    actions = node.handle(LATE, Tick())
    assert node.role is Role.PROSPECTIVE
    for voter in (2, 4, 5):
        req = sent(actions, VoteRequest, to=voter)[-1]
        answer(node, LATE + 5, req, VoteResponse(int(ErrorCode.NONE), 1, 4, False))
    assert sent(node.handle(LATE + 10, Tick()), VoteRequest) == []  # this round is over
    fetch_response(node, actions, LATE + 500, FetchResponse(int(ErrorCode.NONE), 1, 4, 0))
    assert node.role is Role.FOLLOWER and node.leader_id == 1 and node.epoch == 4


def test_a_prospective_asks_its_old_leader_for_a_pre_vote_once_it_answers_that_it_no_longer_leads():
    # Node 1 led epoch 4 and restarted (behind node 3); voter 2 is down. Node 3's Fetch is answered
    # NOT_LEADER_OR_FOLLOWER with no leader: node 1 is the only majority left, so it must be asked.
    node, actions = prospective_after_fetch_timeout(3, leader=1, epoch=4)
    assert [r.destination for r in sent(actions, VoteRequest)] == [2]
    after = fetch_response(node, actions, LATE + 5, FetchResponse(int(ErrorCode.NOT_LEADER_OR_FOLLOWER), -1, 4, 0))
    assert node.role is Role.PROSPECTIVE and node.leader_id == -1 and node.epoch == 4
    assert of_type(after, LeaderChanged) == [LeaderChanged(4, -1)]
    later = node.handle(LATE + 200, Tick())  # past the back-off the refused Fetch earned
    (ask,) = sent(later, VoteRequest, to=1)
    assert ask.message.pre_vote and sent(later, FetchRequest) == []
    answer(node, LATE + 210, ask, VoteResponse(int(ErrorCode.NONE), -1, 4, True))
    assert node.role is Role.CANDIDATE and node.epoch == 5


def test_a_prospective_asks_its_old_leader_for_a_pre_vote_once_that_leader_asks_for_one():
    node, actions = prospective_after_fetch_timeout(3, leader=1, epoch=4)
    answered = request(node, LATE + 5, pre_vote(1, 4))  # a leader never asks: node 1 no longer leads
    (response,) = [a.message for a in answered if isinstance(getattr(a, "message", None), VoteResponse)]
    assert response.leader_id == -1  # the answer no longer names node 1 as the leader
    assert node.role is Role.PROSPECTIVE and node.leader_id == -1
    fetch_req = sent(actions, FetchRequest, to=1)[-1]  # its answer frees the one request slot to node 1
    after = answer(node, LATE + 6, fetch_req, FetchResponse(int(ErrorCode.NOT_LEADER_OR_FOLLOWER), -1, 4, 0))
    later = after + node.handle(LATE + 200, Tick())
    assert [r.destination for r in sent(later, VoteRequest)] == [1]


def test_a_prospective_whose_leader_answers_for_itself_keeps_it():
    node, actions = prospective_after_fetch_timeout(3, leader=1, epoch=4)
    fetch_response(node, actions, LATE + 5, FetchResponse(int(ErrorCode.UNKNOWN_SERVER_ERROR), 1, 4, 0))
    assert node.role is Role.PROSPECTIVE and node.leader_id == 1  # an error, but it still leads


# --- failover speed: no election timeout lost to a refusal or a split vote -------------------------


def test_a_prospective_asks_again_at_once_a_voter_that_refused_it_and_now_asks_for_pre_votes():
    # The voter refused while it still followed the leader; its own pre-vote request shows it no
    # longer does, so waiting for the next round (an election timeout) would only lose time.
    node = make_node(1, quorum_state=QuorumStateData(leader_epoch=3), **PRE_VOTE)
    actions = node.handle(LATE, Tick())
    answer(node, LATE + 5, sent(actions, VoteRequest, to=2)[-1], VoteResponse(int(ErrorCode.NONE), -1, 3, False))
    assert sent(node.handle(LATE + 6, Tick()), VoteRequest, to=2) == []
    out = request(node, LATE + 10, pre_vote(2, 3))
    assert granted(out)
    (again,) = sent(out, VoteRequest, to=2)
    assert again.message.pre_vote and node.role is Role.PROSPECTIVE
    answer(node, LATE + 15, again, VoteResponse(int(ErrorCode.NONE), -1, 3, True))
    assert node.role is Role.CANDIDATE and node.epoch == 4


def candidate_by_pre_vote(node_id: int, batches=()):
    node = make_node(node_id, quorum_state=QuorumStateData(leader_epoch=3), batches=batches, **PRE_VOTE)
    actions = node.handle(LATE, Tick())
    other = 2 if node_id != 2 else 1
    answer(node, LATE + 5, sent(actions, VoteRequest, to=other)[-1], VoteResponse(int(ErrorCode.NONE), -1, 3, True))
    assert node.role is Role.CANDIDATE and node.epoch == 4
    return node


def test_of_two_candidates_split_in_one_epoch_the_lower_id_stands_again_at_once():
    node = candidate_by_pre_vote(1)
    out = request(node, LATE + 10, VoteRequest(None, 4, 2, 0, 0))
    assert not granted(out) and node.voted_id == 1
    assert node.role is Role.PROSPECTIVE
    assert sorted(r.destination for r in sent(out, VoteRequest) if r.message.pre_vote) == [2, 3]


def test_of_two_candidates_split_in_one_epoch_the_one_behind_keeps_waiting():
    node = candidate_by_pre_vote(2)
    out = request(node, LATE + 10, VoteRequest(None, 4, 1, 0, 0))
    assert not granted(out)
    assert node.role is Role.CANDIDATE and node.epoch == 4 and sent(out, VoteRequest) == []
    ahead = candidate_by_pre_vote(3)
    assert ahead.log_end_offset == 0
    request(ahead, LATE + 10, VoteRequest(None, 4, 1, 0, 0))
    assert ahead.role is Role.CANDIDATE, "equal logs: the lower id (1) goes first"


def test_of_two_candidates_split_in_one_epoch_the_one_whose_log_is_ahead_stands_again_at_once():
    node = candidate_by_pre_vote(3, batches=chain((2, 3)))
    out = request(node, LATE + 10, VoteRequest(None, 4, 1, 3, 1))
    assert not granted(out) and node.role is Role.PROSPECTIVE
