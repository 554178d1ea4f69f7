"""Played brokers: the workload side of `registrations` and `isr-changes`.

The workload plays brokers of its own (ids from `broker_id_base`, which no real broker uses) through
the real RPCs of KIP-631 and KIP-497, at the controllers' controller listener: BrokerRegistration
(with incarnation ids), BrokerHeartbeat (`current_metadata_offset`, `want_fence`, `want_shut_down`),
AlterPartition as the leader of partitions whose replicas are those brokers, and reads of what the
cluster made of it (Metadata and DescribeCluster from any node's image, DescribeQuorum, and a
linearizable DescribeConfigs as a Raft read barrier). `workloads.fleet_gen` decides the ops; this
module sends them and writes the answers in the history formats of `checkers.broker_ops`.

Both backends share the request and answer code; only the transport differs: `SimTransport` drives a
`node.sim.admin_client.SimAdminClient` over the simulated network, `RealTransport` the real
`node.client.AdminClient` on the run's asyncio loop (with SASL when the cluster adapter offers a login).

With `client = "confluent-kafka"` the reads of the brokers' images go through librdkafka instead
(`kafka-metadata`, `kafka-describe-cluster`: `workloads.kafka_observer`); the RPCs above have no Kafka
client API and stay on our client.

Before the history starts (`setup`), the played brokers register and catch up, and the topics are
created with explicit assignments on them; the first op of the history (`setup`) reports all of it.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from node.broker.config import DEFAULT_FEATURES
from node.client.errors import KafkaError, server_error
from node.protocol.admin import (
    ConfigResourceType,
    CreatableReplicaAssignment,
    CreatableTopic,
    CreateTopicsRequest,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    DescribeConfigsResource,
    MetadataRequest,
)
from node.protocol.broker_api import (
    AlterPartitionPartitionData,
    AlterPartitionRequest,
    AlterPartitionTopicData,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    Listener,
)
from node.protocol.errors import ErrorCode
from node.protocol.messages import DescribeQuorumRequest
from vocab.errors import UserError
from vocab.generators import Op, seq
from vocab.invocation import Completion, DoneFn, error_text
from vocab.workload import WorkloadEnv, WorkloadRun, client_login
from workloads.fleet_gen import ACTIONS, KAFKA_KINDS, READS, FleetGen, Params, Part, Remembered, Slot, incarnation_id
from workloads.kafka_client import CONFLUENT, OURS, client_choice
from workloads.kafka_observer import KafkaObserver

SETUP_TIMEOUT_S = 60.0
TOPIC_PREFIX = "played-"
BARRIER_CONFIG = "background.threads"

# --- options ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Options:
    brokers: int
    broker_id_base: int
    topics: int
    partitions: int
    replication_factor: int
    request_timeout_ms: int
    fence_slack_ms: int | None
    lag_ms: int
    mix: tuple[tuple[str, float], ...]
    client: str = OURS

    @staticmethod
    def parse(env: WorkloadEnv, workload: str, default_mix: Mapping[str, float]) -> Options:
        def integer(name: str, default: int, low: int) -> int:
            value = env.option(name, default)
            if isinstance(value, bool) or not isinstance(value, int | str):
                raise UserError(f"{workload}: workload option {name} must be an integer, got {value!r}")
            try:
                number = int(value)
            except ValueError:
                raise UserError(f"{workload}: workload option {name} must be an integer, got {value!r}") from None
            if number < low:
                raise UserError(f"{workload}: workload option {name} must be >= {low}, got {number}")
            return number

        try:  # confluent-kafka changes the observations of the brokers' images only (workloads/kafka_observer.py)
            client = client_choice(env)
        except ValueError as exc:
            raise UserError(f"{workload}: {exc}") from None
        brokers = integer("brokers", 4, 1)
        slack = env.option("fence_slack_ms", None)
        return Options(
            brokers=brokers,
            broker_id_base=integer("broker_id_base", 1000, 100),
            topics=integer("topics", 1, 1),
            partitions=integer("partitions", 2, 1),
            replication_factor=min(integer("replication_factor", min(3, brokers), 1), brokers),
            request_timeout_ms=integer("request_timeout_ms", 2_000, 100),
            fence_slack_ms=None if slack is None else integer("fence_slack_ms", 0, 0),
            lag_ms=integer("lag_ms", 1_000, 0),
            mix=parse_mix(env.option("mix", None), default_mix, workload),
            client=client,
        )


def parse_mix(value: Any, default: Mapping[str, float], workload: str) -> tuple[tuple[str, float], ...]:
    """The op mix: a table {kind: weight} or "kind=weight,..."; kinds not given keep their default."""
    known = ("alter", *READS, *ACTIONS)
    given: dict[str, Any] = {}
    if isinstance(value, str):
        for part in filter(None, (p.strip() for p in value.split(","))):
            name, sep, weight = part.partition("=")
            if not sep:
                raise UserError(f"{workload}: workload option mix: '{part}' is not kind=weight")
            given[name.strip()] = weight.strip()
    elif isinstance(value, Mapping):
        given = dict(value)
    elif value is not None:
        raise UserError(f"{workload}: workload option mix must be a table or 'kind=weight,...', got {value!r}")
    mix = dict(default)
    for name, weight in given.items():
        if name not in known:
            raise UserError(f"{workload}: workload option mix: unknown op kind {name!r} (known: {', '.join(known)})")
        try:
            mix[name] = float(weight)
        except (TypeError, ValueError):
            raise UserError(f"{workload}: workload option mix: weight of {name} must be a number") from None
        if mix[name] < 0:
            raise UserError(f"{workload}: workload option mix: weight of {name} must be >= 0")
    if sum(w for k, w in mix.items() if k in READS) <= 0:
        raise UserError(f"{workload}: workload option mix needs a read kind with a weight above 0")
    return tuple((k, w) for k, w in mix.items() if w > 0)


# --- requests --------------------------------------------------------------------------------------


def listener_of(broker: int) -> Listener:
    """A played broker's listener: TEST-NET-1 (RFC 5737), which nobody ever connects to."""
    return Listener("PLAINTEXT", f"192.0.2.{broker % 250 + 1}", 9092, 0)


