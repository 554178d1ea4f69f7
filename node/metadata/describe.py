"""Answers to the read APIs, built from a metadata image alone.

The broker serves these from its image and the controller from the committed image, so both give the
same answer for the same offset; every answer carries `metadata_offset`, the last offset the image
has applied, so a checker knows which prefix of the metadata log it reflects.

These are pure functions: no clock, no I/O, no state beyond the image. The ACL filter and pattern
helpers at the end are shared with the controller (DeleteAcls) and the authorizer.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping

from node.metadata.image import AclEntry, MetadataImage
from node.protocol.acls import (
    CLUSTER_RESOURCE_NAME,
    AclDescription,
    AclOperation,
    AclPermissionType,
    DescribeAclsRequest,
    DescribeAclsResource,
    DescribeAclsResponse,
    PatternType,
    ResourceType,
)
from node.protocol.admin import (
    ConfigResourceType,
    ConfigSource,
    DescribeClusterBroker,
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeConfigsRequest,
    DescribeConfigsResource,
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    MetadataRequest,
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from node.protocol.common import ZERO_UUID
from node.protocol.errors import ErrorCode

WILDCARD_RESOURCE = "*"  # a LITERAL pattern named "*" matches every resource of its type

# Static defaults per config resource type, shown as DEFAULT_CONFIG when a key is not set dynamically.
ConfigDefaults = Mapping[int, Mapping[str, str]]
# May the asker do (operation, resource type, resource name)? None: everything is allowed. The answers
# below leave out or refuse per resource what it may not see, as Kafka does.
Authorized = Callable[[int, int, str], bool]


# --- DescribeConfigs -----------------------------------------------------------------------------


def is_broker_resource_name(name: str) -> bool:
    """A BROKER config resource is "" (the cluster-wide default) or a broker id in decimal."""
    return name == "" or (name.isascii() and name.isdigit() and len(name) <= 10 and int(name) <= 2**31 - 1)


def config_resource_error(image: MetadataImage, resource_type: int, name: str) -> tuple[ErrorCode, str | None]:
    """Kafka's error for a config resource that cannot be read or written; (NONE, None) when it is fine."""
    if resource_type == ConfigResourceType.TOPIC:
        if not name:
            return ErrorCode.INVALID_TOPIC_EXCEPTION, "empty topic name"
        if image.topic_id(name) is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name!r}"
        return ErrorCode.NONE, None
    if resource_type == ConfigResourceType.BROKER:
        if not is_broker_resource_name(name):
            return ErrorCode.INVALID_REQUEST, f"broker resource name {name!r} is neither '' nor a broker id"
        return ErrorCode.NONE, None
    return ErrorCode.INVALID_REQUEST, f"unsupported config resource type {int(resource_type)}"


def _source(resource_type: int, name: str) -> ConfigSource:
    if resource_type == ConfigResourceType.TOPIC:
        return ConfigSource.DYNAMIC_TOPIC_CONFIG
    return ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG if name == "" else ConfigSource.DYNAMIC_BROKER_CONFIG


def _describe_resource(
    image: MetadataImage,
    resource: DescribeConfigsResource,
    defaults: ConfigDefaults | None,
    authorized: Authorized | None,
) -> DescribeConfigsResult:
    rtype, rname = resource.resource_type, resource.resource_name
    if authorized is not None:
        if rtype == ConfigResourceType.TOPIC and not authorized(
            AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, rname
        ):
            return DescribeConfigsResult(ErrorCode.TOPIC_AUTHORIZATION_FAILED, None, rtype, rname)
        if rtype == ConfigResourceType.BROKER and not authorized(
            AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME
        ):
            return DescribeConfigsResult(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None, rtype, rname)
    error, message = config_resource_error(image, rtype, rname)
    if error != ErrorCode.NONE:
        return DescribeConfigsResult(error, message, rtype, rname)
    dynamic = image.configs(int(rtype), rname)
    static = (defaults or {}).get(int(rtype), {})
    keys: Iterable[str]
    if resource.configuration_keys is None:
        keys = sorted(set(dynamic) | set(static))
    else:
        keys = dict.fromkeys(resource.configuration_keys)  # the order asked, without duplicates
    source = _source(rtype, rname)
    out = []
    for key in keys:
        if key in dynamic:
            out.append(DescribeConfigsResourceResult(key, dynamic[key], False, source))
        elif key in static:
            out.append(DescribeConfigsResourceResult(key, static[key], False, ConfigSource.DEFAULT_CONFIG))
    return DescribeConfigsResult(ErrorCode.NONE, None, rtype, rname, tuple(out))


