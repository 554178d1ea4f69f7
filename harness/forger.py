"""The forger: a side process in every run that sends forged and unauthorised requests.

A node that authenticates, authorizes and routes correctly refuses every one of these; a node that
lets one through has a security hole that no workload would notice, because the harness's own
clients are super users. So while the workload runs, the forger sends one request every
`interval_s` (2 s), cycling through the kinds below, each to a random node that has the role it
targets, as the principal `User:mallory` (who can log in but holds no ACL), except the last four
kinds, which the fuzzer found (docs/trust/fuzzing.md) and which go out with the cluster's own
credentials so that the quorum rules, not authorization, must refuse them:

| kind | sent to | KIP rule it tests |
|---|---|---|
| envelope-from-client | a controller | KIP-590: only a broker (ClusterAction) may forward an Envelope |
| alter-partition-without-cluster-action | a controller | KIP-497: AlterPartition needs ClusterAction |
| broker-registration-without-cluster-action | a controller | KIP-631: registration needs ClusterAction |
| broker-heartbeat-without-cluster-action | a controller | KIP-631: heartbeats (a forged controlled shutdown) too |
| vote-on-broker-listener | a broker's listener | KIP-595/KIP-500: quorum RPCs are not for clients |
| begin-quorum-epoch-on-broker-listener | a broker's listener | the same |
| fetch-on-broker-listener | a broker's listener | the same (a forged voter's acknowledgement) |
| write-without-acl | a broker | ACLs: IncrementalAlterConfigs needs AlterConfigs on the topic |
| create-topic-without-acl | a broker | ACLs: CreateTopics needs Create |
| create-acl-without-alter | a broker | ACLs: CreateAcls needs Alter on the cluster |
| write-with-bad-login | a broker (real backends) | SASL/PLAIN: a wrong password never gets a principal |
| end-quorum-epoch-from-non-voter | a controller | KIP-595: voter-only RPC; leader INT32_MAX at epoch INT32_MAX |
| vote-from-non-voter | a controller | KIP-595: a candidate outside the voter set changes nothing |
| begin-quorum-epoch-at-int32-max | a controller | epochs are int32: the limit itself is never taken |
| replayed-vote-of-past-epoch | a controller | KIP-595: a Vote of a past epoch is fenced |

Every op is recorded in history.jsonl under process "forger" (then "forger-1", ... after an
indeterminate outcome, as Jepsen's process semantics require), f = "forge-<kind>", value = what was
sent and the marker its effect would leave: a list item, topic name, ACL resource or broker rack no
one else writes, or, for quorum RPCs, an epoch far above any real one (FORGED_EPOCH_BASE). The
`forgery` checker (checkers/forgery.py) then judges the answers and looks for the markers in every
node's final image and committed log.

Outcomes: an answer with error codes is `fail` (error = the first non-zero code's name); an answer
without any error is `ok`, i.e. accepted; a definite client-side failure (refused connection, SASL
refused) is `fail`; no answer or a lost connection is `info`. On the simulator there are no logins
(a simulated client simply has its principal), so write-with-bad-login runs on real backends only.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harness.db.kraft import FORGER_USER, NODE_USER
from node.client.admin import _error_codes  # every error code of a response, nested ones included
from node.client.errors import AMBIGUOUS_CODES, code_name
from node.protocol.acls import AclCreation, AclOperation, AclPermissionType, CreateAclsRequest, PatternType
from node.protocol.acls import ResourceType as AclResource
from node.protocol.admin import (
    AlterableConfig,
    ConfigOperation,
    ConfigResourceType,
    CreatableTopic,
    CreateTopicsRequest,
    IncrementalAlterConfigsRequest,
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
from node.protocol.forwarding import wrap
from node.protocol.messages import BeginQuorumEpochRequest, EndQuorumEpochRequest, FetchRequest, VoteRequest
from vocab.schedulers import NS_PER_S, Scheduler

FORGER_PROCESS = "forger"
FORGER_PRINCIPAL = "User:mallory"
FORGER_TOPIC = "kchaos-forger"  # created by the harness; only forged requests name it
LIST_CONFIG = "leader.replication.throttled.replicas"  # a list config: an applied APPEND leaves its item
FORGED_EPOCH_BASE = 1_000_000  # forged quorum RPCs claim epochs from here: far above any real epoch
FORGED_BROKER_BASE = 9_000  # forged registrations claim broker ids from here
UNKNOWN_TOPIC_ID = uuid.UUID("00000000-0000-4000-8000-00000000f0e9")
DEFAULT_INTERVAL_S = 2.0
INT32_MAX = 2**31 - 1  # the wire limit of ids and epochs: a non-voter id and an epoch no node may take
DEFAULT_TIMEOUT_S = 5.0
_CODEC = BinaryCodec()


@dataclass(frozen=True, slots=True)
class Shot:
    """One forged request, ready to go: to `node` on its `listener` ("controller" or "broker")."""

    kind: str
    node: str
    listener: str
    request: Any
    value: dict[str, Any]  # what the history records (marker, forged epoch, ...)
    bad_login: bool = False
    as_peer: bool = False  # sent with the cluster's own credentials (see Kind.as_peer)


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a shot ended, as the history records it."""

    type: str  # ok | fail | info
    codes: tuple[str, ...] = ()  # error code names of the answer (NONE included), when answered
    error: str | None = None


