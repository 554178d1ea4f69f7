"""Kafka's own framing for the admin APIs: request header v1/v2, response header v0/v1, and the
translation between Kafka's message bodies and kraft-chaos's request/response dataclasses.

The runtime decodes a Kafka request into the same dataclass our own codec would produce, hands it to
the node core unchanged, and encodes the core's answer back in the version the client asked for. The
core never learns which framing a request came in. Pure: no I/O, no state beyond the layouts.

Version rules, as Kafka's broker applies them: an ApiVersions request of a version not served is
answered with an ApiVersions v0 body carrying UNSUPPORTED_VERSION and the served ranges (so the client
can retry with one it shares); any other API or version not served is a `FrameError` and the
connection closes. ApiVersions' response header is always v0 (a client cannot know yet whether the
server speaks flexible headers).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from node.protocol.acls import (
    AclCreation,
    AclOperation,
    AclPermissionType,
    CreateAclsRequest,
    DeleteAclsFilter,
    DeleteAclsRequest,
    DescribeAclsRequest,
    PatternType,
    ResourceType,
)
from node.protocol.admin import (
    AlterableConfig,
    AlterConfigsRequest,
    AlterConfigsResource,
    ConfigOperation,
    ConfigResourceType,
    ConfigSource,
    CreatableReplicaAssignment,
    CreatableTopic,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    DescribeConfigsResource,
    ElectionType,
    ElectLeadersRequest,
    ElectLeadersTopicPartitions,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResource,
    MetadataRequest,
    MetadataResponse,
)
from node.protocol.errors import ErrorCode
from node.protocol.fields import FrameError
from node.protocol.kafka_schemas import ANSWERED_AS, LAYOUTS
from node.protocol.kafka_wire import Message, Reader, Writer, decode_body, encode_body
from node.protocol.messages import DescribeQuorumRequest
from node.protocol.session import SaslAuthenticateRequest, SaslHandshakeRequest

API_VERSIONS_KEY = 18
_HEAD = struct.Struct(">ihhi")  # length, api_key, api_version, correlation_id


def looks_like_kafka(frame: bytes) -> bool:
    """Whether the first frame of a connection is Kafka's: an ApiVersions request (what every Kafka
    client sends first) longer than our own, whose body is empty (9 bytes after the length)."""
    if len(frame) < _HEAD.size:
        return False
    length, api_key, _, _ = _HEAD.unpack_from(frame)
    return api_key == API_VERSIONS_KEY and length >= 10


@dataclass(frozen=True, slots=True)
class KafkaHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


@dataclass(frozen=True, slots=True)
class KafkaRequest:
    header: KafkaHeader
    message: Any  # our request dataclass, or None when `answer` is already the whole response frame
    answer: bytes | None = None


class KafkaCodec:
    """Decodes Kafka request frames and encodes the answers, for the APIs in `api_keys`."""

    def __init__(
        self, api_keys: frozenset[int], node_id: int, controllers: Sequence[tuple[int, str, int]] | None = None
    ) -> None:
        self.node_id = node_id
        # On a controller listener: the voters (id, host, port) that Metadata and DescribeCluster list
        # instead of the brokers (see `_controllers_view`); None on a broker listener.
        self.controllers = tuple(controllers) if controllers is not None else None
        served = set(api_keys) | {key for key, via in ANSWERED_AS.items() if via in api_keys}
        self.layouts = {key: layouts for key, layouts in LAYOUTS.items() if key in served}

    def api_versions(self) -> list[dict[str, int]]:
        """What ApiVersions advertises: exactly the layouts this listener answers."""
        return [
            {"ApiKey": key, "MinVersion": req.served[0], "MaxVersion": req.served[1]}
            for key, (req, _) in sorted(self.layouts.items())
        ]

    def decode_request(self, frame: bytes | bytearray | memoryview) -> KafkaRequest:
        """One whole request frame (length prefix included); raises FrameError."""
        if len(frame) < _HEAD.size + 2:
            raise FrameError(f"a {len(frame)}-byte frame is too short for a Kafka request header")
        _, api_key, version, correlation_id = _HEAD.unpack_from(frame)
        r = Reader(frame, _HEAD.size)
        client_id = r.string(compact=False)  # never compact, even in header v2
        layouts = self.layouts.get(api_key)
        if layouts is None:
            raise FrameError(f"API key {api_key} is not served on this listener")
        request_layout, _ = layouts
        header = KafkaHeader(api_key, version, correlation_id, client_id)
        if not request_layout.serves(version):
            if api_key == API_VERSIONS_KEY:  # Kafka's fallback: a v0 answer the client can read
                return KafkaRequest(header, None, self._api_versions_frame(header, ErrorCode.UNSUPPORTED_VERSION, 0))
            lo, hi = request_layout.served
            raise FrameError(f"{request_layout.name} v{version} is not served (v{lo}-v{hi})")
        if request_layout.is_flexible(version):
            r.tagged_fields()
        body = decode_body(request_layout, version, r)
        if api_key == API_VERSIONS_KEY:
            return KafkaRequest(header, None, self._api_versions_frame(header, ErrorCode.NONE, version))
        return KafkaRequest(header, _TO_REQUEST[api_key](body, version))

    def encode_response(self, header: KafkaHeader, message: Any) -> bytes:
        """The whole response frame answering `header` with our response dataclass `message`."""
        request_layout, response_layout = self.layouts[header.api_key]
        body = _FROM_RESPONSE[header.api_key](message, header.api_version)
        if header.api_key in (3, 60) and self.controllers is not None:
            self._controllers_view(header.api_key, body)
        elif header.api_key in (3, 60):  # (75 names no controller)
            body["ControllerId"] = self._reported_controller(body)
        return _frame(header, response_layout, request_layout.is_flexible(header.api_version), body)

    def closes_instead(self, message: Any) -> bool:
        """Whether to close the connection instead of sending `message`: a broker that does not serve
        clients yet (not unfenced) refuses Metadata with no brokers and no cluster id. Kafka's broker
        processes no request before it is unfenced; librdkafka takes an empty answer as the truth until
        its periodic broker-list refresh (measured: ~18 s after a whole-cluster restart), while a
        closed connection makes it reconnect and ask again within its reconnect backoff."""
        return (
            self.controllers is None
            and isinstance(message, MetadataResponse)
            and not message.brokers
            and message.cluster_id is None
        )

    def _reported_controller(self, body: dict[str, Any]) -> int:
        """The "controller" a Kafka client sends its admin requests to. As in Kafka's KRaft mode, that is
        a live broker (which forwards writes to the active controller), never a controller a client
        cannot reach: this node when it is one of the brokers listed, else the lowest listed."""
        ids = [b.get("NodeId", b.get("BrokerId")) for b in body["Brokers"]]
        if not ids:
            return -1
        return self.node_id if self.node_id in ids else min(ids)

    def _controllers_view(self, api_key: int, body: dict[str, Any]) -> None:
        """A client that bootstraps from the controller listeners talks to the controllers, as KIP-919's
        `bootstrap.controllers` clients do: the nodes listed are the voters at their controller
        listeners, and the "controller" is the active one this node knows (-1 while none is), so a
        Kafka client sends its admin requests, DescribeConfigs included, to the active controller,
        which answers a read after a read barrier (linearizable)."""
        id_field = "NodeId" if api_key == 3 else "BrokerId"
        assert self.controllers is not None
        body["Brokers"] = [{id_field: i, "Host": h, "Port": p, "Rack": None} for i, h, p in self.controllers]
        if body["ControllerId"] not in {i for i, _, _ in self.controllers}:
            body["ControllerId"] = -1

    def _api_versions_frame(self, header: KafkaHeader, error: int, version: int) -> bytes:
        body = {"ErrorCode": int(error), "ApiKeys": self.api_versions()}
        return _frame(KafkaHeader(header.api_key, version, header.correlation_id, None), LAYOUTS[18][1], False, body)


def _frame(header: KafkaHeader, layout: Message, flexible_header: bool, body: dict[str, Any]) -> bytes:
    w = Writer()
    w.int("int32", header.correlation_id)
    if flexible_header and header.api_key != API_VERSIONS_KEY:
        w.uvarint(0)  # response header v1: no tagged fields
    payload = bytes(w.out) + encode_body(layout, header.api_version, body)
    return struct.pack(">i", len(payload)) + payload


# --- requests: Kafka's body -> our dataclass ---------------------------------------------------------


def _metadata(body: dict[str, Any], version: int) -> MetadataRequest:
    topics = body["Topics"]
    if topics is None or (version == 0 and not topics):
        return MetadataRequest(None)  # v0 asks for every topic with an empty list, later ones with null
    return MetadataRequest(tuple(t["Name"] or "" for t in topics))


def _describe_cluster(body: dict[str, Any], version: int) -> DescribeClusterRequest:
    return DescribeClusterRequest()  # EndpointType 2 (controllers, KIP-919) is answered as 1: see the docs


def _create_topics(body: dict[str, Any], version: int) -> CreateTopicsRequest:
    topics = tuple(
        CreatableTopic(
            t["Name"],
            t["NumPartitions"],
            t["ReplicationFactor"],
            tuple(CreatableReplicaAssignment(a["PartitionIndex"], tuple(a["BrokerIds"])) for a in t["Assignments"]),
            tuple((c["Name"], c["Value"]) for c in t["Configs"]),
        )
        for t in body["Topics"]
    )
    return CreateTopicsRequest(topics, body["TimeoutMs"], body["ValidateOnly"])


def _delete_topics(body: dict[str, Any], version: int) -> DeleteTopicsRequest:
    return DeleteTopicsRequest(tuple(body["TopicNames"]), body["TimeoutMs"])


def _elect_leaders(body: dict[str, Any], version: int) -> ElectLeadersRequest:
    code = body["ElectionType"] if version >= 1 else ElectionType.PREFERRED
    election = ElectionType(code) if code in ElectionType._value2member_map_ else ElectionType.UNKNOWN
    asked = body["TopicPartitions"]
    topics = (
        None
        if asked is None
        else tuple(ElectLeadersTopicPartitions(t["Topic"], tuple(t["PartitionId"])) for t in asked)
    )
    return ElectLeadersRequest(election, topics, body["TimeoutMs"])


def _resource_type(code: int) -> ConfigResourceType:
    return ConfigResourceType(code) if code in ConfigResourceType._value2member_map_ else ConfigResourceType.UNKNOWN


def _describe_configs(body: dict[str, Any], version: int) -> DescribeConfigsRequest:
    resources = tuple(
        DescribeConfigsResource(
            _resource_type(r["ResourceType"]),
            r["ResourceName"],
            None if r["ConfigurationKeys"] is None else tuple(r["ConfigurationKeys"]),
        )
        for r in body["Resources"]
    )
    return DescribeConfigsRequest(resources)


def _operation(code: int) -> ConfigOperation:
    return ConfigOperation(code) if code in ConfigOperation._value2member_map_ else ConfigOperation.UNKNOWN


def _incremental_alter_configs(body: dict[str, Any], version: int) -> IncrementalAlterConfigsRequest:
    resources = tuple(
        IncrementalAlterConfigsResource(
            _resource_type(r["ResourceType"]),
            r["ResourceName"],
            tuple(AlterableConfig(c["Name"], _operation(c["ConfigOperation"]), c["Value"]) for c in r["Configs"]),
        )
        for r in body["Resources"]
    )
    return IncrementalAlterConfigsRequest(resources, body["ValidateOnly"])


def _alter_configs(body: dict[str, Any], version: int) -> AlterConfigsRequest:
    resources = tuple(
        AlterConfigsResource(
            _resource_type(r["ResourceType"]),
            r["ResourceName"],
            tuple((c["Name"], c["Value"]) for c in r["Configs"]),
        )
        for r in body["Resources"]
    )
    return AlterConfigsRequest(resources, body["ValidateOnly"])


def _sasl_handshake(body: dict[str, Any], version: int) -> SaslHandshakeRequest:
    return SaslHandshakeRequest(body["Mechanism"])


def _sasl_authenticate(body: dict[str, Any], version: int) -> SaslAuthenticateRequest:
    return SaslAuthenticateRequest(body["AuthBytes"] or b"")


def _enum(cls: type, code: int) -> Any:
    """Kafka decodes a code it does not know as UNKNOWN (0); the handler answers it with an error."""
    return cls(code) if code in cls._value2member_map_ else cls(0)


_ACL_KINDS = (ResourceType, None, PatternType, None, None, AclOperation, AclPermissionType)  # None: a string
_FILTER_KEYS = (
    "ResourceTypeFilter",
    "ResourceNameFilter",
    "PatternTypeFilter",
    "PrincipalFilter",
    "HostFilter",
    "Operation",
    "PermissionType",
)
_CREATION_KEYS = (
    "ResourceType",
    "ResourceName",
    "ResourcePatternType",
    "Principal",
    "Host",
    "Operation",
    "PermissionType",
)


def _acl_values(entry: dict[str, Any], keys: tuple[str, ...]) -> tuple[Any, ...]:
    """An ACL binding or filter's seven fields, in the order of our dataclasses."""
    return tuple(entry[k] if kind is None else _enum(kind, entry[k]) for k, kind in zip(keys, _ACL_KINDS, strict=True))


