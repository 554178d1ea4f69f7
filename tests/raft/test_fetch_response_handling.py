"""KIP-595 "FetchResponse Handling": followers and observers following, truncating and learning."""

from __future__ import annotations

from node.protocol.errors import ErrorCode
from node.protocol.messages import EpochEndOffset, FetchRequest, FetchResponse, VoteRequest
from node.raft.actions import (
    AppendBatches,
    Fatal,
    Flush,
    HighWatermarkAdvanced,
    PersistQuorumState,
    TruncateLog,
)
from node.raft.events import FlushCompleted, Start, Tick
from node.raft.quorum_state import Role
from tests.raft.helpers import (
    answer,
    batch,
    chain,
    fetch_response,
    make_follower,
    make_node,
    of_type,
    one,
    sent,
)

OK = int(ErrorCode.NONE)


def test_fetch_response_handling_1_fenced_with_leader_follows_that_leader():
    node, actions = make_follower(2, leader=1, epoch=1)
    out = fetch_response(node, actions, 200, FetchResponse(int(ErrorCode.FENCED_LEADER_EPOCH), 3, 2, 0))
    assert node.role is Role.FOLLOWER and (node.leader_id, node.epoch) == (3, 2)
    assert one(out, PersistQuorumState).state.leader_id == 3
    assert sent(out, FetchRequest, to=3)


def test_fetch_response_handling_1_fenced_without_leader_asks_other_voters():
    node, actions = make_follower(2, leader=1, epoch=1)
    out = fetch_response(node, actions, 200, FetchResponse(int(ErrorCode.FENCED_LEADER_EPOCH), -1, 2, 0))
    assert node.role is Role.UNATTACHED and node.epoch == 2
    (req,) = sent(out, FetchRequest)
    assert req.destination in (1, 3)


def test_fetch_response_handling_2_diverging_epoch_known_locally_truncates_to_min():
    node, actions = make_follower(2, leader=1, epoch=3, batches=chain((2, 1), (1, 2), (2, 2)))  # epoch 2: [2,5)
    out = fetch_response(node, actions, 200, FetchResponse(OK, 1, 3, 0, diverging_epoch=EpochEndOffset(2, 3)))
    assert one(out, TruncateLog).offset == 3 and node.log_end_offset == 3
    # The next fetch asks from the truncation point with the epoch now at the end of the log.
    req = sent(out, FetchRequest, to=1)[-1].message
    assert (req.fetch_offset, req.last_fetched_epoch) == (3, 2)


def test_fetch_response_handling_2_diverging_epoch_unknown_locally_truncates_to_local_end_of_smaller_epoch():
    # The follower holds epoch 3 entries that the leader never had; the leader names epoch 2 ending at 4.
    node, actions = make_follower(2, leader=1, epoch=4, batches=chain((2, 1), (3, 3)))
    out = fetch_response(node, actions, 200, FetchResponse(OK, 1, 4, 0, diverging_epoch=EpochEndOffset(2, 4)))
    assert one(out, TruncateLog).offset == 2 and node.log.epoch_entries()[-1].epoch == 1


def test_fetch_response_handling_2_diverging_epoch_zero_truncates_to_its_offset():
    node, actions = make_follower(2, leader=1, epoch=4, batches=chain((2, 3)))
    out = fetch_response(node, actions, 200, FetchResponse(OK, 1, 4, 0, diverging_epoch=EpochEndOffset(0, 0)))
    assert one(out, TruncateLog).offset == 0 and node.log_end_offset == 0


def test_fetch_response_handling_2_never_truncates_below_high_watermark():
    node, actions = make_follower(2, leader=1, epoch=3, batches=chain((2, 1), (3, 2)))
    out = fetch_response(node, actions, 200, FetchResponse(OK, 1, 3, 4))
    assert node.high_watermark == 4
    out = fetch_response(node, out, 300, FetchResponse(OK, 1, 3, 4, diverging_epoch=EpochEndOffset(1, 2)))
    assert of_type(out, Fatal) and not of_type(out, TruncateLog)
    assert node.log_end_offset == 5


