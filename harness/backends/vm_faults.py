"""Faults of a whole VM, for ssh hosts that are VMs booted by `kchaos vagrant up` (inventory `vm = DIR`).

- power loss (`lose_unsynced`): SIGKILL of the VM's qemu, then a boot from its own disk at
  `restart`. The guest's page cache dies with it, so every write the node had not fsynced is lost for
  real (no FUSE layer pretending); what the guest fsynced qemu had written to the disk file. The
  reboot also empties the guest's packet filter and qdiscs, so the backend installs them again.
- VM pause (`pause` on a host whose inventory says `pause = "vm"`): SIGSTOP / SIGCONT of its qemu:
  the whole machine stops, kernel, sshd and guest clock included, as `virsh suspend` does.
- packet loss and delay (`packet`): netem inside the guests (the box's kernel has sch_netem). A prio
  qdisc sends packets for the affected peers to a netem band, on the sender: `tc filter ... match ip
  dst`. One ledger entry per guest; heal (and `kchaos heal`) deletes the root qdisc.

Each fault is in the run's ledger before it is applied; the qemu processes themselves are in the
cluster's ledger (`kchaos vagrant destroy` removes the ones a power cycle started).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.backends.inventory import Host
from harness.backends.ledger import Ledger, register_undo
from harness.backends.procs import is_same_process
from harness.backends.remote_faults import privileged, undo_script
from harness.backends.remote_shell import Remote, each
from vocab.faults.kinds import PacketFault

DEVICE = "eth0"  # the guest's one interface (net.ifnames=0 on the kernel command line)
NETEM_BAND = 4  # prio bands 1-3 keep the default priomap; band 4 gets the filtered traffic


def power_off(ledger: Ledger, host: Host) -> bool:
    """Pull the VM's plug (module docstring); recorded in the run's ledger, whose undo boots it again."""
    from harness.backends import vms

    ledger.record("vm_power", host=host.to_dict(), vm=host.vm)
    return vms.power_off(Path(host.vm), host.name)


def power_on(ledger: Ledger, host: Host) -> bool:
    from harness.backends import vms

    booted = vms.power_on(Path(host.vm), host.name)
    for entry in ledger.outstanding():
        if entry.kind == "vm_power" and entry.fields.get("host", {}).get("name") == host.name:
            ledger.mark_done(entry.id)
    return booted


@register_undo("vm_power")
def undo_power(fields: dict[str, Any]) -> str | None:
    """A run killed between the power loss and the boot: boot the VM, so the cluster is whole again."""
    from harness.backends import vms

    directory = Path(fields["vm"])
    if not (directory / vms.STATE).exists():
        return None  # the cluster was destroyed meanwhile
    name = fields["host"]["name"]
    return f"VM {name} booted again after a power loss" if vms.power_on(directory, name) else None


def pause(ledger: Ledger, host: Host) -> int | None:
    """SIGSTOP the VM's qemu; the ledger id of the pause (None when the VM is off)."""
    from harness.backends import vms

    found = vms.live_qemu(Path(host.vm), host.name)
    if found is None:
        return None
    rid = ledger.record("vm_paused", host=host.to_dict(), pid=found[0], starttime=found[1])
    os.kill(found[0], signal.SIGSTOP)
    return rid


def resume(ledger: Ledger, rid: int) -> None:
    undo_pause(ledger.entry(rid).fields)
    ledger.mark_done(rid)


@register_undo("vm_paused")
def undo_pause(fields: dict[str, Any]) -> str | None:
    pid, start = int(fields["pid"]), int(fields["starttime"])
    if not is_same_process(pid, start):
        return None
    os.kill(pid, signal.SIGCONT)
    return f"VM {fields['host']['name']} (qemu {pid}) continued"


class GuestNetem:
    """Packet loss and delay with netem in the guests (module docstring)."""

    def __init__(self, ledger: Ledger, remotes: Mapping[str, Remote], addresses: Mapping[str, str]) -> None:
        self.ledger, self.remotes, self.addresses = ledger, remotes, addresses
        self._entries: dict[str, int] = {}  # node -> ledger id of its qdisc
        self._sends: dict[str, list[str]] = {}  # node -> the addresses its packets are degraded to
        self._fault: PacketFault | None = None

    def apply(self, links: Mapping[str, frozenset[str]], fault: PacketFault, reachable: Sequence[str]) -> None:
        """Replace the current fault: packets to node N from each peer in links[N] are degraded (on the
        sender). A node not `reachable` (its VM stopped) gets its part at `refresh`."""
        self.heal(reachable)
        self._sends = {}
        for dst, peers in links.items():
            for src in peers:
                self._sends.setdefault(src, []).append(self.addresses[dst])
        self._fault = fault
        try:
            each([n for n in self._sends if n in reachable], self.refresh)
        except BaseException:
            self.heal(reachable)  # all or nothing: a resumed or rebooted VM must not get half a fault
            raise

    def refresh(self, node: str) -> None:
        """Put the node's part of the current fault on its guest (again, after a reboot or a resume)."""
        undo_netem({"host": self.remotes[node].host.to_dict(), "device": DEVICE})
        if self._fault is None or node not in self._sends:
            if node in self._entries:
                self.ledger.mark_done(self._entries.pop(node))
            return
        if node not in self._entries:
            host = self.remotes[node].host
            self._entries[node] = self.ledger.record("vm_netem", host=host.to_dict(), device=DEVICE)
        self.remotes[node].run(_netem_script(self.remotes[node].host, self._sends[node], self._fault))

    def heal(self, reachable: Sequence[str]) -> None:
        """No fault any more; a node not `reachable` loses its qdisc at `refresh`."""
        self._fault, self._sends = None, {}
        nodes = [n for n in self._entries if n in reachable]
        each(nodes, lambda node: undo_netem({"host": self.remotes[node].host.to_dict(), "device": DEVICE}))
        for node in nodes:
            self.ledger.mark_done(self._entries.pop(node))

    def active(self, node: str) -> str:
        """What `tc qdisc show` lists on the node's guest (for tests and `kchaos doctor`)."""
        return self.remotes[node].out(privileged(self.remotes[node].host, f"tc qdisc show dev {DEVICE}"))


def _netem_script(host: Host, destinations: Sequence[str], fault: PacketFault) -> str:
    tc = privileged(host, "tc")
    netem = f"netem limit 100000 loss {fault.loss * 100:g}%"
    if fault.delay_ms:
        netem += f" delay {fault.delay_ms:g}ms"
        if fault.jitter_ms:
            netem += f" {fault.jitter_ms:g}ms"  # uniform: the box's tc has no distribution tables
    lines = [
        f"{tc} qdisc add dev {DEVICE} root handle 1: prio bands {NETEM_BAND} priomap 1 2 2 2 1 2 0 0 1 1 1 1 1 1 1 1",
        f"{tc} qdisc add dev {DEVICE} parent 1:{NETEM_BAND} handle 40: {netem}",
    ]
    lines += [
        f"{tc} filter add dev {DEVICE} parent 1: protocol ip prio 1 u32 match ip dst {d}/32 flowid 1:{NETEM_BAND}"
        for d in sorted(set(destinations))
    ]
    return " && ".join(lines)


@register_undo("vm_netem")
def undo_netem(fields: dict[str, Any]) -> str | None:
    host = Host.from_dict(fields["host"])
    tc = privileged(host, "tc")
    device = fields["device"]
    script = f"{tc} qdisc show dev {device} | grep -q '^qdisc prio 1: root' || exit 7; {tc} qdisc del dev {device} root"
    return undo_script(fields, script, "netem")
