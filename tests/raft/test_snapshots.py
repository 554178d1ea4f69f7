"""Snapshots and the log start (KIP-630, as KIP-595 uses it): making one, serving it with
FetchSnapshot, installing it on a replica below the leader's log start, and restarting from one."""

from __future__ import annotations

import random

import pytest

from node.protocol.broker_api import FetchSnapshotRequest, FetchSnapshotResponse
from node.protocol.errors import ErrorCode
from node.protocol.messages import EpochEndOffset, FetchRequest, FetchResponse, SnapshotId, VoteRequest
from node.raft.actions import (
    Action,
    DeleteLogBefore,
    Fatal,
    Flush,
    HighWatermarkAdvanced,
    LoadSnapshot,
    PersistClusterId,
    ResetLog,
    Respond,
    SendRequest,
    TruncateLog,
    Warn,
    WriteSnapshot,
)
from node.raft.config import RaftConfig
from node.raft.events import (
    Append,
    CreateSnapshot,
    FlushCompleted,
    RequestReceived,
    ResponseReceived,
    SnapshotWritten,
    Start,
    Tick,
)
from node.raft.log import LogError, RaftLog
from node.raft.node import RaftNode
from node.raft.quorum_state import QuorumStateData, Role
from node.raft.records import ClusterIdMessage, decode_control
from node.raft.storage import LoadedSnapshot, LoadedState, StorageError, trim_to_snapshot
from tests.raft.helpers import (
    LATE,
    answer,
    batch,
    chain,
    fetch,
    fetch_response,
    flush_all,
    make_follower,
    make_leader,
    of_type,
    one,
    request,
    sent,
)

DATA = bytes(range(256)) * 3  # 768 opaque snapshot bytes


def responded(actions: list[Action]):
    return one(actions, Respond).message


def grow(leader: RaftNode, now: int, records: int = 3) -> int:
    """Append records on a leader and fsync them; returns the new log end."""
    out = leader.handle(now, Append(f"h{now}", tuple(b"x%d" % i for i in range(records))))
    flush_all(leader, now, out)
    return leader.log_end_offset


def committed_leader(records: int = 3) -> RaftNode:
    """A leader of epoch 1 (voters 1, 2, 3) whose whole log is committed (voter 2 fetched it all)."""
    leader, _ = make_leader(1, cluster_id="c")
    end = grow(leader, LATE + 1, records)
    request(leader, LATE + 2, fetch(2, leader.epoch, end, leader.last_epoch))
    assert leader.high_watermark == end
    return leader


def snapshot_at(node: RaftNode, now: int, end: int, data: bytes = DATA) -> list[Action]:
    """CreateSnapshot, then report the write durable; returns every action of both steps."""
    out = node.handle(now, CreateSnapshot(end, data))
    write = one(out, WriteSnapshot)
    return out + node.handle(now, SnapshotWritten(write.snapshot_id))


def restarted(snapshot: SnapshotId, batches=(), node_id: int = 1, data: bytes = DATA, **kw) -> RaftNode:
    qs = QuorumStateData(leader_epoch=snapshot.epoch, current_voters=(1, 2, 3))
    cfg = RaftConfig(node_id, frozenset((1, 2, 3)), **kw)
    loaded = LoadedState(qs, tuple(batches), "c", snapshot=LoadedSnapshot(snapshot, data))
    return RaftNode(cfg, loaded, random.Random(0))


# --- making a snapshot and moving the log start ------------------------------------------------------


def test_snapshot_is_written_first_and_the_log_start_moves_only_once_it_is_durable():
    leader = committed_leader()
    end = leader.high_watermark
    out = leader.handle(LATE + 3, CreateSnapshot(end, DATA))
    write = one(out, WriteSnapshot)
    assert write.snapshot_id == SnapshotId(end, leader.epoch) and write.data == DATA
    assert not of_type(out, DeleteLogBefore) and leader.log_start_offset == 0 and leader.snapshot_id is None
    out = leader.handle(LATE + 4, SnapshotWritten(write.snapshot_id))
    assert one(out, DeleteLogBefore).offset == end
    assert leader.log_start_offset == end and leader.snapshot_id == write.snapshot_id
    assert leader.log_end_offset == end and leader.last_epoch == leader.epoch  # empty log keeps its epoch
    assert leader.read_committed(0) == []  # below the log start: the state machine loads the snapshot


