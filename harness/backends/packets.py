"""Packet faults (loss, delay ± jitter) on chosen links, with iptables inside the receiving namespace.

A degraded link "a -> b" is handled on b's INPUT, by the packet's source address, in this run's own
chain `KCHAOS_PKT` (jumped to from INPUT, after the partition filter, so a partitioned packet is
dropped, never delayed):
- loss p: `-m statistic --mode random --probability p -j DROP`;
- delay d ± j: `-j NFQUEUE --queue-bypass` to a delay daemon (`harness.backends.delayd`) in that
  namespace, which holds each packet for uniform(d - j, d + j) ms. There is no `tc netem` here, and
  nft has no queue statement on this kernel (CONFIG_NFT_QUEUE), so iptables' NFQUEUE target (nft_compat
  under iptables-nft) does it, whichever filter the partitions use.
Loss applies first; the packets that survive are delayed. A node's rules change in one
iptables-restore transaction; healing empties the chains (they stay, empty, until teardown). Ledgered:
the chain (undo removes it), each daemon (by PID and start time; undo lets its held packets go and
stops it).
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.backends.ledger import Ledger, register_undo
from harness.backends.procs import kill_verified, start_time, wait_gone
from harness.backends.resources import netns_names
from harness.backends.shell import BackendError, run, succeeds
from vocab.faults.kinds import PacketFault

CHAIN = "KCHAOS_PKT"
QUEUE = 4242
# The daemon runs `-m harness.backends.delayd` from here, so it is this tree's code whatever is installed.
TREE_ROOT = Path(__file__).resolve().parents[2]
READY_TIMEOUT_S = 30.0


def _ipt(netns: str, *args: str, check: bool = True) -> str:
    return run(["ip", "netns", "exec", netns, "iptables", "-w", *args], check=check)


def rules(sources: Iterable[str], fault: PacketFault) -> list[str]:
    """The chain's rules (iptables-restore syntax) for packets from `sources`."""
    out = []
    for src in sorted(set(sources)):
        if fault.loss > 0:
            out.append(f"-A {CHAIN} -s {src} -m statistic --mode random --probability {fault.loss:.6f} -j DROP")
        if fault.delay_ms > 0:
            out.append(f"-A {CHAIN} -s {src} -j NFQUEUE --queue-num {QUEUE} --queue-bypass")
    return out


@dataclass
class Daemon:
    netns: str
    popen: subprocess.Popen[str]
    starttime: int | None
    ledger_id: int


