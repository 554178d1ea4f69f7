"""The admin APIs a client speaks to a broker or the active controller: topics, configs, cluster view.

Field names are Kafka's (version 0 of kraft-chaos's own schemas, modelled on Kafka's JSON schemas),
in snake_case. Kafka's `ThrottleTimeMs` is left out: there are no quotas here. Extensions beyond
Kafka are marked "extension"; the main one is `metadata_offset` on every answer a broker serves from
its metadata image, so a checker knows which prefix of the metadata log the answer reflects.

Maps in Kafka's schemas (`mapKey`) are tuples of `(key, value)` pairs here: duplicates are carried to
the handler, which answers them with Kafka's error code (the codec does not judge meaning).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from enum import IntEnum

from node.protocol.common import NO_BROKER, UNKNOWN_OFFSET


class ConfigResourceType(IntEnum):
    """Kafka's ConfigResource.Type (the int8 ResourceType of the config APIs)."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8


class ConfigOperation(IntEnum):
    """Kafka's AlterConfigOp.OpType. UNKNOWN (-1) stands for a code kraft-chaos does not know."""

    UNKNOWN = -1
    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


class ConfigSource(IntEnum):
    """Kafka's DescribeConfigsResponse.ConfigSource."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6


ConfigMap = tuple[tuple[str, str | None], ...]  # (name, value) pairs; a None value in AlterConfigs deletes


# --- CreateTopics (19) -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CreatableReplicaAssignment:
    partition_index: int
    broker_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class CreatableTopic:
    name: str
    num_partitions: int = -1  # -1: the controller's default (num.partitions)
    replication_factor: int = -1  # int16; -1: default.replication.factor
    assignments: tuple[CreatableReplicaAssignment, ...] = ()  # when given, both counts above are -1
    configs: ConfigMap = ()


@dataclass(frozen=True, slots=True)
class CreateTopicsRequest:
    topics: tuple[CreatableTopic, ...]
    timeout_ms: int = 30_000
    validate_only: bool = False


@dataclass(frozen=True, slots=True)
class CreatableTopicResult:
    name: str
    topic_id: uuid.UUID
    error_code: int
    error_message: str | None = None
    num_partitions: int = -1
    replication_factor: int = -1


@dataclass(frozen=True, slots=True)
class CreateTopicsResponse:
    topics: tuple[CreatableTopicResult, ...]


# --- DeleteTopics (20) -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DeleteTopicsRequest:
    topic_names: tuple[str, ...]
    timeout_ms: int = 30_000


@dataclass(frozen=True, slots=True)
class DeletableTopicResult:
    name: str
    topic_id: uuid.UUID
    error_code: int
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class DeleteTopicsResponse:
    responses: tuple[DeletableTopicResult, ...]


# --- IncrementalAlterConfigs (44) and AlterConfigs (33) ----------------------------------------------


@dataclass(frozen=True, slots=True)
class AlterableConfig:
    name: str
    config_operation: ConfigOperation
    value: str | None  # None for DELETE


@dataclass(frozen=True, slots=True)
class IncrementalAlterConfigsResource:
    resource_type: ConfigResourceType
    resource_name: str  # a topic name, a broker id as text, or "" for the cluster-wide broker default
    configs: tuple[AlterableConfig, ...]


@dataclass(frozen=True, slots=True)
class IncrementalAlterConfigsRequest:
    resources: tuple[IncrementalAlterConfigsResource, ...]
    validate_only: bool = False


@dataclass(frozen=True, slots=True)
class AlterConfigsResourceResponse:
    error_code: int
    error_message: str | None
    resource_type: ConfigResourceType
    resource_name: str


@dataclass(frozen=True, slots=True)
class IncrementalAlterConfigsResponse:
    responses: tuple[AlterConfigsResourceResponse, ...]


@dataclass(frozen=True, slots=True)
class AlterConfigsResource:
    """Legacy AlterConfigs: `configs` replaces the resource's whole dynamic config."""

    resource_type: ConfigResourceType
    resource_name: str
    configs: ConfigMap


@dataclass(frozen=True, slots=True)
class AlterConfigsRequest:
    resources: tuple[AlterConfigsResource, ...]
    validate_only: bool = False


@dataclass(frozen=True, slots=True)
class AlterConfigsResponse:
    responses: tuple[AlterConfigsResourceResponse, ...]


# --- DescribeConfigs (32) ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DescribeConfigsResource:
    resource_type: ConfigResourceType
    resource_name: str
    configuration_keys: tuple[str, ...] | None = None  # None: every config


@dataclass(frozen=True, slots=True)
class DescribeConfigsRequest:
    resources: tuple[DescribeConfigsResource, ...]


@dataclass(frozen=True, slots=True)
class DescribeConfigsResourceResult:
    name: str
    value: str | None  # None for a sensitive config
    read_only: bool
    config_source: ConfigSource
    is_sensitive: bool = False