def describe_configs(
    image: MetadataImage,
    request: DescribeConfigsRequest,
    defaults: ConfigDefaults | None = None,
    authorized: Authorized | None = None,
) -> DescribeConfigsResponse:
    """Dynamic configs of each resource (plus `defaults` for keys not set); unknown keys are left out.
    With `authorized`, a resource needs DescribeConfigs on its topic (or on the cluster for brokers)."""
    results = tuple(_describe_resource(image, r, defaults, authorized) for r in request.resources)
    return DescribeConfigsResponse(results, image.last_offset)


# --- DescribeCluster and Metadata ----------------------------------------------------------------


def describe_cluster(
    image: MetadataImage, request: DescribeClusterRequest, controller_id: int
) -> DescribeClusterResponse:
    """Registered brokers (unfenced ones only unless `include_fenced_brokers`), by broker id."""
    brokers = []
    for broker_id, reg in sorted(image.brokers.items()):
        if reg.fenced and not request.include_fenced_brokers:
            continue
        host, port = (reg.endpoints[0].host, reg.endpoints[0].port) if reg.endpoints else ("", 0)
        brokers.append(DescribeClusterBroker(broker_id, host, port, reg.rack, reg.fenced, reg.broker_epoch))
    return DescribeClusterResponse(
        ErrorCode.NONE, None, image.cluster_id or "", controller_id, tuple(brokers), image.last_offset
    )


def _topic_answer(image: MetadataImage, name: str, topic_id: str) -> MetadataResponseTopic:
    partitions = []
    for pid, p in sorted(image.partitions(topic_id).items()):
        error = ErrorCode.NONE if p.leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE
        partitions.append(
            MetadataResponsePartition(error, pid, p.leader, p.leader_epoch, p.replicas, p.isr, p.partition_epoch)
        )
    return MetadataResponseTopic(ErrorCode.NONE, name, uuid.UUID(topic_id), tuple(partitions))


def metadata(
    image: MetadataImage, request: MetadataRequest, controller_id: int, authorized: Authorized | None = None
) -> MetadataResponse:
    """Unfenced brokers and the topics asked for (all when `request.topics` is None). With
    `authorized`, a topic needs Describe: asked by name it gets TOPIC_AUTHORIZATION_FAILED, else it is
    left out."""
    brokers = tuple(
        MetadataResponseBroker(
            bid, reg.endpoints[0].host if reg.endpoints else "", reg.endpoints[0].port if reg.endpoints else 0, reg.rack
        )
        for bid, reg in sorted(image.brokers.items())
        if not reg.fenced
    )
    topics = []
    names = sorted(image.topic_ids) if request.topics is None else list(dict.fromkeys(request.topics))
    for name in names:
        topic_id = image.topic_id(name)
        if authorized is not None and not authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            if request.topics is not None:
                topics.append(MetadataResponseTopic(ErrorCode.TOPIC_AUTHORIZATION_FAILED, name, ZERO_UUID))
            continue
        if topic_id is None:
            error = ErrorCode.INVALID_TOPIC_EXCEPTION if not name else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            topics.append(MetadataResponseTopic(error, name, ZERO_UUID))
        else:
            topics.append(_topic_answer(image, name, topic_id))
    return MetadataResponse(brokers, image.cluster_id, controller_id, tuple(topics), image.last_offset)


# --- ACLs: patterns, filters and DescribeAcls -----------------------------------------------------


