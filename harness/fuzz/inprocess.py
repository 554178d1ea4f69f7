"""In-process targets: the codec plus the sans-IO process core, driven as the real runtime drives it.

`NodeUnderTest` builds a node from a server.properties file exactly as `kchaos node` does (config,
RaftNode, `build_process`), keeps its storage in memory but encodes every record batch, quorum-state
and snapshot with the real file formats (so a value that would not fit a file fails here as it fails
on disk), and answers the core's flushes at once. A frame goes through the listener's codec; what
decodes is handed to the process; every action the process returns is carried out. Any exception,
`Fatal` (but the designed stops, for the targets that play the voters), unrequested `ShutDown`,
undecodable own answer, unencodable record, or cut of committed records is a finding.
"""

from __future__ import annotations

import random
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import node.raft.actions as A
from node.process.actions import ShutDown
from node.process.events import InboundRequest
from node.process.ports import RequestContext
from node.process.process import CONTROLLER_LISTENER
from node.protocol.codec import BinaryCodec, EncodedResponse, FrameError, FrameKind
from node.protocol.kafka_codec import KafkaCodec, KafkaHeader
from node.protocol.messages import DescribeQuorumRequest
from node.protocol.registry import API_KEYS, BROKER_API_KEYS, CONTROLLER_API_KEYS
from node.protocol.session import ApiVersionsRequest
from node.raft.events import FlushCompleted, RequestFailed, ResponseReceived, SnapshotWritten, Start, Tick
from node.raft.node import RaftNode
from node.raft.records import encode_batch
from node.raft.storage import LoadedState
from node.runtime.file_storage import (
    decode_quorum_state,
    decode_snapshot_file,
    encode_quorum_state,
    encode_snapshot_file,
)
from node.runtime.roles import build_process
from node.runtime.server_config import ServerConfig, load_server_config

ROOT = Path(__file__).resolve().parents[2]
COMBINED = ROOT / "examples" / "combined.properties"  # one combined node, the only voter
THREE_VOTERS = """node.id=1
process.roles=broker,controller
listeners=BROKER://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093
controller.listener.names=CONTROLLER
controller.quorum.voters=1@127.0.0.1:19093,2@127.0.0.1:19193,3@127.0.0.1:19293
metadata.log.dir={data}
"""


def kafka_codecs(node_id: int, voters: list[tuple[int, str, int]]) -> dict[str, KafkaCodec]:
    """Each listener's Kafka framing as `NodeServer` builds it (the broker's adds DescribeQuorum)."""
    return {
        CONTROLLER_LISTENER: KafkaCodec(CONTROLLER_API_KEYS, node_id, controllers=voters),
        "BROKER": KafkaCodec(BROKER_API_KEYS | {API_KEYS[DescribeQuorumRequest]}, node_id),
    }


def first_of_three_voters(workdir: Path, seed: int) -> NodeUnderTest:
    """Node 1 of a three-voter combined quorum whose peers the caller plays (so the stops a KIP
    prescribes for their messages are counted, not findings)."""
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "voter-1.properties"
    path.write_text(THREE_VOTERS.format(data=workdir / "data-1"))
    node = NodeUnderTest.from_properties(path, seed)
    node.by_design_stops = 0
    return node


def settled_leader(seed: int) -> NodeUnderTest:
    """The combined node of `COMBINED` after 10 virtual seconds: it elected itself and registered."""
    node = NodeUnderTest.from_properties(COMBINED, seed)
    for _ in range(200):
        node.advance(50)
    return node


class DesignedStop(Exception):
    """The node stopped as its protocol says it must, on something only the quorum's voters send
    (`DESIGNED_STOPS`): not a finding, but the node is gone; the target starts again."""


# The stops a KIP prescribes for what only the quorum's own voters send (the targets that play them set
# `by_design_stops`; requests on a listener anyone can reach never count): KIP-595 "Cluster
# Bootstrapping" stops a node whose cluster id conflicts with an elected leader's (its INVALID_CLUSTER_ID
# answer, its BeginQuorumEpoch, the ClusterId record it commits or the snapshot it sends), and a leader
# asking a follower to truncate committed records is a broken quorum, on which Kafka's KafkaRaftClient
# throws as well: stopping there loses nothing.
DESIGNED_STOPS = (
    "(INVALID_CLUSTER_ID)",
    "belongs to cluster",
    "the metadata log commits clusterId",
    "below the high watermark",
    "below the log start",
)


class Finding(Exception):
    """The node broke the contract: crashed, stopped, or produced something it cannot write or send."""