def test_snapshot_epoch_is_the_epoch_of_the_record_before_its_end():
    qs = QuorumStateData(leader_epoch=2, current_voters=(1, 2, 3))
    leader, _ = make_leader(1, quorum_state=qs, batches=chain((2, 1), (1, 2)), cluster_id="c")
    end = grow(leader, LATE + 1)
    request(leader, LATE + 2, fetch(2, leader.epoch, end, leader.last_epoch))
    assert one(leader.handle(LATE + 3, CreateSnapshot(2, DATA)), WriteSnapshot).snapshot_id == SnapshotId(2, 1)
    assert one(leader.handle(LATE + 3, CreateSnapshot(3, DATA)), WriteSnapshot).snapshot_id == SnapshotId(3, 2)


def test_log_start_moves_only_to_the_snapshot_end_and_the_rest_is_still_served():
    leader = committed_leader()
    middle = leader.log.batches()[1].base_offset  # after the LeaderChange batch
    snapshot_at(leader, LATE + 3, middle)
    assert leader.log_start_offset == middle
    resp = responded(request(leader, LATE + 4, fetch(2, leader.epoch, middle, leader.log.start_epoch)))
    assert resp.snapshot_id is None and resp.records and resp.records[0].base_offset == middle


@pytest.mark.parametrize(
    ("end", "reason"),
    [(99, "above the high watermark"), (2, "not a batch boundary")],
)
def test_create_snapshot_refuses_what_the_state_machine_cannot_have_applied(end, reason):
    leader = committed_leader()  # LeaderChange at 0, three records at [1, 4)
    with pytest.raises(LogError, match=reason):
        leader.handle(LATE + 3, CreateSnapshot(end, DATA))


def test_create_snapshot_at_or_below_the_current_snapshot_is_ignored():
    leader = committed_leader()
    snapshot_at(leader, LATE + 3, leader.high_watermark)
    assert leader.handle(LATE + 4, CreateSnapshot(1, DATA)) == []


# --- the leader serves the snapshot ------------------------------------------------------------------


def leader_with_snapshot() -> tuple[RaftNode, SnapshotId]:
    leader = committed_leader()
    snapshot_at(leader, LATE + 3, leader.high_watermark)
    end = grow(leader, LATE + 4, 2)  # more records above the snapshot
    assert leader.log_end_offset == end
    assert leader.snapshot_id is not None
    return leader, leader.snapshot_id


def test_fetch_below_the_log_start_is_answered_with_the_snapshot_id():
    leader, sid = leader_with_snapshot()
    resp = responded(request(leader, LATE + 5, fetch(3, leader.epoch, 0, 0)))
    assert resp.error_code == ErrorCode.NONE and not resp.records and resp.diverging_epoch is None
    assert resp.snapshot_id == sid and resp.cluster_id == "c" and resp.log_start_offset == sid.end_offset


@pytest.mark.parametrize(
    ("offset", "last_epoch", "needs_snapshot"),
    [
        ("start", "snap", False),  # exactly at the snapshot: consistent
        ("start", 0, True),  # at the log start with another epoch than the snapshot's
        ("start+1", 0, True),  # an epoch older than the snapshot's
        ("start+1", "snap", False),  # inside the log: the usual epoch checks apply
    ],
)
def test_fetch_at_the_log_start_must_agree_with_the_snapshot_epoch(offset, last_epoch, needs_snapshot):
    leader, sid = leader_with_snapshot()
    fetch_offset = sid.end_offset + (1 if offset == "start+1" else 0)
    epoch = sid.epoch if last_epoch == "snap" else last_epoch
    resp = responded(request(leader, LATE + 5, fetch(3, leader.epoch, fetch_offset, epoch)))
    assert (resp.snapshot_id == sid) is needs_snapshot


