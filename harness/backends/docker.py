"""The `docker` backend: each node is a container on a network of this run's own.

Layout for a run with tag T (random hex, unique per run):
  network  kcT          a user-defined bridge network on a free private /24, labelled kchaos.run=T
  sandbox  kcT-NODE     a container that only sleeps: it holds the node's network namespace and fixed
                        address, which is also attached as the named namespace kcT-NODE on the host
  process  kcT-NODE-p   the node's process, in a container that joins the sandbox's namespace; a kill
                        or power loss ends it, a restart replaces it (same address, same data)
  data     the run directory is bind-mounted at its own path, so configs, data dirs (lazyfs mounts
           too), logs and dumps are where the netns backend keeps them

Because the sandbox's namespace is a named one on the host, every fault of the netns backend works
unchanged: partitions and packet faults are rules inside that namespace (which outlive a restarted node),
clock and disk faults are the same preload shims (their cache is bind-mounted read-only), power loss is
the same lazyfs mount. Only processes differ: kill is `docker kill -s KILL`, pause is `docker pause` (the
cgroup freezer: SIGCONT cannot wake it early). An engine the run starts itself gets no docker0, no
iptables rules and no NAT (`docker_engine`), so the host's packet filter stays as it was. Everything is
ledgered before it is created; teardown and `kchaos heal` remove our containers, network and namespace
names only (by label), and stop the engine if this run started it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.backends.docker_engine import LABEL, engine_fields, ensure_engine
from harness.backends.docker_image import CODE_ROOT, cache_dir, ensure_image
from harness.backends.firewall import allow_bridge_forwarding, firewall_named
from harness.backends.ledger import HealReport, Ledger, register_undo
from harness.backends.native import cache_dir as native_cache_dir
from harness.backends.netns import NetnsBackend, NodeHost, ProcessSpec, free_subnet
from harness.backends.resources import kill_all, link_names, netns_names, netns_pids, with_killed
from harness.backends.shell import BackendError, run
from harness.backends.signals import deferred_termination
from vocab.faults.kinds import BACKEND_FAULTS

NODE_PYTHON = "python3"
# What of the harness's own environment a node container gets (the rest is the host's business).
PASSED_ENV = ("PYTHONUNBUFFERED", "LD_PRELOAD", "NO_FAKE_STAT")
PASSED_PREFIXES = ("KCHAOS_", "FAKETIME_")  # the disk and clock shims' settings


@dataclass
class NodeContainer:
    node: str
    name: str
    argv: list[str]
    ledger_id: int


class DockerBackend(NetnsBackend):
    """One container per node (see the module docstring)."""

    faults = BACKEND_FAULTS["docker"]
    node_python = NODE_PYTHON
    node_code_root = CODE_ROOT

    def __init__(
        self,
        run_dir: Path | str,
        node_ids: Sequence[str],
        *,
        firewall: str | None = None,
        tag: str | None = None,
        say: Any = None,
    ) -> None:
        super().__init__(run_dir, node_ids, firewall=firewall, tag=tag)
        self.network = self.bridge
        self.image: str | None = None
        self.client: Any = None
        self._engine: dict[str, str] = {}  # engine_fields: on every container's and network's ledger entry
        self._say = say or (lambda _text: None)
        self._containers: dict[str, NodeContainer] = {}
        self._paused: dict[str, int] = {}
        self._shared: list[str] = []  # host paths every node container sees read-only (`share_read_only`)

    # -- hosts -----------------------------------------------------------------------------------------

    def setup(self) -> None:
        if os.geteuid() != 0:
            raise BackendError("the docker backend needs root (it attaches the containers' network namespaces)")
        if self.ledger is not None:
            return
        if self.bridge in link_names() or any(n.startswith(f"{self.bridge}-") for n in netns_names()):
            raise BackendError(f"run tag {self.tag} is already in use on this host")
        self.firewall = firewall_named(self._firewall_name)
        self.ledger = Ledger.create(self.ledger_path)
        try:
            self.client = ensure_engine(self.ledger, cache_dir())
            self._engine = engine_fields(self.ledger)
            self.image = ensure_image(self.client, self._say)
            self.subnet = free_subnet(self.tag)
            hosts = list(self.subnet.hosts())
            if len(self._nodes) + 1 > len(hosts):
                raise BackendError(f"{len(self._nodes)} nodes do not fit in {self.subnet}")
            self._create_network(str(hosts[0]))
            allow_bridge_forwarding(self.ledger, self.bridge)  # bridged frames cross root FORWARD
            for i, node in enumerate(self._nodes):
                host = NodeHost(node, f"{self.bridge}-{node}", "", str(hosts[i + 1]))
                self._create_sandbox(host)
                self.firewall.install(self.ledger, host.netns)
                self.hosts[node] = host
        except BaseException:
            self.teardown()
            raise

    def _create_network(self, gateway: str) -> None:
        import docker.types

        assert self.ledger is not None and self.subnet is not None
        self.ledger.record("docker-network", name=self.network, run=self.tag, **self._engine)
        pool = docker.types.IPAMPool(subnet=str(self.subnet), gateway=gateway)
        self.client.networks.create(
            self.network,
            driver="bridge",
            ipam=docker.types.IPAMConfig(pool_configs=[pool]),
            labels={LABEL: self.tag},
            options={"com.docker.network.bridge.name": self.bridge},
        )

    def _create_sandbox(self, host: NodeHost) -> None:
        assert self.ledger is not None
        self.ledger.record("docker-container", name=host.netns, run=self.tag, **self._engine)
        container = self.client.containers.create(
            self.image,
            ["sleep", "infinity"],
            name=host.netns,
            hostname=host.node,
            labels={LABEL: self.tag, "kchaos.node": host.node, "kchaos.role": "sandbox"},
            network=self.network,
        )
        # A fixed address: connect with it before the start (create() cannot name one).
        network = self.client.networks.get(self.network)
        network.disconnect(container)
        network.connect(container, ipv4_address=host.address)
        container.start()
        container.reload()
        pid = container.attrs["State"]["Pid"]
        self.ledger.record("docker-netns", name=host.netns)
        run(["ip", "netns", "attach", host.netns, str(pid)])

    def teardown(self) -> HealReport:
        with self._lock, deferred_termination():
            self._containers.clear()
            self._paused.clear()
            report = super().teardown()
            if self.client is not None:
                self.client.close()
                self.client = None
            return report

    # -- processes -----------------------------------------------------------------------------------

    def start(
        self,
        node: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
    ) -> Any:
        """Start `argv` (a command for the node's container: `node_python` is its Python) in a new
        container in the node's namespace, stdout/stderr appended to nodes/NODE/{stdout,stderr}.log."""
        with self._lock:
            if self.is_alive(node):
                raise BackendError(f"node {node} already runs in container {self._containers[node].name}")
            self._specs[node] = ProcessSpec(list(argv), dict(env or {}), CODE_ROOT)
            return self._spawn_container(node)

    def share_read_only(self, paths: Sequence[Path | str]) -> None:
        """Bind-mount these host paths read-only, each at its own path, into every node container started
        from now on: what a system under test runs that the node image does not carry (Kafka: the host's
        JDK and the jars setup.sh fetched)."""
        for path in paths:
            resolved = str(Path(path).resolve())
            if not Path(resolved).exists():
                raise BackendError(f"cannot share {path} with the node containers: it does not exist")
            if resolved not in self._shared:
                self._shared.append(resolved)

    def _spawn_container(self, node: str) -> NodeContainer:
        ledger, _ = self._ready()
        host = self._host(node)
        spec = self._specs[node]
        log_dir = self.run_dir / "nodes" / node
        log_dir.mkdir(parents=True, exist_ok=True)
        name = f"{host.netns}-p"
        self._remove_container(node)  # a killed incarnation: its data is in the run dir, not in it
        data_dir = self.data_dir(node) or self.run_dir / "nodes" / node / "data"
        env = dict(self._faults_ready().spawn_env(node, spec.env, Path(data_dir)) or {})
        env = {k: v for k, v in env.items() if k in PASSED_ENV or k.startswith(PASSED_PREFIXES)}
        # The shell only redirects the output into the run directory and then becomes the node.
        command = 'exec "$@" >>"$KCHAOS_LOG_DIR/stdout.log" 2>>"$KCHAOS_LOG_DIR/stderr.log"'
        rid = ledger.record("docker-container", name=name, run=self.tag, node=node, argv=spec.argv, **self._engine)
        run_dir = str(self.run_dir.resolve())
        native = str(native_cache_dir())
        volumes = {run_dir: {"bind": run_dir, "mode": "rw"}}
        if Path(native).is_dir():
            volumes[native] = {"bind": native, "mode": "ro"}
        for shared in self._shared:
            volumes.setdefault(shared, {"bind": shared, "mode": "ro"})
        try:
            self.client.containers.run(
                self.image,
                ["sh", "-c", command, "node", *spec.argv],
                name=name,
                detach=True,
                init=True,  # docker-init as PID 1: the node gets SIGTERM's default meaning, as on a host
                network_mode=f"container:{host.netns}",
                environment={**env, "KCHAOS_LOG_DIR": str(log_dir.resolve())},
                working_dir=spec.cwd or CODE_ROOT,
                volumes=volumes,
                labels={LABEL: self.tag, "kchaos.node": node, "kchaos.role": "node"},
            )
        except Exception as exc:
            ledger.mark_done(rid)
            reason = (str(exc).strip().splitlines() or [type(exc).__name__])[-1]
            raise BackendError(f"node {node}: cannot start its container: {reason}") from exc
        proc = NodeContainer(node, name, list(spec.argv), rid)
        self._containers[node] = proc
        return proc

    def _container(self, node: str) -> Any | None:
        import docker.errors

        proc = self._containers.get(node)
        if proc is None:
            return None
        try:
            return self.client.containers.get(proc.name)
        except docker.errors.NotFound:
            return None

    def _remove_container(self, node: str) -> None:
        proc = self._containers.pop(node, None)
        if proc is None:
            return
        assert self.ledger is not None
        self.ledger.undo(proc.ledger_id)

    def process(self, node: str) -> Any:  # type: ignore[override]
        return self._containers.get(node)

    def is_alive(self, node: str) -> bool:
        self._host(node)
        container = self._container(node)
        if container is None:
            return False
        container.reload()
        return container.status in ("running", "paused")

    def kill(self, node: str) -> None:
        self._ready()
        self._host(node)
        with self._lock:
            container = self._container(node)
            if container is None:
                return
            self.resume(node)  # a frozen container takes the signal only once thawed
            container.reload()
            if container.status == "running":
                import docker.errors

                try:
                    container.kill(signal="SIGKILL")
                except docker.errors.APIError:
                    container.reload()
                    if container.status == "running":
                        raise
            container.wait(timeout=30)

    def terminate(self, node: str) -> None:
        with self._lock:
            container = self._container(node)
            if container is None:
                return
            self.resume(node)
            container.reload()
            if container.status == "running":
                container.kill(signal="SIGTERM")

    def wait_stopped(self, node: str, timeout: float) -> bool:
        container = self._container(node)
        if container is None:
            return True
        try:
            container.wait(timeout=timeout)
        except Exception:  # the SDK raises the HTTP client's timeout: still running
            container.reload()
            return container.status not in ("running", "paused")
        return True

    def restart(self, node: str) -> None:
        self._host(node)
        with self._lock:
            if node not in self._specs:
                raise BackendError(f"node {node} was never started, so there is no command to restart")
            if self.is_alive(node):
                return
            self._spawn_container(node)

    # -- pause: the cgroup freezer ---------------------------------------------------------------------

    def pause(self, node: str) -> None:
        self._host(node)
        with self._lock:
            container = self._container(node)
            if container is None or node in self._paused:
                return
            container.reload()
            if container.status != "running":
                return
            assert self.ledger is not None
            self._paused[node] = self.ledger.record("docker-pause", name=container.name)
            container.pause()

    def resume(self, node: str) -> None:
        self._host(node)
        with self._lock:
            rid = self._paused.pop(node, None)
            if rid is not None:
                assert self.ledger is not None
                self.ledger.undo(rid)

    def is_paused(self, node: str) -> bool:
        self._host(node)
        return node in self._paused


@register_undo("docker-netns")
def undo_netns_name(fields: dict[str, Any]) -> str | None:
    """The host's name for a container's namespace (the namespace itself goes with its container).
    What runs in it is killed first: besides the container's own processes (which go with it anyway)
    that is whatever the harness started there with `ip netns exec` (a delay daemon whose PID a killed
    harness never ledgered), which outlives the container."""
    name = fields["name"]
    if name not in netns_names():
        return None
    killed = kill_all(netns_pids(name))
    run(["ip", "netns", "del", name])
    return with_killed(f"namespace name {name}", killed)
