"""The layouts of the Kafka APIs the cluster answers in Kafka's own framing, per version.

Written from Kafka's message definitions (clients/src/main/resources/common/message/*.json in
apache/kafka), keeping only what a layout needs: the fields, the versions they appear in, the versions
they may be null in, and the first flexible version. `served` is the version range this cluster
answers; ApiVersions advertises exactly these ranges, so a message missing here is not advertised.
"""

from __future__ import annotations

from node.protocol.kafka_wire import F, Message

_ALL = "0+"

API_VERSIONS_REQUEST = Message(
    18,
    "ApiVersionsRequest",
    (0, 3),
    3,
    (F("ClientSoftwareName", "string", "3+"), F("ClientSoftwareVersion", "string", "3+")),
)
API_VERSIONS_RESPONSE = Message(
    18,
    "ApiVersionsResponse",
    (0, 3),
    3,
    (
        F("ErrorCode", "int16"),
        F("ApiKeys", "[]", fields=(F("ApiKey", "int16"), F("MinVersion", "int16"), F("MaxVersion", "int16"))),
        F("ThrottleTimeMs", "int32", "1+"),
    ),
)

METADATA_REQUEST = Message(
    3,
    "MetadataRequest",
    (0, 12),
    9,
    (
        F("Topics", "[]", nullable="1+", fields=(F("TopicId", "uuid", "10+"), F("Name", "string", nullable="10+"))),
        F("AllowAutoTopicCreation", "bool", "4+", default=True),
        F("IncludeClusterAuthorizedOperations", "bool", "8-10"),
        F("IncludeTopicAuthorizedOperations", "bool", "8+"),
    ),
)
_OPS_UNKNOWN = -(1 << 31)  # Kafka's "authorized operations not requested"
METADATA_RESPONSE = Message(
    3,
    "MetadataResponse",
    (0, 12),
    9,
    (
        F("ThrottleTimeMs", "int32", "3+"),
        F(
            "Brokers",
            "[]",
            fields=(F("NodeId", "int32"), F("Host", "string"), F("Port", "int32"), F("Rack", "string", "1+", "1+")),
        ),
        F("ClusterId", "string", "2+", "2+"),
        F("ControllerId", "int32", "1+", default=-1),
        F(
            "Topics",
            "[]",
            fields=(
                F("ErrorCode", "int16"),
                F("Name", "string", nullable="12+"),
                F("TopicId", "uuid", "10+"),
                F("IsInternal", "bool", "1+"),
                F(
                    "Partitions",
                    "[]",
                    fields=(
                        F("ErrorCode", "int16"),
                        F("PartitionIndex", "int32"),
                        F("LeaderId", "int32"),
                        F("LeaderEpoch", "int32", "7+", default=-1),
                        F("ReplicaNodes", "[]int32"),
                        F("IsrNodes", "[]int32"),
                        F("OfflineReplicas", "[]int32", "5+"),
                    ),
                ),
                F("TopicAuthorizedOperations", "int32", "8+", default=_OPS_UNKNOWN),
            ),
        ),
        F("ClusterAuthorizedOperations", "int32", "8-10", default=_OPS_UNKNOWN),
    ),
)

DESCRIBE_CLUSTER_REQUEST = Message(
    60,
    "DescribeClusterRequest",
    (0, 1),
    0,
    (F("IncludeClusterAuthorizedOperations", "bool"), F("EndpointType", "int8", "1+", default=1)),
)
DESCRIBE_CLUSTER_RESPONSE = Message(
    60,
    "DescribeClusterResponse",
    (0, 1),
    0,
    (
        F("ThrottleTimeMs", "int32"),
        F("ErrorCode", "int16"),
        F("ErrorMessage", "string", nullable=_ALL),
        F("EndpointType", "int8", "1+", default=1),
        F("ClusterId", "string"),
        F("ControllerId", "int32", default=-1),
        F(
            "Brokers",
            "[]",
            fields=(
                F("BrokerId", "int32"),
                F("Host", "string"),
                F("Port", "int32"),
                F("Rack", "string", nullable=_ALL),
            ),
        ),
        F("ClusterAuthorizedOperations", "int32", default=_OPS_UNKNOWN),
    ),
)