def fetch_snapshot(leader: RaftNode, sid: SnapshotId, position: int, max_bytes: int = 300, epoch=None):
    epoch = leader.epoch if epoch is None else epoch
    msg = FetchSnapshotRequest("c", 2, max_bytes, epoch, sid, position)
    return responded(leader.handle(LATE + 6, RequestReceived("peer", 9, msg)))


def test_leader_answers_fetch_snapshot_in_chunks():
    leader, sid = leader_with_snapshot()
    got, position = [], 0
    while position < len(DATA):
        resp = fetch_snapshot(leader, sid, position)
        assert resp.error_code == ErrorCode.NONE and resp.size == len(DATA) and resp.position == position
        assert resp.snapshot_id == sid and 0 < len(resp.unaligned_records) <= 300
        got.append(resp.unaligned_records)
        position += len(resp.unaligned_records)
    assert b"".join(got) == DATA and len(got) == 3


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"sid": SnapshotId(3, 1)}, ErrorCode.SNAPSHOT_NOT_FOUND),
        ({"position": len(DATA)}, ErrorCode.POSITION_OUT_OF_RANGE),
        ({"position": -1}, ErrorCode.POSITION_OUT_OF_RANGE),
        ({"epoch": 0}, ErrorCode.FENCED_LEADER_EPOCH),
        ({"epoch": 9}, ErrorCode.UNKNOWN_LEADER_EPOCH),
        ({"max_bytes": 0}, ErrorCode.INVALID_REQUEST),
    ],
)
def test_leader_refuses_bad_fetch_snapshot_requests(change, error):
    leader, sid = leader_with_snapshot()
    resp = fetch_snapshot(
        leader, change.get("sid", sid), change.get("position", 0), change.get("max_bytes", 300), change.get("epoch")
    )
    assert resp.error_code == error and resp.unaligned_records == b""
    assert resp.leader_id == 1 and resp.leader_epoch == leader.epoch


def test_only_the_leader_serves_snapshots():
    follower, _ = make_follower(2, leader=1, epoch=1)
    msg = FetchSnapshotRequest(None, 3, 100, 1, SnapshotId(4, 1), 0)
    resp = responded(follower.handle(200, RequestReceived("peer", 9, msg)))
    assert resp.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER and resp.leader_id == 1


def test_fetch_snapshot_counts_as_a_voter_fetch_for_the_zombie_rule():
    leader, sid = leader_with_snapshot()
    assert leader.state.check_quorum_deadline > LATE + 6
    fetch_snapshot(leader, sid, 0)  # voter 2, in our epoch
    assert 2 in leader.state.fetched_since_check


# --- a follower below the log start installs the snapshot ---------------------------------------------


def snapshot_reply(follower: RaftNode, actions: list[Action], sid: SnapshotId, epoch: int = 1) -> list[Action]:
    return fetch_response(
        follower,
        actions,
        150,
        FetchResponse(int(ErrorCode.NONE), 1, epoch, 10, sid.end_offset, snapshot_id=sid, cluster_id="leader-cluster"),
    )


def chunk(sid: SnapshotId, position: int, size: int, epoch: int = 1) -> FetchSnapshotResponse:
    data = DATA[position : position + size]
    return FetchSnapshotResponse(int(ErrorCode.NONE), 1, epoch, sid, len(DATA), position, data)