# (forger, op number, marker) -> the request and what the history records about it
Builder = Callable[["Forger", int, str], tuple[Any, dict[str, Any]]]


@dataclass(frozen=True, slots=True)
class Kind:
    name: str
    role: str  # "controller" | "broker": who it is sent to
    listener: str  # "controller" | "broker"
    build: Builder
    needs_login: bool = False  # only where clients log in (not on the simulator)
    # Sent as a peer holding the cluster's credentials (the inter-node user; on the simulator the
    # admin super user), so that authorization lets it through and the quorum rules themselves judge
    # it: a confused or compromised peer, or a cluster without an authorizer.
    as_peer: bool = False


def _append_marker(marker: str) -> IncrementalAlterConfigsRequest:
    change = AlterableConfig(LIST_CONFIG, ConfigOperation.APPEND, marker)
    resource = IncrementalAlterConfigsResource(ConfigResourceType.TOPIC, FORGER_TOPIC, (change,))
    return IncrementalAlterConfigsRequest((resource,))


def _config_item(n: int) -> str:
    return f"{7_000_000 + n}:0"  # a `partition:broker` item no one else appends


def _envelope(forger: Forger, n: int, marker: str) -> tuple[Any, dict[str, Any]]:
    item = _config_item(n)
    frame = _CODEC.encode_request(n, _append_marker(item))
    envelope = wrap(frame, "User:admin", "10.9.9.9", "BROKER", "SASL_PLAINTEXT")  # claims to carry the admin
    return envelope, {"markers": [item], "claims": "User:admin"}


def _alter_partition(forger: Forger, n: int, marker: str) -> tuple[Any, dict[str, Any]]:
    broker = forger.rng.choice(forger.broker_ids)
    data = (AlterPartitionPartitionData(0, 0, (broker,), 0),)
    return AlterPartitionRequest(broker, 0, (AlterPartitionTopicData(UNKNOWN_TOPIC_ID, data),)), {"broker": broker}


def _registration(forger: Forger, n: int, marker: str) -> tuple[Any, dict[str, Any]]:
    broker = FORGED_BROKER_BASE + n
    request = BrokerRegistrationRequest(
        broker,
        forger.cluster_id or "forged-cluster",
        uuid.uuid5(uuid.NAMESPACE_OID, marker),
        (Listener("BROKER", "192.0.2.1", 9092, 2),),
        (BrokerRegistrationFeature("metadata.version", 1, 1),),
        rack=marker,
    )
    return request, {"markers": [marker], "broker": broker}


