"""An ACL authorizer over the metadata image, with the rules of Kafka's StandardAuthorizer.

`Authorizer.authorize(image, principal, host, operation, resource_type, resource_name)` decides one
action; it is pure (the image's ACLs in, a bool out) so the controller and the broker give the same
answer for the same image. The rules, in order:

1. disabled authorizer, or a super user: allowed;
2. an ACL applies when its resource type is the resource's, its pattern covers the name (LITERAL:
   same name or "*"; PREFIXED: a prefix of it), its principal is the principal or "User:*" and its
   host is the host or "*";
3. a DENY that applies to the operation (or to ALL) wins over everything;
4. an ALLOW for the operation, for ALL, or for an operation that implies it (Describe is implied by
   Read, Write, Delete and Alter; DescribeConfigs by AlterConfigs), allows;
5. otherwise, when no ACL at all names the resource (any principal, any operation),
   `allow.everyone.if.no.acl.found` decides; else denied.

The ACLs are indexed once per image offset, so a decision looks at the few ACLs of its resource.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from node.metadata.describe import WILDCARD_RESOURCE
from node.metadata.image import AclEntry, MetadataImage
from node.process.ports import RequestContext
from node.protocol.acls import (
    CLUSTER_RESOURCE_NAME,
    WILDCARD_HOST,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

WILDCARD_PRINCIPAL = "User:*"

# Allowing the key implies allowing these (Kafka's AclEntry.supportedOperations implications).
_IMPLIED_BY: dict[int, frozenset[int]] = {
    AclOperation.DESCRIBE: frozenset(
        {AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER}
    ),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}),
}


def allowing_operations(operation: int) -> frozenset[int]:
    """The ACL operations whose ALLOW grants `operation` (ALL always does)."""
    return _IMPLIED_BY.get(operation, frozenset({operation})) | {AclOperation.ALL}


@dataclass(slots=True)
class _Index:
    """The image's ACLs by resource: literal names, the "*" wildcard, and prefixes."""

    offset: int
    image_id: int
    literal: dict[tuple[int, str], list[AclEntry]]
    wildcard: dict[int, list[AclEntry]]
    prefixed: dict[int, list[AclEntry]]

    @classmethod
    def build(cls, image: MetadataImage) -> _Index:
        index = cls(image.last_offset, id(image), {}, {}, {})
        for entry in image.acls.values():
            if entry.pattern_type == PatternType.PREFIXED:
                index.prefixed.setdefault(entry.resource_type, []).append(entry)
            elif entry.resource_name == WILDCARD_RESOURCE:
                index.wildcard.setdefault(entry.resource_type, []).append(entry)
            else:
                index.literal.setdefault((entry.resource_type, entry.resource_name), []).append(entry)
        return index

    def for_resource(self, resource_type: int, name: str) -> Iterable[AclEntry]:
        yield from self.literal.get((resource_type, name), ())
        yield from self.wildcard.get(resource_type, ())
        for entry in self.prefixed.get(resource_type, ()):
            if name.startswith(entry.resource_name):
                yield entry


class Authorizer:
    """StandardAuthorizer-like decisions over `image.acls` (see the module docstring)."""

    def __init__(
        self,
        super_users: Iterable[str] = (),
        allow_everyone_if_no_acl_found: bool = False,
        enabled: bool = True,
    ) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self.enabled = enabled
        self._index: _Index | None = None

    def _acls(self, image: MetadataImage) -> _Index:
        index = self._index
        if index is None or index.offset != image.last_offset or index.image_id != id(image):
            index = self._index = _Index.build(image)
        return index

    def authorize(
        self,
        image: MetadataImage,
        principal: str,
        host: str,
        operation: int,
        resource_type: int,
        resource_name: str,
    ) -> bool:
        if not self.enabled or principal in self.super_users:
            return True
        allowing = allowing_operations(operation)
        found_any = False
        allowed = False
        for entry in self._acls(image).for_resource(resource_type, resource_name):
            found_any = True
            if entry.principal != principal and entry.principal != WILDCARD_PRINCIPAL:
                continue
            if entry.host != host and entry.host != WILDCARD_HOST:
                continue
            if entry.permission_type == AclPermissionType.DENY:
                if entry.operation in (operation, AclOperation.ALL):
                    return False
            elif entry.operation in allowing:
                allowed = True
        if allowed:
            return True
        return not found_any and self.allow_everyone_if_no_acl_found

    def authorize_ctx(
        self, image: MetadataImage, ctx: RequestContext, operation: int, resource_type: int, resource_name: str
    ) -> bool:
        """`authorize` for the principal and client host of a request."""
        return self.authorize(image, ctx.principal, ctx.client_host, operation, resource_type, resource_name)

    def cluster_action(self, image: MetadataImage, ctx: RequestContext) -> bool:
        """ClusterAction on the cluster: what inter-node and quorum RPCs need. Matches the process's
        `ClusterActionCheck` signature."""
        return self.authorize_ctx(image, ctx, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME)


__all__ = ["WILDCARD_PRINCIPAL", "Authorizer", "allowing_operations"]