def pattern_matches(pattern_type: int, pattern_name: str, resource_name: str) -> bool:
    """Does an ACL's resource pattern cover the concrete resource `resource_name`?

    LITERAL matches the same name, or every name when it is "*"; PREFIXED matches names starting with it.
    """
    if pattern_type == PatternType.LITERAL:
        return pattern_name in (resource_name, WILDCARD_RESOURCE)
    if pattern_type == PatternType.PREFIXED:
        return resource_name.startswith(pattern_name)
    return False


def acl_filter_error(
    resource_type: int, pattern_type: int, operation: int, permission_type: int
) -> tuple[ErrorCode, str | None]:
    """Kafka refuses a filter with an UNKNOWN enum (a code it could not decode) as INVALID_REQUEST."""
    for what, value in (
        ("resource type", resource_type),
        ("pattern type", pattern_type),
        ("operation", operation),
        ("permission type", permission_type),
    ):
        if value == 0:  # UNKNOWN in all four enums
            return ErrorCode.INVALID_REQUEST, f"unknown {what} in the ACL filter"
    return ErrorCode.NONE, None


def acl_filter_matches(
    entry: AclEntry,
    resource_type: int,
    resource_name: str | None,
    pattern_type: int,
    principal: str | None,
    host: str | None,
    operation: int,
    permission_type: int,
) -> bool:
    """Kafka's AclBindingFilter: None / ANY match everything; MATCH finds every ACL that applies to the
    named resource (literal, wildcard or prefixed)."""
    if resource_type != ResourceType.ANY and entry.resource_type != resource_type:
        return False
    if pattern_type == PatternType.MATCH:
        if resource_name is not None and not pattern_matches(entry.pattern_type, entry.resource_name, resource_name):
            return False
    else:
        if pattern_type != PatternType.ANY and entry.pattern_type != pattern_type:
            return False
        if resource_name is not None and entry.resource_name != resource_name:
            return False
    if principal is not None and entry.principal != principal:
        return False
    if host is not None and entry.host != host:
        return False
    if operation != AclOperation.ANY and entry.operation != operation:
        return False
    return permission_type == AclPermissionType.ANY or entry.permission_type == permission_type


def describe_acls(image: MetadataImage, request: DescribeAclsRequest) -> DescribeAclsResponse:
    """Every ACL matching the filter, grouped by resource pattern, in a stable order."""
    r = request
    error, message = acl_filter_error(r.resource_type_filter, r.pattern_type_filter, r.operation, r.permission_type)
    if error != ErrorCode.NONE:
        return DescribeAclsResponse(error, message, (), image.last_offset)
    groups: dict[tuple[int, str, int], list[AclDescription]] = {}
    for entry in image.acls.values():
        if acl_filter_matches(
            entry,
            r.resource_type_filter,
            r.resource_name_filter,
            r.pattern_type_filter,
            r.principal_filter,
            r.host_filter,
            r.operation,
            r.permission_type,
        ):
            key = (entry.resource_type, entry.resource_name, entry.pattern_type)
            groups.setdefault(key, []).append(
                AclDescription(
                    entry.principal,
                    entry.host,
                    AclOperation(entry.operation),
                    AclPermissionType(entry.permission_type),
                )
            )
    resources = tuple(
        DescribeAclsResource(
            ResourceType(key[0]),
            key[1],
            PatternType(key[2]),
            tuple(sorted(acls, key=lambda a: (a.principal, a.host, a.operation, a.permission_type))),
        )
        for key, acls in sorted(groups.items())
    )
    return DescribeAclsResponse(ErrorCode.NONE, None, resources, image.last_offset)


__all__ = [
    "WILDCARD_RESOURCE",
    "Authorized",
    "ConfigDefaults",
    "acl_filter_error",
    "acl_filter_matches",
    "config_resource_error",
    "describe_acls",
    "describe_cluster",
    "describe_configs",
    "is_broker_resource_name",
    "metadata",
    "pattern_matches",
]
