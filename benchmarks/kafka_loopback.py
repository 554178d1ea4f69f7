"""Two real clusters side by side on loopback, for the differential check and the side-by-side
benchmark: Apache Kafka (3 combined nodes, `harness.db.kafka.KafkaDB` on a tiny loopback backend:
each node its own 127.x address, so Kafka's fixed ports do not clash) and the reference cluster
(3 controllers + 2 brokers, `node.runtime.local_cluster`). Both speak Kafka's wire protocol, so one
confluent-kafka AdminClient talks to either. Every process started here is SIGKILLed by its own PID.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.db.kafka.db import KafkaDB, cluster_id
from node.runtime.local_cluster import LocalCluster, NodeProcess, find_leader, kill_all, plan_cluster, status, wait_for
from tests.runtime.test_kraft_cluster import SETTINGS

# The reference cluster's short quorum timeouts, as its cluster tests use them.
REFERENCE_SETTINGS = SETTINGS
# The same timeouts for Kafka, under its own names (its defaults are 2000 ms fetch, 1000 ms election,
# 1000 ms backoff, 2000 ms request timeout, 2000 ms heartbeats, 9000 ms sessions), so failover compares
# the two implementations and not two configurations.
KAFKA_SETTINGS = {
    "controller.quorum.fetch.timeout.ms": "1500",
    "controller.quorum.election.timeout.ms": "1000",
    "controller.quorum.election.backoff.max.ms": "500",
    "controller.quorum.request.timeout.ms": "1000",
    "broker.heartbeat.interval.ms": "250",
    "broker.session.timeout.ms": "6000",
}
# The ACL authorizer on both, every (PLAINTEXT, unauthenticated) connection being User:ANONYMOUS, which
# is made a super user so the nodes keep talking to each other.
KAFKA_AUTHORIZER = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:ANONYMOUS",
}
REFERENCE_AUTHORIZER = {"authorizer.class.name": "kchaos.Authorizer", "super.users": "User:ANONYMOUS"}
READY_TIMEOUT_S = 240.0


@dataclass
class LoopbackBackend:
    """Just what `KafkaDB` needs of a backend (address, data dir, start, is_alive), for plain local
    processes: node i listens on 127.<a>.<b>.i (a random /24 of loopback per run)."""

    run_dir: Path
    nodes: Sequence[str]
    net: str = field(default_factory=lambda: f"127.{random.randint(100, 250)}.{random.randint(1, 250)}")
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def address(self, node: str) -> str:
        return f"{self.net}.{list(self.nodes).index(node) + 1}"

    def data_dir(self, node: str) -> str | None:
        return None

    def start(self, node: str, argv: Sequence[str], env: Mapping[str, str] | None = None, cwd: str | None = None):  # type: ignore[no-untyped-def]
        log_dir = self.run_dir / "nodes" / node
        log_dir.mkdir(parents=True, exist_ok=True)
        with open(log_dir / "stdout.log", "ab") as out:
            self.procs[node] = subprocess.Popen(list(argv), stdout=out, stderr=subprocess.STDOUT, cwd=cwd)
        return self.procs[node]

    def restart(self, node: str) -> None:
        raise NotImplementedError("Side.restart starts a node again (KafkaDB.argv)")

    def is_alive(self, node: str) -> bool:
        proc = self.procs.get(node)
        return proc is not None and proc.poll() is None

    def kill(self, node: str) -> None:
        """kill -9 by the node's own PID, and reap it."""
        proc = self.procs.get(node)
        if proc is not None and proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)

    def kill_all(self) -> None:
        for node in list(self.procs):
            self.kill(node)


@dataclass
class Side:
    """One running cluster as the differential check and the benchmark see it."""

    name: str
    bootstrap: str  # the brokers' listeners, for clients
    leader: object  # () -> an id of the active controller (or None)
    kill: object  # (leader id) -> None: kill -9 of that controller
    restart: object  # (leader id) -> None: start it again and wait until the cluster is whole
    logs: object  # () -> the tail of every node's log (shown when something failed)


@contextlib.contextmanager
def kafka_side(base: Path, acls: bool = True, split: bool = False) -> Iterator[Side]:
    """Apache Kafka on loopback, 3 combined nodes (or, `split`, 3 controllers + 2 brokers as the
    reference cluster runs), ready by its own answers (KafkaDB.wait_ready)."""
    names = ["c1", "c2", "c3", "b1", "b2"] if split else ["n1", "n2", "n3"]
    backend = LoopbackBackend(base, names)
    db = KafkaDB(names, cluster_id(), {**KAFKA_SETTINGS, **(KAFKA_AUTHORIZER if acls else {})})
    try:
        db.install(backend, base)  # type: ignore[arg-type]
        db.wait_ready(READY_TIMEOUT_S)

        def logs() -> str:
            return "\n".join(
                f"----- {n} -----\n{(base / 'nodes' / n / 'stdout.log').read_text(errors='replace')[-3000:]}"
                for n in names
            )

        def restart(node: str) -> None:
            backend.start(node, db.argv(node))
            db.wait_ready(READY_TIMEOUT_S)

        yield Side("kafka", db.bootstrap(), db.leader, backend.kill, restart, logs)
    finally:
        backend.kill_all()


@contextlib.contextmanager
def reference_side(base: Path, acls: bool = True) -> Iterator[Side]:
    """The reference cluster: 3 controllers + 2 brokers, ready once a broker lists both brokers unfenced."""
    from node.client import SyncAdminClient

    plan: LocalCluster = plan_cluster(
        base / "cluster",
        voters=3,
        observers=2,
        settings={**REFERENCE_SETTINGS, **(REFERENCE_AUTHORIZER if acls else {})},
    )
    procs = {spec.node_id: NodeProcess(spec).start() for spec in plan.nodes}
    try:
        wait_for(lambda: find_leader(plan.voters), 60, what="a leader")

        def online() -> bool:
            with contextlib.suppress(Exception), SyncAdminClient(plan.brokers_bootstrap) as admin:
                return sum(not b.fenced for b in admin.list_brokers()) == len(plan.brokers)
            return False

        wait_for(online, 60, interval=0.2, what="both brokers unfenced")

        def leader() -> int | None:
            found = find_leader(plan.voters)
            return found["leader_id"] if found else None

        def kill(node_id: int) -> None:
            proc = procs[node_id]
            proc.signal(signal.SIGKILL)
            proc.wait(10)

        def restart(node_id: int) -> None:
            procs[node_id] = NodeProcess(plan.node(node_id)).start()
            leader = wait_for(lambda: find_leader(plan.voters), 60, what="a leader")

            def caught_up() -> bool:
                doc = status(plan.node(node_id))
                return bool(doc) and doc["leader_id"] is not None and doc["high_watermark"] >= leader["high_watermark"]

            wait_for(caught_up, 60, interval=0.2, what=f"node {node_id} caught up")

        def logs() -> str:
            return "\n".join(f"----- node {i} -----\n{p.log_text()[-3000:]}" for i, p in procs.items())

        yield Side("reference", plan.brokers_bootstrap, leader, kill, restart, logs)
    finally:
        kill_all(procs.values())


__all__ = ["Side", "kafka_side", "reference_side"]
