"""The `kafka` adapter: Apache Kafka 4.x in KRaft mode (the pinned jars, `dist`) as the system under test.

Not on sim (Kafka is a real program). On a backend with `start(node, argv)` and `address(node)` (netns,
docker, ssh) each node runs `java ... kafka.Kafka server.properties` in its namespace (on docker in its
container, which sees the host's JDK and the jars read-only at their own paths: `share_read_only`; over
ssh on its host, whose own `java` must be Java 17+, with the jars uploaded once into the host's root:
`ship_files`, and the storage format run there: `exec`):
- the cluster's shape is the test's: combined nodes n1.. (`process.roles=broker,controller`, `--nodes 3`,
  which fits 2 cores), or controllers c1.. plus brokers b1.. (`--nodes 3+2`); node.id is the node's
  place in that order (1..);
- the controllers are static voters (`controller.quorum.voters=ID@ADDR:9093,...`); brokers listen on
  ADDR:9092 (PLAINTEXT), controllers on ADDR:9093 (CONTROLLER);
- every node's log dir is run_dir/nodes/<node>/data (or the backend's choice), formatted before the
  first start by Kafka's own `kafka.tools.StorageTool format` with one cluster id for the run; a
  restarted node finds its formatted dir;
- the JVM gets a fixed heap (`KAFKA_HEAP`, sized for a 2-core / shared machine: see docs), the serial
  GC, and a log4j2 configuration that writes Kafka's log to stdout: the backend saves it as
  nodes/<node>/stdout.log.
Readiness comes from the cluster's own answers: a controller that leads answers DescribeQuorum with
every voter's log end offset at the high watermark, and every broker lists every broker as registered
and unfenced in DescribeCluster (node/client/kafka_wire.py). The leader is the active controller: the
node that answers DescribeQuorum as leader with the highest epoch.
"""

from __future__ import annotations

import base64
import subprocess
import uuid
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.backends.shell import BackendError
from harness.db.kafka.dist import (
    ARCHIVED_JVM_OPTS,
    KAFKA_VERSION,
    MIN_JAVA,
    KafkaDistError,
    archive_path,
    classpath,
    installed_jars,
    jar_dir,
    java_major,
    java_mounts,
    java_version,
)
from harness.db.program import ProgramDB
from node.client import kafka_wire as quorum
from vocab.backend import Backend
from vocab.db import DBError

BROKER_PORT = 9092
CONTROLLER_PORT = 9093
STOP_TIMEOUT_S = 20.0
FORMAT_TIMEOUT_S = 180.0
STATUS_FILE = "kafka-quorum.json"
# Measured on the 2-core machine (docs/concepts/suts.md): a combined node idles at ~360 MB RSS with a
# 256 MB heap; the workloads' metadata fits in far less.
KAFKA_HEAP = "256m"
JVM_OPTS = (
    f"-Xms{KAFKA_HEAP}",
    f"-Xmx{KAFKA_HEAP}",
    *ARCHIVED_JVM_OPTS,  # C1 only and the serial GC (dist.py says why)
    "-XX:+ExitOnOutOfMemoryError",
    "-Djava.awt.headless=true",
)
FORMAT_JVM_OPTS = ("-Xmx128m", *ARCHIVED_JVM_OPTS)
LOG4J2 = """\
status = warn
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = {level}
rootLogger.appenderRef.out.ref = out
logger.raft.name = org.apache.kafka.raft
logger.raft.level = INFO
"""
# Broker-side defaults that assume a bigger cluster, brought down to this one's size (written into
# every node's server.properties, before the test's own settings).
SMALL_CLUSTER = {
    "group.initial.rebalance.delay.ms": "0",
    "num.network.threads": "2",
    "num.io.threads": "2",
    "background.threads": "2",
    "num.recovery.threads.per.data.dir": "1",
    # The log cleaner's dedupe buffer (128 MB by default) is allocated again whenever a dynamic broker
    # config restarts the cleaner (log.cleaner.threads, message.max.bytes, ...): with the default, such
    # a change ran a 256 MB heap out of memory and the broker exited (benchmarks/kafka_differential.py).
    "log.cleaner.dedupe.buffer.size": str(16 * 1024 * 1024),
}