def registration(cluster_id: str, broker: int, incarnation: str) -> BrokerRegistrationRequest:
    return BrokerRegistrationRequest(
        broker, cluster_id, uuid.UUID(incarnation), (listener_of(broker),), DEFAULT_FEATURES
    )


def request_of(op_f: str, v: Mapping[str, Any], cluster_id: str, topics: Sequence[str]) -> Any:
    if op_f == "register":
        return registration(cluster_id, v["broker"], v["incarnation"])
    if op_f == "heartbeat":
        return BrokerHeartbeatRequest(v["broker"], v["epoch"], v["offset"], v["want_fence"], v["want_shut_down"])
    if op_f == "alter":
        data = AlterPartitionPartitionData(v["partition"], v["leader_epoch"], tuple(v["isr"]), v["partition_epoch"])
        topic = AlterPartitionTopicData(uuid.UUID(v["topic_id"]), (data,))
        return AlterPartitionRequest(v["broker"], v["broker_epoch"], (topic,))
    if op_f == "metadata":
        return MetadataRequest(tuple(topics))
    if op_f == "describe-cluster":
        return DescribeClusterRequest(True)
    if op_f == "quorum":
        return DescribeQuorumRequest()
    if op_f == "barrier":  # the cluster-wide broker config resource: there whatever topics exist
        config = DescribeConfigsResource(ConfigResourceType.BROKER, "", (BARRIER_CONFIG,))
        return DescribeConfigsRequest((config,))
    raise ValueError(f"played brokers have no op {op_f!r}")


# --- answers ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    """How one request ended: a response, or the client's error; and the node that answered."""

    response: Any = None
    error: BaseException | None = None
    node: str | None = None


def code_name(code: int) -> str:
    return ErrorCode(code).name if code in ErrorCode._value2member_map_ else str(code)


def refused(value: Mapping[str, Any], code: int, node: str | None) -> Completion:
    error = server_error(code)
    return Completion(
        "fail" if error.definite else "info", {**value, "error": code_name(code)}, node, error_text(error)
    )


def broke(value: Mapping[str, Any], error: BaseException, node: str | None) -> Completion:
    """A transport failure: `fail` when it certainly did not happen, `info` otherwise."""
    definite = isinstance(error, KafkaError) and error.definite
    librdkafka = getattr(error, "librdkafka_name", None)  # confluent-kafka's errors keep their own names
    name = f"librdkafka:{librdkafka}" if librdkafka else f"client:{type(error).__name__}"
    return Completion("fail" if definite else "info", {**value, "error": name}, node, error_text(error))


