"""CreateTopics / DeleteTopics / CreateAcls / DeleteAcls / DescribeAcls and the read answers."""

from __future__ import annotations

from node.controller import ControllerConfig
from node.process.ports import RequestContext
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
    CreatableReplicaAssignment,
    CreatableTopic,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    DescribeClusterRequest,
    MetadataRequest,
)
from node.protocol.errors import ErrorCode
from node.security.authorizer import Authorizer
from tests.controller.harness import ADMIN, Harness


def _cluster(n: int = 3, **config: object) -> Harness:
    h = Harness(ControllerConfig(**config))  # type: ignore[arg-type]
    for b in range(1, n + 1):
        h.online_broker(b)
    return h


def _codes(response) -> list[int]:
    return [t.error_code for t in response.topics]


def test_create_topics_assigns_replicas_over_live_brokers_and_leads_with_the_first() -> None:
    h = _cluster(3)
    h.heartbeat(3, h.port.image.broker(3).broker_epoch, want_fence=True)
    response = h.call(CreateTopicsRequest((CreatableTopic("t", 4, 2), CreatableTopic("d"))))
    assert _codes(response) == [ErrorCode.NONE, ErrorCode.NONE]
    assert (response.topics[1].num_partitions, response.topics[1].replication_factor) == (1, 1)
    image = h.port.image
    states = image.partitions(image.topic_id("t"))
    assert len(states) == 4
    for s in states.values():
        assert set(s.replicas) <= {1, 2} and len(s.replicas) == 2  # fenced broker 3 gets nothing
        assert s.isr == s.replicas and s.leader == s.replicas[0]
    assert {s.leader for s in states.values()} == {1, 2}  # spread


def test_create_topics_rejections() -> None:
    h = _cluster(2)
    h.call(CreateTopicsRequest((CreatableTopic("exists", 1, 1),)))
    response = h.call(
        CreateTopicsRequest(
            (
                CreatableTopic("exists", 1, 1),
                CreatableTopic("bad name!", 1, 1),
                CreatableTopic("", 1, 1),
                CreatableTopic("zero", 0, 1),
                CreatableTopic("rf", 1, 3),
                CreatableTopic("twice", 1, 1),
                CreatableTopic("twice", 1, 1),
                CreatableTopic("cfg", 1, 1, configs=(("no.such", "1"),)),
                CreatableTopic("cfgval", 1, 1, configs=(("retention.ms", "x"),)),
                CreatableTopic("assign", assignments=(CreatableReplicaAssignment(0, (1, 9)),)),
                CreatableTopic("assign2", assignments=(CreatableReplicaAssignment(1, (1,)),)),
                CreatableTopic(
                    "ok", assignments=(CreatableReplicaAssignment(0, (2, 1)),), configs=(("retention.ms", "5"),)
                ),
            )
        )
    )
    assert _codes(response) == [
        ErrorCode.TOPIC_ALREADY_EXISTS,
        ErrorCode.INVALID_TOPIC_EXCEPTION,
        ErrorCode.INVALID_TOPIC_EXCEPTION,
        ErrorCode.INVALID_PARTITIONS,
        ErrorCode.INVALID_REPLICATION_FACTOR,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.INVALID_CONFIG,
        ErrorCode.INVALID_CONFIG,
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        ErrorCode.NONE,
    ]
    image = h.port.image
    assert sorted(image.topic_ids) == ["exists", "ok"]
    assert image.partition(image.topic_id("ok"), 0).leader == 2
    assert image.config(2, "ok", "retention.ms") == "5"


def test_a_topic_created_in_flight_already_exists_for_the_next_request() -> None:
    h = _cluster(1)
    first = h.send(CreateTopicsRequest((CreatableTopic("t", 1, 1),)))
    second = h.send(CreateTopicsRequest((CreatableTopic("t", 1, 1),)))
    assert h.answer(first) is None and h.answer(second) is None  # the refusal waits for what it saw
    h.port.commit()
    assert _codes(h.answer(first)) == [ErrorCode.NONE]
    assert _codes(h.answer(second)) == [ErrorCode.TOPIC_ALREADY_EXISTS]


