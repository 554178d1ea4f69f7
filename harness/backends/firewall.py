"""Partitions as packet filters *inside* each node's namespace, with nft or iptables.

A node's namespace gets one table (nft `inet kchaos` with a set of blocked source addresses) or one
chain (iptables `KCHAOS`, jumped to from INPUT). A partition replaces the blocked sources; healing the
network empties them. Only the root namespace's FORWARD chain is ever touched, and only when another
tool set its policy to DROP (bridged traffic passes it when br_netfilter is loaded).
"""

from __future__ import annotations

import shutil
from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any

from harness.backends.ledger import Ledger, register_undo
from harness.backends.resources import netns_names
from harness.backends.shell import BackendError, run, succeeds

TABLE = "kchaos"
CHAIN = "KCHAOS"


class Firewall(ABC):
    """Blocks inbound packets by source address inside one network namespace."""

    kind: str

    @abstractmethod
    def install(self, ledger: Ledger, netns: str) -> int:
        """Create this run's (empty) table/chain in `netns`; returns its ledger id."""

    @abstractmethod
    def block(self, netns: str, sources: Iterable[str]) -> None:
        """Drop everything arriving from `sources` (replacing whatever was blocked before)."""

    @abstractmethod
    def clear(self, netns: str) -> None:
        """Block nothing."""

    @abstractmethod
    def blocked(self, netns: str) -> set[str]:
        """The source addresses blocked right now."""


class NftFirewall(Firewall):
    kind = "nft"

    def install(self, ledger: Ledger, netns: str) -> int:
        rid = ledger.record("firewall_table", netns=netns, tool=self.kind)
        script = (
            f"table inet {TABLE} {{\n"
            "  set blocked { type ipv4_addr; }\n"
            "  chain input { type filter hook input priority -10; policy accept; ip saddr @blocked drop; }\n"
            "}\n"
        )
        _nft(netns, "-f", "-", input_text=script)
        return rid

    def block(self, netns: str, sources: Iterable[str]) -> None:
        addrs = sorted(set(sources))
        script = f"flush set inet {TABLE} blocked\n"
        if addrs:
            script += f"add element inet {TABLE} blocked {{ {', '.join(addrs)} }}\n"
        _nft(netns, "-f", "-", input_text=script)  # one transaction: no instant with a half partition

    def clear(self, netns: str) -> None:
        self.block(netns, ())

    def blocked(self, netns: str) -> set[str]:
        out = _nft(netns, "list", "set", "inet", TABLE, "blocked")
        if "elements" not in out:
            return set()
        inside = out.split("elements = {", 1)[1].split("}", 1)[0]
        return {a.strip() for a in inside.replace("\n", " ").split(",") if a.strip()}


class IptablesFirewall(Firewall):
    kind = "iptables"

    def install(self, ledger: Ledger, netns: str) -> int:
        rid = ledger.record("firewall_table", netns=netns, tool=self.kind)
        _ipt(netns, "-N", CHAIN)
        _ipt(netns, "-I", "INPUT", "-j", CHAIN)
        return rid

    def block(self, netns: str, sources: Iterable[str]) -> None:
        _ipt(netns, "-F", CHAIN)
        for addr in sorted(set(sources)):
            _ipt(netns, "-A", CHAIN, "-s", addr, "-j", "DROP")

    def clear(self, netns: str) -> None:
        _ipt(netns, "-F", CHAIN)

    def blocked(self, netns: str) -> set[str]:
        found = set()
        for line in _ipt(netns, "-S", CHAIN).splitlines():
            parts = line.split()
            if parts[:2] == ["-A", CHAIN] and "-s" in parts:
                found.add(parts[parts.index("-s") + 1].removesuffix("/32"))
        return found


FIREWALLS: dict[str, type[Firewall]] = {"nft": NftFirewall, "iptables": IptablesFirewall}


def iptables_backend() -> str | None:
    """'nf_tables' or 'legacy' for the installed iptables, None when there is none."""
    if not shutil.which("iptables"):
        return None
    out = run(["iptables", "--version"], check=False)
    return "nf_tables" if "nf_tables" in out else "legacy"