def completion_of(op: Op, answer: Answer, played_topics: Sequence[str]) -> Completion:
    """The history's completion of `op` (formats: `checkers.broker_ops`)."""
    v = dict(op.value or {})
    node = answer.node
    if answer.error is not None:
        return broke(v, answer.error, node)
    r = answer.response
    if op.f == "register":
        if r.error_code != ErrorCode.NONE:
            return refused(v, r.error_code, node)
        return Completion("ok", {**v, "epoch": r.broker_epoch}, node)
    if op.f == "heartbeat":
        if r.error_code != ErrorCode.NONE:
            return refused(v, r.error_code, node)
        result = {"fenced": r.is_fenced, "caught_up": r.is_caught_up, "shut_down": r.should_shut_down}
        return Completion("ok", {**v, **result}, node)
    if op.f == "alter":
        if r.error_code != ErrorCode.NONE:
            return refused(v, r.error_code, node)
        found = [p for t in r.topics for p in t.partitions if p.partition_index == v["partition"]]
        if not found:
            return Completion(
                "info", {**v, "error": "client:NoPartitionInAnswer"}, node, "the answer lacks the partition"
            )
        p = found[0]
        if p.error_code != ErrorCode.NONE:
            return refused(v, p.error_code, node)
        result = {
            "leader": p.leader_id,
            "leader_epoch": p.leader_epoch,
            "isr": list(p.isr),
            "partition_epoch": p.partition_epoch,
        }
        return Completion("ok", {**v, "result": result}, node)
    if op.f == "metadata":
        parts = {}
        for t in r.topics:
            if t.error_code != ErrorCode.NONE or t.name not in played_topics:
                continue
            for p in t.partitions:
                parts[f"{t.name}/{p.partition_index}"] = {
                    "leader": p.leader_id,
                    "leader_epoch": p.leader_epoch,
                    "isr": list(p.isr_nodes),
                    "replicas": list(p.replica_nodes),
                    "partition_epoch": p.partition_epoch,
                }
        brokers = sorted(b.node_id for b in r.brokers)
        return Completion("ok", {**v, "offset": r.metadata_offset, "brokers": brokers, "partitions": parts}, node)
    if op.f == "describe-cluster":
        if r.error_code != ErrorCode.NONE:
            return refused(v, r.error_code, node)
        brokers = {str(b.broker_id): {"epoch": b.broker_epoch, "fenced": b.is_fenced} for b in r.brokers}
        return Completion("ok", {**v, "offset": r.metadata_offset, "brokers": brokers}, node)
    if op.f == "quorum":
        if r.error_code != ErrorCode.NONE:
            return refused(v, r.error_code, node)
        return Completion("ok", {**v, "leader": r.leader_id, "epoch": r.leader_epoch}, node)
    if op.f == "barrier":
        result = r.results[0] if r.results else None
        if result is None or result.error_code != ErrorCode.NONE:
            return refused(v, result.error_code if result else ErrorCode.UNKNOWN_SERVER_ERROR, node)
        return Completion("ok", {**v, "offset": r.metadata_offset}, node)
    raise ValueError(f"played brokers have no op {op.f!r}")


# --- transports ------------------------------------------------------------------------------------

Callback = Callable[[Answer], None]


