"""The wire layout of every message: one `define` per dataclass, in its field order (version 0 unless
said; `define_older` adds the layouts of older versions a message can still be sent and read in).

Nested structs are defined before the messages that contain them. `fields.Schema` checks each list
against the dataclass, so adding a field to a message without adding it here fails at import.
"""

from __future__ import annotations

from node.protocol import acls, admin, broker_api, session
from node.protocol.fields import (
    BATCHES,
    BOOL,
    BYTES,
    ERROR,
    INT16,
    INT32,
    INT32_ARRAY,
    INT64,
    NONNULL_STRING,
    NULLABLE_BYTES,
    NULLABLE_STRING,
    STRING,
    UINT16,
    UUID,
    array,
    define,
    define_older,
    enum8,
    inline_struct,
    map_of,
    nullable_array,
    optional_struct,
    struct_array,
)
from node.protocol.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    EpochEndOffset,
    FetchRequest,
    FetchResponse,
    ReplicaState,
    VoteRequest,
    VoteResponse,
)

# --- the quorum RPCs (KIP-595) -----------------------------------------------------------------------
define(EpochEndOffset, ("epoch", INT32), ("end_offset", INT64))
define(broker_api.SnapshotId, ("end_offset", INT64), ("epoch", INT32))
define(
    ReplicaState,
    ("replica_id", INT32),
    ("log_end_offset", INT64),
    ("last_fetch_timestamp", INT64),
    ("last_caught_up_timestamp", INT64),
)
VOTE_REQUEST_V0 = (
    ("cluster_id", STRING),
    ("candidate_epoch", INT32),
    ("candidate_id", INT32),
    ("last_offset_epoch", INT32),
    ("last_offset", INT64),
)
# KIP-996 adds PreVote in v2 (Kafka's v1 is KIP-853's dynamic-voter fields, which this project does
# not speak). A standard vote still goes out as v0.
define(VoteRequest, *VOTE_REQUEST_V0, ("pre_vote", BOOL), version=2)
define_older(VoteRequest, 0, *VOTE_REQUEST_V0)
define(VoteResponse, ("error_code", ERROR), ("leader_id", INT32), ("leader_epoch", INT32), ("vote_granted", BOOL))
define(BeginQuorumEpochRequest, ("cluster_id", STRING), ("leader_id", INT32), ("leader_epoch", INT32))
define(BeginQuorumEpochResponse, ("error_code", ERROR), ("leader_id", INT32), ("leader_epoch", INT32))
define(
    EndQuorumEpochRequest,
    ("cluster_id", STRING),
    ("replica_id", INT32),
    ("leader_id", INT32),
    ("leader_epoch", INT32),
    ("preferred_successors", INT32_ARRAY),
)
define(EndQuorumEpochResponse, ("error_code", ERROR), ("leader_id", INT32), ("leader_epoch", INT32))
define(
    FetchRequest,
    ("cluster_id", STRING),
    ("replica_id", INT32),
    ("current_leader_epoch", INT32),
    ("fetch_offset", INT64),
    ("last_fetched_epoch", INT32),
    ("max_wait_ms", INT32),
    ("max_bytes", INT32),
)
define(
    FetchResponse,
    ("error_code", ERROR),
    ("leader_id", INT32),
    ("leader_epoch", INT32),
    ("high_watermark", INT64),
    ("log_start_offset", INT64),
    ("diverging_epoch", optional_struct(EpochEndOffset)),
    ("records", BATCHES),
    ("snapshot_id", optional_struct(broker_api.SnapshotId)),
    ("cluster_id", STRING),
)
define(DescribeQuorumRequest)
define(
    DescribeQuorumResponse,
    ("error_code", ERROR),
    ("leader_id", INT32),
    ("leader_epoch", INT32),
    ("high_watermark", INT64),
    ("current_voters", struct_array(ReplicaState)),
    ("observers", struct_array(ReplicaState)),
    ("cluster_id", STRING),
    ("leader_time_ms", INT64),
)

# --- admin: topics, configs, cluster view ------------------------------------------------------------

NAME = NONNULL_STRING
CONFIG_RESOURCE = enum8(admin.ConfigResourceType)
CONFIG_MAP = map_of(NONNULL_STRING, NULLABLE_STRING)
# How a per-resource answer of the config APIs starts.
RESOURCE_RESULT = (
    ("error_code", ERROR),
    ("error_message", NULLABLE_STRING),
    ("resource_type", CONFIG_RESOURCE),
    ("resource_name", NAME),
)

