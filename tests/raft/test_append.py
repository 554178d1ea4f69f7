"""The append API (KIP-595 "Client Interactions"): commit on HWM, group commit, definite failures."""

from __future__ import annotations

from node.protocol.errors import ErrorCode
from node.protocol.messages import BeginQuorumEpochRequest, EpochEndOffset, FetchResponse
from node.raft.actions import AppendBatches, AppendCompleted, AppendFailed, Flush
from node.raft.events import Append, FlushCompleted
from node.raft.quorum_state import Role
from node.raft.records import MAX_BATCH_BYTES, LeaderChangeMessage, RecordBatch, encode_control
from tests.raft.helpers import (
    LATE,
    fetch,
    fetch_response,
    flush,
    flush_all,
    make_leader,
    of_type,
    one,
    request,
    win_election,
)

OK = int(ErrorCode.NONE)
LEADER_CHANGE_2 = encode_control(LeaderChangeMessage(2, (2, 3)))


def test_append_completes_only_when_high_watermark_passes():
    leader, _ = make_leader(1, cluster_id="c")
    base = leader.log_end_offset
    out = leader.handle(LATE + 1, Append("a", (b"x", b"y")))
    out += flush(leader, LATE + 2)
    assert not of_type(out, AppendCompleted)  # durable on the leader alone is not committed
    out = request(leader, LATE + 3, fetch(2, leader.epoch, base, leader.epoch))
    assert not of_type(out, AppendCompleted)  # voter 2 does not have it yet
    out = request(leader, LATE + 4, fetch(2, leader.epoch, base + 2, leader.epoch))
    assert one(out, AppendCompleted) == AppendCompleted("a", base, base + 1)


def test_append_concurrent_appends_during_fsync_grouped_into_one_batch_and_one_flush():
    leader, _ = make_leader(1, cluster_id="c")
    first = leader.handle(LATE + 1, Append("a", (b"a",)))
    assert one(first, AppendBatches) and one(first, Flush)
    queued = leader.handle(LATE + 2, Append("b", (b"b1", b"b2"))) + leader.handle(LATE + 3, Append("c", (b"c",)))
    assert not of_type(queued, AppendBatches) and not of_type(queued, Flush)
    out = leader.handle(LATE + 4, FlushCompleted(one(first, Flush).end_offset))
    (group,) = one(out, AppendBatches).batches
    assert group.records == (b"b1", b"b2", b"c") and group.epoch == leader.epoch
    assert one(out, Flush).end_offset == group.next_offset
    out = flush(leader, LATE + 5) + request(leader, LATE + 6, fetch(2, leader.epoch, group.next_offset, leader.epoch))
    done = {c.handle: (c.base_offset, c.last_offset) for c in of_type(out, AppendCompleted)}
    b = group.base_offset
    assert done == {"a": (b - 1, b - 1), "b": (b, b + 1), "c": (b + 2, b + 2)}


def test_append_not_leader_fails_definitely():
    follower = make_leader(1)[0]
    request(follower, LATE + 1, BeginQuorumEpochRequest(None, 2, 5))
    assert follower.role is Role.FOLLOWER
    failed = one(follower.handle(LATE + 2, Append("a", (b"x",))), AppendFailed)
    assert failed.handle == "a" and failed.error == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_append_queued_appends_fail_when_leadership_is_lost_before_writing():
    leader, _ = make_leader(1, cluster_id="c")
    leader.handle(LATE + 1, Append("a", (b"a",)))  # written, fsync in flight
    leader.handle(LATE + 2, Append("b", (b"b",)))  # queued behind the fsync
    out = request(leader, LATE + 3, BeginQuorumEpochRequest("c", 2, leader.epoch + 1))
    failed = one(out, AppendFailed)
    assert failed.handle == "b" and failed.error == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert not [f for f in of_type(out, AppendFailed) if f.handle == "a"]  # "a" may still commit


def test_append_oversized_refused_whole():
    leader, _ = make_leader(1, cluster_id="c", append_max_records=4)
    end = leader.log_end_offset
    too_many = one(leader.handle(LATE + 1, Append("n", tuple(b"x" for _ in range(5)))), AppendFailed)
    too_big = one(leader.handle(LATE + 2, Append("s", (b"x" * MAX_BATCH_BYTES,))), AppendFailed)
    empty = one(leader.handle(LATE + 3, Append("e", ())), AppendFailed)
    assert too_many.error == too_big.error == ErrorCode.MESSAGE_TOO_LARGE
    assert empty.error == ErrorCode.INVALID_REQUEST
    assert leader.log_end_offset == end


