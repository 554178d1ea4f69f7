"""The ReplicaHeartbeat extension messages on the wire: registry entry, codec round trip, bad frames."""

from __future__ import annotations

import uuid

import pytest

from node.protocol import registry
from node.protocol.codec import BinaryCodec, FrameError, FrameKind
from node.protocol.errors import ErrorCode
from node.protocol.replication import (
    REPLICA_HEARTBEAT_API_KEY,
    ReplicaHeartbeatPartition,
    ReplicaHeartbeatRequest,
    ReplicaHeartbeatResponse,
)

REQUEST = ReplicaHeartbeatRequest(
    replica_id=3,
    broker_epoch=2**40,
    metadata_offset=12345,
    partitions=(
        ReplicaHeartbeatPartition(uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8"), 0, 7),
        ReplicaHeartbeatPartition(uuid.UUID(int=1), 2**31 - 1, 0),
    ),
)


def test_registered_as_a_broker_api_with_its_private_key():
    assert registry.API_KEYS[ReplicaHeartbeatRequest] == registry.API_KEYS[ReplicaHeartbeatResponse] == 9001
    assert REPLICA_HEARTBEAT_API_KEY in registry.BROKER_API_KEYS
    assert registry.RESPONSE_FOR[ReplicaHeartbeatRequest] is ReplicaHeartbeatResponse
    assert ReplicaHeartbeatRequest not in registry.FORWARDABLE_REQUESTS


@pytest.mark.parametrize("message", [REQUEST, ReplicaHeartbeatRequest(1, -1, -1, ())])
def test_request_round_trip(message):
    codec = BinaryCodec(api_keys=registry.BROKER_API_KEYS)
    frame = codec.decode(codec.encode_request(99, message))
    assert (frame.kind, frame.api_key, frame.correlation_id, frame.message) == (
        FrameKind.REQUEST,
        9001,
        99,
        message,
    )


@pytest.mark.parametrize("code", [ErrorCode.NONE, ErrorCode.STALE_BROKER_EPOCH])
def test_response_round_trip(code):
    codec = BinaryCodec()
    frame = codec.decode(codec.encode_response(5, ReplicaHeartbeatResponse(code)))
    assert frame.kind is FrameKind.RESPONSE and frame.message == ReplicaHeartbeatResponse(code)


def test_truncated_or_lying_frames_are_frame_errors():
    codec = BinaryCodec()
    data = codec.encode_request(1, REQUEST)
    with pytest.raises(FrameError):
        codec.decode(data[:-3])
    # Claim a billion partitions in a small frame: refused before anything is allocated.
    count_at = 13 + 4 + 8 + 8  # frame header (length, key, version, correlation id, flags), then 3 fields
    assert data[count_at : count_at + 4] == (2).to_bytes(4, "big")
    lying = data[:count_at] + (10**9).to_bytes(4, "big") + data[count_at + 4 :]
    with pytest.raises(FrameError, match="bad array count"):
        codec.decode(lying)


def test_a_controller_only_endpoint_still_decodes_it_but_a_quorum_endpoint_does_not():
    data = BinaryCodec().encode_request(1, REQUEST)
    assert BinaryCodec(api_keys=registry.CONTROLLER_API_KEYS).decode(data).message == REQUEST
    with pytest.raises(FrameError, match="not served"):
        BinaryCodec(api_keys=registry.QUORUM_API_KEYS).decode(data)
