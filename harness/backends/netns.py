"""The `netns` backend: each node is a host in its own network namespace, on a bridge of this run's own.

Layout for a run with tag T (random hex, unique per run):
  bridge  kcT        with the first address of a free private /24 (how the harness reaches nodes)
  netns   kcT-NODE   loopback up, `eth0` (peer of veth kcTvI on the bridge) with the node's address
  filter  nft table `inet kchaos` (or iptables chain KCHAOS) inside each namespace for partitions
  faults  packet, clock, pause and disk faults: harness.backends.host_faults (enable_faults first for
          clock and disk faults, which preload shims into the node's process)
  data    with lose_unsynced enabled, RUN/nodes/NODE/data is a lazyfs mount (harness.backends.lazyfs)
Everything is ledgered (harness.backends.ledger) before it is created; teardown(), Ctrl-C and SIGTERM
(while used as a context manager) and `kchaos heal` after a crash undo it.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import random
import re
import secrets
import signal
import subprocess
import threading
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from harness.backends.firewall import Firewall, allow_bridge_forwarding, firewall_named, record_block
from harness.backends.host_faults import HostFaults
from harness.backends.lazyfs.nodes import NodeDisks
from harness.backends.ledger import LEDGER_NAME, HealReport, Ledger
from harness.backends.procs import kill_verified, remove_faketime_files, start_time
from harness.backends.resources import create_bridge, create_netns, create_veth, link_names, netns_names
from harness.backends.shell import BackendError, run
from harness.backends.signals import TeardownOnTermination, deferred_termination
from vocab.backend import Backend, check_grudge
from vocab.faults.kinds import BACKEND_FAULTS, ClockFault, DiskFault, FaultNotSupported, Grudge, Links, PacketFault

NODE_ID = re.compile(r"^[A-Za-z0-9_.-]{1,32}$")
# Candidate /24s: 10.200.0.0 to 10.207.255.0 first, then 172.16.0.0 to 172.31.255.0 (rarely used by anything else).
_POOLS = [ipaddress.ip_network("10.200.0.0/13"), ipaddress.ip_network("172.16.0.0/12")]
_ROUTE_TYPES = {"unicast", "local", "broadcast", "multicast", "anycast", "unreachable", "blackhole", "prohibit"}


@dataclass
class ProcessSpec:
    """How to (re)start a node's process."""

    argv: list[str]
    env: dict[str, str] | None = None
    cwd: str | None = None


@dataclass
class NodeProcess:
    """A process started in a node's namespace; (pid, starttime) identify it even after a crash."""

    node: str
    pid: int
    starttime: int | None
    popen: subprocess.Popen[bytes]
    ledger_id: int
    spec: ProcessSpec
    logs: list[IO[bytes]] = field(default_factory=list)


@dataclass(frozen=True)
class NodeHost:
    node: str
    netns: str
    veth: str
    address: str


def used_networks() -> list[ipaddress.IPv4Network]:
    """Every IPv4 network the root namespace has an address or a (non-default) route in."""
    nets = []
    for line in run(["ip", "-4", "-o", "addr", "show"]).splitlines():
        parts = line.split()
        if "inet" in parts:
            nets.append(ipaddress.ip_interface(parts[parts.index("inet") + 1]).network)
    for line in run(["ip", "-4", "route", "show", "table", "all"]).splitlines():
        parts = line.split()
        if parts and parts[0] in _ROUTE_TYPES:
            parts = parts[1:]
        if parts and parts[0] != "default":
            try:
                nets.append(ipaddress.ip_network(parts[0], strict=False))
            except ValueError:
                continue
    return [n for n in nets if isinstance(n, ipaddress.IPv4Network)]