def detect_firewall() -> Firewall:
    """nft when it is installed and iptables is only its front end (or absent); legacy iptables otherwise."""
    have_nft = shutil.which("nft") is not None
    ipt = iptables_backend()
    if have_nft and ipt != "legacy":
        return NftFirewall()
    if ipt is not None:
        return IptablesFirewall()
    if have_nft:
        return NftFirewall()
    raise BackendError("neither nft nor iptables is installed (apt-get install nftables)")


def firewall_named(name: str | None) -> Firewall:
    if name is None:
        return detect_firewall()
    if name not in FIREWALLS:
        raise BackendError(f"unknown firewall '{name}' (expected one of {', '.join(FIREWALLS)})")
    return FIREWALLS[name]()


def _nft(netns: str, *args: str, input_text: str | None = None) -> str:
    return run(["ip", "netns", "exec", netns, "nft", *args], input_text=input_text)


def _ipt(netns: str, *args: str) -> str:
    return run(["ip", "netns", "exec", netns, "iptables", "-w", *args])


# -- partitions as ledger entries --------------------------------------------------------------------


def record_block(ledger: Ledger, firewall: Firewall, netns: str, sources: Iterable[str]) -> int:
    """Ledger a partition's blocks in `netns`, then apply them."""
    addrs = sorted(set(sources))
    rid = ledger.record("firewall_block", netns=netns, tool=firewall.kind, sources=addrs)
    firewall.block(netns, addrs)
    return rid


@register_undo("firewall_block")
def undo_block(fields: dict[str, Any]) -> str | None:
    netns = fields["netns"]
    if netns not in netns_names():
        return None
    fw = FIREWALLS[fields["tool"]]()
    try:
        if not fw.blocked(netns):
            return None
    except BackendError:
        return None  # the table itself is gone
    fw.clear(netns)
    return f"partition rules in {netns}"


@register_undo("firewall_table")
def undo_table(fields: dict[str, Any]) -> str | None:
    netns = fields["netns"]
    if netns not in netns_names():
        return None
    if fields["tool"] == "nft":
        if not succeeds(["ip", "netns", "exec", netns, "nft", "list", "table", "inet", TABLE]):
            return None
        _nft(netns, "delete", "table", "inet", TABLE)
        return f"nft table inet {TABLE} in {netns}"
    if not succeeds(["ip", "netns", "exec", netns, "iptables", "-w", "-S", CHAIN]):
        return None
    run(["ip", "netns", "exec", netns, "iptables", "-w", "-D", "INPUT", "-j", CHAIN], check=False)
    _ipt(netns, "-F", CHAIN)
    _ipt(netns, "-X", CHAIN)
    return f"iptables chain {CHAIN} in {netns}"


# -- the root namespace's FORWARD chain ----------------------------------------------------------------


def forward_policy_drops() -> bool:
    """True when the root FORWARD chain's policy is DROP (docker does this), which would cut the bridge."""
    if iptables_backend() is None:
        return False
    return "-P FORWARD DROP" in run(["iptables", "-w", "-S", "FORWARD"], check=False)


def _forward_rule(bridge: str) -> list[str]:
    return ["FORWARD", "-i", bridge, "-o", bridge, "-m", "comment", "--comment", f"kchaos {bridge}", "-j", "ACCEPT"]


def allow_bridge_forwarding(ledger: Ledger, bridge: str) -> int | None:
    """If root FORWARD drops by default, accept traffic between ports of our bridge (ledgered)."""
    if not forward_policy_drops():
        return None
    rid = ledger.record("forward_accept", bridge=bridge)
    run(["iptables", "-w", "-I", *_forward_rule(bridge)])
    return rid


@register_undo("forward_accept")
def undo_forward(fields: dict[str, Any]) -> str | None:
    rule = _forward_rule(fields["bridge"])
    removed = False
    while succeeds(["iptables", "-w", "-C", *rule]):
        run(["iptables", "-w", "-D", *rule])
        removed = True
    return f"root FORWARD accept for {fields['bridge']}" if removed else None
