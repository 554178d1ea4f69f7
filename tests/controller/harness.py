"""A fake `ProcessPort` for unit tests of the controller: appends wait until the test commits them,
and committing replays the records into a real `MetadataImage` through a real raft batch."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field

from node.controller import ControllerConfig, QuorumController
from node.metadata.image import MetadataImage
from node.metadata.records import MetadataRecord, decode_record, encode_records
from node.process.ports import AppendOutcome, BarrierOutcome, RequestContext
from node.protocol.broker_api import (
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationFeature,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    Listener,
)
from node.protocol.errors import ErrorCode
from node.raft.records import ReadMarkerMessage, RecordBatch, encode_control
from node.security.authorizer import Authorizer

CLUSTER_ID = "test-cluster"
BROKER = RequestContext(principal="User:broker")
ADMIN = RequestContext(principal="User:admin")


@dataclass
class _Append:
    base: int
    records: tuple[MetadataRecord, ...]
    on_done: Callable[[AppendOutcome], None]


@dataclass
class FakePort:
    node_id: int = 1
    leader_id: int = 1
    leader_epoch: int = 1
    controller_ids: tuple[int, ...] = (1,)
    image: MetadataImage = field(default_factory=MetadataImage)
    responses: list[tuple[Hashable, int, object]] = field(default_factory=list)
    appends: list[_Append] = field(default_factory=list)
    barriers: list[Callable[[BarrierOutcome], None]] = field(default_factory=list)
    wakes: list[int] = field(default_factory=list)
    end_offset: int = 0
    listener: Callable[[], None] | None = None  # the controller's on_committed

    def respond(self, reply_to: Hashable, correlation_id: int, message: object) -> None:
        self.responses.append((reply_to, correlation_id, message))

    def send(self, destination: int, message: object, on_reply: Callable[[object | None], None]) -> None:
        raise AssertionError("the controller sends nothing")

    def next_append_offset(self) -> int:
        return self.end_offset

    def append(self, records: Sequence[bytes], on_done: Callable[[AppendOutcome], None]) -> int:
        base = self.end_offset
        self.appends.append(_Append(base, tuple(decode_record(r) for r in records), on_done))
        self.end_offset += len(records)
        return base

    def read_barrier(self, on_done: Callable[[BarrierOutcome], None]) -> None:
        self.barriers.append(on_done)

    def wake_at(self, deadline_ms: int) -> None:
        self.wakes.append(deadline_ms)

    def shut_down(self, reason: str, requested: bool = False) -> None:
        raise AssertionError("the controller never shuts its process down")

    # --- test controls ---------------------------------------------------------------------------
    def commit(self, count: int | None = None) -> None:
        """Commit the oldest `count` (default: all) pending appends, apply them, call back."""
        todo = self.appends if count is None else self.appends[:count]
        self.appends = self.appends[len(todo) :]
        for a in todo:
            self.image.apply_batch(RecordBatch(a.base, self.leader_epoch, encode_records(a.records)))
        for a in todo:
            a.on_done(AppendOutcome(True, a.base, a.base + len(a.records) - 1))
        if self.listener is not None:
            self.listener()

    def fail(self, error: int = ErrorCode.NOT_CONTROLLER) -> None:
        """Every pending append is lost (leadership moved before it committed)."""
        todo, self.appends = self.appends, []
        self.end_offset = self.image.next_offset
        for a in todo:
            a.on_done(AppendOutcome(False, error=error))

    def overtake(self, count: int = 1) -> None:
        """The Raft core writes `count` entries of its own (read barriers' ReadMarkers) at the offsets
        promised to the pending appends, and commits them; the pending appends move up by `count`."""
        base = self.appends[0].base if self.appends else self.end_offset
        markers = tuple(encode_control(ReadMarkerMessage()) for _ in range(count))
        self.image.apply_batch(RecordBatch(base, self.leader_epoch, markers, control=True))
        for a in self.appends:
            a.base += count
        self.end_offset += count
        if self.listener is not None:
            self.listener()

    def records(self) -> list[MetadataRecord]:
        return [r for a in self.appends for r in a.records]


class Harness:
    """A controller on a fake port, activated, with helpers that send requests and commit."""

    def __init__(self, config: ControllerConfig | None = None, authorizer: Authorizer | None = None) -> None:
        self.port = FakePort()
        self.port.image.set_cluster_id(CLUSTER_ID)
        self.now = 0
        self.ctl = QuorumController(self.port, config or ControllerConfig(), authorizer)
        self.port.listener = lambda: self.ctl.on_committed(self.now)
        self.ctl.activate(self.now)
        self.port.commit()  # the bootstrap metadata.version
        self._cid = 0
        self.incarnations: dict[int, uuid.UUID] = {}

    def send(self, message: object, ctx: RequestContext = ADMIN) -> int:
        self._cid += 1
        self.ctl.handle_request(self.now, ctx, "conn", self._cid, message)
        return self._cid

    def answer(self, cid: int) -> object | None:
        for _reply_to, correlation_id, message in self.port.responses:
            if correlation_id == cid:
                return message
        return None

    def call(self, message: object, ctx: RequestContext = ADMIN, commit: bool = True) -> object:
        cid = self.send(message, ctx)
        if commit:
            self.port.commit()
        response = self.answer(cid)
        assert response is not None, f"no answer to {message}"
        return response

    def tick(self, now_ms: int) -> None:
        self.now = now_ms
        self.ctl.on_tick(now_ms)

    def register(
        self, broker_id: int, incarnation: uuid.UUID | None = None, **kw: object
    ) -> BrokerRegistrationResponse:
        inc = incarnation or uuid.uuid5(uuid.NAMESPACE_OID, f"{broker_id}/{self.now}/{self._cid}")
        self.incarnations[broker_id] = inc
        request = BrokerRegistrationRequest(
            broker_id,
            kw.pop("cluster_id", CLUSTER_ID),  # type: ignore[arg-type]
            inc,
            (Listener("PLAINTEXT", f"127.0.0.{broker_id}", 9092, 0),),
            kw.pop("features", (BrokerRegistrationFeature("metadata.version", 1, 1),)),  # type: ignore[arg-type]
        )
        response = self.call(request, BROKER)
        assert isinstance(response, BrokerRegistrationResponse)
        return response

    def heartbeat(self, broker_id: int, epoch: int, offset: int | None = None, **kw: bool) -> BrokerHeartbeatResponse:
        current = self.port.image.last_offset if offset is None else offset
        response = self.call(BrokerHeartbeatRequest(broker_id, epoch, current, **kw), BROKER)
        assert isinstance(response, BrokerHeartbeatResponse)
        return response

    def online_broker(self, broker_id: int) -> int:
        """Register and unfence a broker; returns its epoch."""
        epoch = self.register(broker_id).broker_epoch
        assert epoch >= 0
        response = self.heartbeat(broker_id, epoch)
        assert not response.is_fenced, response
        return epoch