def _acl_filter(f: dict[str, Any]) -> tuple[Any, ...]:
    return _acl_values(f, _FILTER_KEYS)


def _create_acls(body: dict[str, Any], version: int) -> CreateAclsRequest:
    return CreateAclsRequest(tuple(AclCreation(*_acl_values(c, _CREATION_KEYS)) for c in body["Creations"]))


def _describe_acls(body: dict[str, Any], version: int) -> DescribeAclsRequest:
    return DescribeAclsRequest(*_acl_filter(body))


def _delete_acls(body: dict[str, Any], version: int) -> DeleteAclsRequest:
    return DeleteAclsRequest(tuple(DeleteAclsFilter(*_acl_filter(f)) for f in body["Filters"]))


METADATA_TOPIC = "__cluster_metadata"  # the one partition (0) DescribeQuorum describes


def _describe_quorum(body: dict[str, Any], version: int) -> DescribeQuorumRequest:
    """Answered for the metadata partition whatever the request names (see the docs)."""
    return DescribeQuorumRequest()


def _describe_topic_partitions(body: dict[str, Any], version: int) -> MetadataRequest:
    """Every partition of the topics named (all topics when none are), in one page: the cursor and
    the partition limit are read and not applied (see the docs)."""
    names = tuple(t["Name"] for t in body["Topics"])
    return MetadataRequest(names or None)


