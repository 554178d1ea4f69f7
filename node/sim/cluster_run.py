"""Whole-cluster simulator runs: a config-write workload through the brokers under random faults.

`run_cluster` is the cluster-mode counterpart of `node.sim.runner.run`: it starts a KRaft cluster of
`NodeProcess`es, creates a topic, lets admin clients append unique items to one list-valued topic
config through random brokers while the fault injector partitions, kills and pauses nodes, then
heals everything and waits until the cluster has settled (a caught-up quorum leader, an active
controller, every broker ONLINE, every image at the same offset). The per-event invariants include
image agreement (`node.sim.invariants.ImageAgreement`); the final checks are end to end:

- every acknowledged append is in every node's image (the list config holds its item);
- every append was applied at most once: the committed log holds one `ConfigRecord` for the config
  per applied request, and each applied request added exactly one new item, so the number of those
  records equals the number of items (a request applied twice would add a record, not an item);
- nothing that certainly failed (a definite error) is in the images.

Also here: small inspection helpers the scenario tests share (`active_controller`, `settled`,
`committed_records`, `config_records`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from node.broker.lifecycle import BrokerState
from node.metadata.records import ConfigRecord, MetadataRecord, MetadataRecordError, decode_record
from node.protocol.admin import (
    AlterableConfig,
    ConfigOperation,
    ConfigResourceType,
    CreatableTopic,
    CreateTopicsRequest,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResource,
)
from node.protocol.errors import ErrorCode
from node.sim.admin_client import CallResult, SimAdminClient, broker_endpoints
from node.sim.cluster import ClusterConfig
from node.sim.faults import FaultConfig, FaultInjector
from node.sim.network import LinkModel
from node.sim.runner import converged
from node.sim.world import SimConfig, Simulation, Violation

TOPIC = "chaos"
LIST_CONFIG = "leader.replication.throttled.replicas"  # a list config whose items are "N:M"


# --- inspection --------------------------------------------------------------------------------------


def active_controller(sim: Simulation) -> int | None:
    """The node whose controller is active (at most one is, once the cluster settles)."""
    for node_id, host in sim.nodes.items():
        process = host.process
        if host.up and process is not None and process.controller is not None and process.controller.active:
            return node_id
    return None


def broker_state(sim: Simulation, node_id: int) -> BrokerState | None:
    process = sim.nodes[node_id].process
    return None if process is None or process.broker is None else process.broker.state


def settled(sim: Simulation) -> bool:
    """The quorum converged, the leader's controller is active, every broker is ONLINE and every
    node's image is at the committed end."""
    if not converged(sim):
        return False
    leader = sim.leader()
    if leader is None or active_controller(sim) != leader:
        return False
    end = sim.nodes[leader].raft.high_watermark
    for node_id, host in sim.nodes.items():
        if host.process is None or host.process.image.last_offset + 1 != end:
            return False
        if host.roles is not None and host.roles.broker and broker_state(sim, node_id) is not BrokerState.ONLINE:
            return False
    return True


def supervised(sim: Simulation) -> bool:
    """What systemd's Restart=always does: start again every process that stopped by itself. Always
    True, so it can run inside a `run_until_true` predicate."""
    for node_id, host in sim.nodes.items():
        if not host.up and host.exit_reason is not None:
            sim.restart(node_id)
    return True


def committed_records(sim: Simulation) -> Iterator[tuple[int, MetadataRecord]]:
    """(offset, record) of every metadata record in the committed log (control records skipped)."""
    for batch in sim.checker.committed:
        if batch.control:
            continue
        for i, payload in enumerate(batch.records):
            try:
                yield batch.base_offset + i, decode_record(payload)
            except MetadataRecordError:
                continue


def config_records(sim: Simulation, resource_type: int, resource_name: str, name: str) -> list[ConfigRecord]:
    return [
        r
        for _, r in committed_records(sim)
        if isinstance(r, ConfigRecord)
        and (r.resource_type, r.resource_name, r.name) == (resource_type, resource_name, name)
    ]


def image_items(sim: Simulation, node_id: int, topic: str = TOPIC, name: str = LIST_CONFIG) -> set[str]:
    value = sim.nodes[node_id].process.image.config(ConfigResourceType.TOPIC, topic, name)
    return {item for item in (value or "").split(",") if item}