define(admin.CreatableReplicaAssignment, ("partition_index", INT32), ("broker_ids", INT32_ARRAY))
define(
    admin.CreatableTopic,
    ("name", NAME),
    ("num_partitions", INT32),
    ("replication_factor", INT16),
    ("assignments", struct_array(admin.CreatableReplicaAssignment)),
    ("configs", CONFIG_MAP),
)
define(
    admin.CreateTopicsRequest,
    ("topics", struct_array(admin.CreatableTopic)),
    ("timeout_ms", INT32),
    ("validate_only", BOOL),
)
define(
    admin.CreatableTopicResult,
    ("name", NAME),
    ("topic_id", UUID),
    ("error_code", ERROR),
    ("error_message", NULLABLE_STRING),
    ("num_partitions", INT32),
    ("replication_factor", INT16),
)
define(admin.CreateTopicsResponse, ("topics", struct_array(admin.CreatableTopicResult)))

define(admin.DeleteTopicsRequest, ("topic_names", array(NAME)), ("timeout_ms", INT32))
define(
    admin.DeletableTopicResult,
    ("name", NAME),
    ("topic_id", UUID),
    ("error_code", ERROR),
    ("error_message", NULLABLE_STRING),
)
define(admin.DeleteTopicsResponse, ("responses", struct_array(admin.DeletableTopicResult)))

define(admin.ElectLeadersTopicPartitions, ("topic", NAME), ("partitions", INT32_ARRAY))
define(
    admin.ElectLeadersRequest,
    ("election_type", enum8(admin.ElectionType)),
    ("topic_partitions", nullable_array(inline_struct(admin.ElectLeadersTopicPartitions))),
    ("timeout_ms", INT32),
)
define(
    admin.ElectLeadersPartitionResult,
    ("partition_id", INT32),
    ("error_code", ERROR),
    ("error_message", NULLABLE_STRING),
)
define(
    admin.ElectLeadersTopicResult,
    ("topic", NAME),
    ("partition_result", struct_array(admin.ElectLeadersPartitionResult)),
)
define(
    admin.ElectLeadersResponse,
    ("error_code", ERROR),
    ("replica_election_results", struct_array(admin.ElectLeadersTopicResult)),
)

define(
    admin.AlterableConfig,
    ("name", NAME),
    ("config_operation", enum8(admin.ConfigOperation)),
    ("value", NULLABLE_STRING),
)
define(
    admin.IncrementalAlterConfigsResource,
    ("resource_type", CONFIG_RESOURCE),
    ("resource_name", NAME),
    ("configs", struct_array(admin.AlterableConfig)),
)
define(
    admin.IncrementalAlterConfigsRequest,
    ("resources", struct_array(admin.IncrementalAlterConfigsResource)),
    ("validate_only", BOOL),
)
define(admin.AlterConfigsResourceResponse, *RESOURCE_RESULT)
define(admin.IncrementalAlterConfigsResponse, ("responses", struct_array(admin.AlterConfigsResourceResponse)))
define(
    admin.AlterConfigsResource,
    ("resource_type", CONFIG_RESOURCE),
    ("resource_name", NAME),
    ("configs", CONFIG_MAP),
)
define(
    admin.AlterConfigsRequest,
    ("resources", struct_array(admin.AlterConfigsResource)),
    ("validate_only", BOOL),
)
define(admin.AlterConfigsResponse, ("responses", struct_array(admin.AlterConfigsResourceResponse)))

define(
    admin.DescribeConfigsResource,
    ("resource_type", CONFIG_RESOURCE),
    ("resource_name", NAME),
    ("configuration_keys", nullable_array(NAME)),
)
define(admin.DescribeConfigsRequest, ("resources", struct_array(admin.DescribeConfigsResource)))
define(
    admin.DescribeConfigsResourceResult,
    ("name", NAME),
    ("value", NULLABLE_STRING),
    ("read_only", BOOL),
    ("config_source", enum8(admin.ConfigSource)),
    ("is_sensitive", BOOL),
)
define(
    admin.DescribeConfigsResult,
    *RESOURCE_RESULT,
    ("configs", struct_array(admin.DescribeConfigsResourceResult)),
)
define(
    admin.DescribeConfigsResponse,
    ("results", struct_array(admin.DescribeConfigsResult)),
    ("metadata_offset", INT64),
)