@dataclass
class Outcome:
    refused_frames: int = 0  # FrameError: the runtime closes that connection and serves the others
    handled: int = 0
    warnings: list[str] = field(default_factory=list)
    actions: Counter[str] = field(default_factory=Counter)  # what the node did, by action type: its reach


class NodeUnderTest:
    """One node, in memory, driven through its codec; `feed_frame` is one input."""

    def __init__(self, config: ServerConfig, seed: int) -> None:
        self.config = config
        self.rng = random.Random(seed)
        self.raft = RaftNode(config.raft, LoadedState(None, (), None), self.rng)
        self.process = build_process(config, self.raft, self.rng)
        self.codecs = {
            CONTROLLER_LISTENER: BinaryCodec(api_keys=CONTROLLER_API_KEYS),
            "BROKER": BinaryCodec(api_keys=BROKER_API_KEYS),
        }
        self.reply_codec = BinaryCodec()
        voters = [(v.node_id, v.host, v.port) for v in config.voters]
        self.kafka_codecs = kafka_codecs(config.node_id, voters)
        self._kafka_waiting: dict[object, tuple[KafkaCodec, KafkaHeader]] = {}  # reply_to -> how to answer
        self.now = 0
        self.deadline: int | None = None
        self.outstanding: list[A.SendRequest] = []  # requests the node sent, for the responses target
        self.answered: dict[Any, int] = {}  # reply_to -> answers seen
        self.outcome = Outcome()
        self.by_design_stops: int | None = None  # counting (not None): voters' answers may stop the node
        self.committed = 0  # the highest high watermark the node has reached: never cut below it
        self._run(Start())

    @classmethod
    def from_properties(cls, path: str | Path, seed: int = 0) -> NodeUnderTest:
        return cls(load_server_config(path), seed)

    # --- driving ---------------------------------------------------------------------------------

    def advance(self, ms: int) -> None:
        """Let `ms` of virtual time pass, firing the core's timer when it is due."""
        self.now += ms
        if self.deadline is not None and self.deadline <= self.now:
            self.deadline = None
            self._run(Tick())

    def feed_frame(self, listener: str, frame: bytes, reply_to: object = "fuzz") -> bool:
        """One frame on `listener` ("CONTROLLER" or "BROKER"); False if the codec refused it (the
        runtime closes that connection: a one-line refusal)."""
        codec = self.codecs[listener]
        try:
            decoded = codec.decode(frame)
            if decoded.kind is not FrameKind.REQUEST:
                raise FrameError("a response frame arrived on an inbound connection")
        except FrameError as exc:
            if "\n" in str(exc):
                raise Finding(f"FrameError of more than one line: {str(exc)!r}") from None
            self.outcome.refused_frames += 1
            return False
        ctx = RequestContext(listener_name=listener, frame=frame)
        self._run(InboundRequest(reply_to, decoded.correlation_id, decoded.message, ctx))
        return True

    def feed_kafka(self, listener: str, frame: bytes, reply_to: object) -> bool:
        """One request in Kafka's own framing on `listener`, as `NodeServer._read_kafka` takes it; its
        answer must then encode in the client's version (`_carry_out`). `reply_to` must name this
        request alone (an answer may come after later requests'). False if the codec refused it."""
        codec = self.kafka_codecs[listener]
        try:
            request = codec.decode_request(frame)
        except FrameError as exc:
            if "\n" in str(exc):
                raise Finding(f"FrameError of more than one line: {str(exc)!r}") from None
            self.outcome.refused_frames += 1
            return False
        except Exception as exc:
            raise Finding(f"the Kafka codec raised {exc!r} at {_where(exc)}") from exc
        if request.answer is not None:  # ApiVersions: answered by the codec itself
            return True
        self._kafka_waiting[reply_to] = (codec, request.header)
        ctx = RequestContext(listener_name=listener, frame=None)  # a forwarding broker encodes it again
        self._run(InboundRequest(reply_to, request.header.correlation_id, request.message, ctx))
        return True

    def feed_response(self, sent: A.SendRequest, frame: bytes) -> bool:
        """An answer (as bytes) to a request the node sent; a frame the codec refuses fails the request."""
        try:
            decoded = self.reply_codec.decode(frame)
            if decoded.kind is not FrameKind.RESPONSE:
                raise FrameError("a request frame arrived as an answer")
        except FrameError:
            self.outcome.refused_frames += 1
            self._run(RequestFailed(sent.destination, sent.correlation_id, True))
            return False
        self._run(ResponseReceived(sent.destination, sent.correlation_id, decoded.message))
        return True

    def still_serves(self) -> None:
        """A fresh client on each listener gets an answer: the node serves its other peers."""
        for listener, message in ((CONTROLLER_LISTENER, ApiVersionsRequest()), ("BROKER", ApiVersionsRequest())):
            token = ("probe", listener, self.now)
            frame = self.codecs[listener].encode_request(99, message)
            if not self.feed_frame(listener, frame, token):
                raise Finding(f"a valid {type(message).__name__} was refused on {listener}")
            if not self.answered.get(token):
                raise Finding(f"no answer to a valid {type(message).__name__} on {listener}")
            del self.answered[token]

    # --- carrying out actions --------------------------------------------------------------------

    def _run(self, event: Any) -> None:
        queue = [event]
        steps = 0
        while queue:
            steps += 1
            if steps > 10_000:
                raise Finding("the core did not settle after 10,000 follow-up events (a livelock)")
            ev = queue.pop(0)
            try:
                actions = self.process.handle(self.now, ev)
            except Finding:
                raise
            except Exception as exc:
                raise Finding(f"{type(ev).__name__} raised {exc!r} at {_where(exc)}") from exc
            self.outcome.handled += 1
            for action in actions:
                queue.extend(self._carry_out(action))
            self.committed = max(self.committed, self.raft.high_watermark)

    def _carry_out(self, action: Any) -> list[Any]:
        self.outcome.actions[type(action).__name__] += 1
        match action:
            case A.Respond(reply_to, correlation_id, message) if reply_to in self._kafka_waiting:
                codec, header = self._kafka_waiting.pop(reply_to)
                if not codec.closes_instead(message):
                    try:  # the runtime would drop the client instead of answering it: still a bug
                        codec.encode_response(header, message)
                    except Exception as exc:
                        name, version = type(message).__name__, header.api_version
                        raise Finding(f"cannot encode its answer {name} in Kafka's v{version}: {exc!r}") from None
                self.answered[reply_to] = self.answered.get(reply_to, 0) + 1
            case A.Respond(reply_to, correlation_id, message):
                try:
                    if not isinstance(message, EncodedResponse):  # a forwarded answer is bytes already
                        self.reply_codec.encode_response(correlation_id, message)
                except ValueError as exc:
                    raise Finding(f"cannot encode its own answer {type(message).__name__}: {exc}") from None
                self.answered[reply_to] = self.answered.get(reply_to, 0) + 1
            case A.SendRequest():
                try:
                    self.reply_codec.encode_request(action.correlation_id, action.message)
                except ValueError as exc:
                    raise Finding(f"cannot encode its own request {type(action.message).__name__}: {exc}") from None
                self.outstanding.append(action)
                del self.outstanding[:-64]
            case A.AppendBatches(batches):
                for batch in batches:
                    try:
                        encode_batch(batch)
                    except Exception as exc:
                        raise Finding(
                            f"cannot write batch at {batch.base_offset} epoch {batch.epoch}: {exc!r}"
                        ) from None
            case A.Flush():
                return [FlushCompleted(self.raft.log_end_offset)]
            case A.TruncateLog(offset) | A.ResetLog(offset) if offset < self.committed:
                # Records below the high watermark are committed: no input may make the node drop them
                raise Finding(f"{type(action).__name__} to {offset}, below the committed offset {self.committed}")
            case A.PersistQuorumState(state):
                try:
                    decode_quorum_state(encode_quorum_state(state), "quorum-state")
                except Exception as exc:
                    raise Finding(f"its quorum-state would not load again: {exc}") from None
            case A.WriteSnapshot(snapshot_id, data):
                try:
                    decode_snapshot_file(encode_snapshot_file(snapshot_id, data), "snapshot")
                except Exception as exc:
                    raise Finding(f"its snapshot {snapshot_id} would not load again: {exc}") from None
                return [SnapshotWritten(snapshot_id)]
            case A.SetTimer(deadline):
                self.deadline = deadline
            case A.Fatal(reason) if self.by_design_stops is not None and any(m in reason for m in DESIGNED_STOPS):
                self.by_design_stops += 1
                raise DesignedStop(reason)
            case A.Fatal(reason):
                raise Finding(f"Fatal: {reason}")
            case ShutDown(reason, requested) if not requested:
                raise Finding(f"shut down: {reason}")
            case A.Warn(message):
                self.outcome.warnings.append(message)
        return []


def _where(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return "?"
    last = frames[-1]
    return f"{Path(last.filename).name}:{last.lineno}"