@dataclass(frozen=True)
class Jvm:
    """What a node's `java` command line is made of where it runs."""

    java: str
    classpath: str  # the jar directory's wildcard
    cds_archive: Path | None  # a class-data-sharing archive made by this very JVM, if any


def cluster_id() -> str:
    """A fresh Kafka cluster id: a random UUID in Kafka's URL-safe base64 (22 characters).

    Never one that starts with "-", as Kafka's own `Uuid.randomUuid()` does not: `kafka-storage format
    --cluster-id -xyz...` takes such an id for an option and stops with "expected one argument" (one
    id in 64; a full test suite met it once in a Kafka differential run).
    """
    while (cid := base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")).startswith("-"):
        pass
    return cid


class KafkaDB(ProgramDB):
    """See the module docstring."""

    name = "kafka"

    def __init__(self, nodes: Sequence[str], cid: str, settings: Mapping[str, str] | None = None) -> None:
        self._nodes = list(nodes)
        if not self.controllers or not self.brokers:
            raise DBError("a Kafka cluster needs controllers and brokers: --nodes 3 (combined) or --nodes 3+2")
        self.cluster_id = cid
        self.settings = dict(settings or {})
        self.backend: Backend | None = None
        self.run_dir: Path | None = None
        self.jvms: dict[str, Jvm] = {}  # node -> the java, classpath and CDS option it runs with

    @property
    def nodes(self) -> Sequence[str]:
        return tuple(self._nodes)

    def roles(self, node: str) -> frozenset[str]:
        if node.startswith("n"):
            return frozenset({"broker", "controller"})
        return frozenset({"controller"} if node.startswith("c") else {"broker"})

    @property
    def controllers(self) -> list[str]:
        return [n for n in self._nodes if "controller" in self.roles(n)]

    @property
    def brokers(self) -> list[str]:
        return [n for n in self._nodes if "broker" in self.roles(n)]

    def node_id(self, node: str) -> int:
        return self._nodes.index(node) + 1

    def node_of(self, node_id: int) -> str | None:
        return self._nodes[node_id - 1] if 1 <= node_id <= len(self._nodes) else None

    def broker_address(self, node: str) -> str:
        """A broker's client listener, "host:port" (what `workloads.kafka_observer` bootstraps on)."""
        return f"{self._backend().address(node)}:{BROKER_PORT}"

    def bootstrap(self, nodes: Sequence[str] | None = None) -> str:
        """`bootstrap.servers` for clients: the brokers' listeners (these, or every broker)."""
        return ",".join(self.broker_address(n) for n in (nodes or self.brokers))

    # -- install and start ---------------------------------------------------------------------------

    def install(self, backend: Backend, run_dir: Path) -> None:
        from harness.backends.sim import SimBackend

        if isinstance(backend, SimBackend):
            raise DBError("--sut kafka is not available on the sim backend (use netns, docker or ssh)")
        self.backend, self.run_dir = backend, Path(run_dir)
        try:
            if self.remote_hosts():
                with ThreadPoolExecutor(len(self._nodes)) as pool:  # one host each: at once
                    self.jvms = dict(zip(self._nodes, pool.map(self._remote_jvm, self._nodes)))
            else:
                java, _ = java_version()
                archive = archive_path()
                # its real path: a container sees the JDK, not /usr/bin
                local = Jvm(str(Path(java).resolve()), classpath(), archive if archive.is_file() else None)
                self.jvms = dict.fromkeys(self._nodes, local)
        except KafkaDistError as exc:
            raise DBError(str(exc)) from None
        share = getattr(backend, "share_read_only", None)
        if share is not None:  # docker: the node image carries no JDK and no jars; the host's, read-only
            share([*java_mounts(self.jvms[self._nodes[0]].java), jar_dir()])
        for node in self._nodes:
            self.write_config(node)
        with ThreadPoolExecutor(len(self._nodes)) as pool:  # each format is a JVM start: in parallel
            problems = [p for p in pool.map(self.format, self._nodes) if p]
        if problems:
            raise DBError(problems[0])
        for node in self._nodes:
            backend.start(node, self.argv(node), env=None, cwd=None)  # type: ignore[attr-defined]

    def _remote_jvm(self, node: str) -> Jvm:
        """The host's own `java` (17+, found on its PATH) and the jars shipped there. No CDS archive: one
        is only good for the JVM build that made it, and the host's may differ."""
        backend: Any = self._backend()
        try:
            done = backend.exec(node, ["java", "-version"], timeout=60.0)
        except BackendError as exc:
            raise KafkaDistError(f"{node}: cannot run java on its host: {exc}") from None
        host_java = f"java on the host of {node}"
        if done.returncode == 127:
            raise KafkaDistError(
                f"{host_java}: not found (--sut kafka over ssh needs Java {MIN_JAVA}+ on every host: "
                "apt-get install openjdk-17-jre-headless there)"
            )
        java_major(done.stderr + done.stdout, host_java)
        jars = installed_jars()
        if not jars:
            classpath()  # raises, naming the fix
        directory = backend.ship_files(node, jars, f"kafka-{KAFKA_VERSION}")
        return Jvm("java", f"{directory}/*", None)

    def config_dir(self, node: str) -> Path:
        return self._run_dir() / "nodes" / node

    def data_dir(self, node: str) -> Path:
        chosen = self._backend().data_dir(node)
        return Path(chosen) if chosen else self.config_dir(node) / "data"

    def properties(self, node: str) -> dict[str, str]:
        """The node's server.properties (see the module docstring); the test's settings win."""
        backend = self._backend()
        host = backend.address(node)
        roles = self.roles(node)
        voters = ",".join(f"{self.node_id(c)}@{backend.address(c)}:{CONTROLLER_PORT}" for c in self.controllers)
        listeners = []
        if "broker" in roles:
            listeners.append(f"PLAINTEXT://{host}:{BROKER_PORT}")
        if "controller" in roles:
            listeners.append(f"CONTROLLER://{host}:{CONTROLLER_PORT}")
        replicas = str(min(3, len(self.brokers)))
        props = {
            "process.roles": ",".join(sorted(roles)),
            "node.id": str(self.node_id(node)),
            "controller.quorum.voters": voters,
            "controller.listener.names": "CONTROLLER",
            "listeners": ",".join(listeners),
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.data_dir(node)),
            "offsets.topic.replication.factor": replicas,
            "transaction.state.log.replication.factor": replicas,
            "transaction.state.log.min.isr": "1",
            **SMALL_CLUSTER,
        }
        if "broker" in roles:
            props["advertised.listeners"] = f"PLAINTEXT://{host}:{BROKER_PORT}"
            props["inter.broker.listener.name"] = "PLAINTEXT"
        props.update(self.settings)
        return props

    def write_config(self, node: str) -> None:
        directory = self.config_dir(node)
        directory.mkdir(parents=True, exist_ok=True)
        if not self.remote_hosts():  # a host of its own makes the node's data dir itself
            self.data_dir(node).mkdir(parents=True, exist_ok=True)
        text = "".join(f"{k}={v}\n" for k, v in self.properties(node).items())
        (directory / "server.properties").write_text(text, encoding="utf-8")
        (directory / "log4j2.properties").write_text(LOG4J2.format(level="INFO"), encoding="utf-8")
        (directory / "log4j2-format.properties").write_text(LOG4J2.format(level="WARN"), encoding="utf-8")

    def _java(self, node: str, opts: Sequence[str], log4j: str, main: Sequence[str]) -> list[str]:
        jvm = self.jvms[node]
        cds = [f"-XX:SharedArchiveFile={jvm.cds_archive}"] if jvm.cds_archive else []
        log4j_file = self.config_dir(node) / log4j
        return [jvm.java, *opts, *cds, f"-Dlog4j2.configurationFile={log4j_file}", "-cp", jvm.classpath, *main]

    def argv(self, node: str) -> list[str]:
        """The node's command line: Kafka's own main class on its server.properties."""
        props = self.config_dir(node) / "server.properties"
        return self._java(node, JVM_OPTS, "log4j2.properties", ["kafka.Kafka", str(props)])

    def format(self, node: str) -> str | None:
        """`kafka-storage format` through its main class (offline: no network); the problem, or None."""
        props = self.config_dir(node) / "server.properties"
        main = ["kafka.tools.StorageTool", "format", "--cluster-id", self.cluster_id, "--config", str(props)]
        argv = self._java(node, FORMAT_JVM_OPTS, "log4j2-format.properties", main)
        try:
            if self.remote_hosts():  # the log dir is on the node's host: format it there
                done = self._backend().exec(node, argv, timeout=FORMAT_TIMEOUT_S)  # type: ignore[attr-defined]
            else:
                done = subprocess.run(argv, capture_output=True, text=True, timeout=FORMAT_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            return f"{node}: kafka-storage format did not finish within {FORMAT_TIMEOUT_S:.0f} s"
        except BackendError as exc:
            return f"{node}: kafka-storage format: {exc}"
        (self.config_dir(node) / "format.log").write_text(done.stdout + done.stderr, encoding="utf-8")
        if done.returncode != 0:
            last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            return f"{node}: kafka-storage format failed (exit {done.returncode}): {last[0]}"
        return None

    # -- the cluster's own answers -----------------------------------------------------------------------

    def quorums(self, timeout: float = 1.0) -> dict[str, quorum.Quorum | str | None]:
        """Every controller's DescribeQuorum answer: its view when it leads, None when it does not,
        or the reason it did not answer."""
        out: dict[str, quorum.Quorum | str | None] = {}
        for node in self.controllers:
            try:
                out[node] = quorum.describe_quorum(self._backend().address(node), CONTROLLER_PORT, timeout)
            except quorum.WireError as exc:
                out[node] = str(exc)
        return out

    def leader(self) -> str | None:
        return self._leader_of(self.quorums(timeout=0.5))

    def _leader_of(self, answers: Mapping[str, quorum.Quorum | str | None]) -> str | None:
        """Of the controllers that answered as leader (naming themselves), the one with the highest epoch."""
        best: tuple[int, str] | None = None
        for node, q in answers.items():
            leads = isinstance(q, quorum.Quorum) and q.leader_id == self.node_id(node)
            if leads and (best is None or q.leader_epoch > best[0]):  # type: ignore[union-attr]
                best = (q.leader_epoch, node)  # type: ignore[union-attr]
        return best[1] if best else None

    def _unready(self) -> str | None:
        """What keeps the cluster from being ready, or None when it is ready."""
        backend = self._backend()
        down = [n for n in self._nodes if not backend.is_alive(n)]
        if down:
            return f"not running: {', '.join(down)}"
        answers = self.quorums()
        leader = self._leader_of(answers)
        if leader is None:
            silent = [f"{n} ({a})" for n, a in answers.items() if isinstance(a, str)]
            return "no controller answers DescribeQuorum as leader" + (
                f"; no answer from {silent[0]}" if silent else ""
            )
        q = answers[leader]
        assert isinstance(q, quorum.Quorum)
        lagging = [self.node_of(r) or str(r) for r in q.lagging()]
        if len(q.voters) != len(self.controllers) or lagging or q.high_watermark <= 0:
            return f"voters not caught up to the high watermark {q.high_watermark}: {lagging or sorted(q.voters)}"
        want = {self.node_id(b) for b in self.brokers}
        for node in self.brokers:
            try:
                seen = quorum.unfenced_brokers(backend.address(node), BROKER_PORT)
            except quorum.WireError as exc:
                return f"broker {node} does not answer DescribeCluster: {exc}"
            if seen != want:
                missing = sorted(self.node_of(i) or str(i) for i in want - seen)
                return f"broker {node} does not list {', '.join(missing)} as registered and unfenced"
        return None

    # -- collecting and stopping -------------------------------------------------------------------------

    def collect(self, run_dir: Path, *, stop: bool) -> list[str]:
        statuses = {node: _status(answer) for node, answer in self.quorums(timeout=2.0).items()}
        return self.collect_members(run_dir, stop, statuses, STATUS_FILE, STOP_TIMEOUT_S)


def _status(answer: quorum.Quorum | str | None) -> dict[str, Any]:
    if isinstance(answer, quorum.Quorum):
        return {"leads": True, **answer.__dict__}
    return {"leads": False, "error": answer}