_TO_REQUEST: dict[int, Callable[[dict[str, Any], int], Any]] = {
    75: _describe_topic_partitions,
    55: _describe_quorum,
    30: _create_acls,
    29: _describe_acls,
    31: _delete_acls,
    33: _alter_configs,
    17: _sasl_handshake,
    36: _sasl_authenticate,
    3: _metadata,
    60: _describe_cluster,
    19: _create_topics,
    20: _delete_topics,
    43: _elect_leaders,
    32: _describe_configs,
    44: _incremental_alter_configs,
}


# --- responses: our dataclass -> Kafka's body --------------------------------------------------------


def _metadata_response(m: Any, version: int) -> dict[str, Any]:
    return {
        "Brokers": [{"NodeId": b.node_id, "Host": b.host, "Port": b.port, "Rack": b.rack} for b in m.brokers],
        "ClusterId": m.cluster_id,
        "ControllerId": m.controller_id,
        "Topics": [
            {
                "ErrorCode": t.error_code,
                "Name": t.name,
                "TopicId": t.topic_id,
                "Partitions": [
                    {
                        "ErrorCode": p.error_code,
                        "PartitionIndex": p.partition_index,
                        "LeaderId": p.leader_id,
                        "LeaderEpoch": p.leader_epoch,
                        "ReplicaNodes": list(p.replica_nodes),
                        "IsrNodes": list(p.isr_nodes),
                    }
                    for p in t.partitions
                ],
            }
            for t in m.topics
        ],
    }