# --- the workload ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConfigWorkload:
    clients: int = 2
    interval_ms: int = 50  # each client starts its next append this long after the previous ended
    request_timeout_ms: int = 4_000


@dataclass
class AppendOp:
    item: str
    call: CallResult

    @property
    def status(self) -> str:
        """ok / fail / info: the call's, with a resource error answered by the server as fail/info."""
        if self.call.status != "ok":
            return self.call.status
        code = self.call.response.responses[0].error_code
        if code == ErrorCode.NONE:
            return "ok"
        return "info" if code in (ErrorCode.REQUEST_TIMED_OUT, ErrorCode.UNKNOWN_SERVER_ERROR) else "fail"


class ConfigAppender:
    """Clients that each keep one APPEND of a fresh item in flight, to a random broker."""

    def __init__(self, sim: Simulation, config: ConfigWorkload) -> None:
        self.sim = sim
        self.config = config
        brokers = broker_endpoints(sim.cluster.broker_ids if sim.cluster else ())
        self.clients = [
            SimAdminClient(sim, brokers, principal="User:admin", request_timeout_ms=config.request_timeout_ms)
            for _ in range(config.clients)
        ]
        self.ops: list[AppendOp] = []
        self.running = False

    def start(self) -> None:
        self.running = True
        for client in self.clients:
            self.sim.queue.after(0, self._next, client)

    def stop(self) -> None:
        self.running = False

    def _next(self, client: SimAdminClient) -> None:
        if not self.running:
            return
        item = f"{len(self.ops)}:{-client.address}"
        change = AlterableConfig(LIST_CONFIG, ConfigOperation.APPEND, item)
        resource = IncrementalAlterConfigsResource(ConfigResourceType.TOPIC, TOPIC, (change,))
        endpoint = client.endpoints[self.sim.rng.randrange(len(client.endpoints))]
        op = AppendOp(item, None)  # type: ignore[arg-type]
        self.ops.append(op)
        op.call = client.send(
            IncrementalAlterConfigsRequest((resource,)),
            lambda _result: self.sim.queue.after(self.config.interval_ms, self._next, client),
            endpoints=(endpoint,),
        )

    def counts(self) -> dict[str, int]:
        out = {"ok": 0, "fail": 0, "info": 0, "pending": 0}
        for op in self.ops:
            out[op.status] += 1
        return out


def create_topic(sim: Simulation, timeout_ms: int = 30_000) -> None:
    """Create the workload's topic through the brokers (the cluster must be up). A forward whose outcome
    the broker could not learn (REQUEST_TIMED_OUT: its Envelope or the answer was lost) is sent again
    until `timeout_ms`: a creation applied the first time then answers TOPIC_ALREADY_EXISTS."""
    client = SimAdminClient(sim, broker_endpoints(sim.cluster.broker_ids if sim.cluster else ()))
    replicas = min(3, len(sim.cluster.broker_ids)) if sim.cluster else 1
    request = CreateTopicsRequest((CreatableTopic(TOPIC, 3, replicas),))
    deadline = sim.now + timeout_ms
    while True:
        call = client.send(request, idempotent=False, timeout_ms=max(1, deadline - sim.now))
        if not sim.run_until_true(lambda c=call: c.done, max(1, deadline - sim.now)) or not call.ok:
            raise RuntimeError(f"creating topic {TOPIC!r} failed: {call.error or call.response}")
        code = call.response.topics[0].error_code
        if code in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
            return
        if code != ErrorCode.REQUEST_TIMED_OUT or sim.now >= deadline:
            raise RuntimeError(f"creating topic {TOPIC!r} failed: {ErrorCode(code).name}")


def final_cluster_checks(sim: Simulation, ops: list[AppendOp]) -> str | None:
    """The end-to-end checks of the module docstring; a description of the first failure, if any."""
    digests = {n: h.process.image.digest() for n, h in sim.nodes.items() if h.process is not None}
    if len(set(digests.values())) > 1:
        return f"node images differ after settling: {digests}"
    reference = next(iter(digests))
    items = image_items(sim, reference)
    for op in ops:
        status = op.status
        if status == "ok" and op.item not in items:
            return f"acknowledged append of {op.item!r} is missing from the images"
        if status == "fail" and op.item in items:
            return f"append of {op.item!r} failed definitely ({op.call.error or 'error answer'}) but was applied"
    records = config_records(sim, ConfigResourceType.TOPIC, TOPIC, LIST_CONFIG)
    if len(records) != len(items):
        return (
            f"{len(records)} ConfigRecords of {LIST_CONFIG} for {len(items)} distinct items: "
            "an append was applied more than once"
        )
    return None