def test_follower_below_the_log_start_copies_the_snapshot_then_fetches_from_its_end():
    follower, out = make_follower(2, leader=1, epoch=1, fetch_max_bytes=500)
    sid = SnapshotId(10, 1)
    out = snapshot_reply(follower, out, sid)
    req = one(sent(out, FetchSnapshotRequest, to=1), SendRequest).message
    assert (req.snapshot_id, req.position, req.max_bytes, req.current_leader_epoch) == (sid, 0, 500, 1)
    assert not sent(out, FetchRequest)
    out = answer(follower, 160, sent(out, FetchSnapshotRequest)[-1], chunk(sid, 0, 500))
    req = sent(out, FetchSnapshotRequest)[-1]
    assert req.message.position == 500
    out = answer(follower, 170, req, chunk(sid, 500, 500))
    write = one(out, WriteSnapshot)
    assert write.snapshot_id == sid and write.data == DATA
    assert not sent(out, FetchRequest) and not sent(out, FetchSnapshotRequest)  # waits for the write
    assert not sent(follower.handle(200, Tick()), FetchRequest)
    out = follower.handle(210, SnapshotWritten(sid))
    kinds = [type(a) for a in out]
    assert kinds.index(ResetLog) < kinds.index(LoadSnapshot) < kinds.index(HighWatermarkAdvanced)
    assert one(out, ResetLog).offset == 10 and one(out, LoadSnapshot) == LoadSnapshot(sid, DATA)
    assert one(out, PersistClusterId).cluster_id == "leader-cluster" and follower.cluster_id == "leader-cluster"
    assert follower.log_start_offset == follower.log_end_offset == follower.high_watermark == 10
    nxt = sent(out, FetchRequest, to=1)[-1].message
    assert (nxt.fetch_offset, nxt.last_fetched_epoch) == (10, 1)
    # The rest of the log follows from the snapshot end.
    out = fetch_response(follower, out, 220, FetchResponse(int(ErrorCode.NONE), 1, 1, 12, 10, None, (batch(10, 1, 2),)))
    assert follower.log_end_offset == 12
    flush_all(follower, 230, out)
    assert follower.high_watermark == 12 and [b.base_offset for b in follower.read_committed(10)] == [10]


def test_follower_refuses_a_copied_snapshot_its_state_machine_cannot_load():
    """The core leaves the snapshot's format to the state machine: a copy it says it cannot load is
    neither written nor installed (the log stays), one warning names why, and the next Fetch after
    the back-off starts the copy again."""
    follower, out = make_follower(2, leader=1, epoch=1, batches=chain((3, 1)))
    checked = []

    def check(sid: SnapshotId, data: bytes) -> str | None:
        checked.append((sid, data))
        return "bad snapshot magic" if data == DATA else None

    follower.snapshot_check = check
    sid = SnapshotId(10, 1)
    out = snapshot_reply(follower, out, sid)
    out = answer(follower, 160, sent(out, FetchSnapshotRequest)[-1], chunk(sid, 0, len(DATA)))
    assert checked == [(sid, DATA)]
    assert not of_type(out, WriteSnapshot) and not of_type(out, ResetLog)
    assert one(out, Warn).message == "snapshot 10-1 from node 1 refused: bad snapshot magic"
    assert follower.log_end_offset == 3 and follower.snapshot_id is None
    out = follower.handle(160 + 100, Tick())  # after the back-off: the Fetch names the snapshot again
    assert sent(out, FetchRequest, to=1) and not sent(out, FetchSnapshotRequest)


def test_a_diverging_epoch_ending_below_the_snapshot_stops_the_follower_and_cuts_nothing():
    """Found by the fuzzer's `peers` target: a diverging epoch whose end lies below the follower's log
    start (its snapshot's end) raised LogError while looking for a batch there. Below the log start is
    below the high watermark: the stop Kafka makes when a leader asks to cut committed records."""
    follower, out = make_follower(2, leader=1, epoch=1)
    sid = SnapshotId(10, 1)
    out = snapshot_reply(follower, out, sid)
    out = answer(follower, 160, sent(out, FetchSnapshotRequest)[-1], chunk(sid, 0, len(DATA)))
    out = follower.handle(210, SnapshotWritten(sid))
    assert follower.log_start_offset == follower.high_watermark == follower.log_end_offset == 10
    out = fetch_response(follower, out, 220, FetchResponse(int(ErrorCode.NONE), 1, 1, 10, 10, EpochEndOffset(1, 3)))
    assert one(out, Fatal).reason == "leader asked to truncate to offset 3, below the high watermark 10"
    assert not of_type(out, TruncateLog) and not of_type(out, ResetLog) and follower.log_start_offset == 10


