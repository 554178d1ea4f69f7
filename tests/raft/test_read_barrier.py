"""Linearizable reads: a leader answers a read barrier only after committing an entry of its epoch
and hearing Fetches from a majority (in its epoch) that arrived after the barrier."""

from __future__ import annotations

from node.protocol.errors import ErrorCode
from node.protocol.messages import VoteRequest
from node.raft.actions import ReadBarrierCompleted, ReadBarrierFailed, Respond
from node.raft.events import ReadBarrier
from tests.raft.helpers import LATE, fetch, make_follower, make_leader, of_type, one, request


def committed_leader(voters=(1, 2, 3)):
    """A leader whose LeaderChange record is committed (voter 2 fetched past it)."""
    leader, _ = make_leader(1, voters=voters)
    end = leader.log_end_offset
    request(leader, LATE + 1, fetch(2, leader.epoch, end, leader.epoch))
    assert leader.high_watermark == end
    return leader


def test_read_barrier_waits_for_a_majority_fetch_after_it_arrived():
    leader = committed_leader()
    out = leader.handle(LATE + 2, ReadBarrier("r1"))
    assert not of_type(out, ReadBarrierCompleted), "the fetch that arrived before the barrier cannot confirm it"
    end = leader.log_end_offset
    out = request(leader, LATE + 3, fetch(3, leader.epoch, end, leader.epoch))
    done = one(out, ReadBarrierCompleted)
    assert done.handle == "r1" and done.read_offset == leader.high_watermark


def test_read_barrier_needs_an_entry_of_the_current_epoch_committed():
    leader, _ = make_leader(1)
    out = leader.handle(LATE + 1, ReadBarrier("r"))
    # Voter 3 fetches from the start: it confirms leadership but commits nothing of this epoch yet.
    out = request(leader, LATE + 2, fetch(3, leader.epoch, 0, 0))
    assert not of_type(out, ReadBarrierCompleted)
    end = leader.log_end_offset
    out = request(leader, LATE + 3, fetch(2, leader.epoch, end, leader.epoch))
    assert one(out, ReadBarrierCompleted).handle == "r"


def test_read_barrier_answers_parked_fetches_so_followers_come_back_at_once():
    leader = committed_leader()
    end = leader.log_end_offset
    parked = request(leader, LATE + 2, fetch(3, leader.epoch, end, leader.epoch, max_wait_ms=500), cid=41)
    assert not of_type(parked, Respond)
    out = leader.handle(LATE + 3, ReadBarrier("r"))
    assert [r.correlation_id for r in of_type(out, Respond)] == [41]


def test_read_barrier_on_a_single_voter_completes_once_committed():
    leader, _ = make_leader(1, voters=(1,))
    out = leader.handle(LATE + 1, ReadBarrier("solo"))
    assert one(out, ReadBarrierCompleted).read_offset == leader.high_watermark


def test_read_barrier_fails_on_a_follower_and_on_lost_leadership():
    follower, _ = make_follower(2, leader=1, epoch=1)
    failed = one(follower.handle(300, ReadBarrier("f")), ReadBarrierFailed)
    assert failed.error == ErrorCode.NOT_LEADER_OR_FOLLOWER
    leader = committed_leader()
    leader.handle(LATE + 2, ReadBarrier("lost"))
    # A vote request of a later epoch deposes the leader before any confirmation.
    out = request(leader, LATE + 3, VoteRequest(None, leader.epoch + 1, 3, leader.last_epoch, leader.log_end_offset))
    assert one(out, ReadBarrierFailed).handle == "lost"
