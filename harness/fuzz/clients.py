"""The `clients` target: brokers and admin clients sending the combined node requests built from its image.

The `controller` and `broker` targets sample ids, epochs and names that seldom exist on the node, so
most requests stop at "unknown topic" or "stale epoch": in 40,000 inputs they ran about half of the
controller's AlterPartition and config code. Here each episode's node first gets two more brokers
(registered and heartbeating) and two topics of three replicas, and then every request of the
listeners' APIs is sampled with hints from its metadata image as it is now: its topic ids and names,
broker ids with their epochs, partitions with their leader and partition epochs, ISRs drawn from the
brokers, and config names and values from the catalog. 15% then get an edge value, 5% damaged bytes.
"""

from __future__ import annotations

import random
import uuid
from typing import Any

from harness.fuzz.describe import describe_frame, describe_node
from harness.fuzz.inprocess import settled_leader
from harness.fuzz.mutate import Hints, mutate_bytes, mutate_value, sample
from node.controller.config_catalog import CATALOG, ConfigDef
from node.process.process import CONTROLLER_LISTENER
from node.protocol.admin import (
    AlterableConfig,
    ConfigOperation,
    ConfigResourceType,
    CreatableTopic,
    CreateTopicsRequest,
    IncrementalAlterConfigsResource,
)
from node.protocol.broker_api import (
    AlterPartitionPartitionData,
    AlterPartitionRequest,
    AlterPartitionTopicData,
    BrokerHeartbeatRequest,
    BrokerRegistrationFeature,
    BrokerRegistrationRequest,
    Listener,
)
from node.protocol.codec import BinaryCodec
from node.protocol.registry import API_KEYS, BROKER_API_KEYS, CONTROLLER_API_KEYS, REQUESTS

PROBE_EVERY = 100
EXTRA_BROKERS = (2, 3)
TOPICS = (CreatableTopic("t1", 3, 3), CreatableTopic("t2", 2, 2))
_CODEC = BinaryCodec()
CONFIG_NAMES = sorted({name for by_name in CATALOG.values() for name in by_name})
CONFIG_VALUES = (
    *("0", "1", "-1", "100", "86400000", "true", "false"),
    *("delete", "compact", "delete,compact", "", "x", "1e3"),
)