def free_subnet(seed: str, tries: int = 256) -> ipaddress.IPv4Network:
    """A /24 from the private pools that overlaps nothing on this host, chosen by `seed`."""
    used = used_networks()
    rng = random.Random(seed)
    for _ in range(tries):
        pool = _POOLS[0] if rng.random() < 0.8 else _POOLS[1]
        index = rng.randrange(pool.num_addresses // 256)
        candidate = ipaddress.ip_network((int(pool.network_address) + index * 256, 24))
        if not any(candidate.overlaps(u) for u in used):
            return candidate  # type: ignore[return-value]
    raise BackendError("no free private /24 found for the bridge (every candidate overlaps a route)")


def check_node_ids(node_ids: Sequence[str]) -> None:
    """ValueError unless the ids are distinct, non-empty and safe as host and file names."""
    for node in node_ids:
        if not NODE_ID.match(node):
            raise ValueError(f"node id '{node}': use 1 to 32 of A-Z a-z 0-9 _ . -")
    if len(set(node_ids)) != len(node_ids) or not node_ids:
        raise ValueError(f"node ids must be distinct and non-empty: {list(node_ids)}")


class NetnsBackend(TeardownOnTermination, Backend):
    """One network namespace per node on a bridge; see the module docstring."""

    faults = BACKEND_FAULTS["netns"]

    def __init__(
        self,
        run_dir: Path | str,
        node_ids: Sequence[str],
        *,
        firewall: str | None = None,
        tag: str | None = None,
    ) -> None:
        check_node_ids(node_ids)
        self.run_dir = Path(run_dir)
        self._nodes = list(node_ids)
        self._firewall_name = firewall
        self.tag = tag or secrets.token_hex(3)
        self.bridge = f"kc{self.tag}"
        self.ledger: Ledger | None = None
        self.firewall: Firewall | None = None
        self.subnet: ipaddress.IPv4Network | None = None
        self.hosts: dict[str, NodeHost] = {}
        self._procs: dict[str, NodeProcess] = {}
        self._specs: dict[str, ProcessSpec] = {}
        self._blocks: list[int] = []
        self._lock = threading.RLock()
        self._host_faults: HostFaults | None = None
        self.lazyfs = NodeDisks(self.run_dir)  # data dirs on lazyfs, once enable_faults asks for lose_unsynced

    # -- Backend -------------------------------------------------------------------------------------

    @property
    def node_ids(self) -> Sequence[str]:
        return tuple(self._nodes)

    @property
    def ledger_path(self) -> Path:
        return self.run_dir / LEDGER_NAME

    @property
    def bridge_address(self) -> str:
        return str(self._subnet()[1])

    def address(self, node: str) -> str:
        return self._host(node).address

    def setup(self) -> None:
        if os.geteuid() != 0:
            raise BackendError("the netns backend needs root (network namespaces, bridges, packet filters)")
        if self.ledger is not None:
            return
        taken = netns_names()
        if self.bridge in link_names() or any(n.startswith(f"{self.bridge}-") for n in taken):
            raise BackendError(f"run tag {self.tag} is already in use on this host")
        self.firewall = firewall_named(self._firewall_name)
        self.ledger = Ledger.create(self.ledger_path)
        try:
            self.subnet = free_subnet(self.tag)
            hosts = list(self.subnet.hosts())
            if len(self._nodes) + 1 > len(hosts):
                raise BackendError(f"{len(self._nodes)} nodes do not fit in {self.subnet}")
            create_bridge(self.ledger, self.bridge, f"{hosts[0]}/{self.subnet.prefixlen}")
            allow_bridge_forwarding(self.ledger, self.bridge)
            for i, node in enumerate(self._nodes):
                host = NodeHost(node, f"{self.bridge}-{node}", f"{self.bridge}v{i}", str(hosts[i + 1]))
                create_netns(self.ledger, host.netns)
                create_veth(self.ledger, host.veth, host.netns, self.bridge, f"{host.address}/{self.subnet.prefixlen}")
                self.firewall.install(self.ledger, host.netns)
                self.hosts[node] = host
        except BaseException:
            self.teardown()
            raise

    def teardown(self) -> HealReport:
        """Kill every process, remove every namespace, link and rule; the ledger keeps the record."""
        with self._lock, deferred_termination():
            if self.ledger is None:
                return HealReport()
            if self._host_faults is not None:
                self._host_faults.stop()
            report = self.ledger.undo_all()
            for proc in self._procs.values():
                _reap(proc)
            self._procs.clear()
            self.lazyfs.reap()
            self._blocks.clear()
            if report.failed:
                raise BackendError(
                    f"teardown left {len(report.failed)} resource(s); run `kchaos heal {self.run_dir}`: "
                    + "; ".join(report.failed)
                )
            return report

    def partition(self, grudge: Grudge) -> None:
        check_grudge(grudge, self._nodes)
        ledger, firewall = self._ready()
        with self._lock:
            old = self._blocks
            self._blocks = []
            for node in self._nodes:
                sources = [self.address(peer) for peer in grudge.get(node, ())]
                if sources:
                    self._blocks.append(record_block(ledger, firewall, self._host(node).netns, sources))
                else:
                    firewall.clear(self._host(node).netns)
            for rid in old:  # replaced by the new blocks above (or cleared when the node has none)
                ledger.mark_done(rid)

    def heal_network(self) -> None:
        ledger, _ = self._ready()
        with self._lock:
            for rid in self._blocks:
                ledger.undo(rid)
            self._blocks = []

    def blocked_sources(self, node: str) -> set[str]:
        """Addresses the node currently drops (read back from its packet filter)."""
        _, firewall = self._ready()
        return firewall.blocked(self._host(node).netns)

    # -- power loss (harness.backends.lazyfs) ----------------------------------------------------------

    def data_dir(self, node: str) -> str | None:
        self._host(node)
        return self.lazyfs.data_dir(node)

    def lose_unsynced(self, node: str) -> None:
        self._host(node)
        if self.lazyfs.data_dir(node) is None:
            raise FaultNotSupported("lose_unsynced needs enable_faults(['lose_unsynced']) before the nodes start")
        self.kill(node)
        self.lazyfs.power_loss(node)

    # -- processes -----------------------------------------------------------------------------------

    def start(
        self,
        node: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
    ) -> NodeProcess:
        """Start `argv` inside the node's namespace, stdout/stderr appended to nodes/NODE/{stdout,stderr}.log."""
        spec = ProcessSpec(list(argv), dict(env) if env is not None else None, str(cwd) if cwd else None)
        with self._lock:
            if self.is_alive(node):
                raise BackendError(f"node {node} already runs pid {self._procs[node].pid}")
            self._specs[node] = spec
            return self._spawn(node, spec)

    def _spawn(self, node: str, spec: ProcessSpec) -> NodeProcess:
        ledger, _ = self._ready()
        host = self._host(node)
        log_dir = self.run_dir / "nodes" / node
        log_dir.mkdir(parents=True, exist_ok=True)
        out = open(log_dir / "stdout.log", "ab")  # noqa: SIM115 - closed when the process is reaped
        err = open(log_dir / "stderr.log", "ab")  # noqa: SIM115
        rid = ledger.record("process", node=node, netns=host.netns, argv=spec.argv)
        try:
            # `ip netns exec` execs the command in place, so the PID we get is the command's own. A
            # session of its own keeps Ctrl-C on the terminal from reaching nodes before teardown does.
            popen = subprocess.Popen(
                ["ip", "netns", "exec", host.netns, *spec.argv],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                env=self._spawn_env(node, spec),
                cwd=spec.cwd,
                start_new_session=True,
            )
        except OSError as exc:
            out.close()
            err.close()
            ledger.mark_done(rid)
            raise BackendError(f"node {node}: cannot start {spec.argv[0]}: {exc.strerror}") from exc
        started = start_time(popen.pid)
        ledger.update(rid, pid=popen.pid, starttime=started)
        proc = NodeProcess(node, popen.pid, started, popen, rid, spec, [out, err])
        self._procs[node] = proc
        return proc

    def process(self, node: str) -> NodeProcess | None:
        return self._procs.get(node)

    def is_alive(self, node: str) -> bool:
        self._host(node)
        proc = self._procs.get(node)
        return proc is not None and proc.popen.poll() is None

    def terminate(self, node: str) -> None:
        with self._lock:
            proc = self._procs.get(node)
            if proc is not None and proc.starttime is not None and proc.popen.poll() is None:
                kill_verified(proc.pid, proc.starttime, signal.SIGTERM)

    def wait_stopped(self, node: str, timeout: float) -> bool:
        proc = self._procs.get(node)
        if proc is None:
            return True
        try:
            proc.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return False
        return True

    def kill(self, node: str) -> None:
        ledger, _ = self._ready()
        self._host(node)
        with self._lock:
            proc = self._procs.pop(node, None)
            if proc is None:
                return
            if proc.popen.poll() is None and proc.starttime is not None:
                kill_verified(proc.pid, proc.starttime, signal.SIGKILL)
            _reap(proc)
            ledger.mark_done(proc.ledger_id)

    def restart(self, node: str) -> None:
        self._host(node)
        with self._lock:
            spec = self._specs.get(node)
            if spec is None:
                raise BackendError(f"node {node} was never started, so there is no command to restart")
            if self.is_alive(node):
                return
            dead = self._procs.pop(node, None)
            if dead is not None:  # it exited by itself (a fail-stop): close its logs, drop its leftovers
                _reap(dead)
                self._ready()[0].mark_done(dead.ledger_id)
            self._spawn(node, spec)

    def exec(self, node: str, argv: Sequence[str], *, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
        """Run a short command inside the node's namespace (a probe or a client) and wait for it."""
        return subprocess.run(
            ["ip", "netns", "exec", self._host(node).netns, *argv],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    # -- packet, clock, pause and disk faults (harness.backends.host_faults) ---------------------------

    def enable_faults(self, kinds: Collection[str]) -> None:
        """Prepare what must be in place before the nodes start: lazyfs data dirs (lose_unsynced), clock
        and disk faults (shims, control files)."""
        if "lose_unsynced" in kinds:
            self.lazyfs.start(self._ready()[0], self._nodes)
        self._faults_ready().enable(kinds, self._nodes)

    def packet(self, links: Links, fault: PacketFault) -> None:
        if links is None:
            links = {node: frozenset(p for p in self._nodes if p != node) for node in self._nodes}
        check_grudge(links, self._nodes)
        targets = {self._host(node).netns: [self.address(p) for p in peers] for node, peers in links.items() if peers}
        self._faults_ready().packets.apply(targets, fault, seed=int(self.tag, 16))

    def heal_packet(self) -> None:
        self._faults_ready().packets.heal()

    def packet_rules(self, node: str) -> list[str]:
        """The node's packet-fault rules as iptables lists them (empty when its links are healthy)."""
        return self._faults_ready().packets.active(self._host(node).netns)

    def clock(self, node: str, fault: ClockFault) -> None:
        self._host(node)
        self._faults_ready().clock(node).apply(fault)

    def clock_reset(self, node: str) -> None:
        """The true time again (a no-op where clock faults were never enabled: nothing to reset)."""
        self._host(node)
        control = self._faults_ready().clocks.get(node)
        if control is not None:
            control.apply(ClockFault("reset"))

    def pause(self, node: str) -> None:
        self._host(node)
        with self._lock:
            proc = self._procs.get(node)
            if proc is not None and proc.starttime is not None and proc.popen.poll() is None:
                self._faults_ready().pauses.pause(node, proc.pid, proc.starttime)

    def resume(self, node: str) -> None:
        self._host(node)
        with self._lock:
            self._faults_ready().pauses.resume(node)

    def is_paused(self, node: str) -> bool:
        self._host(node)
        return self._host_faults is not None and self._host_faults.pauses.is_paused(node)

    def disk(self, node: str, fault: DiskFault) -> None:
        self._host(node)
        self._faults_ready().disk(node, f"disk_{fault.kind}").apply(fault)

    def disk_heal(self, node: str) -> None:
        self._host(node)
        control = self._faults_ready().disks.get(node)
        if control is not None:
            control.heal()

    def _faults_ready(self) -> HostFaults:
        ledger, _ = self._ready()
        if self._host_faults is None:
            self._host_faults = HostFaults(self.run_dir, ledger)
        return self._host_faults

    def _spawn_env(self, node: str, spec: ProcessSpec) -> Mapping[str, str] | None:
        """The process's environment: its spec's, plus the clock/disk preloads when those are enabled."""
        data_dir = self.data_dir(node) or self.run_dir / "nodes" / node / "data"
        return self._faults_ready().spawn_env(node, spec.env, Path(data_dir))

    # -- helpers -------------------------------------------------------------------------------------

    def _ready(self) -> tuple[Ledger, Firewall]:
        if self.ledger is None or self.firewall is None:
            raise BackendError("netns backend is not set up (call setup() first)")
        return self.ledger, self.firewall

    def _subnet(self) -> ipaddress.IPv4Network:
        if self.subnet is None:
            raise BackendError("netns backend is not set up (call setup() first)")
        return self.subnet

    def _host(self, node: str) -> NodeHost:
        try:
            return self.hosts[node]
        except KeyError:
            raise BackendError(f"unknown node '{node}' (nodes: {', '.join(self._nodes)})") from None


def _reap(proc: NodeProcess) -> None:
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.popen.wait(timeout=5)
    remove_faketime_files(proc.pid)
    for f in proc.logs:
        f.close()
