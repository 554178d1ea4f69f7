"""The `peers` target: node 1 of three voters, and voters 2 and 3 saying plausible things to it.

The `responses` target answers with sampled values, which seldom line up with the node's state: in
60,000 inputs it ran 40 % of the core's snapshot code and none of a follower's truncation. Here every
message starts from the node's state (epochs around its own, offsets around its log end and high
watermark, batches at its fetch offset, diverging epochs from its own epoch cache, the snapshot of a
real leader, whole or damaged) and is then damaged at times, so that the deep paths of KIP-595 and
KIP-630 meet what a confused, lagging or corrupted peer could send. Requests come from voters 2 and 3
(and at times from a stranger); answers go to whatever the node asked.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Protocol

import node.raft.actions as A
from harness.fuzz.describe import clip, describe_frame, describe_node
from harness.fuzz.inprocess import DesignedStop, first_of_three_voters, settled_leader
from harness.fuzz.mutate import mutate_bytes, mutate_value
from node.metadata.snapshot import snapshot_bytes
from node.process.process import CONTROLLER_LISTENER
from node.protocol.admin import (
    AlterableConfig,
    ConfigOperation,
    ConfigResourceType,
    DescribeConfigsRequest,
    DescribeConfigsResource,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResource,
)
from node.protocol.broker_api import FetchSnapshotRequest, FetchSnapshotResponse, SnapshotId
from node.protocol.codec import BinaryCodec
from node.protocol.errors import ErrorCode
from node.protocol.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    EpochEndOffset,
    FetchRequest,
    FetchResponse,
    VoteRequest,
    VoteResponse,
)
from node.raft.node import RaftNode
from node.raft.records import RecordBatch

PEERS = (2, 3)
STRANGER = 7
PROBE_EVERY = 100
_CODEC = BinaryCodec()
_ERRORS = (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH)


@cache
def donor() -> tuple[tuple[bytes, ...], bytes, SnapshotId]:
    """What a real leader holds: its metadata records and a snapshot of its image."""
    leader = settled_leader(seed=1)
    records = tuple(r for b in leader.raft.log.batches() if not b.control for r in b.records)
    image = leader.process.image
    return records, snapshot_bytes(image), SnapshotId(image.last_offset + 1, image.last_epoch)


class PeersTarget:
    """One input: time passes, a request from a peer, or an answer to something the node sent."""

    def __init__(self, seed: int, workdir: Path) -> None:
        self.workdir = workdir
        self.node = first_of_three_voters(workdir, seed)
        self.voices = Voices(lambda: RaftView(self.node.raft))
        # Half the episodes have loyal voters: node 1 wins its elections and leads under clients' reads
        # and writes, which the unruly half seldom lets it do for long (3 % of its inputs in a profile).
        self.loyal = random.Random(f"loyal:{seed}").random() < 0.5
        self.count = 0
        self._last: tuple[A.SendRequest | None, bytes] = (None, b"")  # what it answered (None: a request)

    def __call__(self, rng: random.Random) -> bool:
        self.count += 1
        node = self.node
        roll = rng.random()
        try:
            if self.loyal:
                accepted = self._loyal(roll, rng)
            elif roll < 0.15:
                node.advance(rng.choice((10, 100, 500, 2000)))
                accepted = True
            elif roll < 0.5:
                message = self.voices.request(rng)
                frame = self.voices.damaged(message, rng, request=True, cid=rng.randint(1, 1000))
                self._last = (None, frame)
                accepted = node.feed_frame(CONTROLLER_LISTENER, frame, ("peer", self.count % 4))
            elif roll < 0.56:
                # A client's read: at the leader it waits on a read barrier that the voters' Fetches
                # (or a change of leader) complete, which the Raft requests alone never start.
                frame = _encode(self.voices.read(rng), True, rng.randint(1, 1000)) or b""
                self._last = (None, frame)
                accepted = node.feed_frame(CONTROLLER_LISTENER, frame, ("client", self.count % 2))
            else:
                if not node.outstanding:
                    node.advance(rng.choice((10, 100, 500)))
                    return True
                sent = node.outstanding.pop(rng.randrange(len(node.outstanding)))
                message = self.voices.answer(sent.destination, sent.message, rng)
                frame = self.voices.damaged(message, rng, request=False, cid=sent.correlation_id)
                self._last = (sent, frame)  # described only if a replay asks
                accepted = node.feed_response(sent, frame)
        except DesignedStop:
            self.node = first_of_three_voters(self.workdir, rng.getrandbits(32))
            return False
        if self.count % PROBE_EVERY == 0:
            node.still_serves()
        return accepted

    def _loyal(self, roll: float, rng: random.Random) -> bool:
        """Voters 2 and 3 grant its votes and fetch to its log end; clients read and write. Each
        frame is still damaged now and then (`Voices.damaged`), more seldom than the unruly ones."""
        node = self.node
        if roll < 0.1:
            node.advance(rng.choice((10, 50, 100)))
            return True
        if roll < 0.75:
            if roll < 0.45:
                message: object = self.voices.loyal_fetch(rng)
                reply_to: tuple[str, int] = ("peer", self.count % 4)
            else:
                message = self.voices.read(rng) if roll < 0.6 else self.voices.write(rng)
                reply_to = ("client", self.count % 2)
            frame = self.voices.damaged(message, rng, request=True, cid=rng.randint(1, 1000), rate=0.3)
            self._last = (None, frame)
            return node.feed_frame(CONTROLLER_LISTENER, frame, reply_to)
        if not node.outstanding:
            node.advance(rng.choice((10, 50)))
            return True
        sent = node.outstanding.pop(rng.randrange(len(node.outstanding)))
        answer = self.voices.loyal_answer(sent.destination, sent.message, rng)
        frame = self.voices.damaged(answer, rng, request=False, cid=sent.correlation_id, rate=0.3)
        self._last = (sent, frame)
        return node.feed_response(sent, frame)

    # --- what a replay shows ---------------------------------------------------------------------

    def last_input(self) -> list[str]:
        sent, frame = self._last
        if not frame:
            return ["nothing sent yet"]
        if sent is None:
            return [
                f"a request on the {CONTROLLER_LISTENER} listener",
                *describe_frame(frame, self.node.codecs[CONTROLLER_LISTENER]),
            ]
        what = f"an answer to {clip(repr(sent.message), 300)} sent to node {sent.destination}"
        return [what, *describe_frame(frame, self.node.reply_codec)]

    def state(self) -> str:
        return describe_node(self.node)


class PeerView(Protocol):
    """What voters 2 and 3 know of node 1: enough to say plausible things to it."""

    @property
    def epoch(self) -> int: ...
    @property
    def log_end_offset(self) -> int: ...
    @property
    def high_watermark(self) -> int: ...
    @property
    def log_start_offset(self) -> int: ...
    @property
    def last_epoch(self) -> int: ...
    @property
    def cluster_id(self) -> str | None: ...
    @property
    def snapshot_id(self) -> SnapshotId | None: ...
    def log_epochs(self) -> list[int]: ...


class RaftView:
    """The view of a node in this process: its core's own attributes, read as the input is built."""

    def __init__(self, raft: RaftNode) -> None:
        self._raft = raft

    def __getattr__(self, name: str) -> object:
        return getattr(self._raft, name)

    def log_epochs(self) -> list[int]:
        return [entry.epoch for entry in self._raft.log.epoch_entries()]


