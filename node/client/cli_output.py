"""How `kchaos admin` prints answers: plain-text tables and Kafka-tool-like lines, or JSON."""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Iterable, Sequence
from enum import Enum
from typing import Any

from node.client.errors import KafkaError
from node.client.results import (
    AclBinding,
    BrokerInfo,
    ClusterDescription,
    ConfigResource,
    ResourceConfig,
    TopicDescription,
)


def table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """Left-aligned columns separated by two spaces."""
    lines = [[str(c) for c in header]] + [["-" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in lines)


def to_jsonable(value: Any) -> Any:
    """Dataclasses, enums (by name), UUIDs, errors and containers as plain JSON values."""
    if isinstance(value, KafkaError):
        return {"error": value.name, "code": value.code, "message": value.message, "definite": value.definite}
    if isinstance(value, Enum):
        return value.name
    if isinstance(value, uuid.UUID):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    return value


def dumps(value: Any) -> str:
    return json.dumps(to_jsonable(value), indent=2, sort_keys=False)


def _ids(ids: Iterable[int]) -> str:
    return ",".join(str(i) for i in ids)


def format_topics(topics: Iterable[TopicDescription]) -> str:
    """Like kafka-topics.sh --describe, with the leader and partition epochs added."""
    lines: list[str] = []
    for t in topics:
        if t.error is not None:
            lines.append(f"Topic: {t.name}\tError: {t.error}")
            continue
        rf = len(t.partitions[0].replicas) if t.partitions else 0
        lines.append(
            f"Topic: {t.name}\tTopicId: {t.topic_id}\tPartitionCount: {len(t.partitions)}\tReplicationFactor: {rf}"
        )
        for p in t.partitions:
            lines.append(
                f"\tTopic: {t.name}\tPartition: {p.partition}\tLeader: {p.leader if p.leader >= 0 else 'none'}"
                f"\tLeaderEpoch: {p.leader_epoch}\tReplicas: {_ids(p.replicas)}\tIsr: {_ids(p.isr)}"
                f"\tPartitionEpoch: {p.partition_epoch}" + (f"\tError: {p.error}" if p.error is not None else "")
            )
    return "\n".join(lines)


def format_configs(resource: ConfigResource, result: ResourceConfig, metadata_offset: int) -> str:
    """Like kafka-configs.sh --describe: one `name=value` line per config, with its source."""
    kind, _, _ = str(resource).partition(":")
    name = resource.name or "<default>"
    lines = [f"Configs for {kind} '{name}' (metadata offset {metadata_offset}):"]
    for entry in sorted(result.entries.values(), key=lambda e: e.name):
        value = "<sensitive>" if entry.sensitive or entry.value is None else entry.value
        flags = f"source={entry.source.name}" + (" read-only" if entry.read_only else "")
        lines.append(f"  {entry.name}={value} ({flags})")
    return "\n".join(lines)


def format_acls(bindings: Sequence[AclBinding]) -> str:
    """Like kafka-acls.sh --list: grouped by resource pattern."""
    by_resource: dict[tuple[str, str, str], list[AclBinding]] = {}
    for b in bindings:
        by_resource.setdefault((b.resource_type.name, b.resource_name, b.pattern_type.name), []).append(b)
    if not by_resource:
        return "No ACLs found."
    lines: list[str] = []
    for (rtype, rname, pattern), acls in sorted(by_resource.items()):
        lines.append(
            f"Current ACLs for resource `ResourcePattern(resourceType={rtype}, name={rname}, patternType={pattern})`:"
        )
        for a in acls:
            lines.append(
                f"\t(principal={a.principal}, host={a.host}, operation={a.operation.name}, "
                f"permissionType={a.permission.name})"
            )
        lines.append("")
    return "\n".join(lines).rstrip()


def format_brokers(brokers: Sequence[BrokerInfo]) -> str:
    rows = [(b.broker_id, b.host, b.port, b.rack, b.state.upper(), b.epoch) for b in brokers]
    return table(("ID", "HOST", "PORT", "RACK", "STATE", "EPOCH"), rows) if rows else "No brokers registered."


def format_cluster(cluster: ClusterDescription) -> str:
    controller = cluster.controller_id if cluster.controller_id >= 0 else "unknown"
    head = [
        f"Cluster ID:       {cluster.cluster_id or 'unknown'}",
        f"Controller ID:    {controller}",
        f"Metadata offset:  {cluster.metadata_offset}",
        "",
    ]
    return "\n".join(head) + format_brokers(cluster.brokers)


__all__ = [
    "dumps",
    "format_acls",
    "format_brokers",
    "format_cluster",
    "format_configs",
    "format_topics",
    "table",
    "to_jsonable",
]
