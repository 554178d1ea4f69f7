"""Every API kraft-chaos speaks: request and response classes, Kafka's API keys, and who serves what.

`messages` keeps the quorum RPCs' own registry (the Raft core needs nothing else); this module joins it
with the admin, inter-node and session APIs for the codec and the runtimes.
"""

from __future__ import annotations

from node.protocol import messages
from node.protocol.acls import (
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
)
from node.protocol.admin import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    MetadataRequest,
    MetadataResponse,
)
from node.protocol.broker_api import (
    AlterPartitionRequest,
    AlterPartitionResponse,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    EnvelopeRequest,
    EnvelopeResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
)
from node.protocol.replication import REPLICA_HEARTBEAT_API_KEY, ReplicaHeartbeatRequest, ReplicaHeartbeatResponse
from node.protocol.session import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

# (Kafka API key, request, response) for everything beyond the quorum RPCs.
_APIS: tuple[tuple[int, type, type], ...] = (
    (3, MetadataRequest, MetadataResponse),
    (17, SaslHandshakeRequest, SaslHandshakeResponse),
    (18, ApiVersionsRequest, ApiVersionsResponse),
    (19, CreateTopicsRequest, CreateTopicsResponse),
    (20, DeleteTopicsRequest, DeleteTopicsResponse),
    (29, DescribeAclsRequest, DescribeAclsResponse),
    (30, CreateAclsRequest, CreateAclsResponse),
    (31, DeleteAclsRequest, DeleteAclsResponse),
    (32, DescribeConfigsRequest, DescribeConfigsResponse),
    (33, AlterConfigsRequest, AlterConfigsResponse),
    (36, SaslAuthenticateRequest, SaslAuthenticateResponse),
    (43, ElectLeadersRequest, ElectLeadersResponse),
    (44, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse),
    (56, AlterPartitionRequest, AlterPartitionResponse),
    (58, EnvelopeRequest, EnvelopeResponse),
    (59, FetchSnapshotRequest, FetchSnapshotResponse),
    (60, DescribeClusterRequest, DescribeClusterResponse),
    (62, BrokerRegistrationRequest, BrokerRegistrationResponse),
    (63, BrokerHeartbeatRequest, BrokerHeartbeatResponse),
    (REPLICA_HEARTBEAT_API_KEY, ReplicaHeartbeatRequest, ReplicaHeartbeatResponse),  # extension, broker <-> broker
)

REQUESTS: tuple[type, ...] = messages.REQUESTS + tuple(req for _, req, _ in _APIS)
RESPONSES: tuple[type, ...] = messages.RESPONSES + tuple(resp for _, _, resp in _APIS)
API_KEYS: dict[type, int] = {
    **messages.API_KEYS,
    **{cls: key for key, req, resp in _APIS for cls in (req, resp)},
}
RESPONSE_FOR: dict[type, type] = dict(zip(REQUESTS, RESPONSES, strict=True))
REQUEST_BY_KEY: dict[int, type] = {API_KEYS[cls]: cls for cls in REQUESTS}
API_NAMES: dict[int, str] = {key: cls.__name__.removesuffix("Request") for key, cls in REQUEST_BY_KEY.items()}

# Which API keys each kind of endpoint serves; a runtime passes one of these to BinaryCodec(api_keys=...)
# so that a frame for another endpoint is refused at the codec instead of reaching a state machine.
QUORUM_API_KEYS = frozenset(messages.API_KEYS[cls] for cls in messages.REQUESTS)
SESSION_API_KEYS = frozenset(
    API_KEYS[cls] for cls in (SaslHandshakeRequest, SaslAuthenticateRequest, ApiVersionsRequest)
)
# Admin writes a broker forwards to the active controller inside an Envelope (KIP-590).
FORWARDABLE_REQUESTS: frozenset[type] = frozenset(
    {
        CreateTopicsRequest,
        DeleteTopicsRequest,
        AlterConfigsRequest,
        IncrementalAlterConfigsRequest,
        CreateAclsRequest,
        DeleteAclsRequest,
        ElectLeadersRequest,
    }
)
# Answered from the local metadata image, by a broker or a controller.
READ_REQUESTS: frozenset[type] = frozenset(
    {DescribeConfigsRequest, DescribeAclsRequest, DescribeClusterRequest, MetadataRequest}
)
BROKER_API_KEYS = SESSION_API_KEYS | frozenset(
    API_KEYS[cls] for cls in FORWARDABLE_REQUESTS | READ_REQUESTS | {ReplicaHeartbeatRequest}
)
CONTROLLER_API_KEYS = (
    QUORUM_API_KEYS
    | BROKER_API_KEYS
    | frozenset(
        API_KEYS[cls]
        for cls in (
            BrokerRegistrationRequest,
            BrokerHeartbeatRequest,
            AlterPartitionRequest,
            EnvelopeRequest,
            FetchSnapshotRequest,
        )
    )
)

__all__ = [
    "API_KEYS",
    "API_NAMES",
    "BROKER_API_KEYS",
    "CONTROLLER_API_KEYS",
    "FORWARDABLE_REQUESTS",
    "QUORUM_API_KEYS",
    "READ_REQUESTS",
    "REQUESTS",
    "REQUEST_BY_KEY",
    "RESPONSES",
    "RESPONSE_FOR",
    "SESSION_API_KEYS",
]