define(admin.DescribeClusterRequest, ("include_fenced_brokers", BOOL))
define(
    admin.DescribeClusterBroker,
    ("broker_id", INT32),
    ("host", NAME),
    ("port", UINT16),
    ("rack", NULLABLE_STRING),
    ("is_fenced", BOOL),
    ("broker_epoch", INT64),
)
define(
    admin.DescribeClusterResponse,
    ("error_code", ERROR),
    ("error_message", NULLABLE_STRING),
    ("cluster_id", NAME),
    ("controller_id", INT32),
    ("brokers", struct_array(admin.DescribeClusterBroker)),
    ("metadata_offset", INT64),
)

define(admin.MetadataRequest, ("topics", nullable_array(NAME)))
define(
    admin.MetadataResponseBroker,
    ("node_id", INT32),
    ("host", NAME),
    ("port", UINT16),
    ("rack", NULLABLE_STRING),
)
define(
    admin.MetadataResponsePartition,
    ("error_code", ERROR),
    ("partition_index", INT32),
    ("leader_id", INT32),
    ("leader_epoch", INT32),
    ("replica_nodes", INT32_ARRAY),
    ("isr_nodes", INT32_ARRAY),
    ("partition_epoch", INT32),
)
define(
    admin.MetadataResponseTopic,
    ("error_code", ERROR),
    ("name", NAME),
    ("topic_id", UUID),
    ("partitions", struct_array(admin.MetadataResponsePartition)),
)
define(
    admin.MetadataResponse,
    ("brokers", struct_array(admin.MetadataResponseBroker)),
    ("cluster_id", NULLABLE_STRING),
    ("controller_id", INT32),
    ("topics", struct_array(admin.MetadataResponseTopic)),
    ("metadata_offset", INT64),
)

# --- admin: ACLs -------------------------------------------------------------------------------------

RESOURCE = enum8(acls.ResourceType)
PATTERN = enum8(acls.PatternType)
OPERATION = enum8(acls.AclOperation)
PERMISSION = enum8(acls.AclPermissionType)
ACL_FILTER = (
    ("resource_type_filter", RESOURCE),
    ("resource_name_filter", NULLABLE_STRING),
    ("pattern_type_filter", PATTERN),
    ("principal_filter", NULLABLE_STRING),
    ("host_filter", NULLABLE_STRING),
    ("operation", OPERATION),
    ("permission_type", PERMISSION),
)
# Who may do what from where: how every ACL ends.
ACL_ENTRY = (
    ("principal", NAME),
    ("host", NAME),
    ("operation", OPERATION),
    ("permission_type", PERMISSION),
)

define(
    acls.AclCreation,
    ("resource_type", RESOURCE),
    ("resource_name", NAME),
    ("resource_pattern_type", PATTERN),
    *ACL_ENTRY,
)
define(acls.CreateAclsRequest, ("creations", struct_array(acls.AclCreation)))
define(acls.AclCreationResult, ("error_code", ERROR), ("error_message", NULLABLE_STRING))
define(acls.CreateAclsResponse, ("results", struct_array(acls.AclCreationResult)))

define(acls.DeleteAclsFilter, *ACL_FILTER)
define(acls.DeleteAclsRequest, ("filters", struct_array(acls.DeleteAclsFilter)))
define(
    acls.DeleteAclsMatchingAcl,
    ("error_code", ERROR),
    ("error_message", NULLABLE_STRING),
    ("resource_type", RESOURCE),
    ("resource_name", NAME),
    ("pattern_type", PATTERN),
    *ACL_ENTRY,
)
define(
    acls.DeleteAclsFilterResult,
    ("error_code", ERROR),
    ("error_message", NULLABLE_STRING),
    ("matching_acls", struct_array(acls.DeleteAclsMatchingAcl)),
)
define(acls.DeleteAclsResponse, ("filter_results", struct_array(acls.DeleteAclsFilterResult)))

define(acls.DescribeAclsRequest, *ACL_FILTER)
define(acls.AclDescription, *ACL_ENTRY)
define(
    acls.DescribeAclsResource,
    ("resource_type", RESOURCE),
    ("resource_name", NAME),
    ("pattern_type", PATTERN),
    ("acls", struct_array(acls.AclDescription)),
)
define(
    acls.DescribeAclsResponse,
    ("error_code", ERROR),
    ("error_message", NULLABLE_STRING),
    ("resources", struct_array(acls.DescribeAclsResource)),
    ("metadata_offset", INT64),
)

