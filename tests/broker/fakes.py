"""A recording ProcessPort and a small metadata image builder for the broker's unit tests."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

from node.broker import Broker, BrokerConfig, BrokerState
from node.metadata.image import MetadataDelta, MetadataImage
from node.metadata.records import (
    BrokerEndpoint,
    FenceBrokerRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    UnfenceBrokerRecord,
)
from node.protocol.broker_api import (
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    Listener,
)
from node.protocol.errors import ErrorCode

CLUSTER = "kchaos-test-cluster"
INCARNATION = uuid.UUID("12345678-1234-5678-1234-567812345678")
LISTENERS = (Listener("PLAINTEXT", "127.0.0.1", 9092, 0),)
T1 = "00000000-0000-4000-8000-000000000001"
T2 = "00000000-0000-4000-8000-000000000002"


@dataclass
class Sent:
    destination: int
    message: object
    on_reply: Callable[[object | None], None]
    answered: bool = False

    def reply(self, response: object | None) -> None:
        assert not self.answered, "a request is answered once"
        self.answered = True
        self.on_reply(response)


@dataclass
class FakePort:
    """Records every effect; the test plays the network and the process (callbacks run when told)."""

    node_id: int = 1
    image: MetadataImage = field(default_factory=MetadataImage)
    leader_id: int = -1
    leader_epoch: int = 0
    controller_ids: tuple[int, ...] = (100, 101, 102)
    sent: list[Sent] = field(default_factory=list)
    responses: list[tuple[Hashable, int, object]] = field(default_factory=list)
    wakes: list[int] = field(default_factory=list)
    shutdowns: list[str] = field(default_factory=list)

    def respond(self, reply_to: Hashable, correlation_id: int, message: object) -> None:
        self.responses.append((reply_to, correlation_id, message))

    def send(self, destination: int, message: object, on_reply: Callable[[object | None], None]) -> None:
        self.sent.append(Sent(destination, message, on_reply))

    def next_append_offset(self) -> int:
        raise AssertionError("a broker never appends")

    def append(self, records, on_done):  # pragma: no cover - a broker never appends
        raise AssertionError("a broker never appends")

    def read_barrier(self, on_done):  # pragma: no cover
        raise AssertionError("a broker never asks for a read barrier")

    def wake_at(self, deadline_ms: int) -> None:
        self.wakes.append(deadline_ms)

    def shut_down(self, reason: str, requested: bool = False) -> None:
        self.shutdowns.append(reason)

    # --- helpers for the tests ---
    def sent_of(self, kind: type) -> list[Sent]:
        return [s for s in self.sent if isinstance(s.message, kind)]

    def unanswered(self, kind: type) -> list[Sent]:
        return [s for s in self.sent_of(kind) if not s.answered]

    def last(self, kind: type) -> Sent:
        found = self.sent_of(kind)
        assert found, f"no {kind.__name__} was sent"
        return found[-1]


class ImageBuilder:
    """Replays records into the port's image at consecutive offsets, as committed batches would."""

    def __init__(self, image: MetadataImage) -> None:
        self.image = image

    def apply(self, *records: MetadataRecord) -> int:
        """Apply `records` as one batch; returns the offset of the first."""
        delta = MetadataDelta(self.image)
        base = self.image.last_offset + 1
        for i, record in enumerate(records):
            delta.replay(record, base + i, 1)
        self.image.apply_delta(delta)
        return base

    def register(self, broker_id: int, fenced: bool = False) -> int:
        """Register `broker_id` (unfenced unless asked); returns its broker epoch."""
        epoch = self.image.last_offset + 1
        endpoint = (BrokerEndpoint("PLAINTEXT", "127.0.0.1", 9000 + broker_id, 0),)
        self.apply(RegisterBrokerRecord(broker_id, str(INCARNATION), epoch, endpoint, {}, None, fenced))
        return epoch

    def fence(self, broker_id: int) -> None:
        self.apply(FenceBrokerRecord(broker_id, self.image.broker(broker_id).broker_epoch))

    def unfence(self, broker_id: int) -> None:
        self.apply(UnfenceBrokerRecord(broker_id, self.image.broker(broker_id).broker_epoch))

    def topic(self, topic_id: str, name: str, *partitions: tuple[tuple[int, ...], tuple[int, ...], int]) -> None:
        """A topic whose partition i has (replicas, isr, leader) = partitions[i]."""
        records: list[MetadataRecord] = [TopicRecord(name, topic_id)]
        for index, (replicas, isr, leader) in enumerate(partitions):
            records.append(PartitionRecord(index, topic_id, replicas, isr, leader=leader))
        self.apply(*records)

    def change_isr(self, topic_id: str, index: int, isr: tuple[int, ...]) -> None:
        self.apply(PartitionChangeRecord(index, topic_id, isr=isr))


def make_broker(
    node_id: int = 1,
    leader_id: int = -1,
    cluster_id: str | None = CLUSTER,
    **config: object,
) -> tuple[Broker, FakePort]:
    port = FakePort(node_id=node_id, leader_id=leader_id)
    port.image.set_cluster_id(CLUSTER)
    broker = Broker(port, BrokerConfig(node_id=node_id, **config), INCARNATION, LISTENERS, cluster_id)  # type: ignore[arg-type]
    return broker, port


def bring_online(broker: Broker, port: FakePort, now_ms: int = 0, leader_id: int = 100, epoch: int = 5) -> None:
    """Start, register with broker epoch `epoch`, and be unfenced by the first heartbeat."""
    if port.leader_id < 0:
        port.leader_id = leader_id
    broker.start(now_ms)
    port.last(BrokerRegistrationRequest).reply(BrokerRegistrationResponse(ErrorCode.NONE, epoch))
    port.last(BrokerHeartbeatRequest).reply(BrokerHeartbeatResponse(ErrorCode.NONE, True, False, False))
    assert broker.state is BrokerState.ONLINE


__all__ = [
    "CLUSTER",
    "INCARNATION",
    "LISTENERS",
    "T1",
    "T2",
    "FakePort",
    "ImageBuilder",
    "Sent",
    "bring_online",
    "make_broker",
]
