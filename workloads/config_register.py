"""config-register: per-key read/write registers on topic config keys, checked for linearizability.

Keys are `<topic>/<config>` for a few topics (created at setup) and a few long-valued topic configs.
- write: IncrementalAlterConfigs SET of a fresh integer (unique in the run) through a random broker,
  which forwards it to the active controller (KIP-590). History: f "write", value = the integer.
- read: DescribeConfigs at the active controller (`linearizable`: answered after a read barrier).
  History: f "read", value = the integer, or null while the key has no dynamic value (the register's
  initial state in the checker's `register` model).
Errors: a definite one (`KafkaError.definite`) -> `fail`; timeouts, lost connections and ambiguous
server answers -> `info` (results/SCHEMA.md; node/client/errors.py decides which is which).

Options (`[workload_options]`): `topics` (3), `configs` (["retention.ms", "segment.ms"]),
`read_fraction` (0.5), `request_timeout_ms` (5000).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Sequence
from typing import Any

from harness.generators import Op, Rng, as_gen, seq
from harness.invocation import Completion, DoneFn, Handler, error_text
from node.client.errors import KafkaError, server_error
from node.protocol.admin import (
    AlterableConfig,
    ConfigOperation,
    ConfigResourceType,
    ConfigSource,
    DescribeConfigsRequest,
    DescribeConfigsResource,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResource,
)
from node.protocol.errors import ErrorCode
from workloads import Workload, WorkloadEnv, WorkloadRun, register_workload

NAME = "config-register"
TOPIC_PREFIX = "register-"
DEFAULT_CONFIGS = ("retention.ms", "segment.ms")


def key_of(topic: str, config: str) -> str:
    return f"{topic}/{config}"


def split_key(key: str) -> tuple[str, str]:
    topic, _, config = key.partition("/")
    return topic, config


def op_maker(keys: Sequence[str], read_fraction: float) -> Callable[[Rng, int], Op]:
    """The generator function: a read or a write of a random key; write values are unique (i + 1)."""
    keys = tuple(keys)

    def make(rng: Rng, i: int) -> Op:
        key = rng.choice(keys)
        if rng.random() < read_fraction:
            return Op("read", None, key=key)
        return Op("write", i + 1, key=key)

    return make


# --- requests and answers (both backends) -----------------------------------------------------------


def write_request(key: str, value: Any) -> IncrementalAlterConfigsRequest:
    topic, config = split_key(key)
    change = AlterableConfig(config, ConfigOperation.SET, str(value))
    return IncrementalAlterConfigsRequest(
        (IncrementalAlterConfigsResource(ConfigResourceType.TOPIC, topic, (change,)),)
    )


def read_request(key: str) -> DescribeConfigsRequest:
    topic, config = split_key(key)
    return DescribeConfigsRequest((DescribeConfigsResource(ConfigResourceType.TOPIC, topic, (config,)),))


def failed(error: BaseException, node: str | None) -> Completion:
    """fail when the error says the op certainly did not happen, info otherwise."""
    definite = isinstance(error, KafkaError) and error.definite
    return Completion("fail" if definite else "info", node=node, error=error_text(error))


def write_answer(response: Any, node: str | None) -> Completion:
    answer = response.responses[0] if response.responses else None
    if answer is None:
        return Completion("info", node=node, error="empty IncrementalAlterConfigs answer")
    if answer.error_code != ErrorCode.NONE:
        return failed(server_error(answer.error_code, answer.error_message), node)
    return Completion("ok", node=node)


def read_answer(response: Any, key: str, node: str | None) -> Completion:
    _, config = split_key(key)
    result = response.results[0] if response.results else None
    if result is None:
        return Completion("fail", node=node, error="empty DescribeConfigs answer")
    if result.error_code != ErrorCode.NONE:
        return failed(server_error(result.error_code, result.error_message), node)
    return Completion("ok", register_value(result.configs, config), node=node)


def register_value(entries: Sequence[Any], config: str) -> int | None:
    """The key's dynamic value as an integer; None while it has only its default."""
    for entry in entries:
        if entry.name == config:
            source = getattr(entry, "config_source", getattr(entry, "source", None))
            if source != ConfigSource.DYNAMIC_TOPIC_CONFIG or entry.value is None:
                return None
            return int(entry.value)
    return None


