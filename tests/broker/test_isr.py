"""KIP-497 ISR tracking: replica heartbeats, shrink after lag, expand on return, the maximal ISR."""

from __future__ import annotations

import uuid

from node.process.ports import RequestContext
from node.protocol.broker_api import (
    AlterPartitionPartitionResult,
    AlterPartitionRequest,
    AlterPartitionResponse,
    AlterPartitionTopicResult,
)
from node.protocol.errors import ErrorCode
from node.protocol.replication import ReplicaHeartbeatPartition, ReplicaHeartbeatRequest, ReplicaHeartbeatResponse
from tests.broker.fakes import T1, T2, ImageBuilder, bring_online, make_broker

LAG = 1000
CTX = RequestContext("User:broker", "127.0.0.2")


class Cluster:
    """Broker 1 (under test) with brokers 1, 2, 3 registered and unfenced in its image."""

    def __init__(self, node_id: int = 1, isr: tuple[int, ...] = (1, 2, 3), partitions: int = 1) -> None:
        self.broker, self.port = make_broker(
            node_id=node_id,
            leader_id=100,
            replica_lag_time_max_ms=LAG,
            replica_heartbeat_interval_ms=100,
            retry_backoff_ms=50,
            heartbeat_interval_ms=60_000,
        )
        self.images = ImageBuilder(self.port.image)
        self.epochs = {b: self.images.register(b) for b in (1, 2, 3)}
        self.images.topic(T1, "orders", *[((1, 2, 3), isr, 1)] * partitions)
        bring_online(self.broker, self.port, now_ms=0, epoch=self.epochs[node_id])
        self.cid = 0

    def heartbeat(self, now: int, replica: int, *parts: tuple[str, int], leader_epoch: int = 0, epoch=None):
        self.cid += 1
        parts = parts or ((T1, 0),)
        request = ReplicaHeartbeatRequest(
            replica,
            self.epochs[replica] if epoch is None else epoch,
            self.port.image.last_offset,
            tuple(ReplicaHeartbeatPartition(uuid.UUID(t), i, leader_epoch) for t, i in parts),
        )
        self.broker.handle_request(now, CTX, f"broker-{replica}", self.cid, request)
        return self.port.responses[-1][2]

    def alters(self) -> list:
        return self.port.sent_of(AlterPartitionRequest)

    def isr_sent(self, request: AlterPartitionRequest) -> dict[tuple[str, int], tuple[int, ...]]:
        return {(str(t.topic_id), p.partition_index): p.new_isr for t in request.topics for p in t.partitions}


def accepted(request: AlterPartitionRequest, epoch_bump: int = 1) -> AlterPartitionResponse:
    return AlterPartitionResponse(
        ErrorCode.NONE,
        tuple(
            AlterPartitionTopicResult(
                t.topic_id,
                tuple(
                    AlterPartitionPartitionResult(
                        p.partition_index, ErrorCode.NONE, 1, p.leader_epoch, p.new_isr, p.partition_epoch + epoch_bump
                    )
                    for p in t.partitions
                ),
            )
            for t in request.topics
        ),
    )


def refused(request: AlterPartitionRequest, code: ErrorCode) -> AlterPartitionResponse:
    return AlterPartitionResponse(
        ErrorCode.NONE,
        tuple(
            AlterPartitionTopicResult(
                t.topic_id, tuple(AlterPartitionPartitionResult(p.partition_index, code) for p in t.partitions)
            )
            for t in request.topics
        ),
    )


def test_a_follower_silent_for_the_lag_time_is_removed_from_the_isr():
    c = Cluster()
    for now in (300, 600, 900):
        assert c.heartbeat(now, 2) == ReplicaHeartbeatResponse(ErrorCode.NONE)
    c.broker.on_tick(1000)  # 3 was never heard: its clock started when broker 1 became leader (t=0)
    assert c.alters() == []
    assert 1001 in c.port.wakes
    c.broker.on_tick(1001)
    (alter,) = c.alters()
    assert alter.destination == 100
    request = alter.message
    assert (request.broker_id, request.broker_epoch) == (1, c.epochs[1])
    (part,) = request.topics[0].partitions
    assert (part.partition_index, part.leader_epoch, part.new_isr, part.partition_epoch) == (0, 0, (1, 2), 0)
    alter.reply(accepted(request))
    assert c.broker.metrics()["isr.shrinks_total"] == 1


def test_a_follower_heard_again_is_added_back_at_once():
    c = Cluster(isr=(1, 2))
    c.heartbeat(100, 3)
    (alter,) = c.alters()
    assert c.isr_sent(alter.message) == {(T1, 0): (1, 2, 3)}
    alter.reply(accepted(alter.message))
    assert c.broker.metrics()["isr.expands_total"] == 1


