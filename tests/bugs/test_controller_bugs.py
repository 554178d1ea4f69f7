"""Each planted controller bug changes what the quorum controller does; the correct one does not."""

from __future__ import annotations

import uuid

from node.bugs import Bugs
from node.controller import ControllerConfig
from node.metadata.records import FenceBrokerRecord
from node.process.ports import RequestContext
from node.protocol import forwarding
from node.protocol.admin import (
    AlterableConfig,
    ConfigOperation,
    ConfigResourceType,
    CreatableTopic,
    CreateTopicsRequest,
    DescribeConfigsRequest,
    DescribeConfigsResource,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResource,
)
from node.protocol.broker_api import AlterPartitionPartitionData, AlterPartitionRequest, AlterPartitionTopicData
from node.protocol.codec import BinaryCodec
from node.protocol.errors import ErrorCode
from node.security.authorizer import Authorizer
from tests.controller.harness import BROKER, Harness

TIMEOUT = ControllerConfig().broker_session_timeout_ms


def harness(*names: str) -> Harness:
    return Harness(ControllerConfig(bugs=Bugs(frozenset(names))))


def cluster(*names: str) -> tuple[Harness, dict[int, int], str]:
    """Three unfenced brokers and a topic of 3 partitions with 3 replicas each."""
    h = harness(*names)
    epochs = {b: h.online_broker(b) for b in (1, 2, 3)}
    response = h.call(CreateTopicsRequest((CreatableTopic("t", 3, 3),)), BROKER)
    return h, epochs, str(response.topics[0].topic_id)


def alter(h: Harness, broker: int, epoch: int, topic_id: str, part: tuple[int, int, tuple[int, ...], int]) -> int:
    data = (AlterPartitionPartitionData(*part),)
    request = AlterPartitionRequest(broker, epoch, (AlterPartitionTopicData(uuid.UUID(topic_id), data),))
    return h.call(request, BROKER).topics[0].partitions[0].error_code


def test_fenced_replica_admitted_into_the_isr_kafka_13916() -> None:
    def rejoin(*names: str) -> tuple[int, bool]:
        h, epochs, tid = cluster(*names)
        p = h.port.image.partition(tid, 0)
        out = next(b for b in p.isr if b != p.leader)
        assert (
            alter(
                h,
                p.leader,
                epochs[p.leader],
                tid,
                (0, p.leader_epoch, tuple(b for b in p.isr if b != out), p.partition_epoch),
            )
            == 0
        )
        assert h.heartbeat(out, epochs[out], want_fence=True).is_fenced
        p = h.port.image.partition(tid, 0)
        code = alter(h, p.leader, epochs[p.leader], tid, (0, p.leader_epoch, (*p.isr, out), p.partition_epoch))
        return code, out in h.port.image.partition(tid, 0).isr

    assert rejoin() == (ErrorCode.INELIGIBLE_REPLICA, False)
    assert rejoin("ctl-fenced-replica-into-isr") == (ErrorCode.NONE, True)


def test_stale_alter_partition_answer_kafka_14154() -> None:
    """A request whose leader epoch is ahead of this controller's state: the controller is stale."""

    def answer(*names: str) -> int:
        h, epochs, tid = cluster(*names)
        p = h.port.image.partition(tid, 0)
        return alter(h, p.leader, epochs[p.leader], tid, (0, p.leader_epoch + 1, (p.leader,), p.partition_epoch + 1))

    assert answer() == ErrorCode.NOT_CONTROLLER  # retriable: the leader asks the real controller
    assert answer("ctl-stale-alter-partition-answer") == ErrorCode.FENCED_LEADER_EPOCH  # definite and wrong


def test_stale_heartbeat_accepted() -> None:
    """Broker 1's first incarnation died; a new one registered. The old one's heartbeat arrives late."""

    def late_heartbeat(*names: str) -> int:
        h = harness(*names)
        old = h.online_broker(1)
        h.tick(TIMEOUT + 1)  # the old incarnation's session lapses
        h.port.commit()
        h.now = TIMEOUT + 2
        new = h.register(1).broker_epoch
        assert new > old
        return h.heartbeat(1, old).error_code

    assert late_heartbeat() == ErrorCode.STALE_BROKER_EPOCH
    assert late_heartbeat("ctl-stale-heartbeat-accepted") == ErrorCode.NONE


def test_unfence_before_catch_up_kafka_13959() -> None:
    def fenced_while_behind(*names: str) -> bool:
        h = harness(*names)
        epoch = h.register(1).broker_epoch
        response = h.heartbeat(1, epoch, offset=epoch - 1)  # its image has not reached its registration
        return response.is_fenced and h.port.image.broker(1).fenced

    assert fenced_while_behind() is True
    assert fenced_while_behind("ctl-unfence-before-catch-up") is False


def test_no_fence_after_failover_kafka_13841() -> None:
    """Broker 1 dies; the controller fails over before its session lapses; nobody ever fences it."""

    def fenced_after_failover(*names: str) -> bool:
        h = harness(*names)
        h.online_broker(1)
        h.ctl.deactivate(h.now)
        h.now = TIMEOUT // 2
        h.ctl.activate(h.now)  # a new active controller (no heartbeat from broker 1 ever comes)
        for t in range(1, 10):
            h.tick(h.now + t * TIMEOUT)
        return any(isinstance(r, FenceBrokerRecord) for r in h.port.records())

    assert fenced_after_failover() is True
    assert fenced_after_failover("ctl-no-fence-after-failover") is False