def _describe_cluster_response(m: Any, version: int) -> dict[str, Any]:
    return {
        "ErrorCode": m.error_code,
        "ErrorMessage": m.error_message,
        "ClusterId": m.cluster_id,
        "ControllerId": m.controller_id,
        "Brokers": [{"BrokerId": b.broker_id, "Host": b.host, "Port": b.port, "Rack": b.rack} for b in m.brokers],
    }


def _create_topics_response(m: Any, version: int) -> dict[str, Any]:
    return {
        "Topics": [
            {
                "Name": t.name,
                "TopicId": t.topic_id,
                "ErrorCode": t.error_code,
                "ErrorMessage": t.error_message,
                "NumPartitions": t.num_partitions,
                "ReplicationFactor": t.replication_factor,
                "Configs": [],
            }
            for t in m.topics
        ]
    }


def _delete_topics_response(m: Any, version: int) -> dict[str, Any]:
    return {
        "Responses": [{"Name": t.name, "ErrorCode": t.error_code, "ErrorMessage": t.error_message} for t in m.responses]
    }


def _elect_leaders_response(m: Any, version: int) -> dict[str, Any]:
    results = [
        {
            "Topic": t.topic,
            "PartitionResult": [
                {"PartitionId": p.partition_id, "ErrorCode": p.error_code, "ErrorMessage": p.error_message}
                for p in t.partition_result
            ],
        }
        for t in m.replica_election_results
    ]
    return {"ErrorCode": m.error_code, "ReplicaElectionResults": results}


