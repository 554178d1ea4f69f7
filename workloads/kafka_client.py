"""The thinnest confluent-kafka client path for workloads on Apache Kafka (`--sut kafka`).

One `AdminClient` per broker, bootstrapped with that broker alone, so an op can be aimed at a node:
librdkafka opens connections sparsely and sends a topic's DescribeConfigs / IncrementalAlterConfigs
to a broker it is connected to ("any" broker), which is the bootstrap one while the workload makes
no other requests through that client. librdkafka completes futures on its own threads; each
completion is handed to the run's asyncio loop (`call_soon_threadsafe`), where the runner expects it.

Errors: a server's error code is definite (`fail`), except the ambiguous ones the reference
cluster's client treats the same way (node/client/errors.py `AMBIGUOUS_CODES`: REQUEST_TIMED_OUT,
UNKNOWN_SERVER_ERROR, NETWORK_EXCEPTION); librdkafka's local errors (negative codes: timed out,
transport, all brokers down) cannot say whether the request was sent, so a write's is `info`. A
failed read is always `fail` (reads change nothing).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from harness.invocation import Completion, DoneFn, error_text
from node.client.errors import AMBIGUOUS_CODES

try:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient
except ImportError:  # pragma: no cover - pyproject installs it
    AdminClient = None  # type: ignore[assignment,misc]
    KafkaException = Exception  # type: ignore[assignment,misc]


def error_code(exc: BaseException) -> int | None:
    """The Kafka (>= 0) or librdkafka-local (< 0) error code an exception carries, if any."""
    err = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
    code = getattr(err, "code", None)
    return code() if callable(code) else None


def failure(exc: BaseException, node: str | None, *, read: bool) -> Completion:
    """`fail` when the op certainly did not happen, `info` otherwise (see the module docstring)."""
    code = error_code(exc)
    definite = read or (code is not None and code >= 0 and code not in AMBIGUOUS_CODES)
    return Completion("fail" if definite else "info", node=node, error=error_text(exc))


class KafkaAdmins:
    """One AdminClient per broker (see the module docstring), completing ops on the run's loop."""

    def __init__(self, bootstraps: dict[str, str], loop: asyncio.AbstractEventLoop, timeout_s: float) -> None:
        if AdminClient is None:
            raise ValueError("confluent-kafka is not installed (pip install -e .)")
        self.loop = loop
        self.timeout_s = timeout_s
        self.nodes = list(bootstraps)
        self.clients = {
            node: AdminClient(
                {
                    "bootstrap.servers": address,
                    "client.id": f"kchaos-{node}",
                    "socket.connection.setup.timeout.ms": 2000,
                    "reconnect.backoff.max.ms": 1000,
                    "log_level": 2,  # librdkafka's connection errors are the faults' doing: not on stderr
                }
            )
            for node, address in bootstraps.items()
        }

    def submit(
        self, node: str, future: Future[Any], answer: Callable[[Any], Completion], done: DoneFn, *, read: bool
    ) -> None:
        """When `future` ends: `answer(result)`, or the failure it raised; `done` runs on the loop."""

        def finished(f: Future[Any]) -> None:
            try:
                completion = answer(f.result())
            except Exception as exc:
                completion = failure(exc, node, read=read)
            self.loop.call_soon_threadsafe(done, completion)

        future.add_done_callback(finished)

    def close(self) -> None:
        self.clients.clear()  # librdkafka closes each client's connections when it is collected
