"""The `kafka` target: requests in Kafka's own framing, what librdkafka, the Java AdminClient and
kafka-python send to either listener.

The other targets speak the cluster's own framing. Real Kafka clients reach a different decoder
(`node/protocol/kafka_codec.py`: the request header, every served version of each API's layout,
compact and tagged fields from the first flexible version), then the same handlers, and their answers
are encoded back in the version the client asked in. Each input here is one such request: an API
the listener serves (now and then one it does not), a version in its served range (now and then
outside it), a body sampled field by field from the version's layout with names, ids and configs
hinted from the node's image (the `clients` target's node: three live brokers, two topics), 10 % of
the values then an edge value of their wire type, 30 % of the frames damaged as bytes. A request the
node takes must get an answer that encodes in the client's version: the runtime drops a client
whose answer it cannot encode, which keeps the node up but leaves that client without an answer.
"""

from __future__ import annotations

import random
import struct
import uuid
from typing import Any

from harness.fuzz.clients import CONFIG_NAMES, CONFIG_VALUES, ClientsTarget
from harness.fuzz.describe import clip, describe_node
from harness.fuzz.mutate import mutate_bytes
from node.process.process import CONTROLLER_LISTENER
from node.protocol.kafka_codec import KafkaCodec
from node.protocol.kafka_wire import Field, Writer, encode_body

LISTENERS = (CONTROLLER_LISTENER, "BROKER")
_INT_RANGES = {"int8": 7, "int16": 15, "int32": 31, "int64": 63}
_EDGE_STRINGS = ("", " ", "\x00", "ü" * 3, "x" * 40_000, "../../etc", "t1\n", "*")


class KafkaTarget:
    """One input: a Kafka-framed request on either listener, sampled from the layouts."""

    def __init__(self, seed: int) -> None:
        self.clients = ClientsTarget(seed)  # the node, with brokers and topics worth naming
        self.node = self.clients.node
        self.count = 0
        self._last: tuple[str, bytes, str] = (CONTROLLER_LISTENER, b"", "")

    def __call__(self, rng: random.Random) -> bool:
        self.count += 1
        if rng.random() < 0.1:
            self.node.advance(rng.choice((10, 100, 1000)))
        listener = rng.choice(LISTENERS)
        frame, what = kafka_request(self.node.kafka_codecs[listener], rng, self._hints(), self.count)
        if rng.random() < 0.3:
            frame = mutate_bytes(frame, rng)
        self._last = (listener, frame, what)
        # a token per request, as the runtime keys a Kafka connection's answers: one may come late
        accepted = self.node.feed_kafka(listener, frame, ("kafka", self.count))
        if self.count % 100 == 0:
            self.node.still_serves()
        return accepted

    def _hints(self) -> dict[str, tuple[Any, ...]]:
        image = self.node.process.image
        return {
            "names": (*image.topics.values(), "t1", "no-such-topic"),
            "topic_ids": tuple(_uuid(topic_id) for topic_id in image.topics),
            "brokers": (*image.brokers, -1, 1000),
        }

    def last_input(self) -> list[str]:
        listener, frame, what = self._last
        if not frame:
            return ["nothing sent yet"]
        return [
            f"a Kafka-framed request on the {listener} listener: {clip(what, 400)}",
            f"{len(frame)} bytes, hex: {frame[:256].hex(' ', -4)}" + (" ..." if len(frame) > 256 else ""),
        ]

    def state(self) -> str:
        return describe_node(self.node)


def _uuid(text: str) -> uuid.UUID:
    try:
        return uuid.UUID(text)
    except ValueError:
        return uuid.UUID(int=0)


