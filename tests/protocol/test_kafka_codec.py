"""Kafka's framing (node/protocol/kafka_codec.py), byte by byte: headers v1/v2, compact encodings,
ApiVersions' v0 fallback, the version rules, and bad input (only ever a FrameError)."""

from __future__ import annotations

import contextlib
import struct
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from node.protocol.admin import (
    ConfigOperation,
    ConfigResourceType,
    CreatableTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
    ElectionType,
    ElectLeadersPartitionResult,
    ElectLeadersRequest,
    ElectLeadersResponse,
    ElectLeadersTopicPartitions,
    ElectLeadersTopicResult,
    IncrementalAlterConfigsRequest,
    MetadataRequest,
    MetadataResponse,
    MetadataResponseBroker,
)
from node.protocol.codec import BinaryCodec
from node.protocol.errors import ErrorCode
from node.protocol.fields import FrameError
from node.protocol.kafka_codec import KafkaCodec, looks_like_kafka
from node.protocol.kafka_wire import Reader, Writer
from node.protocol.registry import BROKER_API_KEYS
from node.protocol.session import ApiVersionsRequest, SaslAuthenticateRequest, SaslAuthenticateResponse

CODEC = KafkaCodec(BROKER_API_KEYS | {55}, node_id=4)  # as a broker listener: DescribeQuorum too


def request(api_key: int, version: int, body: bytes, *, flexible: bool, correlation_id: int = 42) -> bytes:
    header = struct.pack(">hhih", api_key, version, correlation_id, 3) + b"cli" + (b"\x00" if flexible else b"")
    return struct.pack(">i", len(header) + len(body)) + header + body


def compact(text: str) -> bytes:
    raw = text.encode()
    return bytes([len(raw) + 1]) + raw


def test_api_versions_v3_advertises_exactly_the_served_layouts():
    frame = CODEC.decode_request(request(18, 3, compact("x") + compact("1") + b"\x00", flexible=True)).answer
    assert frame is not None
    # response header v0 even for v3 (no tagged-field byte after the correlation id)
    length, correlation_id, error = struct.unpack_from(">iih", frame)
    assert (length, correlation_id, error) == (len(frame) - 4, 42, ErrorCode.NONE)
    r = Reader(frame, 10)
    count = r.uvarint() - 1
    keys = {}
    for _ in range(count):
        key, lo, hi = r.int("int16"), r.int("int16"), r.int("int16")
        r.tagged_fields()
        keys[key] = (lo, hi)
    assert keys == {
        3: (0, 12),
        17: (1, 1),
        29: (0, 3),
        30: (0, 3),
        31: (0, 3),
        18: (0, 3),
        19: (0, 7),
        20: (0, 5),
        32: (0, 4),
        33: (0, 2),
        36: (0, 2),
        43: (0, 2),
        44: (0, 1),
        55: (0, 1),
        60: (0, 1),
        75: (0, 0),
    }
    assert r.int("int32") == 0  # throttle
    r.tagged_fields()
    assert r.pos == len(frame)


def test_unknown_api_versions_version_gets_a_v0_unsupported_version_answer():
    frame = CODEC.decode_request(request(18, 77, b"\x05garbage", flexible=True)).answer
    assert frame is not None
    _, correlation_id, error, count = struct.unpack_from(">iihi", frame)
    assert (correlation_id, error, count) == (42, ErrorCode.UNSUPPORTED_VERSION, 16)
    assert len(frame) == 4 + 4 + 2 + 4 + 16 * 6  # v0: no throttle, no tagged fields


def test_other_versions_not_served_are_frame_errors():
    with pytest.raises(FrameError, match="MetadataRequest v13 is not served"):
        CODEC.decode_request(request(3, 13, b"\x00" * 4, flexible=True))
    with pytest.raises(FrameError, match="API key 56 is not served"):  # AlterPartition: inter-node only
        CODEC.decode_request(request(56, 0, b"", flexible=False))


