"""ElectLeaders (KIP-460): preferred and unclean elections, their error codes, and Alter on the cluster."""

from __future__ import annotations

import dataclasses
import uuid

from node.controller import ControllerConfig
from node.controller.partitions import _unclean
from node.metadata.records import NO_LEADER, PartitionChangeRecord
from node.process.ports import RequestContext
from node.protocol.acls import (
    CLUSTER_RESOURCE_NAME,
    AclCreation,
    AclOperation,
    AclPermissionType,
    CreateAclsRequest,
    PatternType,
    ResourceType,
)
from node.protocol.admin import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreateTopicsRequest,
    ElectionType,
    ElectLeadersPartitionResult,
    ElectLeadersRequest,
    ElectLeadersResponse,
    ElectLeadersTopicPartitions,
    ElectLeadersTopicResult,
)
from node.protocol.broker_api import AlterPartitionPartitionData, AlterPartitionRequest, AlterPartitionTopicData
from node.protocol.errors import ErrorCode
from node.security.authorizer import Authorizer
from tests.controller.harness import BROKER, Harness

PREFERRED, UNCLEAN = ElectionType.PREFERRED, ElectionType.UNCLEAN


def _cluster(
    assignments: tuple[tuple[int, ...], ...] = ((1, 2, 3), (2, 3, 1)), authorizer: Authorizer | None = None
) -> tuple[Harness, dict[int, int], str]:
    h = Harness(ControllerConfig(), authorizer)
    epochs = {b: h.online_broker(b) for b in (1, 2, 3)}
    topic = CreatableTopic("t", assignments=tuple(CreatableReplicaAssignment(i, a) for i, a in enumerate(assignments)))
    response = h.call(CreateTopicsRequest((topic,)), BROKER)
    assert response.topics[0].error_code == ErrorCode.NONE, response
    return h, epochs, str(response.topics[0].topic_id)


def _state(h: Harness, tid: str, pid: int) -> tuple[int, int, int, tuple[int, ...]]:
    p = h.port.image.partition(tid, pid)
    return p.leader, p.leader_epoch, p.partition_epoch, p.isr


def _alter_isr(h: Harness, epochs: dict[int, int], tid: str, pid: int, isr: tuple[int, ...]) -> None:
    leader, le, pe, _ = _state(h, tid, pid)
    data = AlterPartitionPartitionData(pid, le, isr, pe)
    request = AlterPartitionRequest(leader, epochs[leader], (AlterPartitionTopicData(uuid.UUID(tid), (data,)),))
    assert h.call(request, BROKER).topics[0].partitions[0].error_code == ErrorCode.NONE


def _bounce(h: Harness, epochs: dict[int, int], tid: str, broker: int) -> None:
    """`broker` is fenced and unfenced; it loses its leaderships, then the leader of partition 0 takes
    it back into the ISR: the partition's preferred replica is in the ISR but does not lead."""
    assert h.heartbeat(broker, epochs[broker], want_fence=True).is_fenced
    assert not h.heartbeat(broker, epochs[broker]).is_fenced
    _alter_isr(h, epochs, tid, 0, (*_state(h, tid, 0)[3], broker))


def _elect(h: Harness, election: ElectionType, *parts: tuple[str, int], ctx: RequestContext | None = None) -> object:
    topics = tuple(ElectLeadersTopicPartitions(t, (p,)) for t, p in parts)
    request = ElectLeadersRequest(election, topics if parts else None)
    return h.call(request) if ctx is None else h.call(request, ctx)


def _codes(response: ElectLeadersResponse) -> list[tuple[str, int, int]]:
    return [
        (t.topic, p.partition_id, p.error_code) for t in response.replica_election_results for p in t.partition_result
    ]


def test_preferred_election_moves_leadership_back_and_bumps_the_leader_epoch() -> None:
    h, epochs, tid = _cluster()
    _bounce(h, epochs, tid, 1)
    leader, le, pe, isr = _state(h, tid, 0)
    assert leader == 2 and 1 in isr
    response = _elect(h, PREFERRED, ("t", 0))
    assert response == ElectLeadersResponse(
        ErrorCode.NONE, (ElectLeadersTopicResult("t", (ElectLeadersPartitionResult(0, ErrorCode.NONE),)),)
    )
    assert _state(h, tid, 0) == (1, le + 1, pe + 1, isr)  # the ISR stays as it was
    again = _elect(h, PREFERRED, ("t", 0))
    assert _codes(again) == [("t", 0, ErrorCode.ELECTION_NOT_NEEDED)]
    assert _state(h, tid, 0) == (1, le + 1, pe + 1, isr)


def test_a_preferred_replica_outside_the_isr_or_fenced_cannot_be_elected() -> None:
    h, epochs, tid = _cluster()
    assert h.heartbeat(1, epochs[1], want_fence=True).is_fenced
    before = h.port.image.digest()
    assert _codes(_elect(h, PREFERRED, ("t", 0))) == [("t", 0, ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE)]
    assert h.port.image.digest() == before
    assert not h.heartbeat(1, epochs[1]).is_fenced  # live again, but not back in the ISR
    assert 1 not in _state(h, tid, 0)[3]
    before = h.port.image.digest()
    assert _codes(_elect(h, PREFERRED, ("t", 0))) == [("t", 0, ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE)]
    assert h.port.image.digest() == before