def test_the_alter_names_the_incarnation_of_each_member_the_leader_heard_kip_903():
    """KIP-903: each member of the proposed ISR goes with the broker epoch the leader heard it at (its
    own for itself, -1 for a member it has not heard in this term), so the controller can refuse an
    incarnation that registered again since."""
    c = Cluster(isr=(1, 2))
    c.heartbeat(100, 3)
    (alter,) = c.alters()
    (part,) = alter.message.topics[0].partitions
    assert part.new_isr == (1, 2, 3)
    assert part.new_isr_epochs == (c.epochs[1], -1, c.epochs[3])  # 2 was not heard: no epoch to claim


def test_a_fenced_or_stale_incarnation_is_not_added_until_unfenced_in_the_image():
    c = Cluster(isr=(1, 2))
    c.images.fence(3)
    c.broker.on_committed(50)
    c.heartbeat(100, 3)
    assert c.alters() == []  # fenced
    c.heartbeat(900, 2)  # 2 keeps the ISR as it is
    c.images.unfence(3)
    c.broker.on_committed(1200)
    assert c.alters() == []  # 3 unfenced, but last heard more than the lag ago
    stale = c.heartbeat(1300, 3, epoch=c.epochs[3] - 1)
    assert stale == ReplicaHeartbeatResponse(ErrorCode.STALE_BROKER_EPOCH) and c.alters() == []
    c.heartbeat(1400, 3)  # the live incarnation
    (alter,) = c.alters()
    assert c.isr_sent(alter.message) == {(T1, 0): (1, 2, 3)}


def test_a_caught_up_follower_is_added_as_soon_as_the_image_unfences_it():
    c = Cluster(isr=(1, 2))
    c.images.fence(3)
    c.broker.on_committed(50)
    c.heartbeat(100, 3)
    assert c.alters() == []
    c.images.unfence(3)
    c.broker.on_committed(150)
    (alter,) = c.alters()
    assert c.isr_sent(alter.message) == {(T1, 0): (1, 2, 3)}


def test_heartbeats_at_another_leader_epoch_or_for_unled_partitions_do_not_count():
    c = Cluster(isr=(1, 2))
    c.heartbeat(100, 3, leader_epoch=7)
    c.heartbeat(100, 3, (T1, 5))  # no such partition
    assert c.alters() == []


def test_the_leader_assumes_the_maximal_isr_while_a_change_is_in_flight_and_until_the_image_shows_it():
    c = Cluster(isr=(1, 2))
    assert c.broker.maximal_isr(T1, 0) == (1, 2)
    c.heartbeat(100, 3)
    (alter,) = c.alters()
    assert c.broker.maximal_isr(T1, 0) == (1, 2, 3)  # expansion in flight
    alter.reply(accepted(alter.message))
    assert c.broker.maximal_isr(T1, 0) == (1, 2, 3)  # accepted, not yet in the image
    c.heartbeat(200, 3)
    assert len(c.alters()) == 1  # no second proposal for the same change
    c.images.change_isr(T1, 0, (1, 2, 3))
    c.broker.on_committed(250)
    assert c.broker.maximal_isr(T1, 0) == (1, 2, 3) and len(c.alters()) == 1


def test_a_shrink_in_flight_still_counts_the_leaving_replica():
    c = Cluster()
    c.heartbeat(900, 2)
    c.broker.on_tick(1001)
    (alter,) = c.alters()
    assert c.isr_sent(alter.message) == {(T1, 0): (1, 2)}
    assert c.broker.maximal_isr(T1, 0) == (1, 2, 3)


def test_changes_are_batched_and_one_request_is_in_flight_at_a_time():
    c = Cluster(isr=(1, 2), partitions=2)
    c.images.topic(T2, "audit", ((1, 3), (1,), 1))
    c.broker.on_committed(10)
    c.heartbeat(100, 3, (T1, 0), (T1, 1))
    (first,) = c.alters()
    assert c.isr_sent(first.message) == {(T1, 0): (1, 2, 3), (T1, 1): (1, 2, 3)}
    c.heartbeat(150, 3, (T2, 0))
    assert len(c.alters()) == 1  # waits for the answer
    first.reply(accepted(first.message))
    second = c.alters()[-1]
    assert second is not first and c.isr_sent(second.message) == {(T2, 0): (1, 3)}


