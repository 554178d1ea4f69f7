"""Requests to the cluster for the config workloads, the same on both backends.

A workload builds Kafka requests and reads their responses; `Calls` sends them on the run's backend
and reports who answered:
- `to_broker(node, request)`: to one broker's listener (a write is forwarded to the active controller
  in an Envelope, KIP-590; a read is answered from that broker's metadata image);
- `to_controllers(request)`: to the controller listeners (KIP-919's "bootstrap controllers"); only the
  active controller answers (the others say NOT_CONTROLLER and the client moves on).

`SimCalls` uses `node.sim.admin_client.SimAdminClient` on the simulated network, `RealCalls`
`node.client.AdminClient`s on the run's asyncio loop. Both report transport failures with the client's
typed errors, whose `definite` tells a history `fail` from `info` (`failed`).
"""

from __future__ import annotations

import asyncio
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from node.client.errors import KafkaError
from node.protocol.errors import ErrorCode
from vocab.invocation import Completion, error_text
from vocab.workload import client_login


@dataclass(frozen=True, slots=True)
class Answer:
    """How a call ended: a `response` (error codes inside are the caller's to read) or an `error`."""

    response: Any = None
    error: BaseException | None = None
    node: str | None = None  # who answered (or was asked)


Done = Callable[[Answer], None]


def failed(error: BaseException, node: str | None) -> Completion:
    """fail when the error says the op certainly did not happen, info otherwise."""
    definite = isinstance(error, KafkaError) and error.definite
    return Completion("fail" if definite else "info", node=node, error=error_text(error))


class Calls(ABC):
    """Sends requests (see the module docstring)."""

    brokers: list[str]

    @abstractmethod
    def to_broker(self, node: str, request: Any, *, idempotent: bool, done: Done) -> None: ...

    @abstractmethod
    def to_controllers(self, request: Any, *, idempotent: bool, done: Done) -> None: ...

    def close(self) -> None:  # noqa: B027 - optional
        """Release connections."""


class SimCalls(Calls):
    def __init__(self, env: Any, timeout_ms: int) -> None:
        from node.sim.admin_client import SimAdminClient, broker_endpoints, controller_endpoints

        db = env.db
        self.db = db
        self.brokers = list(db.brokers)
        self._broker_endpoints = dict(zip(db.brokers, broker_endpoints([db.node_id(b) for b in db.brokers])))
        self._controllers = controller_endpoints([db.node_id(c) for c in db.controllers])
        self.admin = SimAdminClient(
            db.sim, list(self._broker_endpoints.values()), principal="User:admin", request_timeout_ms=timeout_ms
        )

    def _finish(self, done: Done, fallback: str | None) -> Callable[[Any], None]:
        def finish(result: Any) -> None:
            node = self.db.node_of(result.server.node_id) if result.server is not None else fallback
            done(Answer(result.response, None, node) if result.ok else Answer(None, result.error, node))

        return finish

    def to_broker(self, node: str, request: Any, *, idempotent: bool, done: Done) -> None:
        self.admin.send_to(
            self._broker_endpoints[node], request, on_done=self._finish(done, node), idempotent=idempotent
        )

    def to_controllers(self, request: Any, *, idempotent: bool, done: Done) -> None:
        from node.client.admin import Target

        self.admin.send(
            request,
            self._finish(done, None),
            target=Target.CONTROLLER,
            idempotent=idempotent,
            endpoints=self._controllers,
        )


class RealCalls(Calls):
    """One `AdminClient` per broker (a call goes to the broker chosen for it) and one over every
    controller, all on the run's asyncio loop."""

    def __init__(self, env: Any, timeout_ms: int) -> None:
        from node.client import AdminClient

        db = env.db
        self.db = db
        self.loop = env.scheduler.loop
        self.brokers = list(db.brokers)
        login = client_login(db)
        self._admins = {
            b: AdminClient(db.broker_address(b), request_timeout_ms=timeout_ms, connect_timeout_ms=1_000, **login)
            for b in db.brokers
        }
        self._controller = AdminClient(
            [db.controller_address(c) for c in db.controllers],
            request_timeout_ms=timeout_ms,
            connect_timeout_ms=1_000,
            attempt_timeout_ms=max(500, timeout_ms // 4),
            **login,
        )

    def _run(self, coro: Any, done: Done, node: str | None) -> None:
        task = self.loop.create_task(coro)

        def finished(t: asyncio.Task[Any]) -> None:
            if t.cancelled():
                done(Answer(None, asyncio.CancelledError("cancelled"), node))
            elif t.exception() is not None:
                done(Answer(None, t.exception(), node))
            else:
                response, server = t.result()
                done(Answer(response, None, self.db.node_of_address(server) or node))

        task.add_done_callback(finished)

    def to_broker(self, node: str, request: Any, *, idempotent: bool, done: Done) -> None:
        self._run(self._admins[node].send_with_server(request, idempotent=idempotent), done, node)

    def to_controllers(self, request: Any, *, idempotent: bool, done: Done) -> None:
        from node.client.admin import Target

        coro = self._controller.send_with_server(request, target=Target.CONTROLLER, idempotent=idempotent)
        self._run(coro, done, None)

    def close(self) -> None:
        if self.loop.is_closed() or self.loop.is_running():
            return

        async def close_all() -> None:
            for admin in (*self._admins.values(), self._controller):
                await admin.close()

        self.loop.run_until_complete(asyncio.wait_for(close_all(), 10))


# --- topics -----------------------------------------------------------------------------------------


def create_topics(env: Any, topics: Sequence[str], replicas: int | None = None) -> None:
    """Create `topics` (one partition each, replicated on up to 3 brokers); existing ones are fine."""
    db = env.db
    replicas = replicas or min(3, len(db.brokers))
    if db.sim is not None:
        _create_sim(db, topics, replicas)
    else:
        _create_real(db, topics, replicas)


def _create_sim(db: Any, topics: Sequence[str], replicas: int) -> None:
    from node.protocol.admin import CreatableTopic, CreateTopicsRequest
    from node.sim.admin_client import SimAdminClient, broker_endpoints

    sim = db.sim
    admin = SimAdminClient(sim, broker_endpoints([db.node_id(b) for b in db.brokers]), principal="User:admin")
    request = CreateTopicsRequest(tuple(CreatableTopic(topic, 1, replicas) for topic in topics))
    call = admin.send(request, idempotent=False)
    if not sim.run_until_true(lambda: call.done, 30_000) or not call.ok:
        raise RuntimeError(f"creating topics {list(topics)} failed: {call.error or call.response}")
    for result in call.response.topics:
        if result.error_code not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
            raise RuntimeError(f"creating topic {result.name!r} failed: {ErrorCode(result.error_code).name}")


def _create_real(db: Any, topics: Sequence[str], replicas: int) -> None:
    from node.client import NewTopic, SyncAdminClient
    from node.client.errors import TopicAlreadyExistsError

    bootstrap = [db.broker_address(b) for b in db.brokers]
    deadline = time.monotonic() + 60
    with SyncAdminClient(bootstrap, request_timeout_ms=10_000, **client_login(db)) as admin:
        missing = list(topics)
        while missing:
            results = admin.create_topics([NewTopic(t, 1, replicas) for t in missing])
            last = None
            for topic, result in results.items():
                if result.error is None or isinstance(result.error, TopicAlreadyExistsError):
                    missing.remove(topic)
                else:
                    last = result.error
            if missing and time.monotonic() > deadline:
                raise RuntimeError(f"creating topics {missing} failed: {last}")
            if missing:
                time.sleep(0.5)
