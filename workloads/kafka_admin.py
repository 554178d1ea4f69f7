"""The thinnest client path for workloads on Apache Kafka (`--sut kafka`): confluent-kafka for writes,
Kafka's wire for reads aimed at one broker.

- **Writes and set-up** go through one confluent-kafka `AdminClient` bootstrapped with every broker.
  librdkafka sends a topic's IncrementalAlterConfigs (and DescribeConfigs) to the broker the Metadata
  answer names as controller, whichever broker it was bootstrapped with (measured with Kafka's request
  log: 3 clients, each bootstrapped with a different broker, sent all 360 of their config requests to
  one broker). So a write's history `node` is not known, and is left out.
- **Reads** of one broker's metadata image are sent on Kafka's wire to that broker
  (`node.client.kafka_wire.topic_configs`), blocking, on a thread pool.
librdkafka completes futures on its own threads, the pool on its own; each completion is handed to
the run's asyncio loop (`call_soon_threadsafe`), where the runner expects it.

Errors: a write's error is judged as the reference cluster's workloads judge librdkafka's
(`workloads.kafka_client.from_librdkafka`, the table in docs/internals/kafka-protocol.md): `fail` only
where no attempt can have been applied (validation and authorization answers, local errors before a
send); NOT_CONTROLLER, timeouts and transport errors are `info`, as librdkafka may have retried behind
them. A failed read is always `fail` (reads change nothing).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from vocab.invocation import Completion, DoneFn, error_text
from workloads.kafka_client import from_librdkafka

try:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic
except ImportError:  # pragma: no cover - pyproject installs it
    AdminClient = NewTopic = None  # type: ignore[assignment,misc]
    KafkaException = Exception  # type: ignore[assignment,misc]


def failure(exc: BaseException, node: str | None, *, read: bool) -> Completion:
    """`fail` when the op certainly did not happen, `info` otherwise (see the module docstring)."""
    definite = read or from_librdkafka(exc).definite
    return Completion("fail" if definite else "info", node=node, error=error_text(exc))


def create_topics(admin: Any, topics: Sequence[str], partitions: int, replicas: int, timeout_s: float) -> None:
    """Create `topics` (set-up, blocking) and wait for each; one that already exists is fine."""
    futures = admin.create_topics([NewTopic(t, partitions, replicas) for t in topics], request_timeout=timeout_s)
    for topic, future in futures.items():
        try:
            future.result(timeout=timeout_s)
        except Exception as exc:
            if "already exists" not in str(exc).lower():
                raise ValueError(f"cannot create topic {topic}: {exc}") from None


class KafkaClients:
    """The AdminClient for writes and a read pool for broker-aimed reads (see the module docstring)."""

    def __init__(
        self, brokers: dict[str, str], loop: asyncio.AbstractEventLoop, timeout_s: float, workers: int
    ) -> None:
        if AdminClient is None:
            raise ValueError("confluent-kafka is not installed (pip install -e .)")
        self.loop = loop
        self.timeout_s = timeout_s
        self.brokers = dict(brokers)  # node -> "host:port"
        self.nodes = list(brokers)
        self.admin = AdminClient(
            {
                "bootstrap.servers": ",".join(brokers.values()),
                "client.id": "kchaos",
                "socket.connection.setup.timeout.ms": 2000,
                "reconnect.backoff.max.ms": 1000,
                "log_level": 2,  # librdkafka's connection errors are the faults' doing: not on stderr
            }
        )
        self.pool = ThreadPoolExecutor(max(1, workers), thread_name_prefix="kafka-read")

    def submit(
        self, node: str | None, future: Future[Any], answer: Callable[[Any], Completion], done: DoneFn, *, read: bool
    ) -> None:
        """When `future` ends: `answer(result)`, or the failure it raised; `done` runs on the loop."""

        def finished(f: Future[Any]) -> None:
            try:
                completion = answer(f.result())
            except Exception as exc:
                completion = failure(exc, node, read=read)
            self.loop.call_soon_threadsafe(done, completion)

        future.add_done_callback(finished)

    def read(
        self, node: str, call: Callable[[str, int], Any], answer: Callable[[Any], Completion], done: DoneFn
    ) -> None:
        """Run `call(host, port)` against `node`'s broker listener on the pool; complete as `submit`."""
        host, _, port = self.brokers[node].rpartition(":")
        self.submit(node, self.pool.submit(call, host, int(port)), answer, done, read=True)

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