_ERROR = (F("ErrorCode", "int16"), F("ErrorMessage", "string", nullable=_ALL))
_RESOURCE = (F("ResourceType", "int8"), F("ResourceName", "string"))
_NAME_VALUE = (F("Name", "string"), F("Value", "string", nullable=_ALL))
CREATE_TOPICS_REQUEST = Message(
    19,
    "CreateTopicsRequest",
    (0, 7),
    5,
    (
        F(
            "Topics",
            "[]",
            fields=(
                F("Name", "string"),
                F("NumPartitions", "int32"),
                F("ReplicationFactor", "int16"),
                F("Assignments", "[]", fields=(F("PartitionIndex", "int32"), F("BrokerIds", "[]int32"))),
                F("Configs", "[]", fields=_NAME_VALUE),
            ),
        ),
        F("TimeoutMs", "int32", default=60_000),
        F("ValidateOnly", "bool", "1+"),
    ),
)
CREATE_TOPICS_RESPONSE = Message(
    19,
    "CreateTopicsResponse",
    (0, 7),
    5,
    (
        F("ThrottleTimeMs", "int32", "2+"),
        F(
            "Topics",
            "[]",
            fields=(
                F("Name", "string"),
                F("TopicId", "uuid", "7+"),
                F("ErrorCode", "int16"),
                F("ErrorMessage", "string", "1+", _ALL),
                F("NumPartitions", "int32", "5+", default=-1),
                F("ReplicationFactor", "int16", "5+", default=-1),
                F(
                    "Configs",
                    "[]",
                    "5+",
                    "5+",
                    fields=(
                        F("Name", "string", "5+"),
                        F("Value", "string", "5+", "5+"),
                        F("ReadOnly", "bool", "5+"),
                        F("ConfigSource", "int8", "5+", default=-1),
                        F("IsSensitive", "bool", "5+"),
                    ),
                ),
            ),
        ),
    ),
)

DELETE_TOPICS_REQUEST = Message(
    20, "DeleteTopicsRequest", (0, 5), 4, (F("TopicNames", "[]string", "0-5"), F("TimeoutMs", "int32"))
)
DELETE_TOPICS_RESPONSE = Message(
    20,
    "DeleteTopicsResponse",
    (0, 5),
    4,
    (
        F("ThrottleTimeMs", "int32", "1+"),
        F(
            "Responses",
            "[]",
            fields=(F("Name", "string"), F("ErrorCode", "int16"), F("ErrorMessage", "string", "5+", "5+")),
        ),
    ),
)

ELECT_LEADERS_REQUEST = Message(
    43,
    "ElectLeadersRequest",
    (0, 2),
    2,
    (
        F("ElectionType", "int8", "1+"),  # v0: preferred only (KIP-460 added the type in v1)
        F(
            "TopicPartitions",
            "[]",
            nullable=_ALL,
            fields=(F("Topic", "string"), F("PartitionId", "[]int32")),
        ),
        F("TimeoutMs", "int32", default=60_000),
    ),
)
ELECT_LEADERS_RESPONSE = Message(
    43,
    "ElectLeadersResponse",
    (0, 2),
    2,
    (
        F("ThrottleTimeMs", "int32"),
        F("ErrorCode", "int16", "1+"),
        F(
            "ReplicaElectionResults",
            "[]",
            fields=(
                F("Topic", "string"),
                F(
                    "PartitionResult",
                    "[]",
                    fields=(
                        F("PartitionId", "int32"),
                        F("ErrorCode", "int16"),
                        F("ErrorMessage", "string", nullable=_ALL),
                    ),
                ),
            ),
        ),
    ),
)