def _heartbeat(forger: Forger, n: int, marker: str) -> tuple[Any, dict[str, Any]]:
    broker = forger.rng.choice(forger.broker_ids)  # a forged controlled shutdown of a real broker
    return BrokerHeartbeatRequest(broker, 0, 0, want_shut_down=True), {"broker": broker}


def _vote(forger: Forger, n: int, marker: str) -> tuple[Any, dict[str, Any]]:
    epoch = FORGED_EPOCH_BASE + n
    candidate = forger.rng.choice(forger.voter_ids)
    return VoteRequest(None, epoch, candidate, epoch, 1 << 40), {"forged_epoch": epoch, "claims": candidate}


def _begin_quorum_epoch(forger: Forger, n: int, marker: str) -> tuple[Any, dict[str, Any]]:
    epoch = FORGED_EPOCH_BASE + n
    leader = forger.rng.choice(forger.voter_ids)
    return BeginQuorumEpochRequest(None, leader, epoch), {"forged_epoch": epoch, "claims": leader}


def _fetch(forger: Forger, n: int, marker: str) -> tuple[Any, dict[str, Any]]:
    voter = forger.rng.choice(forger.voter_ids)  # a forged acknowledgement of everything
    return FetchRequest(None, voter, 0, 1 << 40, 0), {"claims": voter}


def _write(forger: Forger, n: int, marker: str) -> tuple[Any, dict[str, Any]]:
    item = _config_item(n)
    return _append_marker(item), {"markers": [item]}


def _create_topic(forger: Forger, n: int, marker: str) -> tuple[Any, dict[str, Any]]:
    return CreateTopicsRequest((CreatableTopic(marker, 1, 1),)), {"markers": [marker]}


def _create_acl(forger: Forger, n: int, marker: str) -> tuple[Any, dict[str, Any]]:
    acl = AclCreation(
        AclResource.TOPIC,
        marker,
        PatternType.LITERAL,
        FORGER_PRINCIPAL,
        "*",
        AclOperation.ALL,
        AclPermissionType.ALLOW,
    )
    return CreateAclsRequest((acl,)), {"markers": [marker]}


def _end_quorum_epoch_from_non_voter(forger: Forger, n: int, marker: str) -> tuple[Any, dict[str, Any]]:
    """What the fuzzer found (issue 24): a resignation of "leader" INT32_MAX, no voter, at epoch
    INT32_MAX, naming every voter a successor; accepted, it moved the node to that epoch."""
    request = EndQuorumEpochRequest(forger.cluster_id, INT32_MAX, INT32_MAX, INT32_MAX, tuple(forger.voter_ids))
    return request, {"forged_epoch": INT32_MAX, "claims": INT32_MAX}


def _vote_from_non_voter(forger: Forger, n: int, marker: str) -> tuple[Any, dict[str, Any]]:
    epoch = FORGED_EPOCH_BASE + n
    return VoteRequest(forger.cluster_id, epoch, INT32_MAX, epoch, 1 << 40), {
        "forged_epoch": epoch,
        "claims": INT32_MAX,
    }


def _begin_quorum_epoch_at_int32_max(forger: Forger, n: int, marker: str) -> tuple[Any, dict[str, Any]]:
    leader = forger.rng.choice(forger.voter_ids)  # a real voter's id, at the one epoch no node may take
    request = BeginQuorumEpochRequest(forger.cluster_id, leader, INT32_MAX)
    return request, {"forged_epoch": INT32_MAX, "claims": leader}


def _replayed_vote(forger: Forger, n: int, marker: str) -> tuple[Any, dict[str, Any]]:
    """A Vote of epoch 0 replayed: every running quorum has elected a leader of epoch >= 1 since."""
    candidate = forger.rng.choice(forger.voter_ids)
    return VoteRequest(forger.cluster_id, 0, candidate, 0, 1 << 40), {"replayed_epoch": 0, "claims": candidate}