def test_config_change_not_atomic() -> None:
    """Two resources changed by one request; leadership is lost after the first batch commits."""

    def run(*names: str) -> tuple[list[int], list[str], int]:
        h = harness(*names)
        h.online_broker(1)
        h.call(CreateTopicsRequest((CreatableTopic("t", 1, 1), CreatableTopic("u", 1, 1))))
        change = (AlterableConfig("retention.ms", ConfigOperation.SET, "1234"),)
        request = IncrementalAlterConfigsRequest(
            tuple(IncrementalAlterConfigsResource(ConfigResourceType.TOPIC, t, change) for t in ("t", "u"))
        )
        cid = h.send(request)
        sizes = [len(a.records) for a in h.port.appends]  # the batches written at once
        h.port.commit(1)  # the first batch commits ...
        sizes += [len(a.records) for a in h.port.appends]  # (what its commit set off)
        h.port.fail()  # ... then the controller loses leadership
        applied = [t for t in ("t", "u") if h.port.image.config(ConfigResourceType.TOPIC, t, "retention.ms")]
        return sizes, applied, h.answer(cid).responses[0].error_code

    assert run() == ([2], ["t", "u"], ErrorCode.NONE)  # one batch: all of it commits, and says so
    # A batch per record, the second written once the first committed (so no group commit can join
    # them): half applied, answered failed.
    assert run("ctl-config-change-not-atomic") == ([1, 1], ["t"], ErrorCode.NOT_CONTROLLER)


def test_read_without_barrier() -> None:
    def read(*names: str) -> tuple[bool, int]:
        h = harness(*names)
        h.online_broker(1)
        h.call(CreateTopicsRequest((CreatableTopic("t", 1, 1),)))
        cid = h.send(
            DescribeConfigsRequest((DescribeConfigsResource(ConfigResourceType.TOPIC, "t", ("retention.ms",)),))
        )
        return h.answer(cid) is not None, len(h.port.barriers)

    assert read() == (False, 1)  # waits for the read barrier (a majority confirms the leadership)
    assert read("ctl-read-without-barrier") == (True, 0)  # answered from the local image at once


def test_envelope_unauthorized_kafka_10181() -> None:
    """A plain client sends an Envelope straight to the controller, claiming to carry the admin."""

    def forged(*names: str) -> tuple[int, list[str]]:
        authorizer = Authorizer(super_users=("User:broker", "User:admin"))
        h = Harness(ControllerConfig(bugs=Bugs(frozenset(names))), authorizer)
        h.online_broker(1)
        frame = BinaryCodec().encode_request(77, CreateTopicsRequest((CreatableTopic("stolen", 1, 1),)))
        envelope = forwarding.wrap(frame, "User:admin", "10.1.2.3", "PLAINTEXT", "PLAINTEXT")
        response = h.call(envelope, RequestContext(principal="User:mallory"))
        return response.error_code, list(h.port.image.topic_ids)

    assert forged() == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [])
    assert forged("ctl-envelope-unauthorized") == (ErrorCode.NONE, ["stolen"])  # run as the admin it claimed


def test_alter_partition_ignores_the_partition_epoch_kip_497() -> None:
    """The leader shrinks the ISR twice from the same state: the second request was built on a
    partition epoch the first one moved past, so it is a stale compare-and-set."""

    def second_shrink(*names: str) -> tuple[int, tuple[int, ...]]:
        h, epochs, tid = cluster(*names)
        p = h.port.image.partition(tid, 0)
        a, b = (r for r in p.isr if r != p.leader)
        first = (0, p.leader_epoch, (p.leader, b), p.partition_epoch)
        assert alter(h, p.leader, epochs[p.leader], tid, first) == ErrorCode.NONE
        stale = (0, p.leader_epoch, (p.leader, a), p.partition_epoch)  # the old epoch: lost update if taken
        return alter(h, p.leader, epochs[p.leader], tid, stale), h.port.image.partition(tid, 0).isr

    code, isr = second_shrink()
    assert code == ErrorCode.INVALID_UPDATE_VERSION and len(isr) == 2
    code, buggy_isr = second_shrink("ctl-alter-partition-ignores-partition-epoch")
    assert code == ErrorCode.NONE and buggy_isr != isr  # the stale request overwrote the first


def test_controlled_shutdown_before_leaderships_moved_kip_631() -> None:
    """A broker asks to shut down while it leads partitions: it may stop only once it leads none."""

    def leaders_after_shutdown(*names: str) -> tuple[bool, int]:
        h, epochs, tid = cluster(*names)
        leader = h.port.image.partition(tid, 0).leader
        response = h.heartbeat(leader, epochs[leader], want_shut_down=True)
        h.port.commit()
        led = sum(p.leader == leader for p in h.port.image.partitions(tid).values())
        return response.should_shut_down, led

    assert leaders_after_shutdown() == (True, 0)
    shut_down, led = leaders_after_shutdown("ctl-shutdown-before-leaders-moved")
    assert shut_down and led >= 1  # told to stop while it still leads
