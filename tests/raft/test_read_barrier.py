"""Linearizable reads: a leader answers a read barrier only once it commits an entry that no voter
could have received before the barrier arrived (a ReadMarker it appends, or any entry still
unshipped then). Fetches that were sent before the barrier, however late they are processed, must
not confirm it: that is how a leader thawed after SIGSTOP answered from stale state."""

from __future__ import annotations

from node.protocol.errors import ErrorCode
from node.protocol.messages import VoteRequest
from node.raft.actions import AppendBatches, ReadBarrierCompleted, ReadBarrierFailed, Respond
from node.raft.events import Append, FlushCompleted, ReadBarrier
from node.raft.records import ReadMarkerMessage, decode_control
from tests.raft.helpers import LATE, fetch, make_follower, make_leader, of_type, one, request


def committed_leader(voters=(1, 2, 3)):
    """A leader whose LeaderChange record was shipped to voter 2 and committed by its next Fetch."""
    leader, _ = make_leader(1, voters=voters)
    request(leader, LATE + 1, fetch(2, leader.epoch, 0, 0))  # answered with the epoch's first batches
    end = leader.log_end_offset
    request(leader, LATE + 1, fetch(2, leader.epoch, end, leader.epoch))
    assert leader.high_watermark == end
    return leader


def appended_markers(actions) -> list[int]:
    return [
        b.base_offset
        for append in of_type(actions, AppendBatches)
        for b in append.batches
        if b.control and isinstance(decode_control(b.records[0]), ReadMarkerMessage)
    ]


def test_fetches_sent_before_the_barrier_do_not_confirm_it():
    leader = committed_leader()
    end = leader.log_end_offset
    out = leader.handle(LATE + 2, ReadBarrier("r1"))
    assert appended_markers(out) == [end], "everything was shipped already: a marker must be appended"
    leader.handle(LATE + 2, FlushCompleted(leader.log_end_offset))
    # Both voters' Fetches at the old end are processed after the barrier, but could have been sent
    # before it (buffered while the leader was frozen): they must not complete it.
    for voter in (2, 3):
        out = request(leader, LATE + 3, fetch(voter, leader.epoch, end, leader.epoch))
        assert not of_type(out, ReadBarrierCompleted), f"voter {voter}'s stale-able fetch confirmed the read"
    # Voter 3 now acknowledges the marker: it received it after the barrier, so it was still ours then.
    out = request(leader, LATE + 4, fetch(3, leader.epoch, leader.log_end_offset, leader.epoch))
    done = one(out, ReadBarrierCompleted)
    assert done.handle == "r1" and done.read_offset == leader.high_watermark > end


def test_a_burst_of_reads_shares_one_marker_and_unshipped_writes_need_none():
    leader = committed_leader()
    end = leader.log_end_offset
    out = leader.handle(LATE + 2, ReadBarrier("a")) + leader.handle(LATE + 2, ReadBarrier("b"))
    assert len(appended_markers(out)) == 1, "the second read may rely on the first read's unshipped marker"
    leader.handle(LATE + 2, FlushCompleted(leader.log_end_offset))
    assert not of_type(request(leader, LATE + 3, fetch(2, leader.epoch, end, leader.epoch)), ReadBarrierCompleted)
    out = request(leader, LATE + 3, fetch(2, leader.epoch, leader.log_end_offset, leader.epoch))
    assert {d.handle for d in of_type(out, ReadBarrierCompleted)} == {"a", "b"}
    # The marker has been shipped: a read arriving now cannot rely on it and needs one of its own.
    assert len(appended_markers(leader.handle(LATE + 4, ReadBarrier("c")))) == 1


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


def test_a_read_behind_an_append_waiting_for_a_flush_writes_no_marker_ahead_of_it():
    """The append is the unshipped entry the read waits for; a marker written first would take the
    offset `append_end_offset` promised it, and the controller decides requests on those promises
    (issue 24: refusals answered against an uncommitted partition epoch)."""
    leader = committed_leader()
    end = leader.log_end_offset
    leader.handle(LATE + 2, Append("w1", (b"one",)))  # written at `end`; its flush is in flight
    request(leader, LATE + 3, fetch(2, leader.epoch, end, leader.epoch))  # ...and shipped
    promised = leader.append_end_offset
    assert not of_type(leader.handle(LATE + 4, Append("w2", (b"two",))), AppendBatches)  # waits for the flush
    assert appended_markers(leader.handle(LATE + 5, ReadBarrier("r"))) == []
    out = leader.handle(LATE + 6, FlushCompleted(end + 1))
    assert [b.base_offset for a in of_type(out, AppendBatches) for b in a.batches] == [promised]
    leader.handle(LATE + 7, FlushCompleted(leader.log_end_offset))
    out = request(leader, LATE + 8, fetch(2, leader.epoch, leader.log_end_offset, leader.epoch))
    assert one(out, ReadBarrierCompleted).read_offset == leader.high_watermark == promised + 1
