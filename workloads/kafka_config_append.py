"""config-append on Apache Kafka (`--sut kafka`): Elle list-append transactions on list-typed topic
configs, judged by what Kafka promises for them.

Keys and elements are the reference cluster's config-append (workloads/config_append.py): `<topic>/<config>`
for `leader.replication.throttled.replicas` and `follower.replication.throttled.replicas`, Kafka's
LIST-typed topic configs whose validator takes any `partition:broker` items (`\\d+:\\d+`, or `*`); an
element n is the item `"n:0"`.

- append transaction, f "txn", `[["append", k, "n:0"], ...]`: one IncrementalAlterConfigs with an
  APPEND per key (one resource per topic) through confluent-kafka, which sends it to one broker; that
  broker forwards it to the active controller, which writes its records as one atomic batch.
- read transaction, f "txn", `[["r", k, [..]], ...]`: one DescribeConfigs of both list configs of one
  topic at a random broker (workloads/kafka_admin.py aims it), answered from that broker's metadata
  image. One resource is read from one image; across resources Kafka promises no snapshot, so a read
  covers one topic.

What Kafka promises: the committed metadata log orders every append (one batch per request), and a
broker's image is a prefix of that log, with no read barrier. So appends and reads are **serializable**
(each read sees a prefix of one order), not strict serializable: a read may miss an append that was
acknowledged before it began. Checkers: `elle-list-append` with `serializable`, `committed-loss`
(list-append: after recovery, the final reads at every broker hold every acknowledged append) and
`stale-list-reads` (per broker, a later read never shows less; the stale-read window measured).
SUBTRACT is not in the history: list-append has no removal (the differential check covers it).

Options (`[workload_options]`): `topics` (from rate x duration), `active_keys` (6), `key_span_ops` (16),
`max_txn_length` (4), `read_fraction` (0.5), `request_timeout_ms` (5000).
"""

from __future__ import annotations

import contextlib
import random
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

from node.client.kafka_wire import topic_configs
from vocab.generators import Op, Rng, as_gen, seq
from vocab.invocation import Completion, DoneFn, Handler, error_text
from vocab.workload import Workload, WorkloadEnv, register_workload
from workloads.config_append import GENERATION, LIST_CONFIGS, TXN, AppendKeys, items, op_maker
from workloads.config_requests import key_of, split_key
from workloads.kafka_admin import KafkaClients
from workloads.kafka_client import from_librdkafka
from workloads.kafka_config_register import KafkaConfigRegister

with contextlib.suppress(ImportError):  # pyproject installs it; the module still loads without it
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

NAME = "config-append"


def topic_read(topic: str, broker: str | None = None) -> Op:
    """A read transaction of both list configs of `topic` (at `broker`, named as the op's key, or at a
    random one)."""
    return Op(TXN, [["r", key_of(topic, c), None] for c in LIST_CONFIGS], key=broker)


def kafka_op_maker(keys: Sequence[str], read_fraction: float, max_txn_length: int, base: int, active: int, span: int):
    """The reference cluster's config-append ops, each read narrowed to the topic of its first key."""
    inner = op_maker(keys, read_fraction, 0.0, max_txn_length, base, active, span)

    def make(rng: Rng, i: int) -> Op:
        op = inner(rng, i)
        if all(m[0] == "r" for m in op.value):
            return topic_read(split_key(op.value[0][1])[0])
        return op

    return make


def all_of(futures: Sequence[Future[Any]]) -> Future[list[BaseException | None]]:
    """A future that ends when all of `futures` have, with each one's exception (None: it succeeded)."""
    combined: Future[list[BaseException | None]] = Future()
    left = [len(futures)]
    lock = threading.Lock()

    def one_done(_: Future[Any]) -> None:
        with lock:
            left[0] -= 1
            last = left[0] == 0
        if last:
            combined.set_result([f.exception() for f in futures])

    for f in futures:
        f.add_done_callback(one_done)
    return combined