# --- clients -----------------------------------------------------------------------------------------


class SimClient:
    """Ops through `node.sim.admin_client.SimAdminClient`s on the simulated network."""

    def __init__(self, env: WorkloadEnv, timeout_ms: int) -> None:
        from node.sim.admin_client import SimAdminClient, broker_endpoints, controller_endpoints

        db, sim = env.db, env.db.sim  # type: ignore[attr-defined]
        self.db = db
        self.brokers = broker_endpoints([db.node_id(b) for b in db.brokers])
        self.controllers = controller_endpoints([db.node_id(c) for c in db.controllers])
        self.admin = SimAdminClient(sim, self.brokers, principal=db.admin_principal, request_timeout_ms=timeout_ms)
        self.rng = random.Random(env.seed ^ 0xC11E)

    def invoke(self, op: Op, done: DoneFn) -> None:
        from node.client.admin import Target

        key = op.key
        if op.f == "write":
            endpoint = self.brokers[self.rng.randrange(len(self.brokers))]
            node = self.db.node_of(endpoint.node_id)
            self.admin.send_to(
                endpoint,
                write_request(key, op.value),
                on_done=lambda r: done(write_answer(r.response, node) if r.ok else failed(r.error, node)),
                idempotent=False,
            )
        elif op.f == "read":

            def read_done(r: Any) -> None:
                node = self.db.node_of(r.server.node_id) if r.server is not None else None
                done(read_answer(r.response, key, node) if r.ok else failed(r.error, node))

            self.admin.send(read_request(key), read_done, target=Target.CONTROLLER, endpoints=self.controllers)
        else:
            done(Completion("fail", error=f"config-register has no op {op.f!r}"))


