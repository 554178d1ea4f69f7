"""The metadata image: the cluster state built by replaying committed metadata records in offset order.

Two classes share one replay function (`_replay`) through a small read/write interface:

- `MetadataImage` holds the state in plain dicts and is changed only by `apply_batch` / `apply_delta`;
  its accessors hand out read-only views, so a reader cannot change it behind the log's back.
- `MetadataDelta` overlays changes on a base (an image or another delta) without touching it: the
  controller replays a request's records into a delta to validate them before it appends them, and
  `apply_batch` uses one to apply a batch atomically (a bad record leaves the image at the previous
  batch). A delta remembers its changes as a list of writes, so committing it costs O(changed).

The image only applies records; it makes no decisions. Fencing a broker, for instance, does not take
it out of any ISR here: the controller emits the PartitionChangeRecords that do, in the same batch.
Replay validates the invariants a correct controller keeps (known partitions, ISR within replicas,
leader within ISR, broker epochs matching, ...) and a violation raises `MetadataImageError` naming
the offset of the offending record.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Protocol

from node.metadata.records import (
    NO_LEADER,
    AccessControlEntryRecord,
    BrokerEndpoint,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    MetadataRecord,
    MetadataRecordError,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    decode_record,
)
from node.protocol.acls import AclOperation, AclPermissionType, PatternType, ResourceType
from node.protocol.admin import ConfigResourceType
from node.raft.records import ClusterIdMessage, CorruptBatchError, RecordBatch, decode_control


class MetadataImageError(ValueError):
    """A record that a correct controller would never have written; the message names its offset."""


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    broker_id: int
    incarnation_id: str
    broker_epoch: int
    endpoints: tuple[BrokerEndpoint, ...]
    features: Mapping[str, tuple[int, int]]
    rack: str | None
    fenced: bool
    in_controlled_shutdown: bool


@dataclass(frozen=True, slots=True)
class PartitionState:
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    removing_replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int


@dataclass(frozen=True, slots=True)
class AclEntry:
    id: str
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int

    @property
    def binding(self) -> tuple[int, str, int, str, str, int, int]:
        """Everything but the id: two entries with the same binding would be one ACL twice."""
        return (
            self.resource_type,
            self.resource_name,
            self.pattern_type,
            self.principal,
            self.host,
            self.operation,
            self.permission_type,
        )


ConfigKey = tuple[int, str]  # (resource_type, resource_name)


class MetadataView(Protocol):
    """What replay reads and writes; both the image and a delta provide it."""

    last_offset: int
    last_epoch: int
    cluster_id: str | None

    def broker(self, broker_id: int) -> BrokerRegistration | None: ...
    def topic_name(self, topic_id: str) -> str | None: ...
    def topic_id(self, name: str) -> str | None: ...
    def partition(self, topic_id: str, partition_id: int) -> PartitionState | None: ...
    def config(self, resource_type: int, resource_name: str, name: str) -> str | None: ...
    def acl(self, acl_id: str) -> AclEntry | None: ...
    def acl_id_of(self, binding: tuple[int, str, int, str, str, int, int]) -> str | None: ...
    def feature_level(self, name: str) -> int: ...

    def put_broker(self, broker_id: int, reg: BrokerRegistration | None) -> None: ...
    def put_topic(self, topic_id: str, name: str) -> None: ...
    def drop_topic(self, topic_id: str) -> None: ...
    def put_partition(self, topic_id: str, partition_id: int, state: PartitionState) -> None: ...
    def put_config(self, resource_type: int, resource_name: str, name: str, value: str | None) -> None: ...
    def drop_config_resource(self, resource_type: int, resource_name: str) -> None: ...
    def put_acl(self, acl_id: str, entry: AclEntry | None) -> None: ...
    def put_feature(self, name: str, level: int) -> None: ...
    def set_cluster_id(self, cluster_id: str) -> None: ...
    def set_position(self, offset: int, epoch: int) -> None: ...


# --- the image ----------------------------------------------------------------------------------


class MetadataImage:
    """The committed metadata state at (`last_offset`, `last_epoch`); -1 / 0 when nothing is applied."""

    def __init__(self) -> None:
        self.last_offset = -1
        self.last_epoch = 0
        self.cluster_id: str | None = None
        self._brokers: dict[int, BrokerRegistration] = {}
        self._topic_names: dict[str, str] = {}
        self._topic_ids: dict[str, str] = {}
        self._partitions: dict[str, dict[int, PartitionState]] = {}
        self._configs: dict[ConfigKey, dict[str, str]] = {}
        self._acls: dict[str, AclEntry] = {}
        self._acl_bindings: dict[tuple[int, str, int, str, str, int, int], str] = {}
        self._features: dict[str, int] = {}

    # reads
    def broker(self, broker_id: int) -> BrokerRegistration | None:
        return self._brokers.get(broker_id)

    def topic_name(self, topic_id: str) -> str | None:
        return self._topic_names.get(topic_id)

    def topic_id(self, name: str) -> str | None:
        return self._topic_ids.get(name)

    def partition(self, topic_id: str, partition_id: int) -> PartitionState | None:
        parts = self._partitions.get(topic_id)
        return None if parts is None else parts.get(partition_id)

    def config(self, resource_type: int, resource_name: str, name: str) -> str | None:
        configs = self._configs.get((resource_type, resource_name))
        return None if configs is None else configs.get(name)

    def acl(self, acl_id: str) -> AclEntry | None:
        return self._acls.get(acl_id)

    def acl_id_of(self, binding: tuple[int, str, int, str, str, int, int]) -> str | None:
        return self._acl_bindings.get(binding)

    def feature_level(self, name: str) -> int:
        return self._features.get(name, 0)

    @property
    def brokers(self) -> Mapping[int, BrokerRegistration]:
        return MappingProxyType(self._brokers)

    @property
    def topics(self) -> Mapping[str, str]:
        """topic_id -> name."""
        return MappingProxyType(self._topic_names)

    @property
    def topic_ids(self) -> Mapping[str, str]:
        """name -> topic_id."""
        return MappingProxyType(self._topic_ids)

    def partitions(self, topic_id: str) -> Mapping[int, PartitionState]:
        return MappingProxyType(self._partitions.get(topic_id, {}))

    def configs(self, resource_type: int, resource_name: str) -> Mapping[str, str]:
        return MappingProxyType(self._configs.get((resource_type, resource_name), {}))

    @property
    def config_resources(self) -> list[ConfigKey]:
        return sorted(self._configs)

    @property
    def acls(self) -> Mapping[str, AclEntry]:
        return MappingProxyType(self._acls)

    @property
    def features(self) -> Mapping[str, int]:
        return MappingProxyType(self._features)

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    # writes (only through replay)
    def put_broker(self, broker_id: int, reg: BrokerRegistration | None) -> None:
        if reg is None:
            self._brokers.pop(broker_id, None)
        else:
            self._brokers[broker_id] = reg

    def put_topic(self, topic_id: str, name: str) -> None:
        self._topic_names[topic_id] = name
        self._topic_ids[name] = topic_id
        self._partitions.setdefault(topic_id, {})

    def drop_topic(self, topic_id: str) -> None:
        name = self._topic_names.pop(topic_id, None)
        if name is not None:
            del self._topic_ids[name]
        self._partitions.pop(topic_id, None)

    def put_partition(self, topic_id: str, partition_id: int, state: PartitionState) -> None:
        self._partitions[topic_id][partition_id] = state

    def put_config(self, resource_type: int, resource_name: str, name: str, value: str | None) -> None:
        key = (resource_type, resource_name)
        if value is not None:
            self._configs.setdefault(key, {})[name] = value
            return
        configs = self._configs.get(key)
        if configs is not None:
            configs.pop(name, None)
            if not configs:
                del self._configs[key]

    def drop_config_resource(self, resource_type: int, resource_name: str) -> None:
        self._configs.pop((resource_type, resource_name), None)

    def put_acl(self, acl_id: str, entry: AclEntry | None) -> None:
        old = self._acls.pop(acl_id, None)
        if old is not None:
            del self._acl_bindings[old.binding]
        if entry is not None:
            self._acls[acl_id] = entry
            self._acl_bindings[entry.binding] = acl_id

    def put_feature(self, name: str, level: int) -> None:
        if level == 0:
            self._features.pop(name, None)
        else:
            self._features[name] = level

    def set_cluster_id(self, cluster_id: str) -> None:
        self.cluster_id = cluster_id

    def set_position(self, offset: int, epoch: int) -> None:
        self.last_offset = offset
        self.last_epoch = epoch

    # applying committed batches
    def apply_batch(self, batch: RecordBatch) -> None:
        """Apply one committed batch atomically; on MetadataImageError the image is unchanged."""
        delta = MetadataDelta(self)
        delta.replay_batch(batch)
        self.apply_delta(delta)

    def apply_batches(self, batches: list[RecordBatch]) -> None:
        for batch in batches:
            self.apply_batch(batch)

    def apply_delta(self, delta: MetadataDelta) -> None:
        """Commit a delta built directly on this image (and nothing applied to the image since)."""
        if delta.base is not self or delta.base_offset != self.last_offset:
            raise MetadataImageError("delta was not built on this image at its current offset")
        delta.commit()

    def copy(self) -> MetadataImage:
        other = MetadataImage()
        other.last_offset, other.last_epoch, other.cluster_id = self.last_offset, self.last_epoch, self.cluster_id
        other._brokers = dict(self._brokers)
        other._topic_names = dict(self._topic_names)
        other._topic_ids = dict(self._topic_ids)
        other._partitions = {tid: dict(parts) for tid, parts in self._partitions.items()}
        other._configs = {key: dict(configs) for key, configs in self._configs.items()}
        other._acls = dict(self._acls)
        other._acl_bindings = dict(self._acl_bindings)
        other._features = dict(self._features)
        return other

    # the canonical form, for dumps, checkers and snapshots
    def to_records(self) -> Iterator[MetadataRecord]:
        """Records that rebuild this state when replayed into an empty image (the snapshot body)."""
        for name in sorted(self._features):
            yield FeatureLevelRecord(name, self._features[name])
        for broker_id in sorted(self._brokers):
            b = self._brokers[broker_id]
            yield RegisterBrokerRecord(
                b.broker_id,
                b.incarnation_id,
                b.broker_epoch,
                b.endpoints,
                dict(b.features),
                b.rack,
                b.fenced,
                b.in_controlled_shutdown,
            )
        for name in sorted(self._topic_ids):
            topic_id = self._topic_ids[name]
            yield TopicRecord(name, topic_id)
            parts = self._partitions[topic_id]
            for pid in sorted(parts):
                p = parts[pid]
                yield PartitionRecord(
                    pid,
                    topic_id,
                    p.replicas,
                    p.isr,
                    p.removing_replicas,
                    p.adding_replicas,
                    p.leader,
                    p.leader_epoch,
                    p.partition_epoch,
                )
        for key in sorted(self._configs):
            configs = self._configs[key]
            for name in sorted(configs):
                yield ConfigRecord(key[0], key[1], name, configs[name])
        for acl_id in sorted(self._acls):
            a = self._acls[acl_id]
            yield AccessControlEntryRecord(a.id, *a.binding)

    def record_count(self) -> int:
        return (
            len(self._features)
            + len(self._brokers)
            + len(self._topic_names)
            + sum(len(p) for p in self._partitions.values())
            + sum(len(c) for c in self._configs.values())
            + len(self._acls)
        )

    def as_dict(self, with_position: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "cluster_id": self.cluster_id,
            "features": dict(sorted(self._features.items())),
            "brokers": [
                {
                    "broker_id": b.broker_id,
                    "incarnation_id": b.incarnation_id,
                    "broker_epoch": b.broker_epoch,
                    "endpoints": [list(e) for e in b.endpoints],
                    "features": {n: list(b.features[n]) for n in sorted(b.features)},
                    "rack": b.rack,
                    "fenced": b.fenced,
                    "in_controlled_shutdown": b.in_controlled_shutdown,
                }
                for _, b in sorted(self._brokers.items())
            ],
            "topics": [
                {
                    "name": name,
                    "topic_id": tid,
                    "partitions": [
                        {
                            "partition_id": pid,
                            "replicas": list(p.replicas),
                            "isr": list(p.isr),
                            "removing_replicas": list(p.removing_replicas),
                            "adding_replicas": list(p.adding_replicas),
                            "leader": p.leader,
                            "leader_epoch": p.leader_epoch,
                            "partition_epoch": p.partition_epoch,
                        }
                        for pid, p in sorted(self._partitions[tid].items())
                    ],
                }
                for name, tid in sorted(self._topic_ids.items())
            ],
            "configs": [
                {"resource_type": key[0], "resource_name": key[1], "configs": dict(sorted(configs.items()))}
                for key, configs in sorted(self._configs.items())
            ],
            "acls": [
                {
                    "id": a.id,
                    "resource_type": a.resource_type,
                    "resource_name": a.resource_name,
                    "pattern_type": a.pattern_type,
                    "principal": a.principal,
                    "host": a.host,
                    "operation": a.operation,
                    "permission_type": a.permission_type,
                }
                for _, a in sorted(self._acls.items())
            ],
        }
        if with_position:
            out["last_offset"] = self.last_offset
            out["last_epoch"] = self.last_epoch
        return out

    def to_json(self, with_position: bool = True) -> str:
        """Canonical JSON: sorted keys, no whitespace; equal states give equal text."""
        return json.dumps(self.as_dict(with_position), sort_keys=True, separators=(",", ":"))

    def digest(self, with_position: bool = True) -> str:
        """SHA-256 (hex) of `to_json()`; `with_position=False` compares states at different offsets."""
        return hashlib.sha256(self.to_json(with_position).encode()).hexdigest()

    def fingerprint(self) -> int:
        """A hash of what `as_dict()` holds, position included, for comparing images inside one process.

        Equal states give equal fingerprints, different states different ones unless two 64-bit hashes
        collide: the same test as comparing `digest()`s, at about a twentieth of the cost. The simulator
        compares every node's image after every apply, and the canonical JSON behind `digest()` was the
        largest single cost of a simulated run under many faults. Python hashes strings with a
        per-process seed, so a fingerprint means nothing outside the process that computed it: store
        or print `digest()` instead.
        """
        brokers = frozenset(
            (
                b.broker_id,
                b.incarnation_id,
                b.broker_epoch,
                b.endpoints,
                frozenset(b.features.items()),
                b.rack,
                b.fenced,
                b.in_controlled_shutdown,
            )
            for b in self._brokers.values()
        )
        partitions = self._partitions
        topics = frozenset((name, tid, frozenset(partitions[tid].items())) for name, tid in self._topic_ids.items())
        configs = frozenset((key, frozenset(configs.items())) for key, configs in self._configs.items())
        return hash(
            (
                self.last_offset,
                self.last_epoch,
                self.cluster_id,
                frozenset(self._features.items()),
                brokers,
                topics,
                configs,
                frozenset(self._acls.values()),
            )
        )

    def _state(self) -> tuple[Any, ...]:
        return (
            self.last_offset,
            self.last_epoch,
            self.cluster_id,
            self._brokers,
            self._topic_names,
            self._partitions,
            self._configs,
            self._acls,
            self._features,
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MetadataImage) and self._state() == other._state()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"MetadataImage(offset={self.last_offset}, epoch={self.last_epoch}, brokers={len(self._brokers)}, "
            f"topics={len(self._topic_names)}, configs={len(self._configs)}, acls={len(self._acls)})"
        )


# --- the delta ----------------------------------------------------------------------------------


class MetadataDelta:
    """Changes on top of a base view, readable as if applied, committed to the base only on `commit()`.

    Deltas stack: a controller can keep one per in-flight batch on top of the committed image and
    fold them in order as they commit, or drop them all when it loses leadership.
    """

    def __init__(self, base: MetadataImage | MetadataDelta) -> None:
        self.base = base
        self.base_offset = base.last_offset
        self.last_offset = base.last_offset
        self.last_epoch = base.last_epoch
        self.cluster_id = base.cluster_id
        self._writes: list[tuple[Any, ...]] = []
        self._brokers: dict[int, BrokerRegistration | None] = {}
        self._topic_names: dict[str, str | None] = {}
        self._topic_ids: dict[str, str | None] = {}
        self._dropped_topics: set[str] = set()
        self._partitions: dict[str, dict[int, PartitionState]] = {}
        self._configs: dict[tuple[int, str, str], str | None] = {}
        self._dropped_resources: set[ConfigKey] = set()
        self._acls: dict[str, AclEntry | None] = {}
        self._acl_bindings: dict[tuple[int, str, int, str, str, int, int], str | None] = {}
        self._features: dict[str, int] = {}

    @property
    def records_written(self) -> int:
        return len(self._writes)

    # reads through the overlay
    def broker(self, broker_id: int) -> BrokerRegistration | None:
        if broker_id in self._brokers:
            return self._brokers[broker_id]
        return self.base.broker(broker_id)

    def topic_name(self, topic_id: str) -> str | None:
        if topic_id in self._topic_names:
            return self._topic_names[topic_id]
        return self.base.topic_name(topic_id)

    def topic_id(self, name: str) -> str | None:
        if name in self._topic_ids:
            return self._topic_ids[name]
        return self.base.topic_id(name)

    def partition(self, topic_id: str, partition_id: int) -> PartitionState | None:
        parts = self._partitions.get(topic_id)
        if parts is not None and partition_id in parts:
            return parts[partition_id]
        if topic_id in self._dropped_topics:
            return None
        return self.base.partition(topic_id, partition_id)

    def config(self, resource_type: int, resource_name: str, name: str) -> str | None:
        key = (resource_type, resource_name, name)
        if key in self._configs:
            return self._configs[key]
        if (resource_type, resource_name) in self._dropped_resources:
            return None
        return self.base.config(resource_type, resource_name, name)

    def acl(self, acl_id: str) -> AclEntry | None:
        if acl_id in self._acls:
            return self._acls[acl_id]
        return self.base.acl(acl_id)

    def acl_id_of(self, binding: tuple[int, str, int, str, str, int, int]) -> str | None:
        if binding in self._acl_bindings:
            return self._acl_bindings[binding]
        return self.base.acl_id_of(binding)

    def feature_level(self, name: str) -> int:
        if name in self._features:
            return self._features[name]
        return self.base.feature_level(name)

    # writes: recorded for commit, mirrored in the overlay
    def put_broker(self, broker_id: int, reg: BrokerRegistration | None) -> None:
        self._writes.append(("put_broker", broker_id, reg))
        self._brokers[broker_id] = reg

    def put_topic(self, topic_id: str, name: str) -> None:
        self._writes.append(("put_topic", topic_id, name))
        self._topic_names[topic_id] = name
        self._topic_ids[name] = topic_id

    def drop_topic(self, topic_id: str) -> None:
        self._writes.append(("drop_topic", topic_id))
        name = self.topic_name(topic_id)
        self._topic_names[topic_id] = None
        if name is not None:
            self._topic_ids[name] = None
        self._dropped_topics.add(topic_id)
        self._partitions.pop(topic_id, None)

    def put_partition(self, topic_id: str, partition_id: int, state: PartitionState) -> None:
        self._writes.append(("put_partition", topic_id, partition_id, state))
        self._partitions.setdefault(topic_id, {})[partition_id] = state

    def put_config(self, resource_type: int, resource_name: str, name: str, value: str | None) -> None:
        self._writes.append(("put_config", resource_type, resource_name, name, value))
        self._configs[(resource_type, resource_name, name)] = value

    def drop_config_resource(self, resource_type: int, resource_name: str) -> None:
        self._writes.append(("drop_config_resource", resource_type, resource_name))
        for key in [k for k in self._configs if k[0] == resource_type and k[1] == resource_name]:
            del self._configs[key]
        self._dropped_resources.add((resource_type, resource_name))

    def put_acl(self, acl_id: str, entry: AclEntry | None) -> None:
        self._writes.append(("put_acl", acl_id, entry))
        old = self.acl(acl_id)
        if old is not None:
            self._acl_bindings[old.binding] = None
        self._acls[acl_id] = entry
        if entry is not None:
            self._acl_bindings[entry.binding] = acl_id

    def put_feature(self, name: str, level: int) -> None:
        self._writes.append(("put_feature", name, level))
        self._features[name] = level

    def set_cluster_id(self, cluster_id: str) -> None:
        self._writes.append(("set_cluster_id", cluster_id))
        self.cluster_id = cluster_id

    def set_position(self, offset: int, epoch: int) -> None:
        self.last_offset = offset
        self.last_epoch = epoch

    # replay
    def replay(self, record: MetadataRecord, offset: int, epoch: int) -> None:
        """Validate and apply one record as if it were at `offset` (MetadataImageError on violation)."""
        _replay(self, record, offset)
        self.set_position(offset, epoch)

    def replay_batch(self, batch: RecordBatch) -> None:
        """Validate and apply a raft batch: data records are decoded; control records are read for the
        clusterId and otherwise only advance the offset."""
        if batch.base_offset != self.last_offset + 1:
            raise MetadataImageError(
                f"offset {batch.base_offset}: batch does not follow the last applied offset {self.last_offset}"
            )
        if batch.epoch < self.last_epoch:
            raise MetadataImageError(f"offset {batch.base_offset}: epoch {batch.epoch} after epoch {self.last_epoch}")
        offset = batch.base_offset
        for payload in batch.records:
            if batch.control:
                _replay_control(self, payload, offset)
            else:
                try:
                    record = decode_record(payload)
                except MetadataRecordError as exc:
                    raise MetadataImageError(f"offset {offset}: {exc}") from None
                _replay(self, record, offset)
            offset += 1
        self.set_position(batch.last_offset, batch.epoch)

    def commit(self) -> None:
        """Write every change into the base, in order. The delta must not be used afterwards."""
        base = self.base
        if base.last_offset != self.base_offset:
            raise MetadataImageError(f"base moved from offset {self.base_offset} to {base.last_offset} under a delta")
        for write in self._writes:
            getattr(base, write[0])(*write[1:])
        base.set_position(self.last_offset, self.last_epoch)
        self._writes = []


def build_image(batches: list[RecordBatch], image: MetadataImage | None = None) -> MetadataImage:
    """Replay batches into `image` (a new empty one by default) and return it."""
    image = MetadataImage() if image is None else image
    image.apply_batches(batches)
    return image


# --- replay rules -------------------------------------------------------------------------------


def _fail(offset: int, record: Any, reason: str) -> MetadataImageError:
    return MetadataImageError(f"offset {offset}: {type(record).__name__}: {reason}")


def _replay_control(view: MetadataView, payload: bytes, offset: int) -> None:
    try:
        message = decode_control(payload)
    except CorruptBatchError as exc:
        raise MetadataImageError(f"offset {offset}: {exc}") from None
    if isinstance(message, ClusterIdMessage):
        if view.cluster_id is not None and view.cluster_id != message.cluster_id:
            raise MetadataImageError(
                f"offset {offset}: clusterId {message.cluster_id!r} after clusterId {view.cluster_id!r}"
            )
        view.set_cluster_id(message.cluster_id)


def _check_partition(offset: int, record: Any, state: PartitionState) -> None:
    replicas = state.replicas
    members = set(replicas)
    if not replicas or len(members) != len(replicas) or min(replicas) < 0:
        raise _fail(offset, record, f"replicas {list(replicas)} must be distinct broker ids, at least one")
    isr = state.isr
    if len(set(isr)) != len(isr) or not members.issuperset(isr):
        raise _fail(offset, record, f"isr {list(isr)} must be distinct members of replicas {list(replicas)}")
    if state.removing_replicas or state.adding_replicas:
        for what, ids in (("removing_replicas", state.removing_replicas), ("adding_replicas", state.adding_replicas)):
            if len(set(ids)) != len(ids) or not members.issuperset(ids):
                raise _fail(offset, record, f"{what} {list(ids)} must be distinct members of replicas")
    if state.leader != NO_LEADER and state.leader not in isr:
        raise _fail(offset, record, f"leader {state.leader} is not in the isr {list(isr)}")
    if state.leader_epoch < 0 or state.partition_epoch < 0:
        raise _fail(offset, record, "epochs must not be negative")


def _broker_at_epoch(view: MetadataView, offset: int, record: Any, broker_id: int, epoch: int) -> BrokerRegistration:
    reg = view.broker(broker_id)
    if reg is None:
        raise _fail(offset, record, f"broker {broker_id} is not registered")
    if reg.broker_epoch != epoch:
        raise _fail(offset, record, f"broker {broker_id} has epoch {reg.broker_epoch}, not {epoch}")
    return reg


def _with(reg: BrokerRegistration, fenced: bool | None, in_controlled_shutdown: bool | None) -> BrokerRegistration:
    return BrokerRegistration(
        reg.broker_id,
        reg.incarnation_id,
        reg.broker_epoch,
        reg.endpoints,
        reg.features,
        reg.rack,
        reg.fenced if fenced is None else fenced,
        reg.in_controlled_shutdown if in_controlled_shutdown is None else in_controlled_shutdown,
    )


def _replay_register(view: MetadataView, r: RegisterBrokerRecord, offset: int) -> None:
    if r.broker_id < 0:
        raise _fail(offset, r, f"broker id {r.broker_id} is negative")
    old = view.broker(r.broker_id)
    if old is not None and r.broker_epoch <= old.broker_epoch:
        raise _fail(offset, r, f"broker {r.broker_id} epoch {r.broker_epoch} is not above {old.broker_epoch}")
    names = [e[0] for e in r.endpoints]
    if len(set(names)) != len(names):
        raise _fail(offset, r, f"duplicate endpoint names {names}")
    for name, (low, high) in r.features.items():
        if low > high:
            raise _fail(offset, r, f"feature {name} range {low}..{high} is empty")
    view.put_broker(
        r.broker_id,
        BrokerRegistration(
            r.broker_id,
            r.incarnation_id,
            r.broker_epoch,
            tuple(BrokerEndpoint(*e) for e in r.endpoints),
            MappingProxyType({n: (lo, hi) for n, (lo, hi) in sorted(r.features.items())}),
            r.rack,
            r.fenced,
            r.in_controlled_shutdown,
        ),
    )


def _replay_partition(view: MetadataView, r: PartitionRecord, offset: int) -> None:
    if view.topic_name(r.topic_id) is None:
        raise _fail(offset, r, f"unknown topic {r.topic_id}")
    if r.partition_id < 0:
        raise _fail(offset, r, f"partition id {r.partition_id} is negative")
    if view.partition(r.topic_id, r.partition_id) is not None:
        raise _fail(offset, r, f"partition {r.topic_id}-{r.partition_id} already exists")
    state = PartitionState(
        tuple(r.replicas),
        tuple(r.isr),
        tuple(r.removing_replicas),
        tuple(r.adding_replicas),
        r.leader,
        r.leader_epoch,
        r.partition_epoch,
    )
    _check_partition(offset, r, state)
    view.put_partition(r.topic_id, r.partition_id, state)


def _replay_partition_change(view: MetadataView, r: PartitionChangeRecord, offset: int) -> None:
    old = view.partition(r.topic_id, r.partition_id)
    if old is None:
        raise _fail(offset, r, f"unknown partition {r.topic_id}-{r.partition_id}")
    state = PartitionState(
        old.replicas if r.replicas is None else tuple(r.replicas),
        old.isr if r.isr is None else tuple(r.isr),
        old.removing_replicas if r.removing_replicas is None else tuple(r.removing_replicas),
        old.adding_replicas if r.adding_replicas is None else tuple(r.adding_replicas),
        old.leader if r.leader is None else r.leader,
        old.leader_epoch if r.leader is None else old.leader_epoch + 1,
        old.partition_epoch + 1,
    )
    if r.leader is not None and r.leader < NO_LEADER:
        raise _fail(offset, r, f"leader {r.leader} is not a broker id or -1")
    _check_partition(offset, r, state)
    view.put_partition(r.topic_id, r.partition_id, state)


def _replay_config(view: MetadataView, r: ConfigRecord, offset: int) -> None:
    if r.resource_type == ConfigResourceType.TOPIC:
        if view.topic_id(r.resource_name) is None:
            raise _fail(offset, r, f"unknown topic {r.resource_name!r}")
    elif r.resource_type == ConfigResourceType.BROKER:
        if r.resource_name and not (r.resource_name.isascii() and r.resource_name.isdigit()):
            raise _fail(offset, r, f"broker resource name {r.resource_name!r} is neither '' nor a broker id")
    else:
        raise _fail(offset, r, f"unsupported resource type {r.resource_type}")
    if not r.name:
        raise _fail(offset, r, "empty config name")
    view.put_config(r.resource_type, r.resource_name, r.name, r.value)


_CONCRETE_RESOURCES = frozenset(range(ResourceType.TOPIC, ResourceType.USER + 1))
_CONCRETE_PATTERNS = frozenset((PatternType.LITERAL, PatternType.PREFIXED))
_CONCRETE_OPERATIONS = frozenset(range(AclOperation.ALL, AclOperation.DESCRIBE_TOKENS + 1))
_CONCRETE_PERMISSIONS = frozenset((AclPermissionType.DENY, AclPermissionType.ALLOW))


def _replay_acl(view: MetadataView, r: AccessControlEntryRecord, offset: int) -> None:
    if view.acl(r.id) is not None:
        raise _fail(offset, r, f"ACL {r.id} already exists")
    for what, value, allowed in (
        ("resource_type", r.resource_type, _CONCRETE_RESOURCES),
        ("pattern_type", r.pattern_type, _CONCRETE_PATTERNS),
        ("operation", r.operation, _CONCRETE_OPERATIONS),
        ("permission_type", r.permission_type, _CONCRETE_PERMISSIONS),
    ):
        if value not in allowed:
            raise _fail(offset, r, f"{what} {value} is not a concrete value")
    if ":" not in r.principal or not r.host or not r.resource_name:
        raise _fail(offset, r, f"principal {r.principal!r}, host {r.host!r}, resource {r.resource_name!r} malformed")
    entry = AclEntry(
        r.id, r.resource_type, r.resource_name, r.pattern_type, r.principal, r.host, r.operation, r.permission_type
    )
    existing = view.acl_id_of(entry.binding)
    if existing is not None:
        raise _fail(offset, r, f"the same ACL already exists as {existing}")
    view.put_acl(r.id, entry)


def _replay_fence(view: MetadataView, r: FenceBrokerRecord | UnfenceBrokerRecord, offset: int) -> None:
    reg = _broker_at_epoch(view, offset, r, r.id, r.epoch)
    view.put_broker(r.id, _with(reg, isinstance(r, FenceBrokerRecord), None))


def _replay_registration_change(view: MetadataView, r: BrokerRegistrationChangeRecord, offset: int) -> None:
    reg = _broker_at_epoch(view, offset, r, r.broker_id, r.broker_epoch)
    view.put_broker(r.broker_id, _with(reg, r.fenced, r.in_controlled_shutdown))


def _replay_unregister(view: MetadataView, r: UnregisterBrokerRecord, offset: int) -> None:
    _broker_at_epoch(view, offset, r, r.broker_id, r.broker_epoch)
    view.put_broker(r.broker_id, None)


def _replay_topic(view: MetadataView, r: TopicRecord, offset: int) -> None:
    if not r.name:
        raise _fail(offset, r, "empty topic name")
    if view.topic_id(r.name) is not None:
        raise _fail(offset, r, f"topic {r.name!r} already exists")
    if view.topic_name(r.topic_id) is not None:
        raise _fail(offset, r, f"topic id {r.topic_id} already exists")
    view.put_topic(r.topic_id, r.name)


def _replay_remove_topic(view: MetadataView, r: RemoveTopicRecord, offset: int) -> None:
    name = view.topic_name(r.topic_id)
    if name is None:
        raise _fail(offset, r, f"unknown topic {r.topic_id}")
    view.drop_topic(r.topic_id)
    view.drop_config_resource(ConfigResourceType.TOPIC, name)


def _replay_remove_acl(view: MetadataView, r: RemoveAccessControlEntryRecord, offset: int) -> None:
    if view.acl(r.id) is None:
        raise _fail(offset, r, f"unknown ACL {r.id}")
    view.put_acl(r.id, None)


def _replay_feature(view: MetadataView, r: FeatureLevelRecord, offset: int) -> None:
    if not r.name or r.feature_level < 0:
        raise _fail(offset, r, f"feature {r.name!r} level {r.feature_level}")
    view.put_feature(r.name, r.feature_level)


_REPLAY: dict[type, Callable[[MetadataView, Any, int], None]] = {
    RegisterBrokerRecord: _replay_register,
    UnregisterBrokerRecord: _replay_unregister,
    TopicRecord: _replay_topic,
    PartitionRecord: _replay_partition,
    ConfigRecord: _replay_config,
    PartitionChangeRecord: _replay_partition_change,
    FenceBrokerRecord: _replay_fence,
    UnfenceBrokerRecord: _replay_fence,
    RemoveTopicRecord: _replay_remove_topic,
    FeatureLevelRecord: _replay_feature,
    BrokerRegistrationChangeRecord: _replay_registration_change,
    AccessControlEntryRecord: _replay_acl,
    RemoveAccessControlEntryRecord: _replay_remove_acl,
}


def _replay(view: MetadataView, record: MetadataRecord, offset: int) -> None:
    handler = _REPLAY.get(type(record))
    if handler is None:
        raise MetadataImageError(f"offset {offset}: not a metadata record: {type(record).__name__}")
    handler(view, record, offset)
