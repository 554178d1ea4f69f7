"""Partition leadership and ISR: AlterPartition (KIP-497), ElectLeaders (KIP-460) and the moves fencing
and shutdown make.

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
from node.controller.errors import whole_request_error
from node.metadata.image import MetadataImage, PartitionState
from node.metadata.records import NO_LEADER, PartitionChangeRecord
from node.process.ports import RequestContext
from node.protocol.acls import CLUSTER_RESOURCE_NAME, AclOperation, ResourceType
from node.protocol.admin import (
    ElectionType,
    ElectLeadersPartitionResult,
    ElectLeadersRequest,
    ElectLeadersResponse,
    ElectLeadersTopicResult,
)
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


# --- ElectLeaders (KIP-460) ----------------------------------------------------------------------


def _preferred(view: MetadataImage, p: PartitionState) -> tuple[ErrorCode, int]:
    """The leader a preferred election gives `p`: the first replica of the assignment if it is in the
    ISR and live. Otherwise a live leader stays (PREFERRED_LEADER_NOT_AVAILABLE), and only a
    leaderless partition takes another ISR member, as Kafka's PartitionChangeBuilder does."""
    if p.leader == p.replicas[0]:
        return ErrorCode.ELECTION_NOT_NEEDED, p.leader

    def valid(b: int) -> bool:
        return b in p.isr and is_live(view, b)

    if valid(p.replicas[0]):
        return ErrorCode.NONE, p.replicas[0]
    if p.leader == NO_LEADER:
        leader = choose_leader(p, p.isr, lambda b: is_live(view, b))
        if leader != NO_LEADER:
            return ErrorCode.NONE, leader
    return ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, p.leader


def _unclean(view: MetadataImage, p: PartitionState) -> tuple[ErrorCode, int, tuple[int, ...]]:
    """The leader and ISR an unclean election gives a leaderless `p`: a live ISR member if there is one
    (a clean election), else the first live replica, which becomes the whole ISR (KIP-460: the topic's
    `unclean.leader.election.enable` is not consulted; the request is the operator's consent)."""
    if p.leader != NO_LEADER:
        return ErrorCode.ELECTION_NOT_NEEDED, p.leader, p.isr

    def live(b: int) -> bool:
        return is_live(view, b)

    clean = choose_leader(p, p.isr, live)
    if clean != NO_LEADER:
        return ErrorCode.NONE, clean, p.isr
    for replica in p.replicas:
        if live(replica):
            return ErrorCode.NONE, replica, (replica,)
    return ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, NO_LEADER, p.isr


def _elect(
    view: MetadataImage, election: ElectionType, topic: str, pid: int
) -> tuple[ErrorCode, str | None, PartitionChangeRecord | None]:
    """One partition's election: its error code, message and change record (None: nothing changes)."""
    topic_id = view.topic_id(topic)
    p = None if topic_id is None else view.partition(topic_id, pid)
    if topic_id is None or p is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no partition {topic}-{pid}", None
    if election == ElectionType.PREFERRED:
        code, leader = _preferred(view, p)
        isr = p.isr
    else:
        code, leader, isr = _unclean(view, p)
    if code != ErrorCode.NONE:
        return code, None, None
    return code, None, _change(topic_id, pid, p, isr, leader)


def _all_partitions(view: MetadataImage) -> list[tuple[str, tuple[int, ...]]]:
    return [(view.topics[tid], tuple(sorted(view.partitions(tid)))) for tid in sorted(view.topics, key=view.topics.get)]


def handle_elect_leaders(
    ctl: ControllerContext, now_ms: int, ctx: RequestContext, request: ElectLeadersRequest, reply: Reply
) -> None:
    """KIP-460: preferred or unclean elections, one PartitionChangeRecord per partition whose leader
    moves (replay bumps its leader epoch), all in one batch. Alter on the cluster is required, as Kafka
    requires it. A request naming no partitions (null) means every partition, and then only the
    partitions where an election was attempted are answered (not ELECTION_NOT_NEEDED), as in Kafka."""
    if not ctl.allowed(ctx, AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME):
        ctl.answer_when_settled(request, reply, whole_request_error(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
        return
    if request.election_type not in (ElectionType.PREFERRED, ElectionType.UNCLEAN):
        message = f"unknown election type {int(request.election_type)}"
        ctl.answer_when_settled(request, reply, whole_request_error(request, ErrorCode.INVALID_REQUEST, message))
        return
    view = ctl.working
    every = request.topic_partitions is None
    asked = (
        _all_partitions(view)
        if request.topic_partitions is None
        else [(t.topic, t.partitions) for t in request.topic_partitions]
    )
    records: list[PartitionChangeRecord] = []
    seen: set[tuple[str, int]] = set()
    topics = []
    for topic, pids in asked:
        results = []
        for pid in pids:
            if (topic, pid) in seen:
                code, message, change = ErrorCode.INVALID_REQUEST, f"{topic}-{pid} is named twice", None
            else:
                code, message, change = _elect(view, request.election_type, topic, pid)
            seen.add((topic, pid))
            if change is not None:
                records.append(change)
            if not (every and code == ErrorCode.ELECTION_NOT_NEEDED):
                results.append(ElectLeadersPartitionResult(pid, code, message))
        if results or not every:
            topics.append(ElectLeadersTopicResult(topic, tuple(results)))
    response = ElectLeadersResponse(ErrorCode.NONE, tuple(topics))
    ctl.write(request, records, reply, lambda _outcome: response)