class RealClient:
    """Ops through `node.client.AdminClient`s on the run's asyncio loop: one per broker (so a write
    goes to the broker chosen for it) and one over every controller (reads find the active one)."""

    def __init__(self, env: WorkloadEnv, timeout_ms: int) -> None:
        from node.client import AdminClient

        db = env.db
        self.db = db
        self.loop = env.scheduler.loop  # type: ignore[attr-defined]
        login = db.login()  # type: ignore[attr-defined]  # SASL/PLAIN as the harness's admin
        self.brokers = [
            (b, AdminClient(db.broker_address(b), request_timeout_ms=timeout_ms, connect_timeout_ms=1_000, **login))  # type: ignore[attr-defined]
            for b in db.brokers  # type: ignore[attr-defined]
        ]
        self.controller = AdminClient(
            [db.controller_address(c) for c in db.controllers],  # type: ignore[attr-defined]
            request_timeout_ms=timeout_ms,
            connect_timeout_ms=1_000,
            attempt_timeout_ms=max(500, timeout_ms // 4),
            **login,
        )
        self.rng = random.Random(env.seed ^ 0xC11E)

    def invoke(self, op: Op, done: DoneFn) -> None:
        if op.f == "write":
            node, admin = self.brokers[self.rng.randrange(len(self.brokers))]
            coro = self._write(admin, node, op.key, op.value)
        elif op.f == "read":
            coro = self._read(op.key)
        else:
            done(Completion("fail", error=f"config-register has no op {op.f!r}"))
            return
        task = self.loop.create_task(coro)
        task.add_done_callback(
            lambda t: done(t.result() if not t.cancelled() else Completion("info", error="cancelled"))
        )

    async def _write(self, admin: Any, node: str, key: str, value: Any) -> Completion:
        try:
            response = await admin.send(write_request(key, value), idempotent=False)
        except Exception as exc:  # typed KafkaErrors say definite or not; anything else is unknown
            return failed(exc, node)
        return write_answer(response, node)

    async def _read(self, key: str) -> Completion:
        from node.client import ConfigResource

        topic, config = split_key(key)
        resource = ConfigResource.topic(topic)
        try:
            described = await self.controller.describe_configs([resource], keys=[config], linearizable=True)
        except Exception as exc:
            return failed(exc, None)
        node = self.db.node_of_address(described.server)  # type: ignore[attr-defined]
        result = described.resources[resource]
        if result.error is not None:
            return failed(result.error, node)
        return Completion("ok", register_value(list(result.entries.values()), config), node=node)

    async def aclose(self) -> None:
        for _, admin in self.brokers:
            await admin.close()
        await self.controller.close()


# --- the workload ------------------------------------------------------------------------------------


class ConfigRegister(WorkloadRun):
    def __init__(self, env: WorkloadEnv) -> None:
        self.env = env
        topics = int(env.option("topics", 3))
        configs = env.option("configs", list(DEFAULT_CONFIGS))
        if isinstance(configs, str):
            configs = [c.strip() for c in configs.split(",") if c.strip()]
        if topics < 1 or not configs:
            raise ValueError("config-register needs topics >= 1 and at least one config")
        self.topics = [f"{TOPIC_PREFIX}{i}" for i in range(topics)]
        self.keys = [key_of(t, c) for t in self.topics for c in configs]
        self.read_fraction = float(env.option("read_fraction", 0.5))
        self.timeout_ms = int(env.option("request_timeout_ms", 5_000))
        self._client: SimClient | RealClient | None = None

    def setup(self) -> None:
        db = self.env.db
        replicas = min(3, len(db.brokers))  # type: ignore[attr-defined]
        if db.sim is not None:  # type: ignore[attr-defined]
            self._create_sim(replicas)
        else:
            self._create_real(replicas)

    def _create_sim(self, replicas: int) -> None:
        from node.protocol.admin import CreatableTopic, CreateTopicsRequest
        from node.sim.admin_client import SimAdminClient, broker_endpoints

        db = self.env.db
        sim = db.sim  # type: ignore[attr-defined]
        endpoints = broker_endpoints([db.node_id(b) for b in db.brokers])  # type: ignore[attr-defined]
        admin = SimAdminClient(sim, endpoints, principal=db.admin_principal)  # type: ignore[attr-defined]
        for topic in self.topics:
            call = admin.send(CreateTopicsRequest((CreatableTopic(topic, 1, replicas),)), idempotent=False)
            if not sim.run_until_true(lambda call=call: call.done, 30_000) or not call.ok:
                raise RuntimeError(f"creating topic {topic!r} failed: {call.error or call.response}")
            code = call.response.topics[0].error_code
            if code not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
                raise RuntimeError(f"creating topic {topic!r} failed: {ErrorCode(code).name}")

    def _create_real(self, replicas: int) -> None:
        from node.client import NewTopic, SyncAdminClient
        from node.client.errors import TopicAlreadyExistsError

        db = self.env.db
        bootstrap = [db.broker_address(b) for b in db.brokers]  # type: ignore[attr-defined]
        deadline = time.monotonic() + 60
        with SyncAdminClient(bootstrap, request_timeout_ms=10_000, **db.login()) as admin:  # type: ignore[attr-defined]
            missing = list(self.topics)
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

    def generator(self) -> Any:
        return as_gen(op_maker(self.keys, self.read_fraction))

    def final_generator(self) -> Any:
        return seq(*(Op("read", None, key=k) for k in self.keys))

    def client(self) -> Handler:
        if self._client is None:
            if self.env.db.sim is not None:  # type: ignore[attr-defined]
                self._client = SimClient(self.env, self.timeout_ms)
            else:
                self._client = RealClient(self.env, self.timeout_ms)
        return self._client

    def close(self) -> None:
        if isinstance(self._client, RealClient):
            loop = self._client.loop
            if not loop.is_closed() and not loop.is_running():
                loop.run_until_complete(asyncio.wait_for(self._client.aclose(), 10))


WORKLOAD = register_workload(
    Workload(
        NAME,
        ("linearizable",),
        ConfigRegister,
        "per-key registers on topic configs: SET through a random broker, linearizable reads at the controller",
    )
)