class SimTransport:
    """Requests over the simulated network (`SimAdminClient`: the real client's routing and errors)."""

    def __init__(self, env: WorkloadEnv, timeout_ms: int) -> None:
        from node.process.process import CONTROLLER_LISTENER
        from node.sim.admin_client import Endpoint, SimAdminClient, controller_endpoints
        from node.sim.cluster import BROKER_LISTENER

        db = env.db
        self.db = db
        self.sim = db.sim  # type: ignore[attr-defined]
        self.controllers = controller_endpoints([db.node_id(c) for c in db.controllers])  # type: ignore[attr-defined]
        self.endpoints = {
            n: Endpoint(db.node_id(n), CONTROLLER_LISTENER if n[0] == "c" else BROKER_LISTENER)  # type: ignore[attr-defined]
            for n in db.nodes
        }
        self.admin = SimAdminClient(self.sim, self.controllers, principal="User:admin", request_timeout_ms=timeout_ms)

    def _done(self, on_done: Callback) -> Callable[[Any], None]:
        def finish(r: Any) -> None:
            node = self.db.node_of(r.server.node_id) if r.server is not None else None  # type: ignore[attr-defined]
            on_done(Answer(r.response if r.ok else None, None if r.ok else r.error, node))

        return finish

    def to_controller(self, request: Any, on_done: Callback, *, idempotent: bool = False) -> None:
        from node.client.admin import Target

        self.admin.send(
            request, self._done(on_done), target=Target.CONTROLLER, endpoints=self.controllers, idempotent=idempotent
        )

    def to_node(self, node: str, request: Any, on_done: Callback) -> None:
        self.admin.send_to(self.endpoints[node], request, on_done=self._done(on_done), idempotent=True)

    def blocking(self, request: Any, node: str | None = None) -> Answer:
        box: list[Answer] = []
        if node is None:
            self.to_controller(request, box.append)
        else:
            self.to_node(node, request, box.append)
        if not self.sim.run_until_true(lambda: bool(box), int(SETUP_TIMEOUT_S * 1000)):
            return Answer(error=TimeoutError("no answer in the simulation"))
        return box[0]

    def close(self) -> None:
        """Nothing to release: the simulation goes away with the run."""


class RealTransport:
    """Requests with `node.client.AdminClient` on the run's asyncio loop: one client over every
    controller (registration, heartbeats, AlterPartition, barriers find the active one) and one per
    node for reads of that node's image."""

    def __init__(self, env: WorkloadEnv, timeout_ms: int) -> None:
        from node.client import AdminClient

        db = env.db
        self.db = db
        self.loop: asyncio.AbstractEventLoop = env.scheduler.loop  # type: ignore[attr-defined]
        login = client_login(db)
        common = {"request_timeout_ms": timeout_ms, "connect_timeout_ms": min(1_000, timeout_ms), **login}
        self.controllers = AdminClient([db.controller_address(c) for c in db.controllers], **common)  # type: ignore[attr-defined]
        self.nodes = {
            n: AdminClient(
                db.controller_address(n) if n[0] == "c" else db.broker_address(n),  # type: ignore[attr-defined]
                attempt_timeout_ms=timeout_ms,
                **common,
            )
            for n in db.nodes
        }

    async def _send(self, client: Any, request: Any, target: Any, idempotent: bool, node: str | None) -> Answer:
        try:
            response, server = await client.send_with_server(request, target=target, idempotent=idempotent)
        except Exception as exc:  # typed KafkaErrors say definite or not; anything else is unknown
            where = getattr(exc, "server", None)
            return Answer(error=exc, node=node or (self.db.node_of_address(where) if where else None))  # type: ignore[attr-defined]
        return Answer(response, None, node or self.db.node_of_address(server))  # type: ignore[attr-defined]

    def _start(self, coro: Any, on_done: Callback) -> None:
        task = self.loop.create_task(coro)
        task.add_done_callback(lambda t: on_done(t.result() if not t.cancelled() else Answer(error=CancelledOp())))

    def to_controller(self, request: Any, on_done: Callback, *, idempotent: bool = False) -> None:
        from node.client.admin import Target

        self._start(self._send(self.controllers, request, Target.CONTROLLER, idempotent, None), on_done)

    def to_node(self, node: str, request: Any, on_done: Callback) -> None:
        from node.client.admin import Target

        self._start(self._send(self.nodes[node], request, Target.ANY, True, node), on_done)

    def blocking(self, request: Any, node: str | None = None) -> Answer:
        from node.client.admin import Target

        client = self.controllers if node is None else self.nodes[node]
        target = Target.CONTROLLER if node is None else Target.ANY
        return self.loop.run_until_complete(self._send(client, request, target, node is not None, node))

    def close(self) -> None:
        if self.loop.is_closed() or self.loop.is_running():
            return

        async def close_all() -> None:
            for client in (self.controllers, *self.nodes.values()):
                await client.close()

        self.loop.run_until_complete(asyncio.wait_for(close_all(), 10))


class CancelledOp(Exception):
    """The run ended with the op in flight: its outcome is unknown."""