KINDS: tuple[Kind, ...] = (
    Kind("envelope-from-client", "controller", "controller", _envelope),
    Kind("alter-partition-without-cluster-action", "controller", "controller", _alter_partition),
    Kind("broker-registration-without-cluster-action", "controller", "controller", _registration),
    Kind("broker-heartbeat-without-cluster-action", "controller", "controller", _heartbeat),
    Kind("vote-on-broker-listener", "broker", "broker", _vote),
    Kind("begin-quorum-epoch-on-broker-listener", "broker", "broker", _begin_quorum_epoch),
    Kind("fetch-on-broker-listener", "broker", "broker", _fetch),
    Kind("write-without-acl", "broker", "broker", _write),
    Kind("create-topic-without-acl", "broker", "broker", _create_topic),
    Kind("create-acl-without-alter", "broker", "broker", _create_acl),
    Kind("write-with-bad-login", "broker", "broker", _write, needs_login=True),
    # What the fuzzer found (docs/trust/fuzzing.md): quorum RPCs on the controller listener itself.
    Kind("end-quorum-epoch-from-non-voter", "controller", "controller", _end_quorum_epoch_from_non_voter, as_peer=True),
    Kind("vote-from-non-voter", "controller", "controller", _vote_from_non_voter, as_peer=True),
    Kind("begin-quorum-epoch-at-int32-max", "controller", "controller", _begin_quorum_epoch_at_int32_max, as_peer=True),
    Kind("replayed-vote-of-past-epoch", "controller", "controller", _replayed_vote, as_peer=True),
)


def outcome_of_response(response: Any) -> Outcome:
    """Answered: `ok` when no error code is set anywhere in it (the forgery was accepted), else `fail`."""
    numbers = list(_error_codes(response))
    codes = tuple(code_name(c) for c in numbers)
    refused = [c for c in codes if c != "NONE"]
    if not refused:
        return Outcome("ok", codes)
    ambiguous = any(c in AMBIGUOUS_CODES for c in numbers)  # e.g. REQUEST_TIMED_OUT: may have been applied
    return Outcome("info" if ambiguous else "fail", codes, refused[0])


def outcome_of_error(error: BaseException) -> Outcome:
    """A client-side failure: definite ones (refused connection, SASL refused) `fail`, others `info`."""
    from node.client.errors import KafkaError, ServerError

    if isinstance(error, ServerError):
        name = code_name(error.code)
        return Outcome("fail" if error.definite else "info", (name,), name)
    if isinstance(error, KafkaError):
        return Outcome("fail" if error.definite else "info", (), f"{type(error).__name__}: {error}")
    return Outcome("info", (), f"{type(error).__name__}: {error}")


# --- transports ----------------------------------------------------------------------------------


class SimTransport:
    """Forged requests over the simulated network, as `User:mallory` (the simulator has no logins)."""

    logins = False

    def __init__(self, db: Any, timeout_s: float) -> None:
        from node.sim.admin_client import SimAdminClient, broker_endpoints

        self.db = db
        self.timeout_ms = int(timeout_s * 1000)
        everyone = broker_endpoints([db.node_id(n) for n in db.nodes])
        self.client = SimAdminClient(db.sim, everyone, principal=FORGER_PRINCIPAL, request_timeout_ms=self.timeout_ms)
        self.peer = SimAdminClient(db.sim, everyone, principal=db.admin_principal, request_timeout_ms=self.timeout_ms)

    def send(self, shot: Shot, done: Callable[[Outcome], None]) -> None:
        from node.process.process import CONTROLLER_LISTENER
        from node.sim.admin_client import Endpoint
        from node.sim.cluster import BROKER_LISTENER

        listener = CONTROLLER_LISTENER if shot.listener == "controller" else BROKER_LISTENER
        endpoint = Endpoint(self.db.node_id(shot.node), listener)

        def finished(result: Any) -> None:
            done(outcome_of_response(result.response) if result.ok else outcome_of_error(result.error))

        client = self.peer if shot.as_peer else self.client
        client.send_to(endpoint, shot.request, idempotent=False, timeout_ms=self.timeout_ms, on_done=finished)

    def close(self) -> None:
        pass