def test_follower_drops_a_snapshot_the_leader_no_longer_has_and_asks_again():
    follower, out = make_follower(2, leader=1, epoch=1)
    out = snapshot_reply(follower, out, SnapshotId(10, 1))
    req = sent(out, FetchSnapshotRequest)[-1]
    gone = FetchSnapshotResponse(int(ErrorCode.SNAPSHOT_NOT_FOUND), 1, 1, SnapshotId(10, 1))
    out = answer(follower, 160, req, gone)
    out += follower.handle(160 + 100, Tick())  # after the backoff
    assert sent(out, FetchRequest) and not sent(out, FetchSnapshotRequest)


def test_follower_restarts_a_snapshot_copy_on_a_chunk_that_does_not_fit():
    follower, out = make_follower(2, leader=1, epoch=1)
    sid = SnapshotId(10, 1)
    out = snapshot_reply(follower, out, sid)
    out = answer(follower, 160, sent(out, FetchSnapshotRequest)[-1], chunk(sid, 100, 50))  # wrong position
    assert not of_type(out, WriteSnapshot)
    out += follower.handle(160 + 100, Tick())
    assert sent(out, FetchRequest) and not sent(out, FetchSnapshotRequest)


def test_follower_with_a_diverged_tail_replaces_its_log_with_the_snapshot():
    # The follower holds epoch-1 records up to 12; the leader committed up to 10 in epoch 2: the
    # follower's last fetched epoch is older than the snapshot's, so its records there diverged.
    follower, out = make_follower(2, leader=1, epoch=3, batches=chain((6, 1), (6, 1)))
    sid = SnapshotId(10, 2)
    out = snapshot_reply(follower, out, sid, epoch=3)
    out = answer(follower, 160, sent(out, FetchSnapshotRequest)[-1], chunk(sid, 0, len(DATA), epoch=3))
    out = follower.handle(170, SnapshotWritten(one(out, WriteSnapshot).snapshot_id))
    assert one(out, ResetLog).offset == 10
    assert follower.batches() == [] and (follower.log_end_offset, follower.last_epoch) == (10, 2)


# --- end to end: a new observer catches up from a leader's snapshot -------------------------------------


class Pump:
    """Delivers requests and responses between in-memory nodes, fsyncs at once, and reports snapshot
    writes durable at once: a tiny runtime for whole-protocol tests."""

    def __init__(self, nodes: dict[int, RaftNode]) -> None:
        self.nodes = nodes
        self.queue: list[tuple[int, object]] = []
        self.seen: dict[int, list[Action]] = {n: [] for n in nodes}

    def feed(self, node_id: int, now: int, event: object) -> None:
        self.queue.append((node_id, event))
        while self.queue:
            target, ev = self.queue.pop(0)
            actions = self.nodes[target].handle(now, ev)  # type: ignore[arg-type]
            self.seen[target].extend(actions)
            for action in actions:
                self.carry_out(target, action)

    def carry_out(self, node_id: int, action: Action) -> None:
        match action:
            case SendRequest(dest, cid, msg) if dest in self.nodes:
                self.queue.append((dest, RequestReceived((node_id, cid), cid, msg)))
            case Respond((src, cid), _, msg):
                self.queue.append((src, ResponseReceived(node_id, cid, msg)))
            case Flush(end):
                self.queue.append((node_id, FlushCompleted(end)))
            case WriteSnapshot(sid, _):
                self.queue.append((node_id, SnapshotWritten(sid)))


