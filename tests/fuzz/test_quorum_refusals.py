"""Issue 24 part 4: quorum RPCs from non-voters, and epochs at the int32 limit, change nothing.

The first test is the crash the fuzzer measured, replayed exactly: a combined node from
examples/combined.properties took an EndQuorumEpoch from "leader" 2147483647 (no voter) at epoch
2147483647, then bumped to 2147483648 at its next election and died writing the batch.
"""

from __future__ import annotations

from pathlib import Path

from harness.fuzz.inprocess import NodeUnderTest
from node.metadata.snapshot import read_header, snapshot_bytes
from node.protocol.broker_api import FetchSnapshotRequest, FetchSnapshotResponse, SnapshotId
from node.protocol.codec import BinaryCodec
from node.protocol.errors import ErrorCode
from node.protocol.messages import (
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchResponse,
    VoteRequest,
)
from node.raft.actions import Respond, Warn
from node.raft.base import INT32_MAX
from node.raft.events import Tick
from node.raft.quorum_state import QuorumStateData, Role
from tests.raft.helpers import make_leader, make_node, one, request

COMBINED = Path(__file__).resolve().parents[2] / "examples" / "combined.properties"
MAX = INT32_MAX
CODEC = BinaryCodec()


def _settled_leader() -> NodeUnderTest:
    node = NodeUnderTest.from_properties(COMBINED, seed=1)
    for _ in range(200):
        node.advance(50)
    assert node.raft.role is Role.LEADER
    return node


def test_end_quorum_epoch_from_a_non_voter_at_int32_max_neither_moves_nor_kills_the_combined_node():
    node = _settled_leader()
    epoch = node.raft.epoch
    frame = BinaryCodec().encode_request(5, EndQuorumEpochRequest(None, MAX, MAX, MAX, (1,)))
    assert node.feed_frame("CONTROLLER", frame, "attacker")
    for _ in range(400):  # well past every election and fetch timeout
        node.advance(50)  # a Finding (the old struct.error while writing the batch) fails the test
    assert node.raft.epoch == epoch and node.raft.role is Role.LEADER
    node.still_serves()


def _answer(node, message):
    return one(request(node, 100, message), Respond).message


def test_every_voter_only_rpc_from_a_non_voter_gets_inconsistent_voter_set_and_changes_nothing():
    node = make_node(1, quorum_state=QuorumStateData(leader_epoch=3, current_voters=(1, 2, 3)))
    before = (node.epoch, node.role, node.voted_id)
    for message in (
        VoteRequest(None, 9, 7, 9, 100),
        VoteRequest(None, 9, 7, 9, 100, pre_vote=True),
        BeginQuorumEpochRequest(None, 7, 9),
        EndQuorumEpochRequest(None, 7, 7, 9, (1,)),
    ):
        assert _answer(node, message).error_code == ErrorCode.INCONSISTENT_VOTER_SET, message
        assert (node.epoch, node.role, node.voted_id) == before


def test_negative_sender_ids_and_epochs_past_the_last_are_invalid_requests():
    node = make_node(1)
    for message in (
        VoteRequest(None, 2, -5, 0, 0),
        BeginQuorumEpochRequest(None, -1, 4),
        VoteRequest(None, MAX, 2, 0, 0),
        BeginQuorumEpochRequest(None, 2, MAX),
        EndQuorumEpochRequest(None, 2, 2, MAX, (1,)),
    ):
        assert _answer(node, message).error_code == ErrorCode.INVALID_REQUEST, message
        assert node.epoch == 0


def test_a_node_at_the_last_epoch_refuses_to_stand_and_warns_once():
    node = make_node(1, voters=(1,), quorum_state=QuorumStateData(leader_epoch=MAX, current_voters=(1,)))
    warnings = []
    for t in range(1, 40):
        warnings += [a for a in node.handle(t * 1000, Tick()) if isinstance(a, Warn)]
    assert node.epoch == MAX and node.role is not Role.CANDIDATE and node.role is not Role.LEADER
    assert len(warnings) == 1 and "last one" in warnings[0].message


def test_a_forged_fetch_naming_the_leader_itself_is_refused():
    leader, _ = make_leader(1)
    resp = _answer(leader, FetchRequest(None, 1, leader.epoch, leader.log_end_offset, leader.epoch))
    assert resp.error_code == ErrorCode.INVALID_REQUEST


def test_a_non_voter_with_a_foreign_cluster_id_cannot_stop_a_voter():
    node = make_node(1, cluster_id="ours")
    actions = request(node, 100, BeginQuorumEpochRequest("theirs", 7, 1))
    assert one(actions, Respond).message.error_code == ErrorCode.INCONSISTENT_VOTER_SET
    assert not [a for a in actions if type(a).__name__ == "Fatal"]


