"""Partition leadership and ISR: AlterPartition (KIP-497) and the moves fencing and shutdown make.

AlterPartition is validated against the working state per partition, with the lessons of
KAFKA-13916 and KAFKA-14617 (a fenced or shutting-down broker, or one that is not registered, may
not join an ISR) and of KAFKA-14154 (epochs ahead of this controller's state mean the controller is
stale: NOT_CONTROLLER, never a definite refusal), and every accepted change of one request goes into
one batch.

When a broker is fenced or shuts down it leaves every ISR and loses every leadership, except that
the last member of an ISR stays in it (with no leader) as Kafka does: emptying the ISR would forget
which replica holds every committed message. Such a partition gets its leader back when that
broker is unfenced.
"""

from __future__ import annotations

from collections.abc import Callable

from node.bugs import NO_BUGS, Bugs
from node.controller.context import ControllerContext, Reply
from node.metadata.image import MetadataImage, PartitionState
from node.metadata.records import NO_LEADER, PartitionChangeRecord
from node.process.ports import RequestContext
from node.protocol.broker_api import (
    AlterPartitionPartitionData,
    AlterPartitionPartitionResult,
    AlterPartitionRequest,
    AlterPartitionResponse,
    AlterPartitionTopicResult,
)
from node.protocol.errors import ErrorCode


def is_live(view: MetadataImage, broker_id: int) -> bool:
    """May `broker_id` lead or join an ISR: registered, unfenced, not shutting down."""
    reg = view.broker(broker_id)
    return reg is not None and not reg.fenced and not reg.in_controlled_shutdown


def choose_leader(state: PartitionState, isr: tuple[int, ...], live: Callable[[int], bool]) -> int:
    """The first replica (in replica order) that is in `isr` and live; NO_LEADER when none is."""
    for replica in state.replicas:
        if replica in isr and live(replica):
            return replica
    return NO_LEADER


def _change(
    topic_id: str, pid: int, old: PartitionState, isr: tuple[int, ...], leader: int
) -> PartitionChangeRecord | None:
    if isr == old.isr and leader == old.leader:
        return None
    return PartitionChangeRecord(
        pid, topic_id, isr=None if isr == old.isr else isr, leader=None if leader == old.leader else leader
    )


def remove_broker(view: MetadataImage, broker_id: int) -> list[PartitionChangeRecord]:
    """The changes that take `broker_id` out of every ISR and leadership (fencing, shutdown)."""

    def live(b: int) -> bool:
        return b != broker_id and is_live(view, b)

    changes = []
    for topic_id in view.topics:
        for pid, p in view.partitions(topic_id).items():
            if broker_id not in p.isr and p.leader != broker_id:
                continue
            isr = tuple(b for b in p.isr if b != broker_id) or p.isr
            leader = p.leader if p.leader != broker_id and p.leader in isr else choose_leader(p, isr, live)
            change = _change(topic_id, pid, p, isr, leader)
            if change is not None:
                changes.append(change)
    return changes


def elect_with(view: MetadataImage, broker_id: int) -> list[PartitionChangeRecord]:
    """Leaders for the leaderless partitions whose ISR holds `broker_id`, which is becoming live."""

    def live(b: int) -> bool:
        return b == broker_id or is_live(view, b)

    changes = []
    for topic_id in view.topics:
        for pid, p in view.partitions(topic_id).items():
            if p.leader == NO_LEADER and broker_id in p.isr:
                change = _change(topic_id, pid, p, p.isr, choose_leader(p, p.isr, live))
                if change is not None:
                    changes.append(change)
    return changes


# --- AlterPartition ------------------------------------------------------------------------------