class Voices:
    """What voters 2 and 3 (and at times a stranger) say to node 1: requests, and answers to what it
    asked, each built around its state as `view()` gives it and damaged at times. The in-process
    target above and the real node over sockets (`harness/fuzz/real_voters.py`) use the same."""

    def __init__(self, view: Callable[[], PeerView]) -> None:
        self.view = view
        self.records, self.snapshot, self.snapshot_id = donor()

    # --- values near the node's state ------------------------------------------------------------

    def _epoch(self, rng: random.Random) -> int:
        e = self.view().epoch
        return max(0, e + rng.choice((0, 0, 0, 1, 1, -1, 2, -2)))

    def _offset(self, rng: random.Random) -> int:
        view = self.view()
        end, hwm, start = view.log_end_offset, view.high_watermark, view.log_start_offset
        return max(0, rng.choice((end, end, hwm, hwm - 1, end - 1, end + 1, start, start - 1, end + 5, 0)))

    def _log_epoch(self, rng: random.Random) -> int:
        entries = self.view().log_epochs()
        if entries and rng.random() < 0.8:
            return rng.choice(entries)
        return max(0, self.view().last_epoch + rng.choice((-1, 0, 1)))

    def _cluster_id(self, rng: random.Random) -> str | None:
        roll = rng.random()
        if roll < 0.02:
            return "a-foreign-cluster-0000000"
        return None if roll < 0.1 else self.view().cluster_id

    def request(self, rng: random.Random) -> object:
        peer = rng.choice(PEERS) if rng.random() < 0.95 else STRANGER
        kind = rng.randrange(5)
        cid = self._cluster_id(rng)
        if kind == 0:
            return VoteRequest(cid, self._epoch(rng), peer, self._log_epoch(rng), self._offset(rng), rng.random() < 0.5)
        if kind == 1:
            return BeginQuorumEpochRequest(cid, peer, self._epoch(rng))
        if kind == 2:
            successors = rng.choice(((1,), (1, 3), (3, 1), (), (1, 2, 3)))
            return EndQuorumEpochRequest(cid, peer, rng.choice((peer, 1, -1)), self._epoch(rng), successors)
        if kind == 3:
            wait = rng.choice((0, 0, 500))
            return FetchRequest(cid, peer, self._epoch(rng), self._offset(rng), self._log_epoch(rng), wait)
        own = self.view().snapshot_id or SnapshotId(self._offset(rng), self._log_epoch(rng))
        position = rng.choice((0, 0, 1, len(self.snapshot), -1))
        return FetchSnapshotRequest(cid, peer, rng.choice((1 << 20, 16, 0)), self._epoch(rng), own, position)

    def read(self, rng: random.Random) -> DescribeConfigsRequest:
        """A linearizable read a client sends the active controller (KIP-631: DescribeConfigs)."""
        resource = rng.choice(
            (
                DescribeConfigsResource(ConfigResourceType.BROKER, rng.choice(("", "1", "2"))),
                DescribeConfigsResource(ConfigResourceType.TOPIC, rng.choice(("t", "no-such-topic"))),
            )
        )
        return DescribeConfigsRequest((resource,))

    def write(self, rng: random.Random) -> IncrementalAlterConfigsRequest:
        """A config change a client sends the active controller: one Raft append when it commits."""
        key = rng.choice(("log.retention.ms", "min.insync.replicas", "unclean.leader.election.enable"))
        value = rng.choice(("1", "2", "604800000", "true", "false"))
        if rng.random() < 0.2:
            change = AlterableConfig(key, ConfigOperation.DELETE, None)
        else:
            change = AlterableConfig(key, ConfigOperation.SET, value)
        resource = IncrementalAlterConfigsResource(ConfigResourceType.BROKER, rng.choice(("", "1")), (change,))
        return IncrementalAlterConfigsRequest((resource,))

    def loyal_fetch(self, rng: random.Random) -> FetchRequest:
        """A voter that follows node 1 fetching at (or just below) its log end: an acknowledgement."""
        view = self.view()
        offset = max(0, view.log_end_offset - rng.choice((0, 0, 0, 1, 2)))
        return FetchRequest(view.cluster_id, rng.choice(PEERS), view.epoch, offset, view.last_epoch, 0)

    def loyal_answer(self, destination: int, req: object, rng: random.Random) -> object:
        """What voters that want node 1 to lead answer: its votes granted, its epoch acknowledged, and
        no leader of their own when it fetches from one of them (a damaged frame may have named one)."""
        match req:
            case VoteRequest():
                return VoteResponse(0, -1, req.candidate_epoch, True)
            case BeginQuorumEpochRequest():
                return BeginQuorumEpochResponse(0, req.leader_id, req.leader_epoch)
            case FetchRequest():
                return FetchResponse(int(ErrorCode.NOT_LEADER_OR_FOLLOWER), -1, req.current_leader_epoch, 0, 0)
        return self.answer(destination, req, rng)

    def answer(self, destination: int, req: object, rng: random.Random) -> object:
        """An answer to `req`, which the node sent to `destination` (2 or 3)."""
        leader = rng.choice((destination, destination, destination, -1, 1, 5 - destination))
        error = int(ErrorCode.NONE) if rng.random() < 0.85 else int(rng.choice(_ERRORS))
        match req:
            case VoteRequest():
                epoch = req.candidate_epoch if rng.random() < 0.8 else self._epoch(rng)
                return VoteResponse(error, rng.choice((-1, -1, leader)), epoch, rng.random() < 0.6)
            case BeginQuorumEpochRequest():
                return BeginQuorumEpochResponse(error, leader, req.leader_epoch)
            case EndQuorumEpochRequest():
                return EndQuorumEpochResponse(error, leader, req.leader_epoch)
            case FetchRequest():
                return self._fetch_answer(req, error, leader, rng)
            case FetchSnapshotRequest():
                return self._snapshot_chunk(destination, req, error, rng)
        return VoteResponse(error, -1, self._epoch(rng), False)  # not a request a voter sends: a wrong answer

    def _fetch_answer(self, req: FetchRequest, error: int, leader: int, rng: random.Random) -> FetchResponse:
        epoch = req.current_leader_epoch if rng.random() < 0.85 else self._epoch(rng)
        start = rng.choice((0, 0, self.view().log_start_offset, self.snapshot_id.end_offset))
        roll = rng.random()
        if roll < 0.6:
            batches = self._batches(req.fetch_offset, req.last_fetched_epoch, epoch, rng)
            end = batches[-1].next_offset if batches else req.fetch_offset
            hwm = max(0, rng.choice((end, end, req.fetch_offset, end - 1, self.view().high_watermark, end + 3)))
            return FetchResponse(error, leader, epoch, hwm, start, records=tuple(batches))
        hwm = self._offset(rng)
        if roll < 0.8:
            diverging = EpochEndOffset(self._log_epoch(rng), self._offset(rng))
            return FetchResponse(error, leader, epoch, hwm, start, diverging_epoch=diverging)
        if roll < 0.92:
            sid = self.snapshot_id
            if rng.random() < 0.3:
                sid = SnapshotId(max(1, sid.end_offset + rng.choice((-1, 1, 10))), self._log_epoch(rng))
            return FetchResponse(
                error, leader, epoch, hwm, sid.end_offset, snapshot_id=sid, cluster_id=self._cluster_id(rng)
            )
        return FetchResponse(error, leader, epoch, hwm, start)

    def _batches(self, base: int, after_epoch: int, leader_epoch: int, rng: random.Random) -> list[RecordBatch]:
        out = []
        epoch = max(0, after_epoch)
        for _ in range(rng.choice((1, 1, 2, 3))):
            epoch = min(max(epoch, rng.choice((epoch, epoch, leader_epoch))), max(leader_epoch, 0))
            if rng.random() < 0.8:
                records = tuple(rng.choice(self.records) for _ in range(rng.randint(1, 4)))
            else:
                records = tuple(rng.randbytes(rng.randint(0, 24)) for _ in range(rng.randint(1, 3)))
            out.append(RecordBatch(base, epoch, records, timestamp_ms=rng.randint(0, 10**6)))
            base += len(records)
        return out

    def _snapshot_chunk(
        self, destination: int, req: FetchSnapshotRequest, error: int, rng: random.Random
    ) -> FetchSnapshotResponse:
        data = self.snapshot
        roll = rng.random()
        if roll < 0.15:
            data = mutate_bytes(data, rng)
        elif roll < 0.25:
            data = rng.randbytes(len(data))
        position = max(0, req.position)
        size = rng.choice((len(data), len(data), max(1, rng.randrange(1, len(data) * 2))))
        chunk = data[position : position + rng.choice((req.max_bytes, req.max_bytes, 64))]
        sid = req.snapshot_id if rng.random() < 0.9 else SnapshotId(req.snapshot_id.end_offset + 1, 0)
        return FetchSnapshotResponse(error, destination, req.current_leader_epoch, sid, size, position, chunk)

    # --- damage, sometimes -----------------------------------------------------------------------

    def damaged(self, message: object, rng: random.Random, request: bool, cid: int = 0, rate: float = 1.0) -> bytes:
        """`message` as a frame; 15 % get an edge value, 5 % damaged bytes (both times `rate`)."""
        mutated = mutate_value(message, rng) if rng.random() < 0.15 * rate else message
        frame = _encode(mutated, request, cid) or _encode(message, request, cid)
        if frame is None:
            return b"\x00\x00\x00\x00"  # a value past its wire type (an epoch at the int32 limit): an empty frame
        return mutate_bytes(frame, rng) if rng.random() < 0.05 * rate else frame


def _encode(message: object, request: bool, cid: int) -> bytes | None:
    try:
        return _CODEC.encode_request(cid or 1, message) if request else _CODEC.encode_response(cid, message)
    except ValueError:
        return None
