"""config-register on Apache Kafka (`--sut kafka`): per-key registers on topic configs, judged by
what Kafka promises for them.

Keys are `<topic>/<config>`, as in the reference cluster's config-register (workloads/config_register.py).
- write: IncrementalAlterConfigs SET of a fresh integer (unique in the run) through a random broker,
  which forwards it to the active controller; acknowledged once the record is committed.
- read: DescribeConfigs at a random broker (sent on Kafka's wire to that broker: librdkafka cannot aim
  it, workloads/kafka_admin.py). Kafka answers it from that broker's metadata image, which
  follows the committed metadata log at its own pace: Kafka documents no read barrier, so these reads
  are not linearizable (measured: a single node answers the default value right after acknowledging
  a SET). History: value = the integer, or null while the key has only its default.
Checkers: `prefix-reads` (every broker shows a prefix of one write order that agrees with real time,
never going back; it measures the stale-read window), `committed-loss` (register: after recovery, the
final reads at every broker show no value older than an acknowledged write). The linearizability
checker is not run: it would report the staleness Kafka never promised to avoid.

Options (`[workload_options]`): `topics` (3), `configs` (["retention.ms", "segment.ms"]),
`read_fraction` (0.5), `request_timeout_ms` (5000).
"""

from __future__ import annotations

import contextlib
import random
from typing import Any

from node.client.kafka_wire import topic_configs
from vocab.generators import Op, as_gen, seq
from vocab.invocation import Completion, DoneFn, Handler
from vocab.workload import Workload, WorkloadEnv, WorkloadRun, register_workload
from workloads.config_register import GENERATION, op_maker, register_keys, register_value
from workloads.config_requests import split_key
from workloads.kafka_admin import KafkaClients, create_topics

with contextlib.suppress(ImportError):  # pyproject installs it; the module still loads without it
    from confluent_kafka.admin import (
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

NAME = "config-register"
SETUP_TIMEOUT_S = 60.0


class KafkaRegisterClient:
    """Carries out config-register ops through `KafkaClients`."""

    def __init__(self, clients: KafkaClients, seed: int) -> None:
        self.clients = clients
        self.rng = random.Random(seed ^ 0xCAFE)

    def invoke(self, op: Op, done: DoneFn) -> None:
        topic, config = split_key(str(op.key))
        timeout = self.clients.timeout_s
        if op.f == "write":
            entry = ConfigEntry(config, str(op.value), incremental_operation=AlterConfigOpType.SET)
            resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[entry])
            future = self.clients.admin.incremental_alter_configs([resource], request_timeout=timeout)[resource]
            self.clients.submit(None, future, lambda _: Completion("ok"), done, read=False)
        elif op.f == "read":
            aimed = op.value.get("node") if isinstance(op.value, dict) else None  # a final read names its broker
            node = aimed or self.rng.choice(self.clients.nodes)

            def call(host: str, port: int) -> Any:
                return topic_configs(host, port, topic, [config], timeout)

            answer = lambda values: Completion("ok", register_value(values[config]), node=node)  # noqa: E731
            self.clients.read(node, call, answer, done)
        else:
            done(Completion("fail", error=f"config-register has no op {op.f!r}"))


class KafkaConfigRegister(WorkloadRun):
    def __init__(self, env: WorkloadEnv) -> None:
        self.env = env
        self.topics, self.keys = register_keys(env)
        self.read_fraction = float(env.option("read_fraction", 0.5))
        self.timeout_s = int(env.option("request_timeout_ms", 5_000)) / 1000
        self._generations = 0
        self._clients: KafkaClients | None = None

    def clients(self) -> KafkaClients:
        if self._clients is None:
            db, loop = self.env.db, getattr(self.env.scheduler, "loop", None)
            if loop is None or getattr(db, "name", "") != "kafka":
                raise ValueError("the kafka workloads need --sut kafka on a real backend (netns)")
            brokers = {node: db.bootstrap([node]) for node in db.brokers}  # type: ignore[attr-defined]
            self._clients = KafkaClients(brokers, loop, self.timeout_s, self.env.spec.concurrency + 2)
        return self._clients

    def setup(self) -> None:
        """Create the topics (one partition, replicated to up to 3 brokers) and wait for each."""
        clients = self.clients()
        replicas = min(3, len(clients.nodes))
        create_topics(clients.admin, self.topics, 1, replicas, SETUP_TIMEOUT_S)

    def generator(self) -> Any:
        base = self._generations * GENERATION
        self._generations += 1
        return as_gen(op_maker(self.keys, self.read_fraction, 0.0, base))

    def final_generator(self) -> Any:
        """Every key at every broker."""
        return seq(*(Op("read", {"node": b}, key=k) for b in self.clients().nodes for k in self.keys))

    def client(self) -> Handler:
        return KafkaRegisterClient(self.clients(), self.env.seed)

    def close(self) -> None:
        if self._clients is not None:
            self._clients.close()


WORKLOAD = register_workload(
    Workload(
        NAME,
        ("prefix-reads", "committed-loss"),
        KafkaConfigRegister,
        "Kafka: per-key registers on topic configs: SET through a random broker, reads from a random "
        "broker's metadata image (not linearizable: judged as prefix reads, stale-read window measured)",
        checker_options={"committed-loss": {"loss_model": "register"}},
        suts=("kafka",),
    )
)