def test_a_begin_quorum_epoch_claiming_to_come_from_the_node_itself_is_refused_not_fatal():
    """Fuzzer finding: 'leader 1' (the receiving node's own id) with a foreign clusterId stopped it."""
    node = make_node(1, cluster_id="ours")
    actions = request(node, 100, BeginQuorumEpochRequest("theirs", 1, 5))
    assert one(actions, Respond).message.error_code == ErrorCode.INVALID_REQUEST
    assert not [a for a in actions if type(a).__name__ == "Fatal"] and node.epoch == 0


def test_an_answer_of_another_api_than_the_request_is_taken_as_lost():
    """Fuzzer finding: an ApiVersions answer to a VoteRequest raised TypeError in the Raft core."""
    from node.protocol.session import ApiVersionsResponse
    from tests.raft.helpers import answer, sent

    node = make_node(1)
    out = node.handle(10_000, Tick())  # the election timeout: a candidate asks 2 and 3
    vote = sent(out, VoteRequest, to=2)[0]
    answer(node, 10_001, vote, ApiVersionsResponse(0, ()))
    assert node.role is Role.CANDIDATE and node.epoch == 1


def test_the_fuzzer_reports_a_node_that_cuts_committed_records():
    """Loses nothing: whatever the input, a node never truncates or resets its log below a high
    watermark it has reached (a snapshot offered below it is refused: tests/raft/test_snapshots.py)."""
    import pytest

    from harness.fuzz.inprocess import Finding
    from node.raft.actions import ResetLog, TruncateLog

    node = _settled_leader()
    committed = node.raft.high_watermark
    assert committed > 0 and node.committed == committed
    assert node._carry_out(TruncateLog(committed)) == []  # at the high watermark: uncommitted records only
    for cut in (TruncateLog(committed - 1), ResetLog(0)):
        with pytest.raises(Finding, match=f"below the committed offset {committed}"):
            node._carry_out(cut)


def _follower_copying_a_snapshot(tmp_path: Path, sid: SnapshotId, data: bytes) -> NodeUnderTest:
    """Node 1 of three voters follows voter 2, which answers its Fetch with `sid` and then its
    FetchSnapshot with `data` in one chunk: all through the node's codec, as from the wire."""
    from harness.fuzz.inprocess import first_of_three_voters

    node = first_of_three_voters(tmp_path, seed=1)
    node.feed_frame("CONTROLLER", CODEC.encode_request(1, BeginQuorumEpochRequest(None, 2, 1)))
    assert (node.raft.role, node.raft.leader_id) == (Role.FOLLOWER, 2)
    for kind, reply in (
        (FetchRequest, FetchResponse(0, 2, 1, 0, snapshot_id=sid)),
        (FetchSnapshotRequest, FetchSnapshotResponse(0, 2, 1, sid, len(data), 0, data)),
    ):
        for _ in range(20):
            asked = [s for s in node.outstanding if isinstance(s.message, kind) and s.message.current_leader_epoch == 1]
            if asked:
                break
            node.advance(50)
        node.outstanding.remove(asked[-1])
        node.feed_response(asked[-1], CODEC.encode_response(asked[-1].correlation_id, reply))
    return node


def test_a_copied_snapshot_that_does_not_load_is_refused_and_the_follower_serves_on(tmp_path):
    """Found by reading what the fuzzer never reached (its `responses` target covered 40 % of
    node/raft/snapshots.py): a FetchSnapshot answer of bytes that are not a snapshot was written,
    replaced the follower's log and then raised SnapshotError in the process, stopping the node (and
    leaving a snapshot on disk no restart could load). Now the process loads it first; refused with one
    warning, nothing written, nothing reset, and the node still serves."""
    sound = snapshot_bytes(_settled_leader().process.image)  # a real snapshot, at 5-1
    header = read_header(sound).snapshot_id
    assert (header.end_offset, header.epoch) == (5, 1)
    for sid, data, why in (
        (SnapshotId(5, 1), b"\x00" * 64, "bad snapshot magic"),
        (SnapshotId(5, 1), sound[:-1] + bytes([sound[-1] ^ 1]), "CRC32C mismatch"),
        (SnapshotId(7, 1), sound, "it holds the state at 5-1"),
    ):
        node = _follower_copying_a_snapshot(tmp_path / f"{why[:3]}-{sid.end_offset}", sid, data)
        assert node.raft.snapshot_id is None and node.raft.log_start_offset == 0, why
        assert any("from node 2 refused: " in w and why in w for w in node.outcome.warnings), node.outcome.warnings
        node.still_serves()
    node = _follower_copying_a_snapshot(tmp_path / "sound", SnapshotId(5, 1), sound)
    assert node.raft.snapshot_id == SnapshotId(5, 1) and node.raft.log_start_offset == 5
    assert node.process.image.last_offset == 4 and not node.outcome.warnings  # loaded once, installed
