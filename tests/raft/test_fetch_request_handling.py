"""KIP-595 "FetchRequest Handling": the leader's checks and its high-watermark rules."""

from __future__ import annotations

from node.protocol.errors import ErrorCode
from node.protocol.messages import EpochEndOffset, FetchResponse
from node.raft.actions import HighWatermarkAdvanced, Respond
from node.raft.events import Append, Tick
from node.raft.quorum_state import QuorumStateData, Role
from tests.raft.helpers import LATE, chain, fetch, flush_all, make_follower, make_leader, of_type, one, request

FIVE = (1, 2, 3, 4, 5)


def fetched(actions) -> FetchResponse:
    return one(actions, Respond).message


def leader_with_log(voters=(1, 2, 3), spec=((2, 1), (1, 2))):
    """Leader of epoch 3 whose log holds older epochs' entries; its LeaderChange sits at the end."""
    qs = QuorumStateData(leader_epoch=2, current_voters=tuple(voters))
    leader, _ = make_leader(1, voters=voters, quorum_state=qs, batches=chain(*spec), cluster_id="c")
    assert leader.epoch == max(3, spec[-1][1] + 1)
    return leader


def grow(leader, now, records=3):
    """Append `records` records and fsync them; returns the new log end."""
    out = leader.handle(now, Append(f"h{now}", tuple(b"x" for _ in range(records))))
    flush_all(leader, now, out)
    return leader.log_end_offset


def test_fetch_request_handling_1_rejects_mismatched_cluster_id():
    leader, _ = make_leader(1, cluster_id="c")
    resp = fetched(request(leader, LATE + 1, fetch(2, leader.epoch, 0, 0, cluster_id="other")))
    assert resp.error_code == ErrorCode.INVALID_CLUSTER_ID and resp.leader_id == 1
    ok = fetched(request(leader, LATE + 1, fetch(2, leader.epoch, 0, 0, cluster_id=None)))
    assert ok.error_code == ErrorCode.NONE and ok.records


def test_fetch_request_handling_1_only_the_leader_rejects_a_cluster_id():
    node, _ = make_follower(2, leader=1, epoch=1, cluster_id="c")
    resp = fetched(request(node, 200, fetch(3, 1, 0, 0, cluster_id="other")))
    assert resp.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER and resp.leader_id == 1


def test_fetch_request_handling_2_fenced_leader_epoch_for_smaller_epoch():
    leader = leader_with_log()
    resp = fetched(request(leader, LATE + 1, fetch(2, 2, 3, 2)))
    assert resp.error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert (resp.leader_id, resp.leader_epoch) == (1, 3) and not resp.records


def test_fetch_request_handling_2_unknown_leader_epoch_for_larger_epoch():
    leader = leader_with_log()
    resp = fetched(request(leader, LATE + 1, fetch(2, 4, 3, 2)))
    assert resp.error_code == ErrorCode.UNKNOWN_LEADER_EPOCH and not resp.records


def test_fetch_request_handling_2_non_leader_names_the_leader():
    node, _ = make_follower(2, leader=1, epoch=1)
    resp = fetched(request(node, 200, fetch(9, 1, 0, 0)))
    assert resp.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER and (resp.leader_id, resp.leader_epoch) == (1, 1)


def test_fetch_request_handling_3_consistent_fetch_returns_records():
    leader = leader_with_log()  # epochs: 1 at [0,2), 2 at [2,3), 3 at [3,4)
    resp = fetched(request(leader, LATE + 1, fetch(2, 3, 2, 1)))
    assert resp.diverging_epoch is None
    assert [b.base_offset for b in resp.records] == [2, 3]


def test_fetch_request_handling_3_start_of_next_epoch_is_consistent():
    leader = leader_with_log()
    resp = fetched(request(leader, LATE + 1, fetch(2, 3, 3, 2)))  # offset 3 starts epoch 3
    assert resp.diverging_epoch is None and [b.base_offset for b in resp.records] == [3]


def test_fetch_request_handling_3_last_fetched_epoch_past_its_end_diverges():
    leader = leader_with_log()
    resp = fetched(request(leader, LATE + 1, fetch(2, 3, 5, 2)))  # follower has epoch 2 up to 5
    assert resp.error_code == ErrorCode.NONE and not resp.records
    assert resp.diverging_epoch == EpochEndOffset(2, 3)


def test_fetch_request_handling_3_unknown_epoch_diverges_to_largest_smaller_epoch():
    leader = leader_with_log(spec=((2, 1), (2, 4)))  # epochs 1 at [0,2), 4 at [2,4): leader epoch 5
    resp = fetched(request(leader, LATE + 1, fetch(2, leader.epoch, 3, 3)))  # follower's epoch 3 is unknown
    assert resp.diverging_epoch == EpochEndOffset(1, 2) and not resp.records


def test_fetch_request_handling_3_offset_inside_a_batch_is_sent_back_to_its_start():
    leader = leader_with_log(spec=((3, 1),))
    resp = fetched(request(leader, LATE + 1, fetch(2, leader.epoch, 1, 1)))
    assert resp.diverging_epoch == EpochEndOffset(1, 0)


