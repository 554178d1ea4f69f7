"""Wire layer of the controller, broker and admin APIs: registry, error codes, codec, Envelope helpers.

Round trips draw values from each message's schema (so a message added later is fuzzed too); the
byte-by-byte tests use one rich hand-written example per message type.
"""

from __future__ import annotations

import dataclasses
import struct
import tracemalloc
import uuid
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from node.protocol import messages, registry
from node.protocol.acls import (
    AclCreation,
    AclCreationResult,
    AclDescription,
    AclOperation,
    AclPermissionType,
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsFilter,
    DeleteAclsFilterResult,
    DeleteAclsMatchingAcl,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResource,
    DescribeAclsResponse,
    PatternType,
    ResourceType,
)
from node.protocol.admin import (
    AlterableConfig,
    AlterConfigsRequest,
    AlterConfigsResource,
    AlterConfigsResourceResponse,
    AlterConfigsResponse,
    ConfigOperation,
    ConfigResourceType,
    ConfigSource,
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeClusterBroker,
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeConfigsRequest,
    DescribeConfigsResource,
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    ElectionType,
    ElectLeadersPartitionResult,
    ElectLeadersRequest,
    ElectLeadersResponse,
    ElectLeadersTopicPartitions,
    ElectLeadersTopicResult,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResource,
    IncrementalAlterConfigsResponse,
    MetadataRequest,
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from node.protocol.broker_api import (
    AlterPartitionPartitionData,
    AlterPartitionPartitionResult,
    AlterPartitionRequest,
    AlterPartitionResponse,
    AlterPartitionTopicData,
    AlterPartitionTopicResult,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationFeature,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    EnvelopeRequest,
    EnvelopeResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Listener,
    SnapshotId,
)
from node.protocol.codec import SUPPORTED_VERSIONS, BinaryCodec, FrameError, FrameKind
from node.protocol.common import ZERO_UUID
from node.protocol.errors import ErrorCode
from node.protocol.fields import (
    INT32,
    SCHEMAS_BY_CLASS,
    Array,
    Batches,
    Bytes,
    Field,
    Fixed,
    OptionalStruct,
    Pair,
    String,
    Struct,
    array,
    define,
)
from node.protocol.forwarding import InvalidEnvelope, answer, unwrap, wrap
from node.protocol.replication import ReplicaHeartbeatPartition, ReplicaHeartbeatRequest, ReplicaHeartbeatResponse
from node.protocol.session import (
    PLAIN,
    ApiVersion,
    ApiVersionsRequest,
    ApiVersionsResponse,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
    parse_plain_auth_bytes,
    plain_auth_bytes,
)
from tests.protocol.test_codec import HEADER_LEN, batches, reframe

CODEC = BinaryCodec()
NEW_REQUESTS = tuple(c for c in registry.REQUESTS if c not in messages.REQUESTS)
NEW_RESPONSES = tuple(c for c in registry.RESPONSES if c not in messages.RESPONSES)
NEW_TYPES = NEW_REQUESTS + NEW_RESPONSES
TOPIC_ID = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
INCARNATION = uuid.UUID("12345678-1234-5678-1234-567812345678")


# --- value strategies derived from the schemas ---------------------------------------------------------

_FIXED_RANGES = {
    "int8": st.integers(-(2**7), 2**7 - 1),
    "int16": st.integers(-(2**15), 2**15 - 1),
    "int32": st.integers(-(2**31), 2**31 - 1),
    "int64": st.integers(-(2**63), 2**63 - 1),
    "uint16": st.integers(0, 2**16 - 1),
    "bool": st.booleans(),
    "error code": st.sampled_from(list(ErrorCode)),
    "uuid": st.uuids(),
}


def values_of(field: Field) -> st.SearchStrategy:
    """Any value the field can carry, read off the field type (so new messages need no test edits)."""
    if isinstance(field, Fixed):
        return st.sampled_from(list(field.enum)) if field.enum is not None else _FIXED_RANGES[field.name]
    if isinstance(field, String):
        text = st.text(max_size=12)
        return st.none() | text if field.nullable else text
    if isinstance(field, Bytes):
        raw = st.binary(max_size=24)
        return st.none() | raw if field.nullable else raw
    if isinstance(field, Array):
        items = st.lists(values_of(field.elem), max_size=3).map(tuple)
        return st.none() | items if field.nullable else items
    if isinstance(field, Pair):
        return st.tuples(values_of(field.key), values_of(field.value))
    if isinstance(field, OptionalStruct):
        return st.none() | messages_of(field.schema.cls)
    if isinstance(field, Struct):
        return messages_of(field.schema.cls)
    if isinstance(field, Batches):
        return st.lists(batches, max_size=2).map(tuple)
    raise AssertionError(f"no strategy for {field!r}")


def messages_of(cls: type) -> st.SearchStrategy:
    schema = SCHEMAS_BY_CLASS[cls]
    return st.builds(cls, *(values_of(f) for _, f in schema.fields))


def encode(msg, correlation_id: int = 42, codec: BinaryCodec = CODEC) -> bytes:
    if type(msg) in registry.REQUESTS:
        return codec.encode_request(correlation_id, msg)
    return codec.encode_response(correlation_id, msg)


def assert_decodes_or_frame_error(frame: bytes) -> None:
    """Damaged input may still decode (a changed integer); anything else must be a one-line FrameError."""
    try:
        decoded = CODEC.decode(frame)
    except FrameError as e:
        assert str(e) and "\n" not in str(e)
        return
    assert type(decoded.message) in registry.API_KEYS


# --- one rich example of each new message --------------------------------------------------------------

EXAMPLES = [
    CreateTopicsRequest(
        (
            CreatableTopic("orders", 3, 2, (), (("cleanup.policy", "compact"), ("retention.ms", None))),
            CreatableTopic("pinned", -1, -1, (CreatableReplicaAssignment(0, (1, 2)),)),
        ),
        5000,
        True,
    ),
    CreateTopicsResponse(
        (
            CreatableTopicResult("orders", TOPIC_ID, ErrorCode.NONE, None, 3, 2),
            CreatableTopicResult("bad name", ZERO_UUID, ErrorCode.INVALID_TOPIC_EXCEPTION, "illegal char ' '"),
        )
    ),
    DeleteTopicsRequest(("orders", "ü-topic"), 1000),
    DeleteTopicsResponse((DeletableTopicResult("orders", TOPIC_ID, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "gone"),)),
    IncrementalAlterConfigsRequest(
        (
            IncrementalAlterConfigsResource(
                ConfigResourceType.TOPIC,
                "orders",
                (
                    AlterableConfig("retention.ms", ConfigOperation.SET, "1000"),
                    AlterableConfig("cleanup.policy", ConfigOperation.APPEND, "delete"),
                    AlterableConfig("segment.ms", ConfigOperation.DELETE, None),
                ),
            ),
            IncrementalAlterConfigsResource(
                ConfigResourceType.BROKER, "1", (AlterableConfig("x", ConfigOperation.SUBTRACT, "a"),)
            ),
        ),
        validate_only=False,
    ),
    IncrementalAlterConfigsResponse(
        (AlterConfigsResourceResponse(ErrorCode.INVALID_CONFIG, "no such config", ConfigResourceType.TOPIC, "t"),)
    ),
    AlterConfigsRequest((AlterConfigsResource(ConfigResourceType.TOPIC, "orders", (("retention.ms", "5"),)),), True),
    AlterConfigsResponse((AlterConfigsResourceResponse(ErrorCode.NONE, None, ConfigResourceType.TOPIC, "orders"),)),
    DescribeConfigsRequest(
        (
            DescribeConfigsResource(ConfigResourceType.TOPIC, "orders", ("retention.ms",)),
            DescribeConfigsResource(ConfigResourceType.BROKER, "2", None),
        )
    ),
    DescribeConfigsResponse(
        (
            DescribeConfigsResult(
                ErrorCode.NONE,
                None,
                ConfigResourceType.TOPIC,
                "orders",
                (
                    DescribeConfigsResourceResult("retention.ms", "1000", False, ConfigSource.DYNAMIC_TOPIC_CONFIG),
                    DescribeConfigsResourceResult(
                        "sasl.jaas.config", None, True, ConfigSource.STATIC_BROKER_CONFIG, True
                    ),
                ),
            ),
        ),
        metadata_offset=1234,
    ),
    CreateAclsRequest(
        (
            AclCreation(
                ResourceType.TOPIC,
                "orders-",
                PatternType.PREFIXED,
                "User:alice",
                "*",
                AclOperation.WRITE,
                AclPermissionType.ALLOW,
            ),
        )
    ),
    CreateAclsResponse((AclCreationResult(ErrorCode.NONE), AclCreationResult(ErrorCode.INVALID_REQUEST, "bad host"))),
    DeleteAclsRequest(
        (
            DeleteAclsFilter(
                ResourceType.ANY, None, PatternType.MATCH, "User:bob", None, AclOperation.ANY, AclPermissionType.DENY
            ),
        )
    ),
    DeleteAclsResponse(
        (
            DeleteAclsFilterResult(
                ErrorCode.NONE,
                None,
                (
                    DeleteAclsMatchingAcl(
                        ErrorCode.NONE,
                        None,
                        ResourceType.CLUSTER,
                        "kafka-cluster",
                        PatternType.LITERAL,
                        "User:bob",
                        "10.0.0.1",
                        AclOperation.CLUSTER_ACTION,
                        AclPermissionType.DENY,
                    ),
                ),
            ),
        )
    ),
    DescribeAclsRequest(ResourceType.TOPIC, "orders", PatternType.LITERAL, None, "*"),
    DescribeAclsResponse(
        ErrorCode.NONE,
        None,
        (
            DescribeAclsResource(
                ResourceType.TOPIC,
                "orders",
                PatternType.LITERAL,
                (AclDescription("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW),),
            ),
        ),
        77,
    ),
    DescribeClusterRequest(include_fenced_brokers=True),
    DescribeClusterResponse(
        ErrorCode.NONE,
        None,
        "MkU3OEVBNTcwNTJENDM2Qk",
        3000,
        (DescribeClusterBroker(1, "127.0.0.11", 9092, "rack-a", False, 40), DescribeClusterBroker(2, "::1", 65535)),
        99,
    ),
    MetadataRequest(("orders",)),
    MetadataResponse(
        (MetadataResponseBroker(1, "127.0.0.11", 9092, None),),
        "cluster",
        3000,
        (
            MetadataResponseTopic(
                ErrorCode.NONE,
                "orders",
                TOPIC_ID,
                (MetadataResponsePartition(ErrorCode.NONE, 0, 1, 4, (1, 2, 3), (1, 2), 7),),
            ),
            MetadataResponseTopic(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "nope", ZERO_UUID),
        ),
        100,
    ),
    BrokerRegistrationRequest(
        1,
        "cluster",
        INCARNATION,
        (Listener("PLAINTEXT", "127.0.0.11", 9092, 0), Listener("SASL_PLAINTEXT", "127.0.0.11", 9093, 2)),
        (BrokerRegistrationFeature("metadata.version", 1, 7),),
        "rack-a",
    ),
    BrokerRegistrationResponse(ErrorCode.DUPLICATE_BROKER_REGISTRATION, -1),
    BrokerHeartbeatRequest(1, 40, 1234, want_fence=False, want_shut_down=True),
    BrokerHeartbeatResponse(ErrorCode.NONE, is_caught_up=True, is_fenced=False, should_shut_down=True),
    AlterPartitionRequest(
        2,
        41,
        (
            AlterPartitionTopicData(
                TOPIC_ID, (AlterPartitionPartitionData(0, 4, (2, 3), 9), AlterPartitionPartitionData(1, 1, (2,), 1))
            ),
        ),
    ),
    AlterPartitionResponse(
        ErrorCode.NONE,
        (
            AlterPartitionTopicResult(
                TOPIC_ID,
                (
                    AlterPartitionPartitionResult(0, ErrorCode.NONE, 2, 4, (2, 3), 10),
                    AlterPartitionPartitionResult(1, ErrorCode.INVALID_UPDATE_VERSION),
                ),
            ),
        ),
    ),
    EnvelopeRequest(
        CODEC.encode_request(7, DeleteTopicsRequest(("t",))), "User:alice", "127.0.0.1", "CLIENT", "SASL_PLAINTEXT"
    ),
    EnvelopeResponse(ErrorCode.NONE, CODEC.encode_response(7, DeleteTopicsResponse(()))),
    FetchSnapshotRequest("cluster", 4, 1 << 20, 5, SnapshotId(1000, 4), 4096),
    FetchSnapshotResponse(ErrorCode.NONE, 1, 5, SnapshotId(1000, 4), 10_000, 4096, b"\x00\x01snapshot-bytes"),
    SaslHandshakeRequest(PLAIN),
    SaslHandshakeResponse(ErrorCode.UNSUPPORTED_SASL_MECHANISM, ("PLAIN",)),
    SaslAuthenticateRequest(plain_auth_bytes("alice", "alice-secret")),
    SaslAuthenticateResponse(ErrorCode.SASL_AUTHENTICATION_FAILED, "Authentication failed: bad password", b""),
    ApiVersionsRequest(),
    ApiVersionsResponse(ErrorCode.NONE, (ApiVersion(19, 0, 0), ApiVersion(58, 0, 0))),
    ReplicaHeartbeatRequest(3, 40, 41, (ReplicaHeartbeatPartition(TOPIC_ID, 0, 7),)),
    ReplicaHeartbeatResponse(ErrorCode.STALE_BROKER_EPOCH),
    ElectLeadersRequest(ElectionType.UNCLEAN, (ElectLeadersTopicPartitions("orders", (0, 2)),), 5000),
    ElectLeadersRequest(ElectionType.PREFERRED, None),
    ElectLeadersResponse(
        ErrorCode.NONE,
        (
            ElectLeadersTopicResult(
                "orders",
                (
                    ElectLeadersPartitionResult(0, ErrorCode.NONE),
                    ElectLeadersPartitionResult(2, ErrorCode.ELECTION_NOT_NEEDED, "has its leader"),
                ),
            ),
        ),
    ),
]


# --- registry and error codes ----------------------------------------------------------------------------

KAFKA_API_KEYS = {
    "Metadata": 3,
    "SaslHandshake": 17,
    "ApiVersions": 18,
    "CreateTopics": 19,
    "DeleteTopics": 20,
    "DescribeAcls": 29,
    "CreateAcls": 30,
    "DeleteAcls": 31,
    "DescribeConfigs": 32,
    "AlterConfigs": 33,
    "SaslAuthenticate": 36,
    "ElectLeaders": 43,
    "IncrementalAlterConfigs": 44,
    "AlterPartition": 56,
    "Envelope": 58,
    "FetchSnapshot": 59,
    "DescribeCluster": 60,
    "BrokerRegistration": 62,
    "BrokerHeartbeat": 63,
}
EXTENSION_API_KEYS = {"ReplicaHeartbeat": 9001}  # kraft-chaos's own broker-to-broker API


def test_every_new_message_has_an_example_and_a_schema():
    assert {type(m) for m in EXAMPLES} == set(NEW_TYPES)
    for cls in registry.API_KEYS:
        assert cls in SCHEMAS_BY_CLASS


def test_api_keys_are_kafkas_and_each_response_shares_its_requests_key():
    keys = {registry.API_NAMES[registry.API_KEYS[c]]: registry.API_KEYS[c] for c in NEW_REQUESTS}
    assert keys == KAFKA_API_KEYS | EXTENSION_API_KEYS
    for req, resp in registry.RESPONSE_FOR.items():
        assert req.__name__.removesuffix("Request") == resp.__name__.removesuffix("Response")
        assert registry.API_KEYS[req] == registry.API_KEYS[resp]
    assert len(registry.REQUEST_BY_KEY) == len(registry.REQUESTS)  # no key used twice
    assert set(SUPPORTED_VERSIONS) == set(registry.API_NAMES)
    for cls in messages.API_KEYS:  # the quorum registry is a part of the whole, unchanged
        assert registry.API_KEYS[cls] == messages.API_KEYS[cls]


def test_endpoint_key_sets_hold_what_each_endpoint_serves():
    keys = registry.API_KEYS
    assert keys[CreateTopicsRequest] in registry.BROKER_API_KEYS
    assert keys[BrokerRegistrationRequest] not in registry.BROKER_API_KEYS
    assert keys[messages.VoteRequest] not in registry.BROKER_API_KEYS
    assert registry.BROKER_API_KEYS < registry.CONTROLLER_API_KEYS
    assert set(registry.API_NAMES) == registry.CONTROLLER_API_KEYS
    assert EnvelopeRequest not in registry.FORWARDABLE_REQUESTS


KAFKA_ERROR_CODES = {
    "UNKNOWN_SERVER_ERROR": -1,
    "NONE": 0,
    "OFFSET_OUT_OF_RANGE": 1,
    "CORRUPT_MESSAGE": 2,
    "UNKNOWN_TOPIC_OR_PARTITION": 3,
    "LEADER_NOT_AVAILABLE": 5,
    "NOT_LEADER_OR_FOLLOWER": 6,
    "REQUEST_TIMED_OUT": 7,
    "BROKER_NOT_AVAILABLE": 8,
    "MESSAGE_TOO_LARGE": 10,
    "NETWORK_EXCEPTION": 13,
    "INVALID_TOPIC_EXCEPTION": 17,
    "NOT_ENOUGH_REPLICAS": 19,
    "TOPIC_AUTHORIZATION_FAILED": 29,
    "CLUSTER_AUTHORIZATION_FAILED": 31,
    "UNSUPPORTED_SASL_MECHANISM": 33,
    "ILLEGAL_SASL_STATE": 34,
    "UNSUPPORTED_VERSION": 35,
    "TOPIC_ALREADY_EXISTS": 36,
    "INVALID_PARTITIONS": 37,
    "INVALID_REPLICATION_FACTOR": 38,
    "INVALID_REPLICA_ASSIGNMENT": 39,
    "INVALID_CONFIG": 40,
    "NOT_CONTROLLER": 41,
    "INVALID_REQUEST": 42,
    "POLICY_VIOLATION": 44,
    "SECURITY_DISABLED": 54,
    "OPERATION_NOT_ATTEMPTED": 55,
    "SASL_AUTHENTICATION_FAILED": 58,
    "INVALID_PRINCIPAL_TYPE": 67,
    "TOPIC_DELETION_DISABLED": 73,
    "FENCED_LEADER_EPOCH": 74,
    "UNKNOWN_LEADER_EPOCH": 75,
    "STALE_BROKER_EPOCH": 77,
    "INVALID_RECORD": 87,
    "RESOURCE_NOT_FOUND": 91,
    "DUPLICATE_RESOURCE": 92,
    "INCONSISTENT_VOTER_SET": 94,
    "INVALID_UPDATE_VERSION": 95,
    "PRINCIPAL_DESERIALIZATION_FAILURE": 97,
    "SNAPSHOT_NOT_FOUND": 98,
    "POSITION_OUT_OF_RANGE": 99,
    "UNKNOWN_TOPIC_ID": 100,
    "DUPLICATE_BROKER_REGISTRATION": 101,
    "BROKER_ID_NOT_REGISTERED": 102,
    "INCONSISTENT_TOPIC_ID": 103,
    "INCONSISTENT_CLUSTER_ID": 104,
    "INELIGIBLE_REPLICA": 107,
    "NEW_LEADER_ELECTED": 108,
}


def test_error_codes_carry_kafkas_numbers():
    for name, number in KAFKA_ERROR_CODES.items():
        assert ErrorCode[name] == number, name
    assert ErrorCode.INCONSISTENT_CLUSTER_ID is ErrorCode.INVALID_CLUSTER_ID  # one member, two names
    assert ErrorCode.INVALID_QUORUM_STATE == 110  # the quorum's own code, unchanged
    assert len({int(e) for e in ErrorCode}) == len(list(ErrorCode))


def test_not_controller_is_retriable_and_stale_broker_epoch_is_not():
    assert ErrorCode.NOT_CONTROLLER.retriable
    assert ErrorCode.UNKNOWN_TOPIC_OR_PARTITION.retriable
    assert not ErrorCode.STALE_BROKER_EPOCH.retriable
    assert not ErrorCode.CLUSTER_AUTHORIZATION_FAILED.retriable
    assert not ErrorCode.TOPIC_ALREADY_EXISTS.retriable


def test_acl_and_config_enums_carry_kafkas_numbers():
    assert (ResourceType.ANY, ResourceType.TOPIC, ResourceType.CLUSTER, ResourceType.USER) == (1, 2, 4, 7)
    assert (PatternType.ANY, PatternType.MATCH, PatternType.LITERAL, PatternType.PREFIXED) == (1, 2, 3, 4)
    assert (AclOperation.ALL, AclOperation.CLUSTER_ACTION, AclOperation.ALTER_CONFIGS) == (2, 9, 11)
    assert (AclPermissionType.DENY, AclPermissionType.ALLOW) == (2, 3)
    assert (ConfigResourceType.TOPIC, ConfigResourceType.BROKER, ConfigResourceType.BROKER_LOGGER) == (2, 4, 8)
    assert [int(op) for op in (ConfigOperation.SET, ConfigOperation.DELETE)] == [0, 1]
    assert [int(op) for op in (ConfigOperation.APPEND, ConfigOperation.SUBTRACT)] == [2, 3]
    assert (ConfigSource.DYNAMIC_TOPIC_CONFIG, ConfigSource.DEFAULT_CONFIG) == (1, 5)


def test_messages_are_frozen_and_slotted():
    for cls in NEW_TYPES:
        assert dataclasses.is_dataclass(cls)
        assert cls.__dataclass_params__.frozen, cls
        assert hasattr(cls, "__slots__"), cls
    with pytest.raises(dataclasses.FrozenInstanceError):
        EXAMPLES[0].timeout_ms = 1  # type: ignore[misc]


# --- round trips and damaged frames ----------------------------------------------------------------------


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(msg=st.one_of(*(messages_of(c) for c in NEW_TYPES)), correlation_id=st.integers(-(2**31), 2**31 - 1))
def test_round_trip_every_new_message(msg, correlation_id):
    frame = CODEC.decode(encode(msg, correlation_id))
    assert frame.message == msg
    assert type(frame.message) is type(msg)
    assert frame.correlation_id == correlation_id
    assert frame.api_key == registry.API_KEYS[type(msg)]
    assert frame.kind == (FrameKind.REQUEST if type(msg) in registry.REQUESTS else FrameKind.RESPONSE)


@pytest.mark.parametrize("msg", EXAMPLES, ids=lambda m: type(m).__name__)
def test_examples_round_trip_with_their_types(msg):
    decoded = CODEC.decode(encode(msg)).message
    assert decoded == msg
    for f in dataclasses.fields(msg):  # enums come back as enum members, ids as UUIDs
        assert type(getattr(decoded, f.name)) is type(getattr(msg, f.name)) or getattr(msg, f.name) is None


@pytest.mark.parametrize("msg", EXAMPLES, ids=lambda m: type(m).__name__)
def test_truncation_at_every_byte_raises_frame_error(msg):
    frame = encode(msg)
    for cut in range(len(frame)):
        with pytest.raises(FrameError):
            CODEC.decode(frame[:cut])
        if cut >= HEADER_LEN:
            with pytest.raises(FrameError):
                CODEC.decode(reframe(frame[:cut]))


@pytest.mark.parametrize("msg", EXAMPLES, ids=lambda m: type(m).__name__)
def test_every_single_byte_change_decodes_or_raises_frame_error(msg):
    frame = encode(msg)
    for i in range(len(frame)):
        for value in (0x00, 0x7F, 0x80, 0xFF, frame[i] ^ 0x01):
            assert_decodes_or_frame_error(frame[:i] + bytes([value]) + frame[i + 1 :])


@pytest.mark.parametrize("msg", EXAMPLES, ids=lambda m: type(m).__name__)
def test_trailing_bytes_are_refused(msg):
    with pytest.raises(FrameError, match="trailing"):
        CODEC.decode(reframe(encode(msg) + b"\x00"))


@settings(max_examples=600, deadline=None)
@given(
    api_key=st.sampled_from(sorted({registry.API_KEYS[c] for c in NEW_TYPES})),
    flags=st.sampled_from([0, 1]),
    body=st.binary(max_size=160),
)
def test_garbage_body_behind_a_valid_header_only_raises_frame_error(api_key, flags, body):
    assert_decodes_or_frame_error(struct.pack(">ihhib", 9 + len(body), api_key, 0, 1, flags) + body)


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=300))
def test_random_garbage_only_raises_frame_error(data):
    assert_decodes_or_frame_error(data)


# --- specific refusals -----------------------------------------------------------------------------------


def _header(api_key: int, flags: int = 0) -> bytes:
    return struct.pack(">hhib", api_key, 0, 1, flags)


def _frame(body_after_header: bytes, api_key: int, flags: int = 0) -> bytes:
    rest = _header(api_key, flags) + body_after_header
    return struct.pack(">i", len(rest)) + rest


@pytest.mark.parametrize(
    ("api_key", "flags", "body", "reason"),
    [
        # CreateTopics: a topic array claiming 2**31-1 entries in a few bytes
        (19, 0, struct.pack(">i", 2**31 - 1) + b"\x00" * 16, "bad array count 2147483647"),
        # DeleteTopics: a string array claiming a billion names
        (20, 0, struct.pack(">i", 10**9) + b"\x00" * 8, "bad array count 1000000000"),
        # SaslAuthenticate: auth bytes claiming 2 GiB
        (36, 0, struct.pack(">i", 2**31 - 1) + b"abc", "truncated frame"),
        # Envelope: request data claiming 1 GiB
        (58, 0, struct.pack(">i", 2**30) + b"\x00" * 32, "truncated frame"),
        # Metadata: a negative count other than -1 (null)
        (3, 0, struct.pack(">i", -2), "bad array count -2"),
        # FetchSnapshotResponse: negative bytes length
        (59, 1, struct.pack(">hii", 0, 1, 1) + struct.pack(">qi", 1, 1) + struct.pack(">qqi", 0, 0, -5), "bad bytes"),
    ],
)
def test_impossible_counts_and_lengths_are_refused_without_allocating(api_key, flags, body, reason):
    frame = _frame(body, api_key, flags)
    tracemalloc.start()
    try:
        with pytest.raises(FrameError, match=reason):
            CODEC.decode(frame)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024  # nothing sized by the claimed count was allocated


def test_null_where_a_string_is_required_is_refused():
    frame = encode(SaslHandshakeRequest("PLAIN"))
    with pytest.raises(FrameError, match=r"SaslHandshakeRequest\.mechanism: bad string length -1"):
        CODEC.decode(reframe(frame[:HEADER_LEN] + b"\xff\xff"))


def test_null_arrays_mean_all_and_empty_arrays_mean_none():
    assert CODEC.decode(encode(MetadataRequest(None))).message.topics is None
    assert CODEC.decode(encode(MetadataRequest(()))).message.topics == ()
    assert encode(MetadataRequest(None))[HEADER_LEN:] == struct.pack(">i", -1)
    with pytest.raises(FrameError, match="bad array count -1"):  # a non-nullable array
        CODEC.decode(_frame(struct.pack(">ii", -1, 0), registry.API_KEYS[DeleteTopicsRequest]))


def test_unknown_enum_codes_decode_as_unknown_so_the_handler_can_answer():
    frame = bytearray(encode(DescribeAclsRequest(ResourceType.TOPIC, None, PatternType.LITERAL)))
    frame[HEADER_LEN] = 99  # resource_type_filter
    decoded = CODEC.decode(bytes(frame)).message
    assert decoded.resource_type_filter is ResourceType.UNKNOWN
    assert decoded.pattern_type_filter is PatternType.LITERAL
    frame = bytearray(encode(EXAMPLES[4]))  # IncrementalAlterConfigs: first op byte follows "retention.ms"
    op_at = bytes(frame).index(b"retention.ms") + len("retention.ms")
    frame[op_at] = 9
    first = CODEC.decode(bytes(frame)).message.resources[0].configs[0]
    assert first.config_operation is ConfigOperation.UNKNOWN


def test_unknown_error_code_and_bad_boolean_in_a_nested_struct_are_frame_errors():
    frame = encode(BrokerHeartbeatResponse(ErrorCode.NONE, True, False, False))
    with pytest.raises(FrameError, match="unknown error code 4242"):
        CODEC.decode(frame[:HEADER_LEN] + struct.pack(">h", 4242) + frame[HEADER_LEN + 2 :])
    with pytest.raises(FrameError, match="bad boolean 2"):
        CODEC.decode(frame[:-1] + b"\x02")
    frame = encode(DescribeClusterResponse(ErrorCode.NONE, brokers=(DescribeClusterBroker(1, "h", 1),)))
    fenced_at = len(frame) - 8 - 8 - 1  # ... is_fenced, broker_epoch | metadata_offset
    assert frame[fenced_at] == 0
    with pytest.raises(FrameError, match=r"DescribeClusterBroker\.is_fenced: bad boolean 3"):
        CODEC.decode(frame[:fenced_at] + b"\x03" + frame[fenced_at + 1 :])


def test_wire_layout_of_a_heartbeat_and_an_alter_partition():
    frame = encode(BrokerHeartbeatRequest(5, 40, 1234, False, True), correlation_id=9)
    assert frame[4:HEADER_LEN] == struct.pack(">hhib", 63, 0, 9, 0)
    assert frame[HEADER_LEN:] == struct.pack(">iqqbb", 5, 40, 1234, 0, 1)
    frame = encode(
        AlterPartitionRequest(
            2, 41, (AlterPartitionTopicData(TOPIC_ID, (AlterPartitionPartitionData(0, 4, (2, 3), 9, (41, -1)),)),)
        )
    )
    expected = (
        struct.pack(">iqi", 2, 41, 1)
        + TOPIC_ID.bytes
        + struct.pack(">iii", 1, 0, 4)
        + struct.pack(">iiii", 2, 2, 3, 9)
        + struct.pack(">iqq", 2, 41, -1)  # KIP-903: each new ISR member's broker epoch
    )
    assert frame[HEADER_LEN:] == expected


def test_config_maps_travel_as_arrays_of_pairs():
    msg = AlterConfigsRequest((AlterConfigsResource(ConfigResourceType.TOPIC, "t", (("a", "1"), ("b", None))),))
    body = encode(msg)[HEADER_LEN:]
    assert body == (
        struct.pack(">ib", 1, 2)
        + struct.pack(">h", 1)
        + b"t"
        + struct.pack(">i", 2)
        + struct.pack(">h", 1)
        + b"a"
        + struct.pack(">h", 1)
        + b"1"
        + struct.pack(">h", 1)
        + b"b"
        + b"\xff\xff"
        + b"\x00"  # validate_only
    )


@pytest.mark.parametrize(
    "msg",
    [
        SaslHandshakeRequest(None),  # type: ignore[arg-type]  # not nullable
        DescribeClusterResponse(ErrorCode.NONE, brokers=(DescribeClusterBroker(1, "h", 70000),)),  # uint16
        CreatableTopicResult("t", "not-a-uuid", ErrorCode.NONE),  # type: ignore[arg-type]
        DescribeAclsRequest(resource_type_filter=42),  # type: ignore[arg-type]  # not a ResourceType
        SaslAuthenticateRequest("text"),  # type: ignore[arg-type]  # not bytes
        MetadataResponsePartition(ErrorCode.NONE, 0, 1, 1, (True,), ()),  # not an int
        CreatableTopic("t", configs=(("a", "b", "c"),)),  # type: ignore[arg-type]  # not a pair
        FetchSnapshotRequest(None, 1, 1, 1, (1, 1), 0),  # type: ignore[arg-type]  # not a SnapshotId
    ],
)
def test_encoding_bad_field_values_raises_value_error(msg):
    wrapper = {
        CreatableTopicResult: lambda m: CreateTopicsResponse((m,)),
        MetadataResponsePartition: lambda m: MetadataResponse(
            (), None, 1, (MetadataResponseTopic(0, "t", ZERO_UUID, (m,)),)
        ),
        CreatableTopic: lambda m: CreateTopicsRequest((m,)),
    }.get(type(msg), lambda m: m)
    with pytest.raises(ValueError, match="cannot encode"):
        encode(wrapper(msg))


def test_schema_must_match_the_dataclass_and_array_elements_must_have_a_size():
    @dataclass(frozen=True, slots=True)
    class Probe:
        a: int
        b: int

    with pytest.raises(TypeError, match="the dataclass has"):
        define(Probe, ("a", INT32))
    assert Probe not in SCHEMAS_BY_CLASS

    @dataclass(frozen=True, slots=True)
    class Empty:
        pass

    define(Empty)
    try:
        with pytest.raises(TypeError, match="at least one byte"):
            array(Struct(Empty))
    finally:
        del SCHEMAS_BY_CLASS[Empty]


# --- endpoints and the Envelope --------------------------------------------------------------------------


def test_a_restricted_codec_refuses_other_endpoints_apis():
    quorum = BinaryCodec(api_keys=registry.QUORUM_API_KEYS)
    vote = messages.VoteRequest("c", 1, 1, 0, 0)
    assert quorum.decode(encode(vote)).message == vote
    with pytest.raises(FrameError, match=r"api key 19 \(CreateTopics\) is not served on this endpoint"):
        quorum.decode(encode(EXAMPLES[0]))
    with pytest.raises(ValueError, match="unknown api keys"):
        BinaryCodec(api_keys={19, 999})


def test_envelope_carries_the_client_header_and_the_answer_goes_back_under_it():
    client = CreateTopicsRequest((CreatableTopic("orders", 1, 1),))
    client_frame = CODEC.encode_request(31337, client)
    env = wrap(client_frame, "User:alice", "127.0.0.5", "CLIENT", "SASL_PLAINTEXT")
    on_the_wire = CODEC.decode(encode(env)).message  # the broker -> controller hop
    assert on_the_wire == env
    inner = unwrap(CODEC, on_the_wire)
    assert (inner.correlation_id, inner.api_key, inner.api_version, inner.message) == (31337, 19, 0, client)
    result = CreateTopicsResponse((CreatableTopicResult("orders", TOPIC_ID, ErrorCode.NONE, None, 1, 1),))
    reply = answer(CODEC, inner, result)
    back = CODEC.decode(encode(reply)).message
    assert back.error_code == ErrorCode.NONE
    client_sees = CODEC.decode(back.response_data)
    assert (client_sees.correlation_id, client_sees.kind, client_sees.message) == (31337, FrameKind.RESPONSE, result)
    with pytest.raises(TypeError, match="does not answer"):
        answer(CODEC, inner, DeleteTopicsResponse(()))


@pytest.mark.parametrize(
    ("inner", "reason"),
    [
        (b"\x00\x00\x00\x05junk!", "inner frame"),
        (CODEC.encode_response(1, DeleteTopicsResponse(())), "is a response"),
        (CODEC.encode_request(1, EXAMPLES[26]), "EnvelopeRequest cannot be forwarded"),  # nested envelope
        (CODEC.encode_request(1, BrokerHeartbeatRequest(1, 1, 1)), "BrokerHeartbeatRequest cannot be forwarded"),
        (CODEC.encode_request(1, MetadataRequest()), "MetadataRequest cannot be forwarded"),
    ],
)
def test_unforwardable_envelope_contents_are_answered_with_invalid_request(inner, reason):
    env = EnvelopeRequest(inner, "User:mallory", "10.0.0.9", "CLIENT", "PLAINTEXT")
    assert CODEC.decode(encode(env)).message == env  # the outer frame itself is fine
    with pytest.raises(InvalidEnvelope, match=reason) as info:
        unwrap(CODEC, env)
    assert info.value.error_code is ErrorCode.INVALID_REQUEST


def test_plain_auth_bytes_round_trip_and_malformed_ones_are_refused():
    assert parse_plain_auth_bytes(plain_auth_bytes("alice", "pw")) == ("", "alice", "pw")
    assert parse_plain_auth_bytes(plain_auth_bytes("alice", "pw", "admin")) == ("admin", "alice", "pw")
    for bad in (b"alice\0pw", b"\0\0pw", b"\xff\0a\0b", b"a\0b\0c\0d"):
        assert parse_plain_auth_bytes(bad) is None