def append_outcome(mops: list[list[Any]], topics: list[str], errors: list[BaseException | None]) -> Completion:
    """ok when every resource was applied; ok with the applied appends when the others certainly were
    not; info when any may have been; fail when none was."""
    refused = {t: e for t, e in zip(topics, errors) if e is not None}
    if not refused:
        return Completion("ok", mops)
    why = "; ".join(f"{t}: {error_text(e)}" for t, e in refused.items())
    if not all(from_librdkafka(e).definite for e in refused.values()):
        return Completion("info", error=why)
    applied = [m for m in mops if split_key(m[1])[0] not in refused]
    if applied:
        return Completion("ok", applied, error=f"partially applied; refused {why}")
    return Completion("fail", error=why)


class KafkaAppendClient:
    """Carries out config-append ops through `KafkaClients`."""

    def __init__(self, clients: KafkaClients, seed: int) -> None:
        self.clients = clients
        self.rng = random.Random(seed ^ 0xA99E)

    def invoke(self, op: Op, done: DoneFn) -> None:
        mops = op.value
        if op.f != TXN or not isinstance(mops, list) or not mops:
            done(Completion("fail", error=f"config-append has no op {op.f!r} {mops!r}"))
        elif all(m[0] == "r" for m in mops):
            self._read(op, done)
        elif all(m[0] == "append" for m in mops):
            self._append(mops, done)
        else:
            done(Completion("fail", error="a config-append transaction either appends or reads"))

    def _append(self, mops: list[list[Any]], done: DoneFn) -> None:
        per_topic: dict[str, dict[str, list[str]]] = {}
        for _, key, value in mops:
            topic, config = split_key(key)
            per_topic.setdefault(topic, {}).setdefault(config, []).append(value)
        resources = [
            ConfigResource(
                ResourceType.TOPIC,
                topic,
                incremental_configs=[
                    ConfigEntry(c, ",".join(vs), incremental_operation=AlterConfigOpType.APPEND)
                    for c, vs in configs.items()
                ],
            )
            for topic, configs in per_topic.items()
        ]
        timeout = self.clients.timeout_s
        futures = self.clients.admin.incremental_alter_configs(resources, request_timeout=timeout)
        topics = list(per_topic)
        answer = lambda errors: append_outcome(mops, topics, errors)  # noqa: E731
        self.clients.submit(None, all_of([futures[r] for r in resources]), answer, done, read=False)

    def _read(self, op: Op, done: DoneFn) -> None:
        keys = [m[1] for m in op.value]
        topics = {split_key(k)[0] for k in keys}
        if len(topics) != 1:
            done(Completion("fail", error="a read covers one topic (one DescribeConfigs resource)"))
            return
        topic = topics.pop()
        names = [split_key(k)[1] for k in keys]
        node = op.key or self.rng.choice(self.clients.nodes)  # a final read names its broker as its key

        def call(host: str, port: int) -> Any:
            return topic_configs(host, port, topic, names, self.clients.timeout_s)

        def answer(values: dict[str, str | None]) -> Completion:
            return Completion("ok", [["r", k, items(values[split_key(k)[1]])] for k in keys], node=node)

        self.clients.read(node, call, answer, done)


class KafkaConfigAppend(AppendKeys, KafkaConfigRegister):
    """config-append's keys and ops, with the topics and clients of the Kafka config-register."""

    def __init__(self, env: WorkloadEnv) -> None:
        AppendKeys.__init__(self, env)
        self.timeout_s = self.timeout_ms / 1000
        self._clients: KafkaClients | None = None

    def generator(self) -> Any:
        base = self._generations * GENERATION
        self._generations += 1
        return as_gen(kafka_op_maker(self.keys, self.read_fraction, self.max_txn_length, base, self.active, self.span))

    def final_generator(self) -> Any:
        """Every topic at every broker."""
        return seq(*(topic_read(t, b) for b in self.clients().nodes for t in self.topics))

    def client(self) -> Handler:
        return KafkaAppendClient(self.clients(), self.env.seed)


WORKLOAD = register_workload(
    Workload(
        NAME,
        ("elle-list-append", "committed-loss", "stale-list-reads"),
        KafkaConfigAppend,
        "Kafka: Elle list-append transactions of APPENDs to list topic configs, reads from a random "
        "broker's metadata image (serializable, not strict: stale-read window measured)",
        checker_options={
            "elle-list-append": {"consistency_model": "serializable"},
            "committed-loss": {"loss_model": "list-append"},
        },
        suts=("kafka",),
    )
)