class PacketFaults:
    """The run's packet faults: which namespaces have the chain (kept, empty, once made: teardown
    removes it with the namespace), which have rules in it, which run a delay daemon."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self._chains: dict[str, int] = {}  # netns -> ledger id of its chain
        self._ruled: set[str] = set()  # namespaces whose chain holds rules
        self._daemons: dict[str, Daemon] = {}
        self._lock = threading.RLock()

    def apply(self, targets: Mapping[str, Iterable[str]], fault: PacketFault, seed: int = 0) -> None:
        """Replace every packet fault: packets into each namespace of `targets` from its sources suffer
        `fault`; every other namespace is healthy."""
        with self._lock:
            self.heal()
            scripts = {netns: rules(sources, fault) for netns, sources in sorted(targets.items())}
            scripts = {netns: lines for netns, lines in scripts.items() if lines}
            if fault.delay_ms > 0:
                self._start_daemons(sorted(scripts), fault, seed)
            for netns, lines in scripts.items():
                self._install_chain(netns)
                script = "*filter\n" + f"-F {CHAIN}\n" + "".join(f"{ln}\n" for ln in lines) + "COMMIT\n"
                self._ruled.add(netns)
                run(["ip", "netns", "exec", netns, "iptables-restore", "-w", "--noflush"], input_text=script)

    def heal(self) -> None:
        """No packet fault anywhere: rules off first (nothing new is queued), then the daemons let
        what they hold go."""
        with self._lock:
            for netns in sorted(self._ruled):
                _ipt(netns, "-F", CHAIN, check=False)
            self._ruled.clear()
            self._stop_daemons(list(self._daemons))

    def active(self, netns: str) -> list[str]:
        """The chain's rules in `netns` as iptables prints them (empty when healthy)."""
        if netns not in self._chains:
            return []
        return [ln for ln in _ipt(netns, "-S", CHAIN).splitlines() if ln.startswith("-A")]

    def _install_chain(self, netns: str) -> None:
        if netns in self._chains:
            return
        rid = self.ledger.record("packet_chain", netns=netns)
        self._chains[netns] = rid
        _ipt(netns, "-N", CHAIN)
        _ipt(netns, "-A", "INPUT", "-j", CHAIN)

    def _start_daemons(self, namespaces: list[str], fault: PacketFault, seed: int) -> None:
        """One delay daemon per namespace, started side by side; returns once each is bound."""
        for i, netns in enumerate(namespaces):
            self._spawn_daemon(netns, fault, seed + i)
        for netns in namespaces:
            popen = self._daemons[netns].popen
            line = _read_line(popen, READY_TIMEOUT_S)
            if line != "ready":
                self._stop_daemons(list(self._daemons))
                err = popen.stderr.read().strip() if popen.stderr else ""
                raise BackendError(f"delay daemon in {netns} did not start: {err or line or 'no output'}")

    def _spawn_daemon(self, netns: str, fault: PacketFault, seed: int) -> None:
        argv = [
            sys.executable,
            "-m",
            "harness.backends.delayd",
            f"--queue={QUEUE}",
            f"--delay-ms={fault.delay_ms}",
            f"--jitter-ms={fault.jitter_ms}",
            f"--seed={seed}",
        ]
        rid = self.ledger.record("delay_daemon", netns=netns, argv=argv)
        try:
            popen = subprocess.Popen(
                ["ip", "netns", "exec", netns, *argv],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                cwd=TREE_ROOT,
                start_new_session=True,
            )
        except OSError as exc:
            self.ledger.mark_done(rid)
            raise BackendError(f"cannot start the delay daemon in {netns}: {exc.strerror}") from exc
        started = start_time(popen.pid)
        self.ledger.update(rid, pid=popen.pid, starttime=started)
        self._daemons[netns] = Daemon(netns, popen, started, rid)

    def _stop_daemons(self, namespaces: list[str]) -> None:
        """SIGTERM them all (each lets its held packets go), then wait for each."""
        daemons = [self._daemons.pop(netns) for netns in namespaces]
        for daemon in daemons:
            if daemon.starttime is not None and daemon.popen.poll() is None:
                kill_verified(daemon.popen.pid, daemon.starttime, signal.SIGTERM)
        for daemon in daemons:
            try:
                daemon.popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                daemon.popen.kill()
                daemon.popen.wait()
            for stream in (daemon.popen.stdout, daemon.popen.stderr):
                if stream is not None:
                    stream.close()
            self.ledger.mark_done(daemon.ledger_id)


def _read_line(popen: subprocess.Popen[str], timeout: float) -> str:
    """The process's first stdout line, or "" if it exits or says nothing within `timeout`."""
    found: list[str] = []
    reader = threading.Thread(target=lambda: found.append(popen.stdout.readline() if popen.stdout else ""))
    reader.daemon = True
    reader.start()
    reader.join(timeout)
    return found[0].strip() if found else ""


@register_undo("packet_chain")
def undo_chain(fields: dict[str, Any]) -> str | None:
    netns = fields["netns"]
    if netns not in netns_names() or not succeeds(["ip", "netns", "exec", netns, "iptables", "-w", "-S", CHAIN]):
        return None
    while succeeds(["ip", "netns", "exec", netns, "iptables", "-w", "-D", "INPUT", "-j", CHAIN]):
        pass
    _ipt(netns, "-F", CHAIN)
    _ipt(netns, "-X", CHAIN)
    return f"packet-fault chain {CHAIN} in {netns}"


@register_undo("delay_daemon")
def undo_daemon(fields: dict[str, Any]) -> str | None:
    pid, start = fields.get("pid"), fields.get("starttime")
    if pid is None or start is None:
        return None  # died before its PID was written; the namespace's undo kills what runs in there
    if not kill_verified(pid, start, signal.SIGTERM):
        return None
    if not wait_gone(pid, start, timeout=10):
        with contextlib.suppress(ProcessLookupError):
            kill_verified(pid, start, signal.SIGKILL)
        wait_gone(pid, start)
    return f"delay daemon {pid} in {fields['netns']}"