# --- the client ------------------------------------------------------------------------------------


class PlayedBrokersClient:
    """A `Handler`: each op of the generator becomes one request; answers become completions."""

    def __init__(
        self,
        transport: SimTransport | RealTransport,
        facts: Mapping[str, Any],
        seed: int,
        observer: KafkaObserver | None = None,
    ) -> None:
        self.transport = transport
        self.observer = observer  # the brokers' images through confluent-kafka (`kafka-*` reads)
        self.facts = dict(facts)
        self.cluster_id = facts["cluster_id"]
        self.topics = sorted(facts["topics"])
        self.controllers = [n for n in facts["nodes"] if n[0] in "cn"]
        self.last_controller: str | None = None
        self.rng = random.Random(seed ^ 0xB20CE5)

    def invoke(self, op: Op, done: DoneFn) -> None:
        if op.f == "setup":
            done(Completion("ok", self.facts))
            return
        if op.f in KAFKA_KINDS.values():
            self._observe(op, done)
            return
        try:
            request = request_of(op.f, op.value or {}, self.cluster_id, self.topics)
        except (KeyError, TypeError, ValueError) as exc:
            done(Completion("fail", error=f"cannot build the request: {exc}"))
            return

        def finish(answer: Answer) -> None:
            completion = completion_of(op, answer, self.topics)
            if completion.type == "ok" and op.f in ("register", "heartbeat", "alter"):
                self.last_controller = completion.node
            done(completion)

        if op.f in ("register", "heartbeat", "alter"):
            self.transport.to_controller(request, finish)
        elif op.f == "barrier":
            self.transport.to_controller(request, finish, idempotent=True)
        elif op.f == "quorum":
            node = self.last_controller if self.last_controller in self.controllers else None
            node = node or self.rng.choice(self.controllers)
            op_value = {**(op.value or {}), "node": node}

            def asked(answer: Answer) -> None:
                completion = completion_of(Op(op.f, op_value), answer, self.topics)
                if completion.type != "ok" and self.last_controller == node:
                    self.last_controller = None  # down or cut off: ask another controller next time
                done(completion)

            self.transport.to_node(node, request, asked)
        else:
            self.transport.to_node(op.value["node"], request, finish)

    def _observe(self, op: Op, done: DoneFn) -> None:
        observe(self.observer, op, done)


def observe(observer: KafkaObserver | None, op: Op, done: DoneFn) -> None:
    """A `kafka-*` read: librdkafka's answer as it is (formats: `checkers.metadata_answers`); also the
    whole client of the observation workloads on Apache Kafka (`workloads.kafka_observe`)."""
    v = dict(op.value or {})
    if observer is None or not observer.observes(v.get("node")):
        done(Completion("fail", v, error=f"{op.f}: no confluent-kafka client for node {v.get('node')!r}"))
        return

    def answered(value: Mapping[str, Any] | None, error: Exception | None, node: str) -> None:
        done(broke(v, error, node) if error is not None else Completion("ok", {**v, **(value or {})}, node))

    observer.read(op.f, v["node"], answered)


# --- preparing the cluster -------------------------------------------------------------------------


def cluster_timing(db: Any) -> tuple[int, int]:
    """(broker.session.timeout.ms, broker.heartbeat.interval.ms) the controllers use."""
    sim = getattr(db, "sim", None)
    if sim is not None and sim.cluster is not None:
        return sim.cluster.broker_session_timeout_ms, sim.cluster.broker_heartbeat_interval_ms
    settings = getattr(db, "settings", {}) or {}
    return int(settings.get("broker.session.timeout.ms", 9_000)), int(
        settings.get("broker.heartbeat.interval.ms", 2_000)
    )


