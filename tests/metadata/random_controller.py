"""A tiny seeded "controller" that writes only valid metadata batches, for property tests.

It keeps its own small model of the cluster (independent of `MetadataImage`) and emits what a
correct controller would: broker epochs equal to the registration offset, fencing together with the
partition changes that take the broker out of every ISR, topics with their partitions and configs,
ISR changes that keep the leader inside the ISR, ACLs, feature levels, and LeaderChange control batches.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field

from node.metadata.records import (
    NO_LEADER,
    AccessControlEntryRecord,
    BrokerEndpoint,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    encode_records,
)
from node.protocol.acls import AclOperation, AclPermissionType, PatternType, ResourceType
from node.protocol.admin import ConfigResourceType
from node.raft.records import (
    ClusterIdMessage,
    LeaderChangeMessage,
    RecordBatch,
    encode_control,
)

CONFIG_NAMES = ("retention.ms", "cleanup.policy", "min.insync.replicas", "segment.bytes")


@dataclass
class _Partition:
    replicas: list[int]
    isr: list[int]
    leader: int


@dataclass
class RandomController:
    rng: random.Random
    epoch: int = 1
    next_offset: int = 0
    brokers: dict[int, tuple[int, bool]] = field(default_factory=dict)  # id -> (epoch, fenced)
    topics: dict[str, tuple[str, dict[int, _Partition]]] = field(default_factory=dict)
    configs: set[tuple[int, str, str]] = field(default_factory=set)
    acls: list[str] = field(default_factory=list)
    topic_seq: int = 0

    def uuid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128)))

    def batches(self, n: int) -> list[RecordBatch]:
        out = [self._control(with_cluster_id=True)]
        while len(out) < n:
            out.append(self.next_batch())
        return out

    def next_batch(self) -> RecordBatch:
        if self.rng.random() < 0.05:
            self.epoch += 1
            return self._control()
        records = self._records()
        batch = RecordBatch(self.next_offset, self.epoch, encode_records(records))
        self.next_offset += len(records)
        return batch

    def _control(self, with_cluster_id: bool = False) -> RecordBatch:
        payloads = [encode_control(LeaderChangeMessage(1 + self.epoch % 3, (1, 2, 3)))]
        if with_cluster_id:
            payloads.append(encode_control(ClusterIdMessage(self.uuid())))
        batch = RecordBatch(self.next_offset, self.epoch, tuple(payloads), control=True)
        self.next_offset += len(payloads)
        return batch

    def _records(self) -> list[MetadataRecord]:
        choices = [self._register, self._create_topic, self._create_topic, self._config, self._feature, self._add_acl]
        if self.brokers:
            choices += [self._fence, self._unfence, self._unfence, self._shutdown]
            if len(self.brokers) > 3:
                choices.append(self._unregister)
        if self.topics:
            choices += [self._isr_change, self._isr_change, self._isr_change, self._config]
            if len(self.topics) > 3:
                choices.append(self._delete_topic)
        if self.acls:
            choices.append(self._remove_acl)
        while True:
            records = self.rng.choice(choices)()
            if records:
                return records

    def _live(self) -> list[int]:
        return sorted(b for b, (_, fenced) in self.brokers.items() if not fenced)

    def _register(self) -> list[MetadataRecord]:
        broker_id = self.rng.randrange(8)
        epoch = self.next_offset  # the broker epoch is the offset of the registration record
        self.brokers[broker_id] = (epoch, True)
        endpoint = BrokerEndpoint("PLAINTEXT", f"10.0.0.{broker_id}", 9092, 0)
        rack = self.rng.choice([None, "r1", "r2"])
        return [RegisterBrokerRecord(broker_id, self.uuid(), epoch, (endpoint,), {"metadata.version": (1, 9)}, rack)]

    def _leave_isrs(self, broker_id: int) -> list[MetadataRecord]:
        changes: list[MetadataRecord] = []
        for topic_id, parts in self.topics.values():
            for pid, p in sorted(parts.items()):
                if broker_id not in p.isr:
                    continue
                isr = [b for b in p.isr if b != broker_id] or p.isr
                leader = p.leader
                if leader == broker_id:
                    others = [b for b in isr if b != broker_id]
                    leader = others[0] if others else NO_LEADER
                moved = leader != p.leader
                p.isr, p.leader = isr, leader
                changes.append(PartitionChangeRecord(pid, topic_id, isr=tuple(isr), leader=leader if moved else None))
        return changes

    def _fence(self) -> list[MetadataRecord]:
        broker_id = self.rng.choice(sorted(self.brokers))
        epoch, _ = self.brokers[broker_id]
        self.brokers[broker_id] = (epoch, True)
        return [FenceBrokerRecord(broker_id, epoch), *self._leave_isrs(broker_id)]

    def _unfence(self) -> list[MetadataRecord]:
        broker_id = self.rng.choice(sorted(self.brokers))
        epoch, _ = self.brokers[broker_id]
        self.brokers[broker_id] = (epoch, False)
        return [UnfenceBrokerRecord(broker_id, epoch)]

    def _shutdown(self) -> list[MetadataRecord]:
        broker_id = self.rng.choice(sorted(self.brokers))
        epoch, _ = self.brokers[broker_id]
        return [BrokerRegistrationChangeRecord(broker_id, epoch, None, True)]

    def _unregister(self) -> list[MetadataRecord]:
        broker_id = self.rng.choice(sorted(self.brokers))
        epoch, _ = self.brokers.pop(broker_id)
        return [UnregisterBrokerRecord(broker_id, epoch), *self._leave_isrs(broker_id)]

    def _create_topic(self) -> list[MetadataRecord]:
        live = self._live()
        if not live:
            return []
        self.topic_seq += 1
        name = f"t{self.topic_seq}"
        topic_id = self.uuid()
        parts: dict[int, _Partition] = {}
        records: list[MetadataRecord] = [TopicRecord(name, topic_id)]
        for pid in range(self.rng.randrange(1, 4)):
            replicas = self.rng.sample(live, min(len(live), 3))
            parts[pid] = _Partition(replicas, list(replicas), replicas[0])
            records.append(PartitionRecord(pid, topic_id, tuple(replicas), tuple(replicas), leader=replicas[0]))
        self.topics[name] = (topic_id, parts)
        if self.rng.random() < 0.5:
            records.append(ConfigRecord(ConfigResourceType.TOPIC, name, "retention.ms", str(self.rng.randrange(10**6))))
            self.configs.add((ConfigResourceType.TOPIC, name, "retention.ms"))
        return records

    def _delete_topic(self) -> list[MetadataRecord]:
        name = self.rng.choice(sorted(self.topics))
        topic_id, _ = self.topics.pop(name)
        self.configs = {c for c in self.configs if c[:2] != (ConfigResourceType.TOPIC, name)}
        return [RemoveTopicRecord(topic_id)]

    def _isr_change(self) -> list[MetadataRecord]:
        name = self.rng.choice(sorted(self.topics))
        topic_id, parts = self.topics[name]
        pid = self.rng.choice(sorted(parts))
        p = parts[pid]
        isr = [b for b in p.replicas if self.rng.random() < 0.7] or [p.replicas[0]]
        change_leader = p.leader not in isr or self.rng.random() < 0.3
        leader = self.rng.choice(isr) if change_leader else p.leader
        p.isr, p.leader = isr, leader
        return [PartitionChangeRecord(pid, topic_id, isr=tuple(isr), leader=leader if change_leader else None)]

    def _config(self) -> list[MetadataRecord]:
        if self.topics and self.rng.random() < 0.6:
            key = (ConfigResourceType.TOPIC, self.rng.choice(sorted(self.topics)))
        else:
            key = (ConfigResourceType.BROKER, self.rng.choice(["", "1", "2"]))
        name = self.rng.choice(CONFIG_NAMES)
        if (*key, name) in self.configs and self.rng.random() < 0.4:
            self.configs.discard((*key, name))
            return [ConfigRecord(key[0], key[1], name, None)]
        self.configs.add((*key, name))
        return [ConfigRecord(key[0], key[1], name, str(self.rng.randrange(1000)))]

    def _feature(self) -> list[MetadataRecord]:
        return [FeatureLevelRecord(self.rng.choice(["metadata.version", "kraft.version"]), self.rng.randrange(0, 5))]

    def _add_acl(self) -> list[MetadataRecord]:
        acl_id = self.uuid()
        self.acls.append(acl_id)
        return [
            AccessControlEntryRecord(
                acl_id,
                ResourceType.TOPIC,
                f"t{self.rng.randrange(100)}-{acl_id[:8]}",
                self.rng.choice([PatternType.LITERAL, PatternType.PREFIXED]),
                f"User:u{self.rng.randrange(5)}",
                "*",
                self.rng.choice([AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE_CONFIGS]),
                self.rng.choice([AclPermissionType.ALLOW, AclPermissionType.DENY]),
            )
        ]

    def _remove_acl(self) -> list[MetadataRecord]:
        acl_id = self.acls.pop(self.rng.randrange(len(self.acls)))
        return [RemoveAccessControlEntryRecord(acl_id)]
