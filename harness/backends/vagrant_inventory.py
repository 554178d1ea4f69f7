"""`kchaos vagrant inventory`: the ssh backend's inventory for the cluster of vagrant/Vagrantfile.

    cd vagrant && vagrant up && cd ..
    kchaos vagrant inventory                       # runs `vagrant ssh-config` in vagrant/
    kchaos vagrant inventory --ssh-config FILE     # or reads its saved output ("-" = stdin)

`vagrant ssh-config` says how to log in to each VM (HostName, Port, User, IdentityFile); the node's own
address is the private-network IP the Vagrantfile gives VM kcN: SUBNET.(10 + N), SUBNET from
$KCHAOS_SUBNET as in the Vagrantfile (default 192.168.56). Logins other than root get `sudo = true`
(Vagrant boxes give the vagrant user password-less sudo), for the packet filter.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vocab.errors import UserError

DEFAULT_SUBNET = "192.168.56"
FIRST_HOST = 10  # kcN gets SUBNET.(FIRST_HOST + N), as in vagrant/Vagrantfile
VAGRANT_DIR = Path(__file__).resolve().parents[2] / "vagrant"
NAME = re.compile(r"^kc(\d+)$")


@dataclass(frozen=True)
class SshConfigHost:
    name: str
    hostname: str
    port: int
    user: str
    identity: str
    strict: str  # StrictHostKeyChecking as given ("no" for Vagrant's throwaway host keys)


def parse_ssh_config(text: str, source: str = "ssh-config") -> list[SshConfigHost]:
    """The `Host` blocks of `vagrant ssh-config` output; a one-line error naming a block that lacks a key."""
    blocks: list[tuple[str, dict[str, str], int]] = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, _, value = line.partition(" ")
        value = value.strip().strip('"')
        if key.lower() == "host":
            blocks.append((value, {}, lineno))
        elif not blocks:
            raise UserError(f"{source}:{lineno}: '{key}' before any Host line (is this `vagrant ssh-config` output?)")
        else:
            blocks[-1][1][key.lower()] = value
    if not blocks:
        raise UserError(f"{source}: no Host blocks (is this `vagrant ssh-config` output?)")
    hosts = []
    for name, fields, lineno in blocks:
        for key in ("hostname", "port", "user", "identityfile"):
            if key not in fields:
                raise UserError(f"{source}:{lineno}: Host {name} has no {key}")
        if not fields["port"].isdigit():
            raise UserError(f"{source}:{lineno}: Host {name}: port {fields['port']!r} is not a number")
        hosts.append(
            SshConfigHost(
                name,
                fields["hostname"],
                int(fields["port"]),
                fields["user"],
                fields["identityfile"],
                fields.get("stricthostkeychecking", "accept-new"),
            )
        )
    return hosts


def node_address(name: str, subnet: str, source: str = "ssh-config") -> str:
    """The private-network address the Vagrantfile gives VM `name` (kcN)."""
    match = NAME.match(name)
    if match is None:
        raise UserError(f"{source}: Host {name} is not one of the Vagrantfile's VMs (kc1, kc2, ...)")
    address = f"{subnet}.{FIRST_HOST + int(match.group(1))}"
    try:
        ipaddress.IPv4Address(address)
    except ValueError:
        raise UserError(f"subnet {subnet!r}: {address} is not an IPv4 address (expected three octets)") from None
    return address


def inventory_toml(hosts: list[SshConfigHost], subnet: str, source: str = "ssh-config") -> str:
    def quoted(value: str) -> str:
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'

    lines = [
        "# Written by `kchaos vagrant inventory` from `vagrant ssh-config`: the VMs of vagrant/Vagrantfile.",
        "[defaults]",
        'python = "/usr/bin/python3"',
        'root = "kchaos"',
        "",
    ]
    for host in sorted(hosts, key=lambda h: int(NAME.match(h.name).group(1)) if NAME.match(h.name) else 0):
        checking = "no" if host.strict.lower() == "no" else "accept-new"
        lines += [
            "[[hosts]]",
            f"name = {quoted(host.name)}",
            f"address = {quoted(node_address(host.name, subnet, source))}",
            f"ssh_address = {quoted(host.hostname)}",
            f"port = {host.port}",
            f"user = {quoted(host.user)}",
            f"key = {quoted(host.identity)}",
            f"sudo = {'false' if host.user == 'root' else 'true'}",
            f"host_key_checking = {quoted(checking)}",
            "",
        ]
    return "\n".join(lines)


def _read_ssh_config(args: argparse.Namespace) -> tuple[str, str]:
    if args.ssh_config == "-":
        return sys.stdin.read(), "<stdin>"
    if args.ssh_config:
        try:
            return Path(args.ssh_config).read_text(encoding="utf-8"), args.ssh_config
        except OSError as exc:
            raise UserError(f"{args.ssh_config}: cannot read: {exc.strerror}") from None
    try:
        proc = subprocess.run(
            ["vagrant", "ssh-config"], cwd=args.vagrant_dir, capture_output=True, text=True, check=False, timeout=300
        )
    except FileNotFoundError:
        raise UserError("vagrant not found: install Vagrant, or pass --ssh-config FILE") from None
    if proc.returncode != 0:
        detail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise UserError(f"`vagrant ssh-config` in {args.vagrant_dir} failed (are the VMs up?): {detail}")
    return proc.stdout, "vagrant ssh-config"


def command(args: argparse.Namespace) -> int:
    text, source = _read_ssh_config(args)
    hosts = parse_ssh_config(text, source)
    toml = inventory_toml(hosts, args.subnet, source)
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(toml, encoding="utf-8")
    print(f"wrote {out}: {len(hosts)} host(s) ({', '.join(h.name for h in hosts)})")
    print(f"run: kchaos run --backend ssh --inventory {out}")
    return 0


def register(subparsers: Any) -> None:
    vagrant = subparsers.add_parser(
        "vagrant",
        description="VM clusters: booted here with qemu (box, up, status, destroy) or from vagrant/Vagrantfile",
    )
    sub = vagrant.add_subparsers(dest="vagrant_command", metavar="COMMAND", required=True)
    p = sub.add_parser("inventory", description=__doc__.split("\n\n")[0])
    p.add_argument("--ssh-config", metavar="FILE", help="saved `vagrant ssh-config` output ('-': stdin)")
    p.add_argument("--vagrant-dir", default=str(VAGRANT_DIR), help="where the Vagrantfile is (default: vagrant/)")
    p.add_argument(
        "--subnet",
        default=os.environ.get("KCHAOS_SUBNET", DEFAULT_SUBNET),
        help="the VMs' private network, three octets (default: $KCHAOS_SUBNET or 192.168.56)",
    )
    p.add_argument("-o", "--output", default=str(VAGRANT_DIR / "inventory.toml"), help="inventory file to write")
    p.set_defaults(func=command)
    from harness.backends.vms import add_commands

    add_commands(sub)