class Preparation:
    """Registers and unfences the played brokers and creates their topics, before the history starts."""

    def __init__(self, transport: SimTransport | RealTransport, opts: Options, seed: int) -> None:
        self.t = transport
        self.opts = opts
        self.seed = seed
        self.brokers = [opts.broker_id_base + i for i in range(opts.brokers)]
        self.epochs: dict[int, int] = {}
        self.controller: str | None = None  # the node whose image names the topic ids

    def _until(self, what: str, attempt: Callable[[], Any]) -> Any:
        deadline = time.monotonic() + SETUP_TIMEOUT_S
        last: Any = None
        for _ in range(10_000):
            result, last = attempt()
            if result is not None:
                return result
            if time.monotonic() > deadline:
                break
            if isinstance(self.t, RealTransport):
                time.sleep(0.1)
        raise RuntimeError(f"preparing the played brokers: {what} failed: {last}")

    def cluster_id(self) -> str:
        def attempt() -> tuple[str | None, Any]:
            a = self.t.blocking(DescribeClusterRequest(True))
            ok = a.response is not None and a.response.error_code == ErrorCode.NONE and a.response.cluster_id
            return (a.response.cluster_id if ok else None), (a.error or a.response)

        return self._until("reading the cluster id", attempt)

    def register(self, cluster_id: str, broker: int, incarnation: str) -> int:
        def attempt() -> tuple[int | None, Any]:
            a = self.t.blocking(registration(cluster_id, broker, incarnation))
            ok = a.response is not None and a.response.error_code == ErrorCode.NONE
            return (a.response.broker_epoch if ok else None), (a.error or a.response)

        return self._until(f"registering broker {broker}", attempt)

    def heartbeat_all(self) -> bool:
        """One caught-up heartbeat per played broker; True when all answered unfenced."""
        unfenced = True
        for b in self.brokers:
            epoch = self.epochs[b]
            a = self.t.blocking(BrokerHeartbeatRequest(b, epoch, epoch))
            unfenced &= a.response is not None and a.response.error_code == ErrorCode.NONE and not a.response.is_fenced
        return unfenced

    def create_topics(self) -> dict[str, dict[str, Any]]:
        names = [f"{TOPIC_PREFIX}{i}" for i in range(self.opts.topics)]
        n, rf = len(self.brokers), self.opts.replication_factor
        layouts = {
            name: {str(p): [self.brokers[(p + t + j) % n] for j in range(rf)] for p in range(self.opts.partitions)}
            for t, name in enumerate(names)
        }

        def attempt() -> tuple[bool | None, Any]:
            self.heartbeat_all()
            topics = tuple(
                CreatableTopic(
                    name,
                    assignments=tuple(CreatableReplicaAssignment(int(p), tuple(ids)) for p, ids in layout.items()),
                )
                for name, layout in layouts.items()
            )
            a = self.t.blocking(CreateTopicsRequest(topics))
            if a.response is None:
                return None, a.error
            codes = {t.error_code for t in a.response.topics}
            done = codes <= {ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS}
            return (True if done else None), [code_name(c) for c in codes]

        if names:
            self._until("creating the played topics", attempt)
        ids = self._topic_ids(names)
        return {name: {"topic_id": ids[name], "replicas": layouts[name]} for name in names}

    def _topic_ids(self, names: list[str]) -> dict[str, str]:
        def attempt() -> tuple[dict[str, str] | None, Any]:
            self.heartbeat_all()
            a = self.t.blocking(MetadataRequest(tuple(names)), node=self.controller)
            if a.response is None:
                return None, a.error
            ids = {t.name: str(t.topic_id) for t in a.response.topics if t.error_code == ErrorCode.NONE}
            return (ids if set(ids) == set(names) else None), a.response

        return self._until("reading the played topics", attempt) if names else {}

    def run(self, nodes: Sequence[str]) -> dict[str, Any]:
        self.controller = next(n for n in nodes if n[0] in "cn")
        cluster_id = self.cluster_id()
        registrations = []
        for b in self.brokers:
            incarnation = incarnation_id(self.seed, b, 0)
            self.epochs[b] = self.register(cluster_id, b, incarnation)
            registrations.append({"broker": b, "incarnation": incarnation, "epoch": self.epochs[b]})
        self._until("unfencing the played brokers", lambda: (True if self.heartbeat_all() else None, "fenced"))
        topics = self.create_topics()
        self.heartbeat_all()
        return {"cluster_id": cluster_id, "registrations": registrations, "topics": topics}


# --- the workload run ------------------------------------------------------------------------------


# Liveness for played brokers: a registration, a heartbeat or an AlterPartition answered `ok` needs the
# active controller (each writes or is decided there), so after the final heal one of them must succeed.
PLAYED_BROKER_CHECKER_OPTIONS: dict[str, dict[str, Any]] = {
    "availability": {"write_f": ["register", "heartbeat", "alter"]},
}