class RealTransport:
    """Forged requests over TCP with SASL/PLAIN as mallory (or with a wrong password), one connection
    each, sent whatever the endpoint's ApiVersions says it serves."""

    logins = True

    def __init__(self, db: Any, scheduler: Any, timeout_s: float) -> None:
        self.db = db
        self.loop = scheduler.loop
        self.timeout_s = timeout_s
        self.tasks: set[asyncio.Task[None]] = set()

    def send(self, shot: Shot, done: Callable[[Outcome], None]) -> None:
        task = self.loop.create_task(self._send(shot, done))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _send(self, shot: Shot, done: Callable[[Outcome], None]) -> None:
        from node.client.connection import Address, Connection

        address = self.db.controller_address(shot.node) if shot.listener == "controller" else None
        host, _, port = (address or self.db.broker_address(shot.node)).rpartition(":")
        login = self.db.login(NODE_USER if shot.as_peer else FORGER_USER)
        credentials = (login["username"], login["password"] + ("-wrong" if shot.bad_login else ""))
        conn = Connection(Address(host, int(port)), BinaryCodec(), credentials)
        deadline = self.loop.time() + self.timeout_s
        try:
            await conn.open(self.timeout_s)
            response = await conn.request(shot.request, deadline)
        except Exception as exc:  # every failure is an outcome of the op, definite or not
            done(outcome_of_error(exc))
            return
        finally:
            await conn.close()
        done(outcome_of_response(response))

    def close(self) -> None:
        for task in list(self.tasks):
            task.cancel()


# --- the side process ------------------------------------------------------------------------------