def test_metadata_null_and_empty_topics_by_version():
    assert CODEC.decode_request(request(3, 0, struct.pack(">i", 0), flexible=False)).message == MetadataRequest(None)
    assert CODEC.decode_request(request(3, 1, struct.pack(">i", 0), flexible=False)).message == MetadataRequest(())
    assert CODEC.decode_request(request(3, 1, struct.pack(">i", -1), flexible=False)).message == MetadataRequest(None)
    named = b"\x02" + b"\x00" * 16 + compact("t") + b"\x00" + b"\x00\x00" + b"\x00"
    assert CODEC.decode_request(request(3, 12, named, flexible=True)).message == MetadataRequest(("t",))
    # librdkafka's "every topic" v12 request: a null array in a 4-byte placeholder; Kafka ignores the rest
    quirk = b"\x00\x00\x00\x00\x01\x00\x00"
    assert CODEC.decode_request(request(3, 12, quirk, flexible=True)).message == MetadataRequest(None)


def test_metadata_response_v12_is_flexible_and_reports_a_broker_as_controller():
    header = CODEC.decode_request(request(3, 12, b"\x00\x00\x00\x00", flexible=True)).header
    brokers = (MetadataResponseBroker(5, "h", 9092), MetadataResponseBroker(4, "g", 9093))
    response = MetadataResponse(brokers, "c", 1, ())
    frame = CODEC.encode_response(header, response)
    r = Reader(frame, 4)
    assert r.int("int32") == 42
    r.tagged_fields()  # response header v1
    assert r.int("int32") == 0  # throttle
    assert r.uvarint() - 1 == 2
    assert (r.int("int32"), r.string(True), r.int("int32"), r.string(True)) == (5, "h", 9092, None)
    r.tagged_fields()
    assert (r.int("int32"), r.string(True), r.int("int32"), r.string(True)) == (4, "g", 9093, None)
    r.tagged_fields()
    assert r.string(True) == "c"
    assert r.int("int32") == 4  # this node, a listed broker; never controller 1, which clients cannot reach


def test_a_controller_listener_lists_the_voters_and_the_active_controller():
    """KIP-919's view: a client bootstrapped on the controllers sees the voters at their controller
    listeners and the active controller as "the controller", so it sends DescribeConfigs there."""
    codec = KafkaCodec(BROKER_API_KEYS, node_id=2, controllers=[(1, "a", 9093), (2, "b", 9093), (3, "c", 9093)])
    brokers = (MetadataResponseBroker(4, "h", 9092),)
    for leader, reported in ((3, 3), (-1, -1), (4, -1)):  # the leader it knows; none; not a voter
        header = codec.decode_request(request(3, 1, struct.pack(">i", -1), flexible=False)).header
        r = Reader(codec.encode_response(header, MetadataResponse(brokers, "c", leader, ())), 4)
        assert r.int("int32") == 42
        listed = [(r.int("int32"), r.string(False), r.int("int32"), r.string(False)) for _ in range(r.int("int32"))]
        assert listed == [(1, "a", 9093, None), (2, "b", 9093, None), (3, "c", 9093, None)]
        assert r.int("int32") == reported


def test_a_broker_not_serving_yet_closes_instead_of_an_empty_metadata_answer():
    """librdkafka would believe an empty Metadata answer for ~18 s; a broker listener closes instead."""
    from node.broker.refusals import UNAVAILABLE, refuse

    refusal = refuse(MetadataRequest(None), UNAVAILABLE)
    assert CODEC.closes_instead(refusal)
    assert not CODEC.closes_instead(MetadataResponse((MetadataResponseBroker(4, "h", 9092),), "c", 4, ()))
    assert not CODEC.closes_instead(MetadataResponse((), "c", -1, ()))  # an answer, not a refusal
    controllers = KafkaCodec(BROKER_API_KEYS, node_id=1, controllers=[(1, "a", 9093)])
    assert not controllers.closes_instead(refusal)


