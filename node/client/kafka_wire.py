"""The harness's own questions to a Kafka cluster, on Kafka's wire: DescribeQuorum, DescribeCluster and
DescribeConfigs at one chosen broker.

confluent-kafka's Python AdminClient has no DescribeQuorum, and the adapter must find the active
controller (for `isolate-leader` and `kill leader`) and know when every voter has caught up. Nor can
it aim a topic's DescribeConfigs at a broker: measured with Kafka's request log, librdkafka sends
every topic DescribeConfigs and IncrementalAlterConfigs to the broker the Metadata answer names as
controller (a KRaft broker names a random live broker there), whichever broker the client was
bootstrapped with. A read from one broker's metadata image is what the workloads must attribute, so
it is sent here. These requests are small: they use the layouts the reference cluster already serves
(node/protocol/kafka_schemas.py), one blocking socket per call. Kafka 4.x answers every version used
(DescribeQuorum v1, DescribeCluster v1, DescribeConfigs v4).
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass
from typing import Any

from node.protocol.kafka_schemas import (
    DESCRIBE_CLUSTER_REQUEST,
    DESCRIBE_CLUSTER_RESPONSE,
    DESCRIBE_CONFIGS_REQUEST,
    DESCRIBE_CONFIGS_RESPONSE,
    DESCRIBE_QUORUM_REQUEST,
    DESCRIBE_QUORUM_RESPONSE,
)
from node.protocol.kafka_wire import Message, Reader, Writer, decode_body, encode_body

CLIENT_ID = "kchaos-harness"
METADATA_TOPIC = "__cluster_metadata"
MAX_FRAME = 16 << 20


class WireError(Exception):
    """No answer (refused, timed out, closed) or an answer that does not parse."""


def call(
    host: str, port: int, request: Message, response: Message, version: int, body: dict[str, Any], timeout: float = 1.0
) -> dict[str, Any]:
    """One request on a fresh connection; the decoded response body."""
    header = Writer()
    header.int("int16", request.api_key)
    header.int("int16", version)
    header.int("int32", 1)
    header.string(CLIENT_ID, False)  # the client id is a plain (non-compact) string in every header version
    if request.is_flexible(version):
        header.uvarint(0)
    payload = bytes(header.out) + encode_body(request, version, body)
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            sock.sendall(struct.pack(">i", len(payload)) + payload)
            size = struct.unpack(">i", _read(sock, 4))[0]
            if not 0 < size <= MAX_FRAME:
                raise WireError(f"{host}:{port} answered a frame of {size} bytes")
            frame = _read(sock, size)
    except OSError as exc:
        raise WireError(f"{host}:{port}: {exc}") from None
    reader = Reader(frame)
    reader.int("int32")  # correlation id
    if response.is_flexible(version):
        reader.tagged_fields()
    try:
        return decode_body(response, version, reader)
    except Exception as exc:
        raise WireError(f"{host}:{port}: cannot parse {response.name}: {exc}") from None


def _read(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise WireError("connection closed before the answer")
        data += chunk
    return data


@dataclass(frozen=True)
class Quorum:
    """A DescribeQuorum answer from the leader of the metadata partition."""

    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: dict[int, int]  # replica id -> log end offset
    observers: dict[int, int]

    def lagging(self) -> list[int]:
        """Voters whose log does not reach the high watermark yet."""
        return sorted(r for r, leo in self.voters.items() if leo < self.high_watermark)


def describe_quorum(host: str, port: int, timeout: float = 1.0) -> Quorum | None:
    """Ask one controller listener; its quorum view when it leads (a follower answers with an error:
    None), WireError when it does not answer."""
    body = {"Topics": [{"TopicName": METADATA_TOPIC, "Partitions": [{"PartitionIndex": 0}]}]}
    answer = call(host, port, DESCRIBE_QUORUM_REQUEST, DESCRIBE_QUORUM_RESPONSE, 1, body, timeout)
    if answer["ErrorCode"] != 0 or not answer["Topics"] or not answer["Topics"][0]["Partitions"]:
        return None
    p = answer["Topics"][0]["Partitions"][0]
    if p["ErrorCode"] != 0:
        return None
    return Quorum(
        leader_id=p["LeaderId"],
        leader_epoch=p["LeaderEpoch"],
        high_watermark=p["HighWatermark"],
        voters={v["ReplicaId"]: v["LogEndOffset"] for v in p["CurrentVoters"]},
        observers={v["ReplicaId"]: v["LogEndOffset"] for v in p["Observers"]},
    )


def unfenced_brokers(host: str, port: int, timeout: float = 1.0) -> set[int]:
    """The brokers one broker's metadata image lists in DescribeCluster (v1 lists only unfenced ones)."""
    body = {"IncludeClusterAuthorizedOperations": False, "EndpointType": 1}
    answer = call(host, port, DESCRIBE_CLUSTER_REQUEST, DESCRIBE_CLUSTER_RESPONSE, 1, body, timeout)
    if answer["ErrorCode"] != 0:
        raise WireError(f"{host}:{port}: DescribeCluster error {answer['ErrorCode']}")
    return {b["BrokerId"] for b in answer["Brokers"]}


TOPIC_RESOURCE = 2
DYNAMIC_TOPIC_CONFIG = 1  # DescribeConfigs' ConfigSource of a topic's own (dynamic) value


class ServerError(WireError):
    """The broker answered with an error code (`code`)."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def topic_configs(host: str, port: int, topic: str, names: list[str], timeout: float = 5.0) -> dict[str, str | None]:
    """The topic's dynamic values of `names` as this broker's metadata image has them (None: the key
    has only a default); ServerError for an error answer, WireError for none."""
    body = {
        "Resources": [{"ResourceType": TOPIC_RESOURCE, "ResourceName": topic, "ConfigurationKeys": names}],
        "IncludeSynonyms": False,
        "IncludeDocumentation": False,
    }
    answer = call(host, port, DESCRIBE_CONFIGS_REQUEST, DESCRIBE_CONFIGS_RESPONSE, 4, body, timeout)
    result = answer["Results"][0] if answer["Results"] else None
    if result is None:
        raise WireError(f"{host}:{port}: DescribeConfigs answered no resource")
    if result["ErrorCode"] != 0:
        raise ServerError(f"{host}:{port}: DescribeConfigs error {result['ErrorCode']}", result["ErrorCode"])
    found = {c["Name"]: c for c in result["Configs"]}
    missing = [n for n in names if n not in found]
    if missing:
        raise WireError(f"{host}:{port}: DescribeConfigs did not return {missing[0]}")
    return {n: found[n]["Value"] if found[n]["ConfigSource"] == DYNAMIC_TOPIC_CONFIG else None for n in names}