def test_delete_topics() -> None:
    h = _cluster(1, delete_topic_enable=True)
    h.call(CreateTopicsRequest((CreatableTopic("t", 2, 1, configs=(("retention.ms", "1"),)),)))
    response = h.call(DeleteTopicsRequest(("t", "nope")))
    assert [r.error_code for r in response.responses] == [ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    assert not h.port.image.topic_ids and not h.port.image.configs(2, "t")
    off = _cluster(1, delete_topic_enable=False)
    off.call(CreateTopicsRequest((CreatableTopic("t", 1, 1),)))
    response = off.call(DeleteTopicsRequest(("t",)))
    assert [r.error_code for r in response.responses] == [ErrorCode.TOPIC_DELETION_DISABLED]


def _acl(name: str, pattern: int = PatternType.LITERAL, principal: str = "User:a", op: int = AclOperation.READ):
    return AclCreation(ResourceType.TOPIC, name, pattern, principal, "*", op, AclPermissionType.ALLOW)


def test_create_describe_and_delete_acls() -> None:
    h = _cluster(1)
    response = h.call(
        CreateAclsRequest(
            (
                _acl("t"),
                _acl("t"),  # the same twice: one record
                _acl("logs-", PatternType.PREFIXED, "User:b"),
                _acl("x", PatternType.MATCH),
                _acl("x", principal="alice"),
                _acl("x", op=AclOperation.ANY),
                AclCreation(
                    ResourceType.CLUSTER, "other", 3, "User:a", "*", AclOperation.ALTER, AclPermissionType.ALLOW
                ),
                AclCreation(ResourceType.UNKNOWN, "x", 3, "User:a", "*", AclOperation.READ, AclPermissionType.ALLOW),
            )
        )
    )
    assert [r.error_code for r in response.results] == [ErrorCode.NONE] * 3 + [ErrorCode.INVALID_REQUEST] * 5
    assert len(h.port.image.acls) == 2
    again = h.call(CreateAclsRequest((_acl("t"),)))
    assert again.results[0].error_code == ErrorCode.NONE and len(h.port.image.acls) == 2
    described = h.call(DescribeAclsRequest(ResourceType.TOPIC, "logs-app", PatternType.MATCH))
    assert [(r.resource_name, r.pattern_type) for r in described.resources] == [("logs-", PatternType.PREFIXED)]
    assert described.metadata_offset == h.port.image.last_offset
    assert h.call(DescribeAclsRequest(ResourceType.UNKNOWN)).error_code == ErrorCode.INVALID_REQUEST
    anything = DeleteAclsFilter(
        ResourceType.ANY, None, PatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
    )
    bad = DeleteAclsFilter(
        ResourceType.ANY, None, PatternType.UNKNOWN, None, None, AclOperation.ANY, AclPermissionType.ANY
    )
    deleted = h.call(DeleteAclsRequest((anything, anything, bad)))
    counts = [(r.error_code, len(r.matching_acls)) for r in deleted.filter_results]
    assert counts == [(ErrorCode.NONE, 2), (ErrorCode.NONE, 0), (ErrorCode.INVALID_REQUEST, 0)]
    assert not h.port.image.acls


def test_acl_writes_need_alter_on_the_cluster() -> None:
    h = Harness(ControllerConfig(), Authorizer(super_users=("User:admin", "User:broker")))
    response = h.call(CreateAclsRequest((_acl("t"),)), RequestContext(principal="User:a"))
    assert response.results[0].error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert h.call(CreateAclsRequest((_acl("t"),)), ADMIN).results[0].error_code == ErrorCode.NONE
    topics = h.call(CreateTopicsRequest((CreatableTopic("t", 1, 1),)), RequestContext(principal="User:a"))
    assert _codes(topics) == [ErrorCode.TOPIC_AUTHORIZATION_FAILED]


def test_cluster_and_metadata_reads_come_from_the_committed_image() -> None:
    h = _cluster(2)
    h.call(CreateTopicsRequest((CreatableTopic("t", 2, 2),)))
    h.heartbeat(2, h.port.image.broker(2).broker_epoch, want_fence=True)
    cluster = h.call(DescribeClusterRequest())
    assert [b.broker_id for b in cluster.brokers] == [1] and cluster.controller_id == 1
    every = h.call(DescribeClusterRequest(include_fenced_brokers=True))
    assert [(b.broker_id, b.is_fenced) for b in every.brokers] == [(1, False), (2, True)]
    meta = h.call(MetadataRequest(("t", "missing")))
    assert [t.error_code for t in meta.topics] == [ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    assert all(p.leader_id == 1 and p.isr_nodes == (1,) for p in meta.topics[0].partitions)
    assert meta.metadata_offset == h.port.image.last_offset == cluster.metadata_offset