# --- one run -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClusterRunConfig:
    seed: int = 0
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    link: LinkModel = field(default_factory=LinkModel)
    workload: ConfigWorkload = field(default_factory=ConfigWorkload)
    faults: FaultConfig = field(default_factory=lambda: FaultConfig(kinds=("partition", "kill")))
    duration_ms: int = 20_000
    quiet_max_ms: int = 60_000
    raft: dict[str, int] = field(default_factory=dict)

    def sim_config(self) -> SimConfig:
        return SimConfig(seed=self.seed, cluster=self.cluster, link=self.link, raft=self.raft)


@dataclass
class ClusterRunResult:
    seed: int
    valid: bool
    violation: Violation | None
    error: str | None
    summary: dict[str, Any]
    sim: Simulation
    ops: list[AppendOp]

    @property
    def failure(self) -> str | None:
        return str(self.violation) if self.violation is not None else self.error


def run_cluster(config: ClusterRunConfig) -> ClusterRunResult:
    wall = time.perf_counter()
    sim = Simulation(config.sim_config())
    sim.start()
    error: str | None = None
    workload = ConfigAppender(sim, config.workload)
    if not sim.run_until_true(lambda: settled(sim), config.quiet_max_ms, poll_ms=100):
        error = "the cluster did not come up"
    else:
        try:
            create_topic(sim)
        except RuntimeError as exc:
            error = str(exc)
    if error is None and sim.violation is None:
        injector = FaultInjector(sim, config.faults)
        workload.start()
        injector.start()
        sim.run_for(config.duration_ms)
        injector.stop()
        workload.stop()
        if sim.violation is None:
            sim.heal_all()
            ok = sim.run_until_true(lambda: supervised(sim) and settled(sim), config.quiet_max_ms, poll_ms=100)
            # Let the calls still in flight finish (their deadlines are short), then settle again.
            sim.run_for(config.workload.request_timeout_ms + 100)
            ok = ok and sim.run_until_true(lambda: supervised(sim) and settled(sim), config.quiet_max_ms, poll_ms=100)
            if sim.violation is None:
                error = final_cluster_checks(sim, workload.ops) if ok else _unsettled(sim, config.quiet_max_ms)
    sim.trace.close()
    valid = sim.violation is None and error is None
    summary = {
        "seed": config.seed,
        "shape": {"controllers": config.cluster.controllers, "brokers": config.cluster.brokers},
        "simulated_s": sim.now / 1000,
        "wall_s": round(time.perf_counter() - wall, 3),
        "events": sim.stats.events,
        "appends": workload.counts(),
        "faults_injected": dict(sorted(sim.stats.faults.items())),
        "image_checks": sim.images.checks,
        "committed_offset": sim.checker.committed_end,
        "verdict": "valid" if valid else "invalid",
        "failure": str(sim.violation) if sim.violation else error,
        "digest": sim.trace.digest,
    }
    return ClusterRunResult(config.seed, valid, sim.violation, error, summary, sim, workload.ops)


def _unsettled(sim: Simulation, quiet_ms: int) -> str:
    states = []
    for node_id, host in sim.nodes.items():
        if host.process is None:
            states.append(f"{node_id}:down")
            continue
        raft, process = host.raft, host.process
        broker = broker_state(sim, node_id)
        states.append(
            f"{node_id}:{raft.role.value}/e{raft.epoch}/hwm{raft.high_watermark}/img{process.image.last_offset + 1}"
            + (f"/{broker.name}" if broker is not None else "")
            + ("/active" if process.controller is not None and process.controller.active else "")
        )
    return f"the cluster did not settle {quiet_ms} ms after the final heal ({' '.join(states)})"


__all__ = [
    "LIST_CONFIG",
    "TOPIC",
    "AppendOp",
    "ClusterRunConfig",
    "ClusterRunResult",
    "ConfigAppender",
    "ConfigWorkload",
    "active_controller",
    "broker_state",
    "committed_records",
    "config_records",
    "create_topic",
    "final_cluster_checks",
    "image_items",
    "run_cluster",
    "settled",
    "supervised",
]
