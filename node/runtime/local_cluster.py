"""A quorum on this machine's loopback: config files and node processes (for tests and benchmarks).

Node N listens on 127.A.B.(N+1), each on a free port, with its own data dir and log file under one base
directory. Linux routes all of 127.0.0.0/8 to lo; each cluster takes a /24 of it at random (A.B), so
clusters planned at the same moment (the test suite's parallel workers) never share an address: one
cannot take a port the other picked between `free_port` and its node's bind. Processes are started
with `python -m node.runtime` and are only ever signalled by their own PID.

The first `voters` nodes are controllers (listener CONTROLLER); the rest are brokers (observers of the
metadata quorum) whose BROKER listener serves clients and the other brokers. `sasl_settings` turns
SASL/PLAIN and the authorizer on for both listeners. A node's metadata image and committed log can
be read while it runs (`fetch_image`, `fetch_committed_log`: its HTTP endpoint) or from the files a
clean stop leaves in its data dir (`read_dumps`).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from node.metadata.dump import COMMITTED_LOG_DUMP, IMAGE_DUMP


def free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


@dataclass(frozen=True, slots=True)
class NodeSpec:
    node_id: int
    voter: bool
    host: str
    port: int
    metrics_port: int
    base_dir: Path

    @property
    def data_dir(self) -> Path:
        return self.base_dir / f"node-{self.node_id}" / "data"

    @property
    def config_path(self) -> Path:
        return self.base_dir / f"node-{self.node_id}" / "server.properties"

    @property
    def log_path(self) -> Path:
        return self.base_dir / f"node-{self.node_id}" / "node.log"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def metrics_url(self) -> str:
        return f"http://{self.host}:{self.metrics_port}"


@dataclass(slots=True)
class LocalCluster:
    base_dir: Path
    nodes: list[NodeSpec]
    settings: dict[str, str] = field(default_factory=dict)

    @property
    def voters(self) -> list[NodeSpec]:
        return [n for n in self.nodes if n.voter]

    @property
    def voters_value(self) -> str:
        return ",".join(f"{n.node_id}@{n.host}:{n.port}" for n in self.voters)

    @property
    def brokers(self) -> list[NodeSpec]:
        return [n for n in self.nodes if not n.voter]

    @property
    def controllers_bootstrap(self) -> str:
        """Every controller's address, for a client's --bootstrap-server."""
        return ",".join(n.address for n in self.voters)

    @property
    def brokers_bootstrap(self) -> str:
        """Every broker's address, for a client's --bootstrap-server."""
        return ",".join(n.address for n in self.brokers)

    def node(self, node_id: int) -> NodeSpec:
        return next(n for n in self.nodes if n.node_id == node_id)

    def properties(self, spec: NodeSpec, extra: dict[str, str] | None = None) -> str:
        role = "controller" if spec.voter else "broker"
        listener = "CONTROLLER" if spec.voter else "BROKER"
        lines = {
            "node.id": str(spec.node_id),
            "process.roles": role,
            "listeners": f"{listener}://{spec.host}:{spec.port}",
            "controller.listener.names": "CONTROLLER",
            "controller.quorum.voters": self.voters_value,
            "metadata.log.dir": str(spec.data_dir),
            "metrics.listener": f"{spec.host}:{spec.metrics_port}",
            "kchaos.test.append.enable": "true",
            **self.settings,
            **(extra or {}),
        }
        return "".join(f"{k}={v}\n" for k, v in lines.items())

    def write_configs(self) -> None:
        for spec in self.nodes:
            spec.config_path.parent.mkdir(parents=True, exist_ok=True)
            spec.config_path.write_text(self.properties(spec))


def sasl_settings(users: dict[str, str], login: str, super_users: tuple[str, ...] = ()) -> dict[str, str]:
    """Settings for SASL/PLAIN on both listeners, the authorizer on, and every node logging in to the
    others as `login` (one of `users`, made a super user so it holds ClusterAction)."""
    supers = dict.fromkeys([f"User:{login}", *super_users])
    return {
        "listener.security.protocol.map": "CONTROLLER:SASL_PLAINTEXT,BROKER:SASL_PLAINTEXT",
        "kchaos.sasl.users": ",".join(f"{name}:{password}" for name, password in users.items()),
        "kchaos.sasl.username": login,
        "kchaos.sasl.password": users[login],
        "authorizer.class.name": "kchaos.Authorizer",
        "super.users": ";".join(supers),
    }


def loopback_subnet() -> str:
    """`127.A.B`: a /24 of the loopback network for one cluster, outside 127.0.0.0/24."""
    pick = random.SystemRandom()
    return f"127.{pick.randint(1, 254)}.{pick.randint(0, 255)}"


def unused_address() -> tuple[str, int]:
    """A loopback host and port that nothing listens on, on a /24 of its own: a port found free on
    127.0.0.1 may be taken a moment later by any other test or process of the machine."""
    host = f"{loopback_subnet()}.{random.SystemRandom().randint(2, 254)}"
    return host, free_port(host)


def plan_cluster(
    base_dir: Path, voters: int = 3, observers: int = 0, settings: dict[str, str] | None = None
) -> LocalCluster:
    nodes = []
    subnet = loopback_subnet()
    for node_id in range(1, voters + observers + 1):
        host = f"{subnet}.{node_id + 1}"
        nodes.append(NodeSpec(node_id, node_id <= voters, host, free_port(host), free_port(host), base_dir))
    cluster = LocalCluster(base_dir, nodes, dict(settings or {}))
    cluster.write_configs()
    return cluster


class NodeProcess:
    """One `python -m node.runtime node start` process, its stderr going to the node's log file."""

    def __init__(self, spec: NodeSpec, config_path: Path | None = None) -> None:
        self.spec = spec
        self.config_path = config_path or spec.config_path
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> NodeProcess:
        self.spec.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.spec.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "node.runtime", "node", "start", "--config", str(self.config_path)],
                stdout=log,
                stderr=log,
                cwd=Path(__file__).resolve().parents[2],
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: int) -> None:
        if self.alive():
            assert self.proc is not None
            os.kill(self.proc.pid, sig)

    def wait(self, timeout: float) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout)

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM, then SIGKILL if it does not exit in time. Returns the exit code."""
        if self.proc is None:
            return None
        if self.alive():
            self.signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.signal(signal.SIGKILL)
        return self.proc.wait(timeout)

    def log_text(self) -> str:
        try:
            return self.spec.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""


def kill_all(procs: Iterable[NodeProcess], timeout: float = 10.0) -> None:
    """SIGKILL each process still running (by its own PID) and reap it: cleanup for tests and benchmarks."""
    for proc in procs:
        if proc.alive():
            proc.signal(signal.SIGKILL)
            proc.wait(timeout)


# --- talking to a node's HTTP endpoint -------------------------------------------------------------


def http_json(url: str, body: bytes | None = None, timeout: float = 5.0) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=body, method="POST" if body is not None else "GET")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def http_text(url: str, timeout: float = 10.0) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return resp.read().decode()


def fetch_image(spec: NodeSpec, timeout: float = 10.0) -> dict[str, Any]:
    """The running node's metadata image dump (`GET /v1/image`)."""
    return json.loads(http_text(spec.metrics_url + "/v1/image", timeout))