# --- between nodes -----------------------------------------------------------------------------------

define(
    broker_api.Listener,
    ("name", NAME),
    ("host", NAME),
    ("port", UINT16),
    ("security_protocol", INT16),
)
define(
    broker_api.BrokerRegistrationFeature,
    ("name", NAME),
    ("min_supported_version", INT16),
    ("max_supported_version", INT16),
)
define(
    broker_api.BrokerRegistrationRequest,
    ("broker_id", INT32),
    ("cluster_id", NAME),
    ("incarnation_id", UUID),
    ("listeners", struct_array(broker_api.Listener)),
    ("features", struct_array(broker_api.BrokerRegistrationFeature)),
    ("rack", NULLABLE_STRING),
)
define(broker_api.BrokerRegistrationResponse, ("error_code", ERROR), ("broker_epoch", INT64))
define(
    broker_api.BrokerHeartbeatRequest,
    ("broker_id", INT32),
    ("broker_epoch", INT64),
    ("current_metadata_offset", INT64),
    ("want_fence", BOOL),
    ("want_shut_down", BOOL),
)
define(
    broker_api.BrokerHeartbeatResponse,
    ("error_code", ERROR),
    ("is_caught_up", BOOL),
    ("is_fenced", BOOL),
    ("should_shut_down", BOOL),
)

define(
    broker_api.AlterPartitionPartitionData,
    ("partition_index", INT32),
    ("leader_epoch", INT32),
    ("new_isr", INT32_ARRAY),
    ("partition_epoch", INT32),
    ("new_isr_epochs", array(INT64)),
)
define(
    broker_api.AlterPartitionTopicData,
    ("topic_id", UUID),
    ("partitions", struct_array(broker_api.AlterPartitionPartitionData)),
)
define(
    broker_api.AlterPartitionRequest,
    ("broker_id", INT32),
    ("broker_epoch", INT64),
    ("topics", struct_array(broker_api.AlterPartitionTopicData)),
)
define(
    broker_api.AlterPartitionPartitionResult,
    ("partition_index", INT32),
    ("error_code", ERROR),
    ("leader_id", INT32),
    ("leader_epoch", INT32),
    ("isr", INT32_ARRAY),
    ("partition_epoch", INT32),
)
define(
    broker_api.AlterPartitionTopicResult,
    ("topic_id", UUID),
    ("partitions", struct_array(broker_api.AlterPartitionPartitionResult)),
)
define(
    broker_api.AlterPartitionResponse,
    ("error_code", ERROR),
    ("topics", struct_array(broker_api.AlterPartitionTopicResult)),
)

define(
    broker_api.EnvelopeRequest,
    ("request_data", BYTES),
    ("request_principal", NAME),
    ("client_host_address", NAME),
    ("listener_name", NAME),
    ("security_protocol", NAME),
)
define(broker_api.EnvelopeResponse, ("error_code", ERROR), ("response_data", NULLABLE_BYTES))

define(
    broker_api.FetchSnapshotRequest,
    ("cluster_id", NULLABLE_STRING),
    ("replica_id", INT32),
    ("max_bytes", INT32),
    ("current_leader_epoch", INT32),
    ("snapshot_id", inline_struct(broker_api.SnapshotId)),
    ("position", INT64),
)
define(
    broker_api.FetchSnapshotResponse,
    ("error_code", ERROR),
    ("leader_id", INT32),
    ("leader_epoch", INT32),
    ("snapshot_id", inline_struct(broker_api.SnapshotId)),
    ("size", INT64),
    ("position", INT64),
    ("unaligned_records", BYTES),
)

# --- session -----------------------------------------------------------------------------------------

define(session.SaslHandshakeRequest, ("mechanism", NAME))
define(session.SaslHandshakeResponse, ("error_code", ERROR), ("mechanisms", array(NAME)))
define(session.SaslAuthenticateRequest, ("auth_bytes", BYTES))
define(
    session.SaslAuthenticateResponse,
    ("error_code", ERROR),
    ("error_message", NULLABLE_STRING),
    ("auth_bytes", BYTES),
)
define(session.ApiVersionsRequest)
define(session.ApiVersion, ("api_key", INT16), ("min_version", INT16), ("max_version", INT16))
define(session.ApiVersionsResponse, ("error_code", ERROR), ("api_keys", struct_array(session.ApiVersion)))