def test_fetch_response_handling_voter_fetches_again_only_after_flush():
    node, actions = make_follower(2, leader=1, epoch=1)
    records = (batch(0, 1, 2), batch(2, 1, 1))
    out = fetch_response(node, actions, 200, FetchResponse(OK, 1, 1, 0, records=records))
    assert one(out, AppendBatches).batches == records
    assert one(out, Flush).end_offset == 3
    assert not sent(out, FetchRequest)  # acknowledging 3 before fsync would let the leader count it
    assert not sent(node.handle(250, Tick()), FetchRequest)
    out = node.handle(260, FlushCompleted(3))
    req = sent(out, FetchRequest, to=1)[-1].message
    assert (req.fetch_offset, req.last_fetched_epoch) == (3, 1)


def test_fetch_response_handling_high_watermark_passed_on_bounded_by_log_end():
    node, actions = make_follower(2, leader=1, epoch=1)
    out = fetch_response(node, actions, 200, FetchResponse(OK, 1, 1, 10, records=(batch(0, 1, 2),)))
    assert one(out, HighWatermarkAdvanced).high_watermark == 2 and node.high_watermark == 2


def test_fetch_response_handling_invalid_cluster_id_is_fatal():
    node, actions = make_follower(2, leader=1, epoch=1, cluster_id="mine")
    out = fetch_response(node, actions, 200, FetchResponse(int(ErrorCode.INVALID_CLUSTER_ID), 1, 1, 0))
    assert "mine" in one(out, Fatal).reason


def test_fetch_response_handling_observer_discovers_leader_through_current_leader():
    observer = make_node(7, voters=(1, 2, 3), start=False)
    (req,) = sent(observer.handle(0, Start()), FetchRequest)
    assert req.destination in (1, 2, 3) and req.message.replica_id == 7
    out = answer(observer, 60, req, FetchResponse(int(ErrorCode.NOT_LEADER_OR_FOLLOWER), 3, 2, 0))
    assert observer.role is Role.FOLLOWER and observer.leader_id == 3 and observer.epoch == 2
    assert sent(out, FetchRequest, to=3)


def test_fetch_response_handling_observer_keeps_searching_while_no_leader_is_known():
    observer = make_node(7, voters=(1, 2, 3))
    destinations = set()
    now = 0
    for _ in range(30):
        now += 2_500
        out = observer.handle(now, Tick())
        for req in sent(out, FetchRequest):
            destinations.add(req.destination)
            answer(observer, now, req, FetchResponse(int(ErrorCode.NOT_LEADER_OR_FOLLOWER), -1, 0, 0))
    assert observer.role is Role.UNATTACHED and destinations == {1, 2, 3}


def test_fetch_response_handling_unattached_voter_discovers_leader():
    node = make_node(2, start=False)
    req = sent(node.handle(0, Start()), FetchRequest)
    assert req, "an unattached voter looks for the leader with Fetch"
    answer(node, 20, req[0], FetchResponse(int(ErrorCode.NOT_LEADER_OR_FOLLOWER), 1, 1, 0))
    assert node.role is Role.FOLLOWER and node.leader_id == 1


def test_fetch_response_handling_fetch_timeout_makes_voter_candidate_and_observer_search():
    node, _ = make_follower(2, leader=1, epoch=1)
    deadline = node.state.fetch_deadline
    node.handle(deadline - 1, Tick())
    assert node.role is Role.FOLLOWER
    out = node.handle(deadline, Tick())
    assert node.role is Role.CANDIDATE and node.epoch == 2 and sent(out, VoteRequest)

    observer, _ = make_follower(7, leader=1, epoch=1)
    observer.handle(observer.state.fetch_deadline, Tick())
    assert observer.role is Role.UNATTACHED and observer.epoch == 1