def test_a_new_observer_catches_up_from_the_leaders_snapshot_then_the_log():
    leader = RaftNode(RaftConfig(1, frozenset({1})), LoadedState(None, (), None), random.Random(1))
    observer = RaftNode(
        RaftConfig(4, frozenset({1}), fetch_max_bytes=200), LoadedState(None, (), None), random.Random(2)
    )
    pump = Pump({1: leader})
    pump.feed(1, 0, Start())
    pump.feed(1, LATE, Tick())
    assert leader.role is Role.LEADER
    for i in range(5):
        pump.feed(1, LATE + i, Append(i, (b"a%d" % i, b"b%d" % i)))
    snap_end = leader.high_watermark
    pump.feed(1, LATE + 10, CreateSnapshot(snap_end, DATA))
    assert leader.log_start_offset == snap_end
    pump.feed(1, LATE + 11, Append("after", (b"c", b"d")))
    assert leader.high_watermark == leader.log_end_offset > snap_end

    pump.nodes[4] = observer
    pump.seen[4] = []
    pump.feed(4, LATE + 20, Start())
    for t in range(LATE + 21, LATE + 5_000, 50):
        pump.feed(4, t, Tick())
        if observer.log_end_offset == leader.log_end_offset and observer.high_watermark == leader.high_watermark:
            break
    seen = pump.seen[4]
    assert one(seen, LoadSnapshot) == LoadSnapshot(SnapshotId(snap_end, leader.epoch), DATA)
    assert len(of_type(seen, WriteSnapshot)) == 1
    assert observer.log_start_offset == snap_end and observer.role is Role.FOLLOWER
    assert observer.batches() == leader.batches()  # the records above the snapshot, copied unchanged
    assert observer.read_committed(snap_end) == leader.read_committed(snap_end)
    assert observer.cluster_id == leader.cluster_id  # learnt with the snapshot (its ClusterId record is gone)
    assert sum(1 for a in seen if isinstance(a, SendRequest) and isinstance(a.message, FetchSnapshotRequest)) == 4


# --- restart, votes and the epoch cache after a snapshot ---------------------------------------------


def test_restart_from_a_snapshot_loads_it_first_and_starts_the_log_at_its_end():
    sid = SnapshotId(10, 3)
    node = restarted(sid, batches=(batch(8, 3, 2), batch(10, 3, 2)))  # one stale batch below the snapshot
    out = node.handle(0, Start())
    assert out[0] == LoadSnapshot(sid, DATA)
    assert one(out, DeleteLogBefore).offset == 10
    assert node.log_start_offset == 10 and node.high_watermark == 10 and node.log_end_offset == 12
    assert node.read_committed(0) == [] and node.read_committed(10) == []  # 10.. is not committed yet
    assert node.snapshot_id == sid


def test_restart_with_a_log_remnant_straddling_the_snapshot_resets_it():
    node = restarted(SnapshotId(10, 3), batches=(batch(8, 2, 4),))
    out = node.handle(0, Start())
    assert one(out, ResetLog).offset == 10 and node.batches() == [] and node.last_epoch == 3


def test_restart_with_an_older_epochs_log_past_the_snapshot_resets_it():
    """Killed after a fetched snapshot (10, epoch 3) became durable but before its ResetLog ran: the old
    log goes on past the snapshot end in epoch 2, records the leader's log does not hold. Starting on
    it would append epoch 2 after epoch 3 (the node could never start again); it restarts empty."""
    node = restarted(SnapshotId(10, 3), batches=chain((6, 2), (4, 2), (2, 2)))
    out = node.handle(0, Start())
    assert one(out, ResetLog).offset == 10 and node.batches() == []
    assert (node.log_end_offset, node.last_epoch) == (10, 3)
    kept = restarted(SnapshotId(10, 3), batches=chain((6, 3), (4, 3), (2, 4)))  # the same epoch goes on
    kept.handle(0, Start())
    assert kept.log_end_offset == 12 and kept.last_epoch == 4


def test_restart_with_an_older_epochs_log_ending_at_the_snapshot_end_starts_after_the_snapshots_epoch():
    """The same crash when the old log ends exactly at the snapshot end (issue 24, config-register seed
    11): every batch is below the snapshot, so they go (DeleteLogBefore), and the record before the log
    start is the snapshot's last one, of epoch 3, not the deleted batch's epoch 2."""
    node = restarted(SnapshotId(10, 3), batches=chain((8, 1), (2, 2)))
    out = node.handle(0, Start())
    assert one(out, DeleteLogBefore).offset == 10 and node.batches() == []
    assert (node.log_start_offset, node.log_end_offset, node.last_epoch) == (10, 10, 3)