DESCRIBE_CONFIGS_REQUEST = Message(
    32,
    "DescribeConfigsRequest",
    (0, 4),
    4,
    (
        F(
            "Resources",
            "[]",
            fields=(
                F("ResourceType", "int8"),
                F("ResourceName", "string"),
                F("ConfigurationKeys", "[]string", nullable=_ALL),
            ),
        ),
        F("IncludeSynonyms", "bool", "1+"),
        F("IncludeDocumentation", "bool", "3+"),
    ),
)
DESCRIBE_CONFIGS_RESPONSE = Message(
    32,
    "DescribeConfigsResponse",
    (0, 4),
    4,
    (
        F("ThrottleTimeMs", "int32"),
        F(
            "Results",
            "[]",
            fields=(
                *_ERROR,
                *_RESOURCE,
                F(
                    "Configs",
                    "[]",
                    fields=(
                        F("Name", "string"),
                        F("Value", "string", nullable=_ALL),
                        F("ReadOnly", "bool"),
                        F("IsDefault", "bool", "0"),
                        F("ConfigSource", "int8", "1+", default=-1),
                        F("IsSensitive", "bool"),
                        F(
                            "Synonyms",
                            "[]",
                            "1+",
                            fields=(
                                F("Name", "string", "1+"),
                                F("Value", "string", "1+", _ALL),
                                F("Source", "int8", "1+"),
                            ),
                        ),
                        F("ConfigType", "int8", "3+"),
                        F("Documentation", "string", "3+", _ALL),
                    ),
                ),
            ),
        ),
    ),
)

INCREMENTAL_ALTER_CONFIGS_REQUEST = Message(
    44,
    "IncrementalAlterConfigsRequest",
    (0, 1),
    1,
    (
        F(
            "Resources",
            "[]",
            fields=(
                F("ResourceType", "int8"),
                F("ResourceName", "string"),
                F(
                    "Configs",
                    "[]",
                    fields=(F("Name", "string"), F("ConfigOperation", "int8"), F("Value", "string", nullable=_ALL)),
                ),
            ),
        ),
        F("ValidateOnly", "bool"),
    ),
)
_ALTER_RESPONSE_FIELDS = (F("ThrottleTimeMs", "int32"), F("Responses", "[]", fields=(*_ERROR, *_RESOURCE)))
INCREMENTAL_ALTER_CONFIGS_RESPONSE = Message(44, "IncrementalAlterConfigsResponse", (0, 1), 1, _ALTER_RESPONSE_FIELDS)

ALTER_CONFIGS_REQUEST = Message(
    33,
    "AlterConfigsRequest",
    (0, 2),
    2,
    (
        F(
            "Resources",
            "[]",
            fields=(F("ResourceType", "int8"), F("ResourceName", "string"), F("Configs", "[]", fields=_NAME_VALUE)),
        ),
        F("ValidateOnly", "bool"),
    ),
)
ALTER_CONFIGS_RESPONSE = Message(33, "AlterConfigsResponse", (0, 2), 2, _ALTER_RESPONSE_FIELDS)

_NEVER = 1 << 15  # "flexibleVersions": "none"
# Only v1: in v0 the SASL tokens that follow are not Kafka frames at all.
SASL_HANDSHAKE_REQUEST = Message(17, "SaslHandshakeRequest", (1, 1), _NEVER, (F("Mechanism", "string"),))
SASL_HANDSHAKE_RESPONSE = Message(
    17, "SaslHandshakeResponse", (1, 1), _NEVER, (F("ErrorCode", "int16"), F("Mechanisms", "[]string"))
)
SASL_AUTHENTICATE_REQUEST = Message(36, "SaslAuthenticateRequest", (0, 2), 2, (F("AuthBytes", "bytes"),))
SASL_AUTHENTICATE_RESPONSE = Message(
    36,
    "SaslAuthenticateResponse",
    (0, 2),
    2,
    (
        F("ErrorCode", "int16"),
        F("ErrorMessage", "string", nullable=_ALL),
        F("AuthBytes", "bytes"),
        F("SessionLifetimeMs", "int64", "1+"),
    ),
)

