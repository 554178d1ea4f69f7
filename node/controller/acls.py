"""CreateAcls and DeleteAcls, stored as `AccessControlEntryRecord` / `RemoveAccessControlEntryRecord`.

Both need Alter on the cluster. A creation must name concrete values (no ANY, MATCH or UNKNOWN), a
principal like "User:name", a host and a resource name (for the cluster: "kafka-cluster"); Kafka
answers a bad one with INVALID_REQUEST. Creating an ACL that already exists succeeds without a
record. A filter removes every ACL it matches; each removed ACL is listed once, under the first
filter that matched it. All records of one request are one batch.
"""

from __future__ import annotations

from node.controller.context import ControllerContext, Reply
from node.metadata.describe import acl_filter_error, acl_filter_matches
from node.metadata.records import AccessControlEntryRecord, MetadataRecord, RemoveAccessControlEntryRecord
from node.process.ports import RequestContext
from node.protocol.acls import (
    CLUSTER_RESOURCE_NAME,
    AclCreation,
    AclCreationResult,
    AclOperation,
    AclPermissionType,
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsFilterResult,
    DeleteAclsMatchingAcl,
    DeleteAclsRequest,
    DeleteAclsResponse,
    PatternType,
    ResourceType,
)
from node.protocol.errors import ErrorCode

_CONCRETE_RESOURCES = frozenset(range(ResourceType.TOPIC, ResourceType.USER + 1))
_CONCRETE_OPERATIONS = frozenset(range(AclOperation.ALL, AclOperation.DESCRIBE_TOKENS + 1))


def creation_error(c: AclCreation) -> str | None:
    """Why `c` is not a valid ACL binding, or None."""
    if c.resource_type not in _CONCRETE_RESOURCES:
        return f"resource type {int(c.resource_type)} is not a concrete resource type"
    if c.resource_pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"pattern type {int(c.resource_pattern_type)} is neither LITERAL nor PREFIXED"
    if c.operation not in _CONCRETE_OPERATIONS:
        return f"operation {int(c.operation)} is not a concrete operation"
    if c.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        return f"permission type {int(c.permission_type)} is neither ALLOW nor DENY"
    kind, _, name = c.principal.partition(":")
    if not kind or not name:
        return f"principal {c.principal!r} is not of the form Type:name"
    if not c.host:
        return "empty host (use '*' for any host)"
    if not c.resource_name:
        return "empty resource name"
    if c.resource_type == ResourceType.CLUSTER and c.resource_name != CLUSTER_RESOURCE_NAME:
        return f"the cluster resource is named {CLUSTER_RESOURCE_NAME!r}"
    return None


def _may_alter_acls(ctl: ControllerContext, ctx: RequestContext) -> bool:
    return ctl.allowed(ctx, AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME)


def handle_create_acls(
    ctl: ControllerContext, now_ms: int, ctx: RequestContext, request: CreateAclsRequest, reply: Reply
) -> None:
    if not _may_alter_acls(ctl, ctx):
        results = tuple(AclCreationResult(ErrorCode.CLUSTER_AUTHORIZATION_FAILED) for _ in request.creations)
        ctl.answer_when_settled(request, reply, CreateAclsResponse(results))
        return
    view = ctl.working
    records: list[MetadataRecord] = []
    planned: set[tuple[int, str, int, str, str, int, int]] = set()
    out: list[AclCreationResult] = []
    for i, c in enumerate(request.creations):
        problem = creation_error(c)
        if problem is not None:
            out.append(AclCreationResult(ErrorCode.INVALID_REQUEST, problem))
            continue
        binding = (
            int(c.resource_type),
            c.resource_name,
            int(c.resource_pattern_type),
            c.principal,
            c.host,
            int(c.operation),
            int(c.permission_type),
        )
        if view.acl_id_of(binding) is None and binding not in planned:
            planned.add(binding)
            records.append(AccessControlEntryRecord(ctl.new_uuid("acl", i), *binding))
        out.append(AclCreationResult(ErrorCode.NONE))
    response = CreateAclsResponse(tuple(out))
    ctl.write(request, records, reply, lambda _outcome: response)


def handle_delete_acls(
    ctl: ControllerContext, now_ms: int, ctx: RequestContext, request: DeleteAclsRequest, reply: Reply
) -> None:
    if not _may_alter_acls(ctl, ctx):
        results = tuple(DeleteAclsFilterResult(ErrorCode.CLUSTER_AUTHORIZATION_FAILED) for _ in request.filters)
        ctl.answer_when_settled(request, reply, DeleteAclsResponse(results))
        return
    acls = sorted(ctl.working.acls.values(), key=lambda a: a.id)
    removed: set[str] = set()
    records: list[MetadataRecord] = []
    out: list[DeleteAclsFilterResult] = []
    for f in request.filters:
        code, message = acl_filter_error(f.resource_type_filter, f.pattern_type_filter, f.operation, f.permission_type)
        if code != ErrorCode.NONE:
            out.append(DeleteAclsFilterResult(code, message))
            continue
        matching = []
        for entry in acls:
            if entry.id in removed or not acl_filter_matches(
                entry,
                f.resource_type_filter,
                f.resource_name_filter,
                f.pattern_type_filter,
                f.principal_filter,
                f.host_filter,
                f.operation,
                f.permission_type,
            ):
                continue
            removed.add(entry.id)
            records.append(RemoveAccessControlEntryRecord(entry.id))
            matching.append(
                DeleteAclsMatchingAcl(
                    ErrorCode.NONE,
                    None,
                    ResourceType(entry.resource_type),
                    entry.resource_name,
                    PatternType(entry.pattern_type),
                    entry.principal,
                    entry.host,
                    AclOperation(entry.operation),
                    AclPermissionType(entry.permission_type),
                )
            )
        out.append(DeleteAclsFilterResult(ErrorCode.NONE, None, tuple(matching)))
    response = DeleteAclsResponse(tuple(out))
    ctl.write(request, records, reply, lambda _outcome: response)


__all__ = ["creation_error", "handle_create_acls", "handle_delete_acls"]