def _validate(
    view: MetadataImage,
    request: AlterPartitionRequest,
    topic_id: str,
    data: AlterPartitionPartitionData,
    bugs: Bugs = NO_BUGS,
) -> ErrorCode:
    if view.topic_name(topic_id) is None:
        return ErrorCode.UNKNOWN_TOPIC_ID
    p = view.partition(topic_id, data.partition_index)
    if p is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    ahead = data.leader_epoch > p.leader_epoch or data.partition_epoch > p.partition_epoch
    if ahead and "ctl-stale-alter-partition-answer" not in bugs:
        # KAFKA-14154: the leader knows epochs this controller has not seen, so this controller is
        # stale (its working state holds everything committed). Only the active one may judge.
        return ErrorCode.NOT_CONTROLLER
    if p.leader != request.broker_id:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER  # a stale leader
    if data.leader_epoch != p.leader_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    if data.partition_epoch != p.partition_epoch and "ctl-alter-partition-ignores-partition-epoch" not in bugs:
        return ErrorCode.INVALID_UPDATE_VERSION  # KIP-497's stale zkVersion
    isr = data.new_isr
    if not isr or len(set(isr)) != len(isr) or not set(isr) <= set(p.replicas):
        return ErrorCode.INVALID_REQUEST  # a replica outside the replicas
    if request.broker_id not in isr:
        return ErrorCode.INVALID_REQUEST  # the leader outside the ISR
    epochs = data.new_isr_epochs
    if epochs and len(epochs) != len(isr):
        return ErrorCode.INVALID_REQUEST  # KIP-903: an epoch for every member, or none
    for joining in set(isr) - set(p.isr):
        if not is_live(view, joining) and "ctl-fenced-replica-into-isr" not in bugs:
            return ErrorCode.INELIGIBLE_REPLICA  # KAFKA-13916 / KAFKA-14617: fenced, shutting down, unknown
    for member, epoch in zip(isr, epochs, strict=False):
        reg = view.broker(member)
        if epoch >= 0 and (reg is None or reg.broker_epoch != epoch):  # -1: the leader has no epoch for it
            # KIP-903: the leader saw another incarnation of it catch up (KAFKA-14617)
            return ErrorCode.INELIGIBLE_REPLICA
    return ErrorCode.NONE


def handle_alter_partition(
    ctl: ControllerContext, now_ms: int, ctx: RequestContext, request: AlterPartitionRequest, reply: Reply
) -> None:
    view = ctl.working
    reg = view.broker(request.broker_id)
    if reg is None or reg.broker_epoch != request.broker_epoch:
        ctl.answer_when_settled(request, reply, AlterPartitionResponse(ErrorCode.STALE_BROKER_EPOCH))
        return
    records: list[PartitionChangeRecord] = []
    seen: set[tuple[str, int]] = set()
    topics = []
    for topic in request.topics:
        topic_id = str(topic.topic_id)
        results = []
        for data in topic.partitions:
            key = (topic_id, data.partition_index)
            error = (
                ErrorCode.INVALID_REQUEST if key in seen else _validate(view, request, topic_id, data, ctl.config.bugs)
            )
            seen.add(key)
            p = view.partition(topic_id, data.partition_index)
            if error != ErrorCode.NONE or p is None:
                results.append(AlterPartitionPartitionResult(data.partition_index, error))
                continue
            isr, partition_epoch = p.isr, p.partition_epoch
            if tuple(data.new_isr) != p.isr:  # the same ISR again needs no record
                records.append(PartitionChangeRecord(data.partition_index, topic_id, isr=tuple(data.new_isr)))
                isr, partition_epoch = tuple(data.new_isr), p.partition_epoch + 1  # as replay will make it
            results.append(
                AlterPartitionPartitionResult(
                    data.partition_index, ErrorCode.NONE, p.leader, p.leader_epoch, isr, partition_epoch
                )
            )
        topics.append(AlterPartitionTopicResult(topic.topic_id, tuple(results)))
    response = AlterPartitionResponse(ErrorCode.NONE, tuple(topics))
    ctl.write(request, records, reply, lambda _outcome: response)