# --- ACLs: a filter's strings may be null ("any"); the pattern type appears in v1+ (LITERAL before) ---
_LITERAL = 3
_ACL_FILTER = (
    F("ResourceTypeFilter", "int8"),
    F("ResourceNameFilter", "string", nullable=_ALL),
    F("PatternTypeFilter", "int8", "1+", default=_LITERAL),
    F("PrincipalFilter", "string", nullable=_ALL),
    F("HostFilter", "string", nullable=_ALL),
    F("Operation", "int8"),
    F("PermissionType", "int8"),
)
_ACL_ENTRY = (F("Principal", "string"), F("Host", "string"), F("Operation", "int8"), F("PermissionType", "int8"))
CREATE_ACLS_REQUEST = Message(
    30,
    "CreateAclsRequest",
    (0, 3),
    2,
    (F("Creations", "[]", fields=(*_RESOURCE, F("ResourcePatternType", "int8", "1+", default=_LITERAL), *_ACL_ENTRY)),),
)
CREATE_ACLS_RESPONSE = Message(
    30, "CreateAclsResponse", (0, 3), 2, (F("ThrottleTimeMs", "int32"), F("Results", "[]", fields=_ERROR))
)
DESCRIBE_ACLS_REQUEST = Message(29, "DescribeAclsRequest", (0, 3), 2, _ACL_FILTER)
DESCRIBE_ACLS_RESPONSE = Message(
    29,
    "DescribeAclsResponse",
    (0, 3),
    2,
    (
        F("ThrottleTimeMs", "int32"),
        *_ERROR,
        F(
            "Resources",
            "[]",
            fields=(
                *_RESOURCE,
                F("PatternType", "int8", "1+", default=_LITERAL),
                F("Acls", "[]", fields=_ACL_ENTRY),
            ),
        ),
    ),
)
DELETE_ACLS_REQUEST = Message(31, "DeleteAclsRequest", (0, 3), 2, (F("Filters", "[]", fields=_ACL_FILTER),))
DELETE_ACLS_RESPONSE = Message(
    31,
    "DeleteAclsResponse",
    (0, 3),
    2,
    (
        F("ThrottleTimeMs", "int32"),
        F(
            "FilterResults",
            "[]",
            fields=(
                *_ERROR,
                F(
                    "MatchingAcls",
                    "[]",
                    fields=(*_ERROR, *_RESOURCE, F("PatternType", "int8", "1+", default=_LITERAL), *_ACL_ENTRY),
                ),
            ),
        ),
    ),
)

# --- DescribeQuorum (KIP-595): v2's directory ids and node endpoints (KIP-853) are not served ---
_REPLICA_STATE = (
    F("ReplicaId", "int32"),
    F("LogEndOffset", "int64"),
    F("LastFetchTimestamp", "int64", "1+", default=-1),
    F("LastCaughtUpTimestamp", "int64", "1+", default=-1),
)
DESCRIBE_QUORUM_REQUEST = Message(
    55,
    "DescribeQuorumRequest",
    (0, 1),
    0,
    (
        F(
            "Topics",
            "[]",
            fields=(F("TopicName", "string"), F("Partitions", "[]", fields=(F("PartitionIndex", "int32"),))),
        ),
    ),
)
DESCRIBE_QUORUM_RESPONSE = Message(
    55,
    "DescribeQuorumResponse",
    (0, 1),
    0,
    (
        F("ErrorCode", "int16"),
        F(
            "Topics",
            "[]",
            fields=(
                F("TopicName", "string"),
                F(
                    "Partitions",
                    "[]",
                    fields=(
                        F("PartitionIndex", "int32"),
                        F("ErrorCode", "int16"),
                        F("LeaderId", "int32"),
                        F("LeaderEpoch", "int32"),
                        F("HighWatermark", "int64"),
                        F("CurrentVoters", "[]", fields=_REPLICA_STATE),
                        F("Observers", "[]", fields=_REPLICA_STATE),
                    ),
                ),
            ),
        ),
    ),
)

