"""CreateTopics and DeleteTopics.

Replicas are assigned round-robin over the live brokers (registered, unfenced, not shutting down),
starting at a position derived from the log offset so that assignments spread and every run of the
same history assigns the same way. The ISR is the live replicas; the leader is the first replica in
the ISR. All topics of one request are one batch.
"""

from __future__ import annotations

import re
import uuid

from node.controller.config_catalog import lookup
from node.controller.context import ControllerContext, Reply
from node.controller.partitions import is_live
from node.metadata.image import MetadataImage
from node.metadata.records import (
    NO_LEADER,
    ConfigRecord,
    MetadataRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from node.process.ports import RequestContext
from node.protocol.acls import CLUSTER_RESOURCE_NAME, AclOperation, ResourceType
from node.protocol.admin import (
    ConfigResourceType,
    CreatableTopic,
    CreatableTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)
from node.protocol.common import ZERO_UUID
from node.protocol.errors import ErrorCode

MAX_TOPIC_NAME = 249
MAX_PARTITIONS = 10_000  # per topic: far beyond any test, well below a batch that would not fit
_LEGAL_NAME = re.compile(r"^[a-zA-Z0-9._-]+$")


class TopicRefusal(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def topic_name_error(name: str) -> str | None:
    if not name:
        return "empty topic name"
    if name in (".", ".."):
        return f"topic name {name!r} is not allowed"
    if len(name) > MAX_TOPIC_NAME:
        return f"topic name is {len(name)} characters long, over {MAX_TOPIC_NAME}"
    if not _LEGAL_NAME.match(name):
        return f"topic name {name!r} has characters outside [a-zA-Z0-9._-]"
    return None


def _assignment(
    view: MetadataImage, topic: CreatableTopic, live: list[int], defaults: tuple[int, int], start: int
) -> list[tuple[int, ...]]:
    """The replicas of each partition, validated, as Kafka refuses bad counts and assignments."""
    if topic.assignments:
        if topic.num_partitions != -1 or topic.replication_factor != -1:
            raise TopicRefusal(ErrorCode.INVALID_REQUEST, "give either an assignment or counts, not both")
        indexes = sorted(a.partition_index for a in topic.assignments)
        if indexes != list(range(len(indexes))):
            raise TopicRefusal(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "partition indexes must be 0..n-1, each once")
        if len(indexes) > MAX_PARTITIONS:
            raise TopicRefusal(ErrorCode.INVALID_PARTITIONS, f"more than {MAX_PARTITIONS} partitions")
        out = []
        for a in sorted(topic.assignments, key=lambda a: a.partition_index):
            ids = tuple(a.broker_ids)
            if not ids or len(set(ids)) != len(ids):
                raise TopicRefusal(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"partition {a.partition_index}: {list(ids)}")
            if any(view.broker(b) is None for b in ids):
                raise TopicRefusal(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"partition {a.partition_index}: unregistered broker in {list(ids)}",
                )
            if not any(b in live for b in ids):
                raise TopicRefusal(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"partition {a.partition_index}: no live broker in {list(ids)}",
                )
            out.append(ids)
        return out
    partitions = defaults[0] if topic.num_partitions == -1 else topic.num_partitions
    factor = defaults[1] if topic.replication_factor == -1 else topic.replication_factor
    if partitions < 1 or partitions > MAX_PARTITIONS:
        raise TopicRefusal(ErrorCode.INVALID_PARTITIONS, f"{partitions} partitions (1..{MAX_PARTITIONS})")
    if factor < 1:
        raise TopicRefusal(ErrorCode.INVALID_REPLICATION_FACTOR, f"replication factor {factor} is below 1")
    if factor > len(live):
        raise TopicRefusal(
            ErrorCode.INVALID_REPLICATION_FACTOR, f"replication factor {factor} is above the {len(live)} live brokers"
        )
    n = len(live)
    return [tuple(live[(start + p + j) % n] for j in range(factor)) for p in range(partitions)]


def _topic_records(
    ctl: ControllerContext, ctx: RequestContext, topic: CreatableTopic, start: int
) -> tuple[list[MetadataRecord], str, int, int]:
    view = ctl.working
    if not (
        ctl.allowed(ctx, AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME)
        or ctl.allowed(ctx, AclOperation.CREATE, ResourceType.TOPIC, topic.name)
    ):
        raise TopicRefusal(ErrorCode.TOPIC_AUTHORIZATION_FAILED, f"not authorized to create {topic.name!r}")
    problem = topic_name_error(topic.name)
    if problem is not None:
        raise TopicRefusal(ErrorCode.INVALID_TOPIC_EXCEPTION, problem)
    if view.topic_id(topic.name) is not None:
        raise TopicRefusal(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {topic.name!r} already exists")
    names = [name for name, _ in topic.configs]
    if len(set(names)) != len(names):
        raise TopicRefusal(ErrorCode.INVALID_REQUEST, "a config appears twice")
    for name, value in topic.configs:
        definition = lookup(ConfigResourceType.TOPIC, name)
        problem = "unknown config" if definition is None else (None if value is None else definition.check(value))
        if problem is not None:
            raise TopicRefusal(ErrorCode.INVALID_CONFIG, f"{name}: {problem}")
    live = sorted(b for b in view.brokers if is_live(view, b))
    defaults = (ctl.config.num_partitions, ctl.config.default_replication_factor)
    replicas = _assignment(view, topic, live, defaults, start)
    topic_id = ctl.new_uuid("topic", topic.name)
    records: list[MetadataRecord] = [TopicRecord(topic.name, topic_id)]
    for pid, ids in enumerate(replicas):
        isr = tuple(b for b in ids if b in live)
        leader = isr[0] if isr else NO_LEADER
        records.append(PartitionRecord(pid, topic_id, ids, isr, leader=leader))
    records.extend(
        ConfigRecord(ConfigResourceType.TOPIC, topic.name, name, value)
        for name, value in topic.configs
        if value is not None
    )
    return records, topic_id, len(replicas), len(replicas[0])


def handle_create_topics(
    ctl: ControllerContext, now_ms: int, ctx: RequestContext, request: CreateTopicsRequest, reply: Reply
) -> None:
    names = [t.name for t in request.topics]
    results: list[CreatableTopicResult] = []
    records: list[MetadataRecord] = []
    start = ctl.next_offset()
    for i, topic in enumerate(request.topics):
        try:
            if names.count(topic.name) > 1:
                raise TopicRefusal(ErrorCode.INVALID_REQUEST, f"topic {topic.name!r} appears twice")
            mine, topic_id, partitions, factor = _topic_records(ctl, ctx, topic, start + i)
            records.extend(mine)
            results.append(
                CreatableTopicResult(topic.name, uuid.UUID(topic_id), ErrorCode.NONE, None, partitions, factor)
            )
        except TopicRefusal as refusal:
            results.append(CreatableTopicResult(topic.name, ZERO_UUID, refusal.code, str(refusal)))
    response = CreateTopicsResponse(tuple(results))
    ctl.write(request, [] if request.validate_only else records, reply, lambda _outcome: response)


def handle_delete_topics(
    ctl: ControllerContext, now_ms: int, ctx: RequestContext, request: DeleteTopicsRequest, reply: Reply
) -> None:
    view = ctl.working
    names = list(request.topic_names)
    results: list[DeletableTopicResult] = []
    records: list[MetadataRecord] = []
    for name in names:
        topic_id = view.topic_id(name)
        code, message = ErrorCode.NONE, None
        if names.count(name) > 1:
            code, message = ErrorCode.INVALID_REQUEST, "the same topic appears twice"
        elif not ctl.allowed(ctx, AclOperation.DELETE, ResourceType.TOPIC, name):
            code, message = ErrorCode.TOPIC_AUTHORIZATION_FAILED, f"not authorized to delete {name!r}"
        elif topic_id is None:
            code, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name!r}"
        elif not ctl.config.delete_topic_enable:
            code, message = ErrorCode.TOPIC_DELETION_DISABLED, "delete.topic.enable is false"
        if code == ErrorCode.NONE and topic_id is not None:
            records.append(RemoveTopicRecord(topic_id))
            results.append(DeletableTopicResult(name, uuid.UUID(topic_id), code))
        else:
            results.append(DeletableTopicResult(name, ZERO_UUID, code, message))
    response = DeleteTopicsResponse(tuple(results))
    ctl.write(request, records, reply, lambda _outcome: response)


__all__ = ["handle_create_topics", "handle_delete_topics", "topic_name_error"]