def kafka_request(
    codec: KafkaCodec, rng: random.Random, hints: dict[str, tuple[Any, ...]], cid: int
) -> tuple[bytes, str]:
    """A whole request frame in Kafka's framing, and what it is (for a replay)."""
    if rng.random() < 0.03:
        api_key, version = rng.randint(0, 80), rng.randint(0, 15)
        layout = codec.layouts.get(api_key, (None, None))[0]
    else:
        api_key = rng.choice(sorted(codec.layouts))
        layout = codec.layouts[api_key][0]
        lo, hi = layout.served
        version = rng.randint(lo, hi) if rng.random() < 0.95 else rng.choice((lo - 1, hi + 1, 99))
    body: dict[str, Any] = {}
    if layout is not None:
        body = _struct(layout.fields, max(0, version), rng, hints)
    header = Writer()
    header.int("int16", api_key)
    header.int("int16", version)
    header.int("int32", cid)
    header.string(rng.choice(("rdkafka", "adminclient-1", None, "")), compact=False)
    flexible = layout is not None and layout.is_flexible(version)
    if flexible:
        header.uvarint(0)  # request header v2: no tagged fields
    try:
        payload = bytes(header.out) + (encode_body(layout, max(0, version), body) if layout else b"")
    except (struct.error, ValueError, TypeError, OverflowError, UnicodeError):
        payload = bytes(header.out)  # an edge value its wire type cannot hold: the header alone
    name = layout.name if layout is not None else f"API key {api_key}"
    return struct.pack(">i", len(payload)) + payload, f"{name} v{version} {clip(repr(body), 300)}"


def _struct(fields: tuple[Field, ...], version: int, rng: random.Random, hints: dict[str, tuple[Any, ...]]) -> dict:
    out: dict[str, Any] = {}
    for f in fields:
        if not f.present(version):
            continue
        if f.null_ok(version) and rng.random() < 0.1:
            out[f.name] = None
        elif f.type == "{}":
            out[f.name] = _struct(f.fields, version, rng, hints)
        elif f.type.startswith("[]"):
            n = rng.choice((0, 1, 1, 2, 3)) if rng.random() < 0.98 else 300
            if f.fields:
                out[f.name] = [_struct(f.fields, version, rng, hints) for _ in range(n)]
            else:
                out[f.name] = [_value(f.name, f.type[2:], rng, hints) for _ in range(n)]
        else:
            out[f.name] = _value(f.name, f.type, rng, hints)
    return out


def _value(name: str, type_: str, rng: random.Random, hints: dict[str, tuple[Any, ...]]) -> Any:
    edge = rng.random() < 0.1
    if type_ in _INT_RANGES:
        bits = _INT_RANGES[type_]
        if edge:
            return rng.choice((-(1 << bits), (1 << bits) - 1, -1, 0))
        if "Broker" in name or "NodeId" in name or name in ("ReplicaId", "Leader"):
            return rng.choice(hints["brokers"])
        if name == "ResourceType":
            return rng.choice((2, 4, 1, 0, 3))
        if name in ("PatternType", "Operation", "PermissionType", "ResourcePatternType"):
            return rng.choice((0, 1, 2, 3, 4))
        if name == "ConfigOperation":
            return rng.choice((0, 0, 1, 2, 3))
        return rng.choice((-1, 0, 1, 2, 3, 5, 1000))
    if type_ == "bool":
        return rng.random() < 0.5
    if type_ == "uuid":
        ids = hints["topic_ids"]
        return rng.choice(ids) if ids and rng.random() < 0.7 else uuid.UUID(int=rng.getrandbits(128))
    if type_ == "bytes":
        return rng.randbytes(rng.choice((0, 1, 16, 300)))
    if edge:
        return rng.choice(_EDGE_STRINGS)
    if "Config" in name or (name in ("Name", "Key") and rng.random() < 0.3):
        return rng.choice(CONFIG_NAMES) if "Value" not in name else rng.choice(CONFIG_VALUES)
    if "Value" in name:
        return rng.choice(CONFIG_VALUES)
    if "Topic" in name or "Resource" in name or name == "Name":
        return rng.choice(hints["names"])
    if "Principal" in name:
        return rng.choice(("User:alice", "User:*", "alice", "User:"))
    if "Host" in name:
        return rng.choice(("*", "127.0.0.1", ""))
    return rng.choice(("", "a", "t1", "User:bob"))