class PlayedBrokersRun(WorkloadRun):
    """One run of a played-broker workload; `name` and `default_mix` come from the subclass."""

    name = "played-brokers"
    default_mix: Mapping[str, float] = {}

    def __init__(self, env: WorkloadEnv) -> None:
        self.env = env
        self.opts = Options.parse(env, self.name, self.default_mix)
        self.transport: SimTransport | RealTransport | None = None
        self.facts: dict[str, Any] | None = None
        self._client: PlayedBrokersClient | None = None
        self.observer: KafkaObserver | None = None
        self._latest: list[Any] = [None]  # the main phase's FleetGen after its last event

    def _transport(self) -> SimTransport | RealTransport:
        if self.transport is None:
            sim = getattr(self.env.db, "sim", None)
            cls = SimTransport if sim is not None else RealTransport
            self.transport = cls(self.env, self.opts.request_timeout_ms)
        return self.transport

    def setup(self) -> None:
        db = self.env.db
        session_ms, heartbeat_ms = cluster_timing(db)
        slack = self.opts.fence_slack_ms
        if slack is None:
            slack = 1_000 if getattr(db, "sim", None) is not None else max(1_000, session_ms)
        prepared = Preparation(self._transport(), self.opts, self.env.seed).run(list(db.nodes))
        self.facts = {
            "cluster_id": prepared["cluster_id"],
            "session_timeout_ms": session_ms,
            "heartbeat_interval_ms": heartbeat_ms,
            "fence_slack_ms": slack,
            "brokers": [r["broker"] for r in prepared["registrations"]],
            "nodes": {n: db.node_id(n) for n in db.nodes},  # type: ignore[attr-defined]
            "topics": prepared["topics"],
            "registrations": prepared["registrations"],
        }

    def generator(self) -> Any:
        facts = self.facts
        assert facts is not None, "setup() first"
        nodes = tuple(facts["nodes"])
        params = Params(
            seed=self.env.seed,
            session_ms=facts["session_timeout_ms"],
            heartbeat_ms=facts["heartbeat_interval_ms"],
            slack_ms=facts["fence_slack_ms"],
            nodes=nodes,
            controllers=tuple(n for n in nodes if n[0] in "cn"),
            mix=self.opts.mix,
            lag_ms=self.opts.lag_ms,
            kafka_nodes=self._kafka_nodes(),
        )
        slots = tuple(Slot(r["broker"], r["incarnation"], 0, r["epoch"]) for r in facts["registrations"])
        parts = tuple(
            Part(f"{name}/{p}", name, int(p), t["topic_id"], tuple(ids))
            for name, t in sorted(facts["topics"].items())
            for p, ids in sorted(t["replicas"].items(), key=lambda kv: int(kv[0]))
        )
        return Remembered(FleetGen(params, slots, parts), self._latest)

    def recovery_generator(self) -> Any:
        """The played brokers carry on from where the main phase left them (their epochs and
        incarnations are the cluster's now), so heartbeats and registrations after the heal show
        whether the controller came back."""
        latest = self._latest[0]
        return self.generator() if latest is None else latest

    def final_generator(self) -> Any:
        """After the heal: a barrier, then every node's image (Metadata and DescribeCluster)."""
        nodes = list(self.env.db.nodes)
        kafka = self._kafka_nodes()
        reads = [Op(KAFKA_KINDS[f] if n in kafka else f, {"node": n}) for n in nodes for f in KAFKA_KINDS]
        return seq(Op("barrier", {}), *reads)

    def _kafka_nodes(self) -> frozenset[str]:
        """The nodes whose images are observed through confluent-kafka: the brokers, with that client."""
        return frozenset(self.env.db.brokers) if self.opts.client == CONFLUENT else frozenset()

    def client(self) -> PlayedBrokersClient:
        if self._client is None:
            assert self.facts is not None, "setup() first"
            if self.opts.client == CONFLUENT:
                self.observer = KafkaObserver(self.env, self.opts.request_timeout_ms, sorted(self.facts["topics"]))
            self._client = PlayedBrokersClient(self._transport(), self.facts, self.env.seed, self.observer)
        return self._client

    def close(self) -> None:
        if self.observer is not None:
            self.observer.close()
        if self.transport is not None:
            self.transport.close()