class ClientsTarget:
    """One input: time passes, or a request on either listener, sampled with the image's hints."""

    def __init__(self, seed: int) -> None:
        self.node = settled_leader(seed)
        self.classes = [c for c in REQUESTS if API_KEYS[c] in CONTROLLER_API_KEYS or API_KEYS[c] in BROKER_API_KEYS]
        self.count = 0
        self._last: tuple[str, bytes] = (CONTROLLER_LISTENER, b"")
        self._set_up()

    def _set_up(self) -> None:
        """A cluster worth asking about: two more live brokers beside the leader's own, two topics."""
        node = self.node
        features = (BrokerRegistrationFeature("metadata.version", 1, 1),)
        for broker in EXTRA_BROKERS:
            listener = (Listener("PLAINTEXT", "127.0.0.1", 9000 + broker, 0),)
            cluster = node.raft.cluster_id or ""
            registration = BrokerRegistrationRequest(broker, cluster, uuid.UUID(int=broker), listener, features)
            self._send(CONTROLLER_LISTENER, registration)
        node.advance(100)
        for broker, registration in node.process.image.brokers.items():
            beat = BrokerHeartbeatRequest(broker, registration.broker_epoch, node.raft.high_watermark)
            self._send(CONTROLLER_LISTENER, beat)
        node.advance(100)
        self._send(CONTROLLER_LISTENER, CreateTopicsRequest(TOPICS))
        node.advance(100)

    def _send(self, listener: str, message: object) -> bool:
        self._last = (listener, frame := _CODEC.encode_request(self.count % 1000 + 1, message))
        return self.node.feed_frame(listener, frame, ("client", self.count % 4))

    def __call__(self, rng: random.Random) -> bool:
        self.count += 1
        node = self.node
        if rng.random() < 0.1:
            node.advance(rng.choice((10, 100, 1000, 5000)))
            self._keep_alive(rng)
            return True
        cls = rng.choice(self.classes)
        message = sample(cls, rng, hints=self._hints())
        if rng.random() < 0.15:
            message = mutate_value(message, rng)
        key = API_KEYS[cls]
        both = key in CONTROLLER_API_KEYS and key in BROKER_API_KEYS
        listener = CONTROLLER_LISTENER if key in CONTROLLER_API_KEYS and (not both or rng.random() < 0.5) else "BROKER"
        try:
            frame = _CODEC.encode_request(rng.randint(1, 1000), message)
        except ValueError:  # an edge value the codec will not write: no frame
            return False
        if rng.random() < 0.05:
            frame = mutate_bytes(frame, rng)
        self._last = (listener, frame)
        accepted = node.feed_frame(listener, frame, ("client", self.count % 4))
        node.advance(rng.choice((0, 1, 10, 100)))
        if self.count % PROBE_EVERY == 0:
            node.still_serves()
        return accepted

    def _keep_alive(self, rng: random.Random) -> None:
        """What live brokers do between requests: heartbeat (most of the time, so that some get
        fenced now and then), and what an operator does: create the two topics again once deleted."""
        image = self.node.process.image
        for broker, registration in image.brokers.items():
            if rng.random() < 0.9:
                beat = BrokerHeartbeatRequest(broker, registration.broker_epoch, self.node.raft.high_watermark)
                self._send(CONTROLLER_LISTENER, beat)
        if len(image.topics) < 2:
            self._send(CONTROLLER_LISTENER, CreateTopicsRequest(TOPICS))

    def _hints(self) -> Hints:
        image = self.node.process.image
        topics = list(image.topics.items())  # (topic id, name)
        brokers = dict(image.brokers)
        ids = sorted(brokers) or [1]

        def partition(rng: random.Random) -> Any:
            if not topics:
                return None
            topic_id = rng.choice(topics)[0]
            states = image.partitions(topic_id)
            return rng.choice(list(states.values())) if states else None

        def epoch_of(field: str) -> Any:
            def pick(rng: random.Random) -> int:
                state = partition(rng)
                base = getattr(state, field) if state is not None else 0
                return max(-1, base + rng.choice((0, 0, 0, 1, -1)))

            return pick

        def broker_set(rng: random.Random) -> tuple[int, ...]:
            chosen = rng.sample(ids, rng.randint(1, len(ids)))
            if rng.random() < 0.1:
                chosen.append(rng.choice((4, chosen[0], -1)))  # a stranger, a repeat, a bad id
            return tuple(chosen)

        def config_pairs(rng: random.Random) -> tuple[tuple[str, str | None], ...]:
            values = (*CONFIG_VALUES, None)
            return tuple((rng.choice(CONFIG_NAMES), rng.choice(values)) for _ in range(rng.randint(0, 3)))

        def heartbeat(rng: random.Random) -> BrokerHeartbeatRequest:
            broker = rng.choice(ids)
            epoch = brokers[broker].broker_epoch if broker in brokers else 0
            offset = max(0, self.node.raft.high_watermark + rng.choice((0, 0, -1, -10, 2)))
            return BrokerHeartbeatRequest(broker, epoch, offset, rng.random() < 0.1, rng.random() < 0.05)

        def alter_partition(rng: random.Random) -> AlterPartitionRequest:
            """From a partition's leader, with its epochs: the ISR it asks for, right or not."""
            if not topics:
                return AlterPartitionRequest(rng.choice(ids), 0, ())
            topic_id = rng.choice(topics)[0]
            states = image.partitions(topic_id)
            pid, state = rng.choice(list(states.items()))
            leader = state.leader if state.leader in brokers and rng.random() < 0.9 else rng.choice(ids)
            epoch = brokers[leader].broker_epoch if leader in brokers else 0
            isr = tuple(b for b in state.replicas if b == leader or rng.random() < 0.6)
            if rng.random() < 0.1:
                isr = broker_set(rng)
            data = AlterPartitionPartitionData(
                pid,
                state.leader_epoch + rng.choice((0, 0, 0, -1, 1)),
                isr,
                state.partition_epoch + rng.choice((0, 0, 0, -1, 1)),
                tuple(brokers[b].broker_epoch if b in brokers else -1 for b in isr) if rng.random() < 0.5 else (),
            )
            return AlterPartitionRequest(leader, epoch, (AlterPartitionTopicData(uuid.UUID(topic_id), (data,)),))

        names = [name for _, name in topics] or ["t1"]

        def config_resource(rng: random.Random) -> IncrementalAlterConfigsResource:
            """Configs of the right resource type with values near the valid ones, SET mostly."""
            kind = rng.choice((ConfigResourceType.TOPIC, ConfigResourceType.TOPIC, ConfigResourceType.BROKER))
            name = rng.choice(names) if kind == ConfigResourceType.TOPIC else rng.choice((*map(str, ids), ""))
            defs = list(CATALOG[kind].values())
            entries = []
            for definition in rng.sample(defs, rng.randint(1, 3)):
                operation = rng.choice((ConfigOperation.SET,) * 4 + tuple(ConfigOperation)[1:])
                value = None if operation == ConfigOperation.DELETE else plausible_value(definition, rng)
                entries.append(AlterableConfig(definition.name, operation, value))
            return IncrementalAlterConfigsResource(kind, name, tuple(entries))

        return {
            "IncrementalAlterConfigsResource": config_resource,
            "BrokerHeartbeatRequest": heartbeat,
            "AlterPartitionRequest": alter_partition,
            "topic_id": lambda rng: uuid.UUID(rng.choice(topics)[0]) if topics else uuid.uuid4(),
            "CreatableTopic.name": lambda rng: rng.choice((*names, "t3", "t4")),
            "topic_name": lambda rng: rng.choice(names),
            "topic_names": lambda rng: tuple(rng.sample(names, rng.randint(1, len(names)))),
            "resource_name": lambda rng: rng.choice((*names, *map(str, ids), "")),
            "AlterableConfig.name": lambda rng: rng.choice(CONFIG_NAMES),
            "AlterableConfig.value": lambda rng: rng.choice(CONFIG_VALUES),
            "configs": config_pairs,
            "broker_id": lambda rng: rng.choice((*ids, *ids, 4)),
            "broker_epoch": lambda rng: rng.choice([r.broker_epoch for r in brokers.values()] or [0]),
            "cluster_id": lambda rng: self.node.raft.cluster_id or "",
            "incarnation_id": lambda rng: uuid.UUID(rng.choice([r.incarnation_id for r in brokers.values()])),
            "current_metadata_offset": lambda rng: max(0, self.node.raft.high_watermark + rng.choice((0, -1, -5, 3))),
            "partition_index": lambda rng: rng.choice((0, 0, 1, 2, 3)),
            "leader_epoch": epoch_of("leader_epoch"),
            "partition_epoch": epoch_of("partition_epoch"),
            "new_isr": broker_set,
            "broker_ids": broker_set,
            "num_partitions": lambda rng: rng.choice((1, 3, -1, 0)),
            "replication_factor": lambda rng: rng.choice((1, 2, 3, -1, 4)),
        }

    def last_input(self) -> list[str]:
        listener, frame = self._last
        return [f"a frame on the {listener} listener", *describe_frame(frame, self.node.codecs[listener])]

    def state(self) -> str:
        image = self.node.process.image
        return f"{describe_node(self.node)}; {len(image.brokers)} brokers, {len(image.topics)} topics in the image"


def plausible_value(definition: ConfigDef, rng: random.Random) -> str:
    """A value of the config's kind: its default, one at or past its bounds, a choice, or nonsense."""
    roll = rng.random()
    if roll < 0.1:
        return rng.choice(CONFIG_VALUES)
    if roll < 0.3:
        return definition.default
    if definition.kind in ("int", "long", "double"):
        edges = [b for b in (definition.low, definition.high) if b is not None] or [0]
        bound = int(rng.choice(edges))
        return str(bound + rng.choice((0, 0, 1, -1, 1000)))
    if definition.kind == "bool":
        return rng.choice(("true", "false", "TRUE", "yes"))
    if definition.choices:
        return ",".join(rng.sample(sorted(definition.choices), rng.randint(1, min(2, len(definition.choices)))))
    return definition.default