def test_fetch_request_handling_3_negative_offset_is_out_of_range():
    leader = leader_with_log()
    resp = fetched(request(leader, LATE + 1, fetch(2, leader.epoch, -5, 0)))
    assert resp.error_code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_fetch_request_handling_4_hwm_waits_for_an_entry_of_the_current_epoch():
    """The Figure-8 rule: older entries on a majority are not committed by a new leader alone."""
    leader = leader_with_log()
    assert leader.high_watermark == 0
    # Voter 2 has everything before this epoch's LeaderChange (offset 3): a majority holds [0, 3).
    out = request(leader, LATE + 1, fetch(2, 3, 3, 2))
    assert leader.high_watermark == 0 and not of_type(out, HighWatermarkAdvanced)
    # Once it holds the LeaderChange of epoch 3, everything up to it commits at once.
    out = request(leader, LATE + 2, fetch(2, 3, 4, 3))
    assert leader.high_watermark == 4 and one(out, HighWatermarkAdvanced).high_watermark == 4


def test_fetch_request_handling_4_hwm_is_largest_offset_on_a_majority():
    leader, _ = make_leader(1, voters=FIVE, cluster_id="c")  # LeaderChange at [0,1)
    end = grow(leader, LATE + 1, records=3)  # [1,4)
    assert end == 4
    request(leader, LATE + 2, fetch(2, leader.epoch, 4, leader.epoch))
    assert leader.high_watermark == 0  # two of five
    request(leader, LATE + 3, fetch(3, leader.epoch, 1, leader.epoch))
    assert leader.high_watermark == 1  # sorted [4, 4, 1, ...]: the third largest
    request(leader, LATE + 4, fetch(4, leader.epoch, 4, leader.epoch))
    assert leader.high_watermark == 4


def test_fetch_request_handling_4_leader_counts_its_own_copy_only_after_fsync():
    leader, _ = make_leader(1, voters=FIVE, cluster_id="c")
    out = leader.handle(LATE + 1, Append("a", (b"x", b"y")))  # [1,3), not yet fsynced
    request(leader, LATE + 2, fetch(2, leader.epoch, 3, leader.epoch))
    request(leader, LATE + 2, fetch(3, leader.epoch, 3, leader.epoch))
    assert leader.high_watermark == 1  # the leader's own durable copy ends at 1
    flush_all(leader, LATE + 3, out)
    assert leader.high_watermark == 3


def test_fetch_request_handling_4_observers_do_not_count():
    leader, _ = make_leader(1, cluster_id="c")
    end = leader.log_end_offset
    request(leader, LATE + 1, fetch(7, leader.epoch, end, leader.epoch))
    request(leader, LATE + 1, fetch(8, leader.epoch, end, leader.epoch))
    assert leader.high_watermark == 0
    request(leader, LATE + 2, fetch(2, leader.epoch, end, leader.epoch))
    assert leader.high_watermark == end


def test_fetch_request_handling_4_hwm_never_goes_back():
    leader, _ = make_leader(1, cluster_id="c")
    end = grow(leader, LATE + 1)
    request(leader, LATE + 2, fetch(2, leader.epoch, end, leader.epoch))
    assert leader.high_watermark == end
    request(leader, LATE + 3, fetch(2, leader.epoch, 1, leader.epoch))  # voter 2 lost its tail
    assert leader.high_watermark == end


def test_fetch_request_handling_parked_fetch_completes_on_append():
    leader, _ = make_leader(1, cluster_id="c")
    end = leader.log_end_offset
    out = request(leader, LATE + 1, fetch(2, leader.epoch, end, leader.epoch, max_wait_ms=500), cid=11)
    assert not of_type(out, Respond)
    out = leader.handle(LATE + 2, Append("a", (b"x",)))
    resp = one(out, Respond)
    assert resp.correlation_id == 11 and [b.base_offset for b in resp.message.records] == [end]


def test_fetch_request_handling_parked_fetch_completes_on_hwm_advance():
    leader, _ = make_leader(1, cluster_id="c")
    end = leader.log_end_offset
    parked = fetch(7, leader.epoch, end, leader.epoch, max_wait_ms=500)
    assert not of_type(request(leader, LATE + 1, parked, reply_to="observer"), Respond)
    out = request(
        leader, LATE + 2, fetch(2, leader.epoch, end, leader.epoch), reply_to="voter"
    )  # voter 2 commits [0, end)
    answers = {r.reply_to: r.message for r in of_type(out, Respond)}
    assert len(answers) == 2
    assert all(m.high_watermark == end and not m.records for m in answers.values())


def test_fetch_request_handling_parked_fetch_completes_on_timeout():
    leader, _ = make_leader(1, cluster_id="c")
    end = leader.log_end_offset
    request(leader, LATE + 1, fetch(7, leader.epoch, end, leader.epoch, max_wait_ms=500))
    assert not of_type(leader.handle(LATE + 500, Tick()), Respond)
    resp = one(leader.handle(LATE + 501, Tick()), Respond).message
    assert resp.error_code == ErrorCode.NONE and not resp.records


def test_fetch_request_handling_parked_fetches_fail_when_leadership_is_lost():
    leader, _ = make_leader(1, cluster_id="c")
    end = leader.log_end_offset
    request(leader, LATE + 1, fetch(7, leader.epoch, end, leader.epoch, max_wait_ms=500))
    from node.protocol.messages import BeginQuorumEpochRequest

    out = request(leader, LATE + 2, BeginQuorumEpochRequest("c", 3, leader.epoch + 1), reply_to="b")
    parked = [r for r in of_type(out, Respond) if r.reply_to == "peer"]
    assert parked and parked[0].message.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert leader.role is Role.FOLLOWER