def test_fetch_response_handling_observer_does_not_refollow_the_leader_it_lost_on_hearsay():
    # Voters whose fetch timeout has not fired yet still name the dead leader: following them would
    # cost the observer a whole fetch timeout more; only the lost leader's own answer brings it back.
    observer, _ = make_follower(7, leader=1, epoch=1)
    now = observer.state.fetch_deadline
    out = observer.handle(now, Tick())
    assert observer.role is Role.UNATTACHED
    for _ in range(20):
        for req in sent(out, FetchRequest):
            if req.destination == 1:
                out = answer(observer, now, req, FetchResponse(OK, 1, 1, 0))
                assert observer.role is Role.FOLLOWER and observer.leader_id == 1
                return
            out = answer(observer, now, req, FetchResponse(int(ErrorCode.NOT_LEADER_OR_FOLLOWER), 1, 1, 0))
            assert observer.role is Role.UNATTACHED, "followed a dead leader on a voter's word"
        now += 1_000
        out += observer.handle(now, Tick())
    raise AssertionError("the observer never asked the lost leader itself")


def test_fetch_response_handling_observer_follows_a_new_epochs_leader_after_losing_one():
    observer, _ = make_follower(7, leader=1, epoch=1)
    now = observer.state.fetch_deadline
    (req,) = sent(observer.handle(now, Tick()), FetchRequest)
    answer(observer, now, req, FetchResponse(int(ErrorCode.NOT_LEADER_OR_FOLLOWER), 2, 2, 0))
    assert observer.role is Role.FOLLOWER and observer.leader_id == 2 and observer.epoch == 2


def test_fetch_response_handling_successful_fetch_resets_fetch_timeout():
    node, actions = make_follower(2, leader=1, epoch=1)
    first = node.state.fetch_deadline
    out = fetch_response(node, actions, 1_500, FetchResponse(OK, 1, 1, 0))
    assert node.state.fetch_deadline == 1_500 + node.config.fetch_timeout_ms > first
    node.handle(first, Tick())
    assert node.role is Role.FOLLOWER
    assert sent(out, FetchRequest)


def test_fetch_response_handling_error_from_leader_backs_off_before_retrying():
    node, actions = make_follower(2, leader=1, epoch=1)
    out = fetch_response(node, actions, 200, FetchResponse(int(ErrorCode.NOT_LEADER_OR_FOLLOWER), 1, 1, 0))
    assert not sent(out, FetchRequest)
    later = node.handle(200 + node.config.retry_backoff_ms, Tick())
    assert sent(later, FetchRequest, to=1)


def test_fetch_response_handling_2_diverging_offset_inside_a_batch_cuts_the_whole_batch():
    node, actions = make_follower(2, leader=1, epoch=3, batches=chain((2, 1), (3, 2)))  # one batch [2,5)
    out = fetch_response(node, actions, 200, FetchResponse(OK, 1, 3, 0, diverging_epoch=EpochEndOffset(2, 3)))
    assert one(out, TruncateLog).offset == 2


def test_fetch_response_handling_records_of_an_epoch_before_the_logs_last_are_not_appended():
    """`kchaos fuzz --seed 40001`, input 2,004,408: an answer from the leader carried, at the follower's
    log end, a batch of an epoch older than the log's last. Appending it raised `LogError` in the core
    and stopped the node. A leader that validated the fetch holds nothing older after it, so such
    records are not applied (nor any after them), and the next fetch asks again from the same place."""
    node, actions = make_follower(2, leader=1, epoch=3, batches=chain((2, 1), (1, 2)))  # ends at 3, epoch 2
    out = fetch_response(node, actions, 200, FetchResponse(OK, 1, 3, 0, records=(batch(3, 1), batch(4, 3))))
    assert not of_type(out, AppendBatches) and not of_type(out, Fatal)
    assert node.log_end_offset == 3 and node.log.last_epoch == 2 and node.role is Role.FOLLOWER
    # A batch of the log's own last epoch and then a backwards one: the good prefix is kept
    out = fetch_response(node, out, 300, FetchResponse(OK, 1, 3, 0, records=(batch(3, 2), batch(4, 1))))
    assert one(out, AppendBatches).batches == (batch(3, 2),) and node.log_end_offset == 4
    out = node.handle(310, FlushCompleted(4))
    req = sent(out, FetchRequest, to=1)[-1].message
    assert (req.fetch_offset, req.last_fetched_epoch) == (4, 2)
    out = fetch_response(node, out, 400, FetchResponse(OK, 1, 3, 0, records=(batch(4, 3),)))
    assert one(out, AppendBatches).batches == (batch(4, 3),) and node.log.last_epoch == 3