def test_create_topics_v7_both_ways():
    w = Writer()
    w.uvarint(2)
    w.string("t", True)
    w.int("int32", 3)
    w.int("int16", 2)
    w.uvarint(1)  # no assignments
    w.uvarint(2)
    w.string("cleanup.policy", True)
    w.string("compact", True)
    w.uvarint(0)
    w.uvarint(0)
    w.int("int32", 5000)
    w.out.append(1)
    w.uvarint(0)
    decoded = CODEC.decode_request(request(19, 7, bytes(w.out), flexible=True))
    assert decoded.message == CreateTopicsRequest(
        (decoded.message.topics[0].__class__("t", 3, 2, (), (("cleanup.policy", "compact"),)),), 5000, True
    )
    topic_id = uuid.uuid4()
    frame = CODEC.encode_response(
        decoded.header, CreateTopicsResponse((CreatableTopicResult("t", topic_id, ErrorCode.NONE, None, 3, 2),))
    )
    r = Reader(frame, 8)
    r.tagged_fields()
    assert r.int("int32") == 0 and r.uvarint() == 2
    assert r.string(True) == "t" and uuid.UUID(bytes=bytes(r.take(16))) == topic_id
    assert (r.int("int16"), r.string(True), r.int("int32"), r.int("int16")) == (0, None, 3, 2)


def test_elect_leaders_v2_both_ways():
    body = b"\x01" + b"\x02" + compact("t") + b"\x03" + struct.pack(">ii", 0, 2) + b"\x00"
    body += struct.pack(">i", 5000) + b"\x00"
    decoded = CODEC.decode_request(request(43, 2, body, flexible=True))
    assert decoded.message == ElectLeadersRequest(
        ElectionType.UNCLEAN, (ElectLeadersTopicPartitions("t", (0, 2)),), 5000
    )
    results = (
        ElectLeadersPartitionResult(0, ErrorCode.NONE),
        ElectLeadersPartitionResult(2, ErrorCode.ELECTION_NOT_NEEDED, "x"),
    )
    frame = CODEC.encode_response(decoded.header, ElectLeadersResponse(0, (ElectLeadersTopicResult("t", results),)))
    r = Reader(frame, 8)
    r.tagged_fields()
    assert (r.int("int32"), r.int("int16"), r.uvarint(), r.string(True), r.uvarint()) == (0, 0, 2, "t", 3)
    assert (r.int("int32"), r.int("int16"), r.string(True)) == (0, 0, None)
    r.tagged_fields()
    assert (r.int("int32"), r.int("int16"), r.string(True)) == (2, 84, "x")
    r.tagged_fields()
    r.tagged_fields()
    r.tagged_fields()
    assert r.pos == len(frame)


def test_elect_leaders_v0_is_preferred_and_v1_maps_unknown_types():
    # v0: no ElectionType, a null topic list (every partition), no top-level error code in the answer
    decoded = CODEC.decode_request(request(43, 0, struct.pack(">ii", -1, 100), flexible=False))
    assert decoded.message == ElectLeadersRequest(ElectionType.PREFERRED, None, 100)
    frame = CODEC.encode_response(decoded.header, ElectLeadersResponse(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ()))
    assert frame[8:] == struct.pack(">ii", 0, 0)  # throttle, no results
    v1 = CODEC.decode_request(request(43, 1, struct.pack(">bii", 7, -1, 100), flexible=False))
    assert v1.message.election_type is ElectionType.UNKNOWN


