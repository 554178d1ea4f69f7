"""AlterPartition (KIP-497): every rejection rule, batching, and ClusterAction."""

from __future__ import annotations

import uuid

from node.controller import ControllerConfig
from node.process.ports import RequestContext
from node.protocol.admin import CreatableTopic, CreateTopicsRequest
from node.protocol.broker_api import (
    AlterPartitionPartitionData,
    AlterPartitionRequest,
    AlterPartitionTopicData,
)
from node.protocol.errors import ErrorCode
from node.security.authorizer import Authorizer
from tests.controller.harness import BROKER, Harness


def _cluster(authorizer: Authorizer | None = None) -> tuple[Harness, dict[int, int], str]:
    h = Harness(ControllerConfig(), authorizer)
    epochs = {b: h.online_broker(b) for b in (1, 2, 3)}
    response = h.call(CreateTopicsRequest((CreatableTopic("t", 3, 3),)), BROKER)
    return h, epochs, str(response.topics[0].topic_id)


def _alter(h: Harness, broker: int, epoch: int, topic_id: str, *parts: tuple[int, int, tuple[int, ...], int]) -> object:
    data = tuple(AlterPartitionPartitionData(p, le, isr, pe) for p, le, isr, pe in parts)
    return h.call(AlterPartitionRequest(broker, epoch, (AlterPartitionTopicData(uuid.UUID(topic_id), data),)), BROKER)


def _leader_of(h: Harness, topic_id: str, pid: int) -> tuple[int, int, int, tuple[int, ...]]:
    s = h.port.image.partition(topic_id, pid)
    return s.leader, s.leader_epoch, s.partition_epoch, s.isr


def test_a_valid_change_is_applied_once_and_a_replay_of_it_is_stale() -> None:
    h, epochs, tid = _cluster()
    leader, le, pe, isr = _leader_of(h, tid, 0)
    shrunk = tuple(b for b in isr if b == leader or b != isr[-1])
    response = _alter(h, leader, epochs[leader], tid, (0, le, shrunk, pe))
    result = response.topics[0].partitions[0]
    assert response.error_code == ErrorCode.NONE and result.error_code == ErrorCode.NONE
    assert result.isr == shrunk and result.partition_epoch == pe + 1 and result.leader_epoch == le
    assert _leader_of(h, tid, 0) == (leader, le, pe + 1, shrunk)
    again = _alter(h, leader, epochs[leader], tid, (0, le, shrunk, pe))
    assert again.topics[0].partitions[0].error_code == ErrorCode.INVALID_UPDATE_VERSION
    assert _leader_of(h, tid, 0) == (leader, le, pe + 1, shrunk)