@dataclass
class Forger:
    """See the module docstring. `sink` is the history writer's `write`."""

    db: Any
    scheduler: Scheduler
    sink: Callable[[dict[str, Any]], Any]
    seed: int
    transport: Any
    interval_s: float = DEFAULT_INTERVAL_S
    rng: random.Random = field(init=False)
    voter_ids: tuple[int, ...] = field(init=False)
    broker_ids: tuple[int, ...] = field(init=False)
    cluster_id: str | None = None
    process: str = FORGER_PROCESS
    _count: int = 0
    _crashes: int = 0
    _kinds: list[Kind] = field(init=False)
    _pending: dict[str, Any] | None = None  # the invoke of the op in flight
    _stopped: bool = False
    _closed: bool = False

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed ^ 0xF0E9)
        self.voter_ids = tuple(self.db.node_id(n) for n in self.db.controllers)
        self.broker_ids = tuple(self.db.node_id(n) for n in self.db.brokers)
        self._kinds = [k for k in KINDS if self.transport.logins or not k.needs_login]
        if not self.broker_ids:  # a cluster without brokers: only what controllers receive
            self._kinds = [k for k in self._kinds if k.role == "controller"]
        # A short run still gets a different mix with every seed. The quorum kinds the fuzzer added come
        # after the others: a 25 s gate or matrix run sends about ten shots, and those go to the kinds
        # whose planted bugs the gate counts on (shuffled first, the same order as before they came).
        quorum = [k for k in self._kinds if k.as_peer]
        self._kinds = [k for k in self._kinds if not k.as_peer]
        self.rng.shuffle(self._kinds)
        self.rng.shuffle(quorum)
        self._kinds += quorum

    # -- the runner's side ----------------------------------------------------------------------------

    def setup(self) -> None:
        """Create the topic forged config writes name (as the harness's admin), so that a forged
        write that got through would be applied, not refused for naming no topic."""
        self.db.create_topics([FORGER_TOPIC])

    def start(self) -> None:
        self.scheduler.call_at(self.scheduler.now() + int(self.interval_s * NS_PER_S), self._fire)

    def stop(self) -> None:
        """No new forged request after this; the one in flight may still complete."""
        self._stopped = True

    def close(self) -> None:
        """The run is over: an op still in flight is indeterminate (`info`)."""
        if self._closed:
            return
        if self._pending is not None:
            self._complete(Outcome("info", (), "no answer before the run ended"))
        self._closed = True
        self.transport.close()

    # -- one forged request after another -------------------------------------------------------------

    def _fire(self) -> None:
        if self._stopped or self._closed:
            return
        kind = self._kinds[self._count % len(self._kinds)]
        n = self._count
        self._count += 1
        shot = self._shot(kind, n)
        now = self.scheduler.now()
        self._pending = {"f": f"forge-{kind.name}", "value": shot.value, "node": shot.node}
        self.sink({"time": now, "process": self.process, "type": "invoke", **self._pending})
        self.transport.send(shot, self._answered)

    def _shot(self, kind: Kind, n: int) -> Shot:
        marker = f"forged-{self.seed % 100_000}-{n}"
        request, extra = kind.build(self, n, marker)
        nodes = self.db.controllers if kind.role == "controller" else self.db.brokers
        node = self.rng.choice(list(nodes))
        principal = "peer" if kind.as_peer else FORGER_PRINCIPAL
        value = {"kind": kind.name, "listener": kind.listener, "principal": principal, **extra}
        if kind.needs_login:
            value["login"] = "wrong password"
        return Shot(kind.name, node, kind.listener, request, value, bad_login=kind.needs_login, as_peer=kind.as_peer)

    def _answered(self, outcome: Outcome) -> None:
        if self._closed or self._pending is None:
            return  # an answer after the run ended (recorded as info at close)
        self._complete(outcome)
        if not self._stopped:
            self.scheduler.call_at(self.scheduler.now() + int(self.interval_s * NS_PER_S), self._fire)

    def _complete(self, outcome: Outcome) -> None:
        pending, self._pending = self._pending, None
        assert pending is not None
        value = {**pending["value"], "codes": list(outcome.codes)} if outcome.codes else pending["value"]
        event = {
            "time": self.scheduler.now(),
            "process": self.process,
            "type": outcome.type,
            "f": pending["f"],
            "value": value,
            "node": pending["node"],
            "error": outcome.error,
        }
        self.sink(event)
        if outcome.type == "info":  # Jepsen: that process never issues again
            self._crashes += 1
            self.process = f"{FORGER_PROCESS}-{self._crashes}"


def make_forger(db: Any, backend: Any, scheduler: Any, sink: Callable[[dict[str, Any]], Any], seed: int) -> Forger:
    """The forger for a run of the kraft cluster on `backend` (sim or a real one)."""
    transport: Any
    if getattr(db, "sim", None) is not None:
        transport = SimTransport(db, DEFAULT_TIMEOUT_S)
    else:
        transport = RealTransport(db, scheduler, DEFAULT_TIMEOUT_S)
    return Forger(db, scheduler, sink, seed, transport, cluster_id=_cluster_id(db))


def _cluster_id(db: Any) -> str | None:
    sim = getattr(db, "sim", None)
    if sim is None:
        return None
    for node_id in sim.live_nodes():
        process = sim.process(node_id)
        if process is not None and process.image.cluster_id:
            return str(process.image.cluster_id)
    return None


__all__ = [
    "FORGED_BROKER_BASE",
    "FORGED_EPOCH_BASE",
    "FORGER_PRINCIPAL",
    "FORGER_PROCESS",
    "FORGER_TOPIC",
    "KINDS",
    "Forger",
    "Outcome",
    "Shot",
    "make_forger",
    "outcome_of_error",
    "outcome_of_response",
]
