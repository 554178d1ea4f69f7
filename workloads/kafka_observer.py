"""The played-broker workloads' observations through confluent-kafka (librdkafka): Metadata and
DescribeCluster answers from the brokers, as a Kafka client sees them.

Selected with `workload_options = { client = "confluent-kafka" }` on `registrations` and `isr-changes`.
Only the observations change: registration, heartbeats and AlterPartition are inter-node RPCs that no
Kafka client sends (a broker sends them to the controller), so they stay on our client, as do the
reads of a controller's image (Kafka's controllers serve no Metadata to clients) and the Raft
barrier. A read of a broker's image becomes

- `kafka-metadata`: `AdminClient.list_topics()` on a client bootstrapped on that broker, one Metadata
  answer (`orig_broker_id` names the broker that gave it): the unfenced brokers, the controller id and
  per partition the leader, replicas and ISR. No offset, no epochs: Kafka's answer has no offset and
  the Python API drops the leader epoch.
- `kafka-describe-cluster`: `AdminClient.describe_cluster()` (librdkafka sends Metadata for it).

`checkers/metadata_answers.py` judges each answer alone; docs/internals/kafka-protocol.md says why
nothing more can be judged. Errors are mapped by `workloads.kafka_client.from_librdkafka` (the same
table as the config workloads'; a read changes nothing, so its outcome only decides `fail` vs `info`).

`list_topics` blocks, so it runs in the loop's default thread pool, bounded by the request timeout
(librdkafka's own) and `GRACE_S` more (the loop's); `describe_cluster` returns a future.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from vocab.workload import client_login
from workloads.kafka_client import GRACE_S, _ck, admin_config, from_librdkafka


def metadata_value(md: Any, topics: Sequence[str]) -> dict[str, Any]:
    """A `kafka-metadata` completion's value from librdkafka's ClusterMetadata (the played topics only,
    as our client's `metadata` records them)."""
    parts: dict[str, Any] = {}
    for name, t in sorted(md.topics.items()):
        if name not in topics or t.error is not None:
            continue
        for pid, p in sorted(t.partitions.items()):
            parts[f"{name}/{pid}"] = {"leader": p.leader, "isr": list(p.isrs), "replicas": list(p.replicas)}
    return {
        "brokers": sorted(md.brokers),
        "controller": md.controller_id,
        "answered_by": md.orig_broker_id,
        "partitions": parts,
    }


def cluster_value(result: Any) -> dict[str, Any]:
    """A `kafka-describe-cluster` completion's value from librdkafka's DescribeClusterResult."""
    controller = result.controller.id if result.controller is not None else -1
    return {"brokers": sorted(n.id for n in result.nodes), "controller": controller}


class KafkaObserver:
    """One AdminClient per broker node; `read(f, node, done)` sends one observation and calls `done`
    with `(value, error, answering node)` on the run's loop."""

    def __init__(self, env: Any, timeout_ms: int, topics: Sequence[str]) -> None:
        ck = _ck()
        db = env.db
        self.db = db
        self.loop: asyncio.AbstractEventLoop = env.scheduler.loop
        self.timeout_s = timeout_ms / 1000
        self.topics = tuple(topics)
        login = client_login(db)
        self.admins: dict[str, Any] = {
            b: ck.AdminClient(admin_config([db.broker_address(b)], login, timeout_ms, f"observer-{b}"))
            for b in db.brokers
        }

    def observes(self, node: str) -> bool:
        return node in self.admins

    def read(self, f: str, node: str, done: Callable[[Mapping[str, Any] | None, Exception | None, str], None]) -> None:
        admin = self.admins[node]

        async def ask() -> Mapping[str, Any]:
            if f == "kafka-metadata":
                md = await self.loop.run_in_executor(None, lambda: admin.list_topics(timeout=self.timeout_s))
                return metadata_value(md, self.topics)
            future = admin.describe_cluster(request_timeout=self.timeout_s)
            return cluster_value(await asyncio.wrap_future(future))

        def finished(task: asyncio.Task[Mapping[str, Any]]) -> None:
            if task.cancelled():
                done(None, from_librdkafka(asyncio.CancelledError("the run ended first")), node)
            elif task.exception() is not None:
                done(None, from_librdkafka(task.exception()), node)  # type: ignore[arg-type]
            else:
                value = task.result()
                answered = self.db.node_of(value["answered_by"]) if "answered_by" in value else None
                done(value, None, answered or node)
            admin.poll(0)  # hand librdkafka's queued log lines to its logger

        task = self.loop.create_task(asyncio.wait_for(ask(), self.timeout_s + GRACE_S))
        task.add_done_callback(finished)

    def close(self) -> None:
        """Destroy the AdminClients (rd_kafka_destroy runs when the last reference goes)."""
        self.admins.clear()
        gc.collect()