def test_a_stale_partition_epoch_waits_for_the_image_before_proposing_again():
    c = Cluster(isr=(1, 2))
    c.heartbeat(100, 3)
    (alter,) = c.alters()
    alter.reply(refused(alter.message, ErrorCode.INVALID_UPDATE_VERSION))
    c.heartbeat(200, 3)
    c.broker.on_tick(300)
    assert len(c.alters()) == 1
    c.images.change_isr(T1, 0, (1, 2))  # the change the controller knew of: partition epoch 1
    c.broker.on_committed(400)
    retry = c.alters()[-1]
    assert retry is not alter
    (part,) = retry.message.topics[0].partitions
    assert part.partition_epoch == 1 and part.new_isr == (1, 2, 3)


def test_fenced_leader_epoch_waits_for_the_image_too():
    c = Cluster(isr=(1, 2))
    c.heartbeat(100, 3)
    c.alters()[0].reply(refused(c.alters()[0].message, ErrorCode.FENCED_LEADER_EPOCH))
    c.broker.on_tick(500)
    assert len(c.alters()) == 1


def test_request_level_errors_and_no_answer_are_retried_after_backoff():
    c = Cluster(isr=(1, 2))
    c.heartbeat(100, 3)
    c.alters()[0].reply(AlterPartitionResponse(ErrorCode.NOT_CONTROLLER))
    c.broker.on_tick(120)
    assert len(c.alters()) == 1
    c.broker.on_tick(160)
    assert len(c.alters()) == 2
    c.alters()[1].reply(None)
    c.broker.on_tick(300)
    assert len(c.alters()) == 3
    c.alters()[2].reply(AlterPartitionResponse(ErrorCode.STALE_BROKER_EPOCH))
    c.broker.on_tick(400)
    assert len(c.alters()) == 4
    assert c.broker.metrics()["isr.alter_partition_request_errors_total"] == 3


def test_a_follower_heartbeats_each_leader_it_follows_every_interval():
    c = Cluster(node_id=2)
    c.images.topic(T2, "audit", ((3, 2), (3, 2), 3), ((1, 3), (1, 3), 1))
    c.broker.on_committed(10)
    c.broker.on_tick(100)
    sent = c.port.sent_of(ReplicaHeartbeatRequest)
    by_leader = {s.destination: s.message for s in sent}
    assert set(by_leader) == {1, 3}
    assert by_leader[1].replica_id == 2 and by_leader[1].broker_epoch == c.epochs[2]
    assert [(str(p.topic_id), p.partition_index) for p in by_leader[1].partitions] == [(T1, 0)]
    assert [(str(p.topic_id), p.partition_index) for p in by_leader[3].partitions] == [(T2, 0)]
    count = len(sent)
    c.broker.on_tick(150)
    assert len(c.port.sent_of(ReplicaHeartbeatRequest)) == count  # not due yet
    c.broker.on_tick(200)  # due, answered or not: a lost heartbeat never stalls the next
    assert len(c.port.sent_of(ReplicaHeartbeatRequest)) == count + 2


def test_an_unanswered_alter_partition_is_given_up_after_the_request_timeout_and_retried():
    c = Cluster(isr=(1, 2))
    c.heartbeat(100, 3)
    (lost,) = c.alters()
    c.broker.on_tick(100 + 29_999)
    assert len(c.alters()) == 1
    c.broker.on_tick(100 + 30_000)  # gives up on it after request.timeout.ms, then backs off
    assert len(c.alters()) == 1
    c.heartbeat(100 + 30_040, 2)
    c.heartbeat(100 + 30_050, 3)
    retry = c.alters()[-1]
    assert retry is not lost and c.isr_sent(retry.message) == {(T1, 0): (1, 2, 3)}
    lost.reply(accepted(lost.message))  # a late answer changes nothing
    assert c.broker.maximal_isr(T1, 0) == (1, 2, 3) and len(c.alters()) == 2


def test_a_broker_that_knows_a_newer_registration_says_stale_broker_epoch():
    c = Cluster(isr=(1, 2))
    assert c.heartbeat(100, 3, epoch=c.epochs[3] - 1) == ReplicaHeartbeatResponse(ErrorCode.STALE_BROKER_EPOCH)


def test_a_newer_incarnation_than_the_image_knows_is_not_added_until_the_image_has_its_registration():
    c = Cluster(isr=(1, 2))
    newer = c.port.image.last_offset + 1
    c.heartbeat(100, 3, epoch=newer)  # broker 3 restarted; its new registration is not in our image yet
    assert c.alters() == []
    c.epochs[3] = c.images.register(3)
    assert c.epochs[3] == newer
    c.broker.on_committed(150)
    (alter,) = c.alters()
    assert c.isr_sent(alter.message) == {(T1, 0): (1, 2, 3)}
