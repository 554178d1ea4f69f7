"""The authorizer's decision matrix: patterns, deny wins, implied operations, hosts, super users."""

from __future__ import annotations

import uuid

import pytest

from node.metadata.image import MetadataDelta, MetadataImage
from node.metadata.records import AccessControlEntryRecord
from node.process.ports import RequestContext
from node.protocol.acls import AclOperation as Op
from node.protocol.acls import AclPermissionType as Perm
from node.protocol.acls import PatternType, ResourceType
from node.security.authorizer import Authorizer

LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
TOPIC, CLUSTER = ResourceType.TOPIC, ResourceType.CLUSTER
ALLOW, DENY = Perm.ALLOW, Perm.DENY


def _image(*acls: tuple[int, str, int, str, str, int, int]) -> MetadataImage:
    image = MetadataImage()
    delta = MetadataDelta(image)
    for i, binding in enumerate(acls):
        delta.replay(AccessControlEntryRecord(str(uuid.UUID(int=i + 1)), *binding), i, 1)
    delta.commit()
    return image


IMAGE = _image(
    (TOPIC, "orders", LIT, "User:alice", "*", Op.READ, ALLOW),
    (TOPIC, "orders", LIT, "User:alice", "10.0.0.9", Op.WRITE, DENY),
    (TOPIC, "orders", LIT, "User:alice", "*", Op.WRITE, ALLOW),
    (TOPIC, "logs-", PRE, "User:bob", "*", Op.ALL, ALLOW),
    (TOPIC, "logs-secret", LIT, "User:bob", "*", Op.READ, DENY),
    (TOPIC, "*", LIT, "User:*", "*", Op.DESCRIBE, ALLOW),
    (TOPIC, "cfg", LIT, "User:carol", "*", Op.ALTER_CONFIGS, ALLOW),
    (TOPIC, "hosted", LIT, "User:dave", "10.0.0.1", Op.READ, ALLOW),
    (CLUSTER, "kafka-cluster", LIT, "User:broker", "*", Op.CLUSTER_ACTION, ALLOW),
)

CASES = [
    # principal, host, operation, resource type, name, expected
    ("User:alice", "1.2.3.4", Op.READ, TOPIC, "orders", True),
    ("User:alice", "1.2.3.4", Op.WRITE, TOPIC, "orders", True),
    ("User:alice", "10.0.0.9", Op.WRITE, TOPIC, "orders", False),  # a host-specific DENY wins
    ("User:alice", "1.2.3.4", Op.DELETE, TOPIC, "orders", False),
    ("User:alice", "1.2.3.4", Op.READ, TOPIC, "orders2", False),  # literal means the exact name
    ("User:bob", "1.2.3.4", Op.WRITE, TOPIC, "logs-app", True),  # prefixed, ALL
    ("User:bob", "1.2.3.4", Op.READ, TOPIC, "logs-secret", False),  # DENY wins over prefixed ALL
    ("User:bob", "1.2.3.4", Op.WRITE, TOPIC, "logs-secret", True),
    ("User:bob", "1.2.3.4", Op.READ, TOPIC, "log", False),
    ("User:eve", "1.2.3.4", Op.DESCRIBE, TOPIC, "anything", True),  # wildcard resource and principal
    ("User:eve", "1.2.3.4", Op.READ, TOPIC, "anything", False),
    ("User:alice", "1.2.3.4", Op.DESCRIBE, TOPIC, "orders", True),  # Describe implied by Read
    ("User:carol", "1.2.3.4", Op.DESCRIBE_CONFIGS, TOPIC, "cfg", True),  # DescribeConfigs by AlterConfigs
    ("User:carol", "1.2.3.4", Op.ALTER, TOPIC, "cfg", False),
    ("User:dave", "10.0.0.1", Op.READ, TOPIC, "hosted", True),
    ("User:dave", "10.0.0.2", Op.READ, TOPIC, "hosted", False),
    ("User:broker", "1.2.3.4", Op.CLUSTER_ACTION, CLUSTER, "kafka-cluster", True),
    ("User:alice", "1.2.3.4", Op.CLUSTER_ACTION, CLUSTER, "kafka-cluster", False),
    ("User:root", "1.2.3.4", Op.CLUSTER_ACTION, CLUSTER, "kafka-cluster", True),  # super user
    ("User:root", "1.2.3.4", Op.READ, TOPIC, "logs-secret", True),
]


@pytest.mark.parametrize(("principal", "host", "op", "rtype", "name", "expected"), CASES)
def test_decision(principal: str, host: str, op: int, rtype: int, name: str, expected: bool) -> None:
    authorizer = Authorizer(super_users=("User:root",))
    assert authorizer.authorize(IMAGE, principal, host, op, rtype, name) is expected


def test_deny_of_read_does_not_deny_describe_and_deny_all_denies_everything() -> None:
    image = _image(
        (TOPIC, "t", LIT, "User:a", "*", Op.READ, DENY),
        (TOPIC, "t", LIT, "User:a", "*", Op.DESCRIBE, ALLOW),
        (TOPIC, "u", LIT, "User:a", "*", Op.ALL, DENY),
        (TOPIC, "u", LIT, "User:a", "*", Op.DESCRIBE, ALLOW),
    )
    authorizer = Authorizer()
    assert authorizer.authorize(image, "User:a", "h", Op.DESCRIBE, TOPIC, "t")
    assert not authorizer.authorize(image, "User:a", "h", Op.READ, TOPIC, "t")
    assert not authorizer.authorize(image, "User:a", "h", Op.DESCRIBE, TOPIC, "u")


def test_allow_everyone_if_no_acl_found_applies_only_to_resources_without_acls() -> None:
    open_authorizer = Authorizer(allow_everyone_if_no_acl_found=True)
    image = _image((TOPIC, "guarded", LIT, "User:a", "*", Op.READ, ALLOW))
    assert open_authorizer.authorize(image, "User:x", "h", Op.WRITE, TOPIC, "free")
    assert not open_authorizer.authorize(image, "User:x", "h", Op.READ, TOPIC, "guarded")
    assert not Authorizer().authorize(image, "User:x", "h", Op.WRITE, TOPIC, "free")


def test_a_disabled_authorizer_allows_everything_and_the_index_follows_the_image() -> None:
    assert Authorizer(enabled=False).authorize(MetadataImage(), "User:x", "h", Op.ALTER, CLUSTER, "kafka-cluster")
    authorizer = Authorizer()
    image = MetadataImage()
    ctx = RequestContext(principal="User:broker")
    assert not authorizer.cluster_action(image, ctx)
    delta = MetadataDelta(image)
    delta.replay(
        AccessControlEntryRecord(
            str(uuid.UUID(int=1)), CLUSTER, "kafka-cluster", LIT, "User:broker", "*", Op.CLUSTER_ACTION, ALLOW
        ),
        0,
        1,
    )
    delta.commit()
    assert authorizer.cluster_action(image, ctx)