def test_votes_compare_against_the_snapshot_when_the_log_is_empty():
    node = restarted(SnapshotId(10, 3), node_id=3)
    node.handle(0, Start())

    def vote(candidate, last_epoch, last_offset):
        msg = VoteRequest("c", 4, candidate, last_epoch, last_offset)
        return responded(node.handle(5, RequestReceived("peer", 1, msg)))

    assert not vote(1, 3, 9).vote_granted  # shorter than our snapshot
    assert not vote(1, 2, 50).vote_granted  # older last epoch
    assert vote(2, 3, 10).vote_granted


def test_a_candidate_after_a_snapshot_offers_the_snapshot_as_its_last_entry():
    node = restarted(SnapshotId(10, 3))
    node.handle(0, Start())
    out = node.handle(LATE, Tick())
    req = sent(out, VoteRequest)[0].message
    assert (req.last_offset_epoch, req.last_offset) == (3, 10)


def test_leader_above_a_snapshot_never_mints_a_new_cluster_id():
    sid = SnapshotId(10, 3)
    qs = QuorumStateData(leader_epoch=3, current_voters=(1,))
    loaded = LoadedState(qs, (), None, snapshot=LoadedSnapshot(sid, DATA))
    node = RaftNode(RaftConfig(1, frozenset({1})), loaded, random.Random(0))
    node.handle(0, Start())
    node.handle(LATE, Tick())
    assert node.role is Role.LEADER
    first = node.batches()[0]
    assert first.base_offset == 10 and not any(isinstance(decode_control(r), ClusterIdMessage) for r in first.records)


def test_epoch_cache_after_dropping_the_log_prefix():
    log = RaftLog(chain((2, 1), (2, 3), (2, 5)))
    log.drop_before(4)
    assert (log.start_offset, log.start_epoch) == (4, 3)
    assert log.end_offset_for_epoch(3).offset == 4 and log.end_offset_for_epoch(3).epoch == 3
    assert log.end_offset_for_epoch(4) == log.end_offset_for_epoch(3)
    assert (log.end_offset_for_epoch(5).offset, log.end_offset_for_epoch(5).epoch) == (6, 5)
    assert log.end_offset_for_epoch(2).epoch == 0  # older than anything held: unknown
    log.drop_before(6)
    assert len(log) == 0 and (log.end_offset, log.last_epoch) == (6, 5)
    with pytest.raises(LogError):
        log.truncate(5)


def test_trim_to_snapshot_refuses_a_gap_below_the_log():
    with pytest.raises(StorageError, match="starts at offset 12"):
        trim_to_snapshot(SnapshotId(10, 1), (batch(12, 1),))
    with pytest.raises(StorageError, match="no snapshot"):
        trim_to_snapshot(None, (batch(5, 1),))
    assert trim_to_snapshot(SnapshotId(10, 1), (batch(8, 1, 2),)).delete_before


def test_follower_refuses_a_snapshot_ending_below_its_high_watermark():
    """Installing a snapshot restarts the log at its end: one ending below the high watermark would cut
    committed records away. A leader holds and covers everything committed, so such an answer comes
    from a confused peer (or a fuzzer): refused, the log untouched, and the next fetch asks again."""
    follower, out = make_follower(2, leader=1, epoch=1, batches=chain((6, 1), (6, 1)))
    out = fetch_response(follower, out, 100, FetchResponse(int(ErrorCode.NONE), 1, 1, 8))
    assert follower.high_watermark == 8
    out = fetch_response(
        follower, out, 150, FetchResponse(int(ErrorCode.NONE), 1, 1, 8, 5, snapshot_id=SnapshotId(5, 1))
    )
    assert not sent(out, FetchSnapshotRequest) and (follower.log_end_offset, follower.high_watermark) == (12, 8)
    assert "below this node's high watermark 8: refused" in one(out, Warn).message
    out = follower.handle(150 + 100, Tick())  # after the backoff: fetching the log again, from its end
    req = sent(out, FetchRequest, to=1)[-1].message
    assert (req.fetch_offset, req.last_fetched_epoch) == (12, 1)
    out = fetch_response(
        follower, out, 300, FetchResponse(int(ErrorCode.NONE), 1, 1, 8, 8, snapshot_id=SnapshotId(8, 1))
    )
    assert sent(out, FetchSnapshotRequest, to=1)  # one ending at the high watermark is fine