@dataclass(frozen=True, slots=True)
class DescribeConfigsResult:
    error_code: int
    error_message: str | None
    resource_type: ConfigResourceType
    resource_name: str
    configs: tuple[DescribeConfigsResourceResult, ...] = ()


@dataclass(frozen=True, slots=True)
class DescribeConfigsResponse:
    results: tuple[DescribeConfigsResult, ...]
    metadata_offset: int = UNKNOWN_OFFSET  # extension: the metadata offset the answer reflects


# --- DescribeCluster (60) ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DescribeClusterRequest:
    include_fenced_brokers: bool = False  # Kafka's v2 field; `brokers list` wants every broker


@dataclass(frozen=True, slots=True)
class DescribeClusterBroker:
    broker_id: int
    host: str
    port: int  # uint16
    rack: str | None = None
    is_fenced: bool = False
    broker_epoch: int = -1  # extension: the epoch of the registration (its record's offset)


@dataclass(frozen=True, slots=True)
class DescribeClusterResponse:
    error_code: int
    error_message: str | None = None
    cluster_id: str = ""
    controller_id: int = NO_BROKER
    brokers: tuple[DescribeClusterBroker, ...] = ()
    metadata_offset: int = UNKNOWN_OFFSET  # extension


# --- Metadata (3) ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MetadataRequest:
    topics: tuple[str, ...] | None = None  # None: every topic


@dataclass(frozen=True, slots=True)
class MetadataResponseBroker:
    node_id: int
    host: str
    port: int  # uint16
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class MetadataResponsePartition:
    error_code: int
    partition_index: int
    leader_id: int
    leader_epoch: int
    replica_nodes: tuple[int, ...]
    isr_nodes: tuple[int, ...]
    partition_epoch: int = -1  # extension: what an AlterPartition must name (KIP-497's zkVersion)


@dataclass(frozen=True, slots=True)
class MetadataResponseTopic:
    error_code: int
    name: str
    topic_id: uuid.UUID
    partitions: tuple[MetadataResponsePartition, ...] = ()


@dataclass(frozen=True, slots=True)
class MetadataResponse:
    brokers: tuple[MetadataResponseBroker, ...]
    cluster_id: str | None
    controller_id: int
    topics: tuple[MetadataResponseTopic, ...]
    metadata_offset: int = UNKNOWN_OFFSET  # extension


# --- ElectLeaders (43) -------------------------------------------------------------------------------


class ElectionType(IntEnum):
    """KIP-460's election types. UNKNOWN (-1) stands for a code kraft-chaos does not know."""

    UNKNOWN = -1
    PREFERRED = 0  # move leadership to the first replica of the assignment, if it is in the ISR
    UNCLEAN = 1  # a leaderless partition: any live replica, even one outside the ISR


@dataclass(frozen=True, slots=True)
class ElectLeadersTopicPartitions:
    topic: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ElectLeadersRequest:
    election_type: ElectionType
    topic_partitions: tuple[ElectLeadersTopicPartitions, ...] | None  # None: every partition of every topic
    timeout_ms: int = 60_000


@dataclass(frozen=True, slots=True)
class ElectLeadersPartitionResult:
    partition_id: int
    error_code: int
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class ElectLeadersTopicResult:
    topic: str
    partition_result: tuple[ElectLeadersPartitionResult, ...]


@dataclass(frozen=True, slots=True)
class ElectLeadersResponse:
    error_code: int
    replica_election_results: tuple[ElectLeadersTopicResult, ...] = ()


__all__ = [
    "AlterConfigsRequest",
    "AlterConfigsResource",
    "AlterConfigsResourceResponse",
    "AlterConfigsResponse",
    "AlterableConfig",
    "ConfigMap",
    "ConfigOperation",
    "ConfigResourceType",
    "ConfigSource",
    "CreatableReplicaAssignment",
    "CreatableTopic",
    "CreatableTopicResult",
    "CreateTopicsRequest",
    "CreateTopicsResponse",
    "DeletableTopicResult",
    "DeleteTopicsRequest",
    "DeleteTopicsResponse",
    "DescribeClusterBroker",
    "DescribeClusterRequest",
    "DescribeClusterResponse",
    "DescribeConfigsRequest",
    "DescribeConfigsResource",
    "DescribeConfigsResourceResult",
    "DescribeConfigsResponse",
    "DescribeConfigsResult",
    "ElectLeadersPartitionResult",
    "ElectLeadersRequest",
    "ElectLeadersResponse",
    "ElectLeadersTopicPartitions",
    "ElectLeadersTopicResult",
    "ElectionType",
    "IncrementalAlterConfigsRequest",
    "IncrementalAlterConfigsResource",
    "IncrementalAlterConfigsResponse",
    "MetadataRequest",
    "MetadataResponse",
    "MetadataResponseBroker",
    "MetadataResponsePartition",
    "MetadataResponseTopic",
]