def test_append_grouping_respects_the_batch_record_limit():
    leader, _ = make_leader(1, cluster_id="c", append_max_records=3)
    first = leader.handle(LATE + 1, Append("a", (b"a",)))
    leader.handle(LATE + 2, Append("b", (b"b", b"b")))
    leader.handle(LATE + 3, Append("c", (b"c", b"c")))
    out = leader.handle(LATE + 4, FlushCompleted(one(first, Flush).end_offset))
    (group,) = one(out, AppendBatches).batches
    assert group.records == (b"b", b"b")  # "c" would exceed 3 records: it waits for the next fsync
    out = flush(leader, LATE + 5)
    assert one(out, AppendBatches).batches[0].records == (b"c", b"c")


def _deposed_leader_with_uncommitted_append(records: int = 1):
    """Leader 1 of epoch 1 writes append "a" at offset `at` (`records` records); nobody else has it.
    Then leader 2 of epoch 2 takes over and 1 follows it."""
    leader, _ = make_leader(1, cluster_id="c")
    at = leader.log_end_offset
    leader.handle(LATE + 1, Append("a", tuple(b"a" for _ in range(records))))
    flush(leader, LATE + 2)
    actions = request(leader, LATE + 3, BeginQuorumEpochRequest("c", 2, 2))
    assert leader.role is Role.FOLLOWER
    return leader, actions, at


def test_append_deposed_leader_append_completed_when_entry_survived():
    node, actions, at = _deposed_leader_with_uncommitted_append()
    new_leader_change = RecordBatch(at + 1, 2, (LEADER_CHANGE_2,), control=True)
    out = fetch_response(node, actions, LATE + 4, FetchResponse(OK, 2, 2, at + 2, records=(new_leader_change,)))
    assert one(out, AppendCompleted) == AppendCompleted("a", at, at)


def test_append_deposed_leader_append_failed_when_another_entry_was_committed():
    node, actions, at = _deposed_leader_with_uncommitted_append()
    out = fetch_response(node, actions, LATE + 4, FetchResponse(OK, 2, 2, at, diverging_epoch=EpochEndOffset(1, at)))
    assert not of_type(out, AppendFailed)  # truncation alone decides nothing
    replacement = RecordBatch(at, 2, (LEADER_CHANGE_2,), control=True)
    out = fetch_response(node, out, LATE + 6, FetchResponse(OK, 2, 2, at + 1, records=(replacement,)))
    failed = one(out, AppendFailed)
    assert failed.handle == "a" and failed.error == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_append_of_a_new_epoch_is_answered_while_an_old_epochs_append_waits_beyond_it():
    """Leader 1 of epoch 1 writes "a" (5 records) that nobody else has; leader 2 of epoch 2 replaces
    it with one record; 1 leads again in epoch 3 and writes "b" below where "a" ended. Once the high
    watermark passes "b", "b" is answered: "a" still waits (its offsets are not all decided) and must
    not hold it back."""
    node, actions, at = _deposed_leader_with_uncommitted_append(records=5)
    out = fetch_response(node, actions, LATE + 4, FetchResponse(OK, 2, 2, at, diverging_epoch=EpochEndOffset(1, at)))
    replacement = RecordBatch(at, 2, (LEADER_CHANGE_2,), control=True)
    out = fetch_response(node, out, LATE + 5, FetchResponse(OK, 2, 2, at + 1, records=(replacement,)))
    assert node.log_end_offset == at + 1 and node.high_watermark == at + 1
    out = flush_all(node, LATE + 5, out)
    elected = win_election(node, 4 * LATE)
    assert node.role is Role.LEADER and node.epoch == 3
    flush_all(node, 4 * LATE, elected)
    b_at = node.log_end_offset
    assert b_at < at + 4  # "b" lies below the end of "a"
    flush_all(node, 4 * LATE + 1, node.handle(4 * LATE + 1, Append("b", (b"b",))))
    out = request(node, 4 * LATE + 2, fetch(2, 3, b_at + 1, 3, cluster_id="c"))
    assert node.high_watermark == b_at + 1
    assert one(out, AppendCompleted) == AppendCompleted("b", b_at, b_at)
    assert not [f for f in of_type(out, AppendFailed) if f.handle == "a"]  # offset at+4 is not decided yet