def test_unknown_topics_and_partitions_and_a_partition_named_twice() -> None:
    h, epochs, tid = _cluster()
    _bounce(h, epochs, tid, 1)
    before = _state(h, tid, 0)
    request = ElectLeadersRequest(
        PREFERRED,
        (
            ElectLeadersTopicPartitions("nope", (0,)),
            ElectLeadersTopicPartitions("t", (7, 0, 0)),
        ),
    )
    response = h.call(request)
    assert _codes(response) == [
        ("nope", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ("t", 7, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ("t", 0, ErrorCode.NONE),
        ("t", 0, ErrorCode.INVALID_REQUEST),
    ]
    assert _state(h, tid, 0) == (1, before[1] + 1, before[2] + 1, before[3])  # elected once


def test_every_partition_answers_only_the_partitions_where_an_election_was_tried() -> None:
    h, epochs, tid = _cluster()
    _bounce(h, epochs, tid, 1)  # partition 0 led by 2, partition 1 still by its preferred 2
    records_before = len(h.port.records())
    cid = h.send(ElectLeadersRequest(PREFERRED, None))
    assert [type(r) for r in h.port.records()[records_before:]] == [PartitionChangeRecord]
    h.port.commit()
    assert _codes(h.answer(cid)) == [("t", 0, ErrorCode.NONE)]
    assert _state(h, tid, 0)[0] == 1 and _state(h, tid, 1)[0] == 2
    assert h.call(ElectLeadersRequest(PREFERRED, None)) == ElectLeadersResponse(ErrorCode.NONE, ())


def test_unclean_election_takes_a_live_replica_outside_the_isr_only_when_nothing_leads() -> None:
    h, epochs, tid = _cluster(((1, 2, 3),))
    assert _codes(_elect(h, UNCLEAN, ("t", 0))) == [("t", 0, ErrorCode.ELECTION_NOT_NEEDED)]
    _alter_isr(h, epochs, tid, 0, (1,))  # only the leader is in sync
    assert h.heartbeat(1, epochs[1], want_fence=True).is_fenced
    leader, le, pe, isr = _state(h, tid, 0)
    assert (leader, isr) == (NO_LEADER, (1,))  # the last member stays in the ISR, leaderless
    assert _codes(_elect(h, PREFERRED, ("t", 0))) == [("t", 0, ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE)]
    assert _codes(_elect(h, UNCLEAN, ("t", 0))) == [("t", 0, ErrorCode.NONE)]
    assert _state(h, tid, 0) == (2, le + 1, pe + 1, (2,))  # the first live replica, now the whole ISR


def test_unclean_election_prefers_a_live_isr_member_and_needs_some_live_replica() -> None:
    h, epochs, tid = _cluster(((1, 2),))
    _alter_isr(h, epochs, tid, 0, (1,))
    for b in (1, 2):
        assert h.heartbeat(b, epochs[b], want_fence=True).is_fenced
    before = h.port.image.digest()
    assert _codes(_elect(h, UNCLEAN, ("t", 0))) == [("t", 0, ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE)]
    assert h.port.image.digest() == before
    # A leaderless partition with a live ISR member (a moment the controller itself never leaves, as it
    # elects at unfencing) gets that member, not the first live replica: the election stays clean.
    for b in (1, 2):
        assert not h.heartbeat(b, epochs[b]).is_fenced
    state = dataclasses.replace(h.port.image.partition(tid, 0), replicas=(2, 1), leader=NO_LEADER)
    assert state.isr == (1,)
    assert _unclean(h.port.image, state) == (ErrorCode.NONE, 1, (1,))


def test_election_needs_alter_on_the_cluster() -> None:
    h, epochs, tid = _cluster(authorizer=Authorizer(super_users=("User:admin", "User:broker")))
    _bounce(h, epochs, tid, 1)
    before = h.port.image.digest()
    alice = RequestContext(principal="User:alice")
    refused = _elect(h, PREFERRED, ("t", 0), ctx=alice)
    assert refused == ElectLeadersResponse(
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        (ElectLeadersTopicResult("t", (ElectLeadersPartitionResult(0, ErrorCode.CLUSTER_AUTHORIZATION_FAILED),)),),
    )
    assert h.port.image.digest() == before
    grant = AclCreation(
        ResourceType.CLUSTER,
        CLUSTER_RESOURCE_NAME,
        PatternType.LITERAL,
        "User:alice",
        "*",
        AclOperation.ALTER,
        AclPermissionType.ALLOW,
    )
    assert h.call(CreateAclsRequest((grant,))).results[0].error_code == ErrorCode.NONE
    assert _codes(_elect(h, PREFERRED, ("t", 0), ctx=alice)) == [("t", 0, ErrorCode.NONE)]
    assert _state(h, tid, 0)[0] == 1


def test_an_unknown_election_type_is_an_invalid_request() -> None:
    h, _epochs, _tid = _cluster()
    response = _elect(h, ElectionType.UNKNOWN, ("t", 0))
    assert response.error_code == ErrorCode.INVALID_REQUEST
    assert _codes(response) == [("t", 0, ErrorCode.INVALID_REQUEST)]