def _describe_configs_response(m: Any, version: int) -> dict[str, Any]:
    return {
        "Results": [
            {
                "ErrorCode": r.error_code,
                "ErrorMessage": r.error_message,
                "ResourceType": int(r.resource_type),
                "ResourceName": r.resource_name,
                "Configs": [
                    {
                        "Name": c.name,
                        "Value": c.value,
                        "ReadOnly": c.read_only,
                        "IsDefault": c.config_source == ConfigSource.DEFAULT_CONFIG,
                        "ConfigSource": int(c.config_source),
                        "IsSensitive": c.is_sensitive,
                    }
                    for c in r.configs
                ],
            }
            for r in m.results
        ]
    }


def _alter_configs_response(m: Any, version: int) -> dict[str, Any]:
    return {
        "Responses": [
            {
                "ErrorCode": r.error_code,
                "ErrorMessage": r.error_message,
                "ResourceType": int(r.resource_type),
                "ResourceName": r.resource_name,
            }
            for r in m.responses
        ]
    }


def _sasl_handshake_response(m: Any, version: int) -> dict[str, Any]:
    return {"ErrorCode": m.error_code, "Mechanisms": list(m.mechanisms)}


def _sasl_authenticate_response(m: Any, version: int) -> dict[str, Any]:
    return {"ErrorCode": m.error_code, "ErrorMessage": m.error_message, "AuthBytes": m.auth_bytes}


def _error(x: Any) -> dict[str, Any]:
    return {"ErrorCode": x.error_code, "ErrorMessage": x.error_message}


def _acl_entry(a: Any) -> dict[str, Any]:
    return {
        "Principal": a.principal,
        "Host": a.host,
        "Operation": int(a.operation),
        "PermissionType": int(a.permission_type),
    }


def _create_acls_response(m: Any, version: int) -> dict[str, Any]:
    return {"Results": [_error(r) for r in m.results]}


def _describe_acls_response(m: Any, version: int) -> dict[str, Any]:
    resources = [
        {
            "ResourceType": int(r.resource_type),
            "ResourceName": r.resource_name,
            "PatternType": int(r.pattern_type),
            "Acls": [_acl_entry(a) for a in r.acls],
        }
        for r in m.resources
    ]
    return {**_error(m), "Resources": resources}


def _delete_acls_response(m: Any, version: int) -> dict[str, Any]:
    results = [
        {
            **_error(f),
            "MatchingAcls": [
                {
                    **_error(a),
                    "ResourceType": int(a.resource_type),
                    "ResourceName": a.resource_name,
                    "PatternType": int(a.pattern_type),
                    **_acl_entry(a),
                }
                for a in f.matching_acls
            ],
        }
        for f in m.filter_results
    ]
    return {"FilterResults": results}


def _replica_states(replicas: Any) -> list[dict[str, Any]]:
    return [
        {
            "ReplicaId": r.replica_id,
            "LogEndOffset": r.log_end_offset,
            "LastFetchTimestamp": r.last_fetch_timestamp,
            "LastCaughtUpTimestamp": r.last_caught_up_timestamp,
        }
        for r in replicas
    ]


def _describe_quorum_response(m: Any, version: int) -> dict[str, Any]:
    partition = {
        "PartitionIndex": 0,
        "ErrorCode": m.error_code,
        "LeaderId": m.leader_id,
        "LeaderEpoch": m.leader_epoch,
        "HighWatermark": m.high_watermark,
        "CurrentVoters": _replica_states(m.current_voters),
        "Observers": _replica_states(m.observers),
    }
    return {"ErrorCode": 0, "Topics": [{"TopicName": METADATA_TOPIC, "Partitions": [partition]}]}


def _describe_topic_partitions_response(m: Any, version: int) -> dict[str, Any]:
    return {"Topics": _metadata_response(m, version)["Topics"], "NextCursor": None}


_FROM_RESPONSE: dict[int, Callable[[Any, int], dict[str, Any]]] = {
    75: _describe_topic_partitions_response,
    55: _describe_quorum_response,
    30: _create_acls_response,
    29: _describe_acls_response,
    31: _delete_acls_response,
    33: _alter_configs_response,
    17: _sasl_handshake_response,
    36: _sasl_authenticate_response,
    3: _metadata_response,
    60: _describe_cluster_response,
    19: _create_topics_response,
    20: _delete_topics_response,
    43: _elect_leaders_response,
    32: _describe_configs_response,
    44: _alter_configs_response,
}

__all__ = ["KafkaCodec", "KafkaHeader", "KafkaRequest", "looks_like_kafka"]
