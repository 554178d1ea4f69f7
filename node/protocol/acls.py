"""The ACL admin APIs (CreateAcls, DeleteAcls, DescribeAcls) and Kafka's ACL enums, with Kafka's numbers.

A filter's `None` string means "any"; its enums use `ANY` (1) to match every value. Kafka decodes an
enum code it does not know as `UNKNOWN` (0), and so does the codec here, so a request naming an
unknown resource type, pattern or operation is answered with an error code, not a dropped connection.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from node.protocol.common import UNKNOWN_OFFSET


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


CLUSTER_RESOURCE_NAME = "kafka-cluster"  # Kafka's name of the one CLUSTER resource
WILDCARD_HOST = "*"


# --- CreateAcls (30) ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AclCreation:
    resource_type: ResourceType
    resource_name: str
    resource_pattern_type: PatternType
    principal: str  # "User:alice"
    host: str  # "*" for any host
    operation: AclOperation
    permission_type: AclPermissionType


@dataclass(frozen=True, slots=True)
class CreateAclsRequest:
    creations: tuple[AclCreation, ...]


@dataclass(frozen=True, slots=True)
class AclCreationResult:
    error_code: int
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class CreateAclsResponse:
    results: tuple[AclCreationResult, ...]  # one per creation, in order


# --- DeleteAcls (31) ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DeleteAclsFilter:
    resource_type_filter: ResourceType
    resource_name_filter: str | None
    pattern_type_filter: PatternType
    principal_filter: str | None
    host_filter: str | None
    operation: AclOperation
    permission_type: AclPermissionType


@dataclass(frozen=True, slots=True)
class DeleteAclsRequest:
    filters: tuple[DeleteAclsFilter, ...]


@dataclass(frozen=True, slots=True)
class DeleteAclsMatchingAcl:
    error_code: int
    error_message: str | None
    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType


@dataclass(frozen=True, slots=True)
class DeleteAclsFilterResult:
    error_code: int
    error_message: str | None = None
    matching_acls: tuple[DeleteAclsMatchingAcl, ...] = ()


@dataclass(frozen=True, slots=True)
class DeleteAclsResponse:
    filter_results: tuple[DeleteAclsFilterResult, ...]  # one per filter, in order


# --- DescribeAcls (29) -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DescribeAclsRequest:
    resource_type_filter: ResourceType = ResourceType.ANY
    resource_name_filter: str | None = None
    pattern_type_filter: PatternType = PatternType.ANY
    principal_filter: str | None = None
    host_filter: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY


@dataclass(frozen=True, slots=True)
class AclDescription:
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType


@dataclass(frozen=True, slots=True)
class DescribeAclsResource:
    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    acls: tuple[AclDescription, ...]


@dataclass(frozen=True, slots=True)
class DescribeAclsResponse:
    error_code: int
    error_message: str | None = None
    resources: tuple[DescribeAclsResource, ...] = ()
    metadata_offset: int = UNKNOWN_OFFSET  # extension: the metadata offset the answer reflects


__all__ = [
    "CLUSTER_RESOURCE_NAME",
    "WILDCARD_HOST",
    "AclCreation",
    "AclCreationResult",
    "AclDescription",
    "AclOperation",
    "AclPermissionType",
    "CreateAclsRequest",
    "CreateAclsResponse",
    "DeleteAclsFilter",
    "DeleteAclsFilterResult",
    "DeleteAclsMatchingAcl",
    "DeleteAclsRequest",
    "DeleteAclsResponse",
    "DescribeAclsRequest",
    "DescribeAclsResource",
    "DescribeAclsResponse",
    "PatternType",
    "ResourceType",
]