# --- DescribeTopicPartitions (KIP-966): answered like Metadata, all partitions in one page ---
_CURSOR = (F("TopicName", "string"), F("PartitionIndex", "int32"))
DESCRIBE_TOPIC_PARTITIONS_REQUEST = Message(
    75,
    "DescribeTopicPartitionsRequest",
    (0, 0),
    0,
    (
        F("Topics", "[]", fields=(F("Name", "string"),)),
        F("ResponsePartitionLimit", "int32", default=2000),
        F("Cursor", "{}", nullable=_ALL, fields=_CURSOR),
    ),
)
DESCRIBE_TOPIC_PARTITIONS_RESPONSE = Message(
    75,
    "DescribeTopicPartitionsResponse",
    (0, 0),
    0,
    (
        F("ThrottleTimeMs", "int32"),
        F(
            "Topics",
            "[]",
            fields=(
                F("ErrorCode", "int16"),
                F("Name", "string", nullable=_ALL),
                F("TopicId", "uuid"),
                F("IsInternal", "bool"),
                F(
                    "Partitions",
                    "[]",
                    fields=(
                        F("ErrorCode", "int16"),
                        F("PartitionIndex", "int32"),
                        F("LeaderId", "int32"),
                        F("LeaderEpoch", "int32", default=-1),
                        F("ReplicaNodes", "[]int32"),
                        F("IsrNodes", "[]int32"),
                        F("EligibleLeaderReplicas", "[]int32", nullable=_ALL),
                        F("LastKnownElr", "[]int32", nullable=_ALL),
                        F("OfflineReplicas", "[]int32"),
                    ),
                ),
                F("TopicAuthorizedOperations", "int32", default=_OPS_UNKNOWN),
            ),
        ),
        F("NextCursor", "{}", nullable=_ALL, fields=_CURSOR),
    ),
)

# api key -> (request layout, response layout)
LAYOUTS: dict[int, tuple[Message, Message]] = {
    req.api_key: (req, resp)
    for req, resp in (
        (API_VERSIONS_REQUEST, API_VERSIONS_RESPONSE),
        (METADATA_REQUEST, METADATA_RESPONSE),
        (DESCRIBE_CLUSTER_REQUEST, DESCRIBE_CLUSTER_RESPONSE),
        (CREATE_TOPICS_REQUEST, CREATE_TOPICS_RESPONSE),
        (DELETE_TOPICS_REQUEST, DELETE_TOPICS_RESPONSE),
        (ELECT_LEADERS_REQUEST, ELECT_LEADERS_RESPONSE),
        (DESCRIBE_CONFIGS_REQUEST, DESCRIBE_CONFIGS_RESPONSE),
        (INCREMENTAL_ALTER_CONFIGS_REQUEST, INCREMENTAL_ALTER_CONFIGS_RESPONSE),
        (ALTER_CONFIGS_REQUEST, ALTER_CONFIGS_RESPONSE),
        (SASL_HANDSHAKE_REQUEST, SASL_HANDSHAKE_RESPONSE),
        (SASL_AUTHENTICATE_REQUEST, SASL_AUTHENTICATE_RESPONSE),
        (CREATE_ACLS_REQUEST, CREATE_ACLS_RESPONSE),
        (DESCRIBE_ACLS_REQUEST, DESCRIBE_ACLS_RESPONSE),
        (DELETE_ACLS_REQUEST, DELETE_ACLS_RESPONSE),
        (DESCRIBE_QUORUM_REQUEST, DESCRIBE_QUORUM_RESPONSE),
        (DESCRIBE_TOPIC_PARTITIONS_REQUEST, DESCRIBE_TOPIC_PARTITIONS_RESPONSE),
    )
}

# Kafka APIs with no request of their own here: served wherever the API they are answered by is.
ANSWERED_AS: dict[int, int] = {75: 3}  # DescribeTopicPartitions -> Metadata

__all__ = ["ANSWERED_AS", "LAYOUTS"]