def fetch_committed_log(spec: NodeSpec, timeout: float = 10.0) -> list[dict[str, Any]]:
    """The running node's committed-log dump (`GET /v1/committed-log`), one entry per record."""
    return [json.loads(line) for line in http_text(spec.metrics_url + "/v1/committed-log", timeout).splitlines()]


def read_dumps(spec: NodeSpec) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The image and committed-log dumps a clean stop wrote into the node's data dir."""
    image = json.loads((spec.data_dir / IMAGE_DUMP).read_text())
    lines = (spec.data_dir / COMMITTED_LOG_DUMP).read_text().splitlines()
    return image, [json.loads(line) for line in lines]


def status(spec: NodeSpec, timeout: float = 2.0) -> dict | None:
    """The node's /v1/status document, or None when it does not answer."""
    with contextlib.suppress(OSError, ValueError):
        return http_json(spec.metrics_url + "/v1/status", timeout=timeout)[1]
    return None


def wait_for(predicate, timeout: float, interval: float = 0.05, what: str = "condition"):  # type: ignore[no-untyped-def]
    """Poll `predicate` until it returns something truthy; TimeoutError naming `what` otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def find_leader(specs: list[NodeSpec], min_epoch: int = 0) -> dict | None:
    """The status of a node that is leader in an epoch >= min_epoch, agreed on by the others asked."""
    for spec in specs:
        doc = status(spec)
        if doc and doc["role"] == "leader" and doc["epoch"] >= min_epoch:
            return doc
    return None