def test_every_rejection_rule() -> None:
    h, epochs, tid = _cluster()
    leader, le, pe, isr = _leader_of(h, tid, 0)
    follower = next(b for b in isr if b != leader)
    before = h.port.image.digest()
    stale_broker = _alter(h, leader, epochs[leader] - 1, tid, (0, le, (leader,), pe))
    assert stale_broker.error_code == ErrorCode.STALE_BROKER_EPOCH
    cases = [
        (follower, epochs[follower], (0, le, (follower,), pe), ErrorCode.NOT_LEADER_OR_FOLLOWER),
        (leader, epochs[leader], (0, le - 1, (leader,), pe), ErrorCode.FENCED_LEADER_EPOCH),
        (leader, epochs[leader], (0, le, (leader,), pe - 1), ErrorCode.INVALID_UPDATE_VERSION),
        # KAFKA-14154: epochs ahead of this controller's state mean the controller is stale
        (leader, epochs[leader], (0, le, (leader,), pe + 5), ErrorCode.NOT_CONTROLLER),
        (leader, epochs[leader], (0, le + 1, (leader,), pe), ErrorCode.NOT_CONTROLLER),
        (follower, epochs[follower], (0, le + 1, (follower,), pe + 1), ErrorCode.NOT_CONTROLLER),
        (leader, epochs[leader], (0, le, (leader, 9), pe), ErrorCode.INVALID_REQUEST),  # outside the replicas
        (leader, epochs[leader], (0, le, (follower,), pe), ErrorCode.INVALID_REQUEST),  # the leader outside the ISR
        (leader, epochs[leader], (0, le, (leader, leader), pe), ErrorCode.INVALID_REQUEST),
        (leader, epochs[leader], (0, le, (), pe), ErrorCode.INVALID_REQUEST),
        (leader, epochs[leader], (7, le, (leader,), pe), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    for broker, epoch, part, code in cases:
        response = _alter(h, broker, epoch, tid, part)
        assert response.topics[0].partitions[0].error_code == code, (part, response)
    unknown = _alter(h, leader, epochs[leader], str(uuid.uuid4()), (0, le, (leader,), pe))
    assert unknown.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID
    assert h.port.image.digest() == before


def test_a_fenced_or_shutting_down_broker_may_not_join_the_isr() -> None:
    h, epochs, tid = _cluster()
    leader, le, pe, isr = _leader_of(h, tid, 0)
    out = next(b for b in isr if b != leader)
    third = next(b for b in isr if b not in (leader, out))
    shrunk = tuple(b for b in isr if b != out)
    response = _alter(h, leader, epochs[leader], tid, (0, le, shrunk, pe))
    assert response.topics[0].partitions[0].error_code == ErrorCode.NONE
    pe += 1
    # `out` asks to be fenced: it may not come back into the ISR (KAFKA-13916).
    assert h.heartbeat(out, epochs[out], want_fence=True).is_fenced
    leader, le, pe, isr = _leader_of(h, tid, 0)
    response = _alter(h, leader, epochs[leader], tid, (0, le, (*isr, out), pe))
    assert response.topics[0].partitions[0].error_code == ErrorCode.INELIGIBLE_REPLICA
    # `third` shuts down: it leaves the ISR and may not rejoin either.
    assert h.heartbeat(third, epochs[third], want_shut_down=True).should_shut_down
    leader, le, pe, isr = _leader_of(h, tid, 0)
    assert third not in isr
    response = _alter(h, leader, epochs[leader], tid, (0, le, (*isr, third), pe))
    assert response.topics[0].partitions[0].error_code == ErrorCode.INELIGIBLE_REPLICA
    assert _leader_of(h, tid, 0) == (leader, le, pe, isr)


def test_a_member_the_leader_saw_in_another_incarnation_may_not_join_the_isr() -> None:
    """KIP-903 (KAFKA-14617): `out` crashes and registers again with a new epoch, maybe with an empty
    log; a leader that saw the old incarnation catch up names that epoch, and the controller refuses.
    The new incarnation's epoch is accepted, and -1 (no epoch known) or no epochs at all skip the check."""
    h, epochs, tid = _cluster()
    leader, le, pe, isr = _leader_of(h, tid, 0)
    out = next(b for b in isr if b != leader)
    shrunk = tuple(b for b in isr if b != out)
    assert _alter(h, leader, epochs[leader], tid, (0, le, shrunk, pe)).topics[0].partitions[0].error_code == 0
    leader, le, pe, isr = _leader_of(h, tid, 0)
    for step in range(1, 11):  # `out` crashed: its session lapses while the others heartbeat
        h.tick(step * 1_000)
        for b in epochs:
            if b != out:
                h.heartbeat(b, epochs[b])
    reborn = h.online_broker(out)  # back as a new incarnation: a new broker epoch
    assert reborn != epochs[out]
    grown = (*isr, out)

    def alter_with(member_epochs: tuple[int, ...]) -> int:
        data = AlterPartitionPartitionData(0, le, grown, pe, member_epochs)
        request = AlterPartitionRequest(leader, epochs[leader], (AlterPartitionTopicData(uuid.UUID(tid), (data,)),))
        return h.call(request, BROKER).topics[0].partitions[0].error_code

    known = tuple(epochs[b] for b in isr)
    assert alter_with((*known, epochs[out])) == ErrorCode.INELIGIBLE_REPLICA  # the old incarnation
    assert alter_with((*known, reborn)[:-1]) == ErrorCode.INVALID_REQUEST  # an epoch for every member
    assert _leader_of(h, tid, 0) == (leader, le, pe, isr)
    assert alter_with((*known, reborn)) == ErrorCode.NONE
    assert _leader_of(h, tid, 0)[3] == grown
    leader, le, pe, isr = _leader_of(h, tid, 0)
    grown = tuple(b for b in isr if b != out)
    assert alter_with(tuple(-1 for _ in grown)) == ErrorCode.NONE  # no epoch known: not checked


def test_one_request_for_many_partitions_is_one_append_with_per_partition_results() -> None:
    h, epochs, tid = _cluster()
    image = h.port.image
    by_leader: dict[int, list[int]] = {}
    for pid, s in image.partitions(tid).items():
        by_leader.setdefault(s.leader, []).append(pid)
    leader, pids = max(by_leader.items(), key=lambda kv: len(kv[1]))
    parts = [
        (p, image.partition(tid, p).leader_epoch, (leader,), image.partition(tid, p).partition_epoch) for p in pids
    ]
    parts.append((pids[0], parts[0][1], (leader,), parts[0][3]))  # the same partition twice
    cid = h.send(
        AlterPartitionRequest(
            leader,
            epochs[leader],
            (AlterPartitionTopicData(uuid.UUID(tid), tuple(AlterPartitionPartitionData(*p) for p in parts)),),
        ),
        BROKER,
    )
    assert len(h.port.appends) == 1 and len(h.port.appends[0].records) == len(pids)
    h.port.commit()
    results = h.answer(cid).topics[0].partitions
    assert [r.error_code for r in results] == [ErrorCode.NONE] * len(pids) + [ErrorCode.INVALID_REQUEST]
    for p in pids:
        assert h.port.image.partition(tid, p).isr == (leader,)


def test_a_forged_alter_partition_from_a_plain_client_is_refused_and_nothing_applied() -> None:
    authorizer = Authorizer(super_users=("User:broker", "User:admin"))
    h, epochs, tid = _cluster(authorizer)
    leader, le, pe, _ = _leader_of(h, tid, 0)
    before = h.port.image.digest()
    request = AlterPartitionRequest(
        leader,
        epochs[leader],
        (AlterPartitionTopicData(uuid.UUID(tid), (AlterPartitionPartitionData(0, le, (leader,), pe),)),),
    )
    response = h.call(request, RequestContext(principal="User:mallory"))
    assert response.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert not h.port.appends and h.port.image.digest() == before