def test_incremental_alter_configs_v0_maps_unknown_codes():
    body = struct.pack(">i", 1) + struct.pack(">bh", 2, 1) + b"t" + struct.pack(">i", 2)
    body += struct.pack(">h", 1) + b"a" + struct.pack(">b", 3) + struct.pack(">h", -1)
    body += struct.pack(">h", 1) + b"b" + struct.pack(">b", 9) + struct.pack(">h", 1) + b"v" + b"\x00"
    message = CODEC.decode_request(request(44, 0, body, flexible=False)).message
    assert isinstance(message, IncrementalAlterConfigsRequest)
    [resource] = message.resources
    assert resource.resource_type is ConfigResourceType.TOPIC
    assert [(c.name, c.config_operation, c.value) for c in resource.configs] == [
        ("a", ConfigOperation.SUBTRACT, None),
        ("b", ConfigOperation.UNKNOWN, "v"),
    ]


@pytest.mark.parametrize(
    "frame, reason",
    [
        (request(3, 12, b"\x00", flexible=True)[:-1] + b"", "truncated"),
        (request(3, 12, b"\x80\x80\x80\x80\x80\x01", flexible=True), "longer than 5 bytes"),
        (request(3, 1, struct.pack(">i", 1 << 30), flexible=False), "cannot fit"),
        (request(19, 4, struct.pack(">i", 1) + struct.pack(">h", 2) + b"\xff\xfe", flexible=False), "not UTF-8"),
        (struct.pack(">ihh", 4, 3, 0), "too short"),
    ],
)
def test_bad_frames_are_one_line_frame_errors(frame, reason):
    with pytest.raises(FrameError, match=reason):
        CODEC.decode_request(frame)


def test_sasl_authenticate_v2_bytes_both_ways():
    decoded = CODEC.decode_request(request(36, 2, b"\x04\x00u\x00" + b"\x00", flexible=True))
    assert decoded.message == SaslAuthenticateRequest(b"\x00u\x00")
    frame = CODEC.encode_response(decoded.header, SaslAuthenticateResponse(ErrorCode.SASL_AUTHENTICATION_FAILED, "no"))
    r = Reader(frame, 8)
    r.tagged_fields()
    assert (r.int("int16"), r.string(True), r.length(True), r.int("int64")) == (58, "no", 0, 0)
    with pytest.raises(FrameError, match="SaslHandshakeRequest v0 is not served"):  # raw tokens would follow
        CODEC.decode_request(request(17, 0, b"\x00\x05PLAIN", flexible=False))


def test_describe_topic_partitions_is_answered_as_metadata_with_a_null_cursor():
    body = b"\x02" + compact("t") + b"\x00" + struct.pack(">i", 10) + b"\xff" + b"\x00"
    decoded = CODEC.decode_request(request(75, 0, body, flexible=True))
    assert decoded.message == MetadataRequest(("t",))
    with_cursor = b"\x01" + struct.pack(">i", 10) + b"\x01" + compact("t") + struct.pack(">i", 3) + b"\x00\x00"
    assert CODEC.decode_request(request(75, 0, with_cursor, flexible=True)).message == MetadataRequest(None)
    frame = CODEC.encode_response(decoded.header, MetadataResponse((), "c", 1, ()))
    r = Reader(frame, 8)
    r.tagged_fields()
    assert (r.int("int32"), r.uvarint(), r.int("int8")) == (0, 1, -1)  # no topics, NextCursor null
    r.tagged_fields()
    assert r.pos == len(frame)


def test_sniffing_tells_kafka_from_our_own_api_versions():
    ours = BinaryCodec().encode_request(1, ApiVersionsRequest())  # 9 bytes after the length
    assert not looks_like_kafka(ours)
    assert looks_like_kafka(request(18, 0, b"", flexible=False))
    assert not looks_like_kafka(request(3, 12, b"\x00" * 4, flexible=True))


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from([3, 17, 18, 19, 20, 29, 30, 31, 32, 33, 36, 43, 44, 55, 60, 75]),
    st.integers(0, 13),
    st.binary(max_size=64),
)
def test_any_bytes_decode_or_raise_frame_error(api_key, version, body):
    for flexible in (False, True):
        with contextlib.suppress(FrameError):  # anything else fails the test
            CODEC.decode_request(request(api_key, version, body, flexible=flexible))
