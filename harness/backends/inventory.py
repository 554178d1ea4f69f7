"""The SSH backend's inventory: which hosts the nodes run on and how to log in to them (TOML).

    [defaults]                      # optional: any host key, for every host that does not set it
    user = "vagrant"
    key = "~/.ssh/id_ed25519"       # relative paths are relative to the inventory file
    python = "/usr/bin/python3"     # on the host; a venv is made from it
    root = "kchaos"                 # the host's working directory (relative: to the login's home)
    sudo = true                     # packet filters through `sudo -n` (a non-root login)
    clock = "libfaketime"           # clock faults: the node's own clock through libfaketime, or "guest":
                                    # the host's kernel clock (date -s), for a VM that runs only the node
    vm = "vagrant/.cluster"         # the host is a VM of `kchaos vagrant up` there (written by `up`):
                                    # lose_unsynced is a power loss of the VM, packet faults use netem
    pause = "process"               # pause faults stop the node's process, or "vm": the whole VM (needs vm)

    [[hosts]]
    name = "kc1"
    address = "192.168.56.11"       # where the node listens and the harness's clients reach it
    ssh_address = "127.0.0.1"       # where ssh connects (default: address)
    port = 2222                     # ssh port (default 22)

Nodes take hosts in file order (node 1 on the first host, ...); a run needs at least as many hosts as
nodes. Every problem is one `UserError` line naming the file, the host and the key.
"""

from __future__ import annotations

import ipaddress
import re
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from vocab.errors import UserError

HOST_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
HOST_KEY_CHECKING = ("yes", "accept-new", "no")
CLOCKS = ("libfaketime", "guest")
PAUSES = ("process", "vm")
# key -> (type, default); `None` default = required
_FIELDS: dict[str, tuple[type, Any]] = {
    "name": (str, None),
    "address": (str, None),
    "ssh_address": (str, ""),
    "port": (int, 22),
    "user": (str, None),
    "key": (str, None),
    "python": (str, "python3"),
    "root": (str, "kchaos"),
    "sudo": (bool, False),
    "known_hosts": (str, ""),
    "host_key_checking": (str, "accept-new"),
    "clock": (str, "libfaketime"),
    "vm": (str, ""),
    "pause": (str, "process"),
}


@dataclass(frozen=True)
class Host:
    """One machine reachable over SSH (see the module docstring for each field)."""

    name: str
    address: str
    user: str
    key: str
    ssh_address: str = ""
    port: int = 22
    python: str = "python3"
    root: str = "kchaos"
    sudo: bool = False
    known_hosts: str = ""
    host_key_checking: str = "accept-new"
    clock: str = "libfaketime"
    vm: str = ""
    pause: str = "process"

    @property
    def target(self) -> str:
        return self.ssh_address or self.address

    def to_dict(self) -> dict[str, Any]:
        """What a ledger entry keeps, so `kchaos heal` can log in again after the harness died."""
        return asdict(self)

    @classmethod
    def from_dict(cls, fields: dict[str, Any]) -> Host:
        return cls(**{k: v for k, v in fields.items() if k in _FIELDS})


@dataclass(frozen=True)
class Inventory:
    path: Path
    hosts: list[Host] = field(default_factory=list)

    def for_nodes(self, nodes: list[str]) -> dict[str, Host]:
        """Node -> host, in file order; a one-line error when there are too few hosts."""
        if len(self.hosts) < len(nodes):
            raise UserError(
                f"{self.path}: {len(self.hosts)} host(s) for {len(nodes)} nodes ({', '.join(nodes)}); "
                "add [[hosts]] or run fewer nodes"
            )
        return dict(zip(nodes, self.hosts))


def load_inventory(path: str | Path) -> Inventory:
    """Read and check an inventory file (see the module docstring)."""
    path = Path(path)
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{path}: no such inventory file") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read the inventory: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise UserError(f"{path}: the inventory is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{path}: not valid TOML: {exc}") from None
    return parse_inventory(doc, path)


def parse_inventory(doc: dict[str, Any], path: Path) -> Inventory:
    unknown = sorted(set(doc) - {"defaults", "hosts"})
    if unknown:
        raise UserError(f"{path}: unknown top-level key '{unknown[0]}' (expected [defaults] and [[hosts]])")
    defaults = doc.get("defaults", {})
    if not isinstance(defaults, dict):
        raise UserError(f"{path}: [defaults] must be a table")
    _check_fields(defaults, path, "[defaults]", allow_missing=True)
    for key in ("name", "address", "ssh_address"):
        if key in defaults:
            raise UserError(f"{path}: [defaults] cannot set '{key}' (it differs per host)")
    hosts_doc = doc.get("hosts")
    if not isinstance(hosts_doc, list) or not hosts_doc or not all(isinstance(h, dict) for h in hosts_doc):
        raise UserError(f"{path}: needs at least one [[hosts]] table")
    hosts: list[Host] = []
    seen: dict[str, str] = {}
    for i, raw in enumerate(hosts_doc, 1):
        where = f"host {raw.get('name', f'#{i}')!s}"
        merged = {**defaults, **raw}
        _check_fields(merged, path, where, allow_missing=False)
        host = Host(**{k: merged.get(k, default) for k, (_, default) in _FIELDS.items()})
        _check_host(host, path, where)
        for label, value in (("name", host.name), ("address", host.address)):
            other = seen.get(f"{label}:{value}")
            if other is not None:
                raise UserError(f"{path}: {where}: {label} '{value}' is used by host {other} too")
            seen[f"{label}:{value}"] = host.name
        hosts.append(_resolve_key(host, path))
    return Inventory(path, hosts)


def _check_fields(table: dict[str, Any], path: Path, where: str, *, allow_missing: bool) -> None:
    for key, value in table.items():
        if key not in _FIELDS:
            raise UserError(f"{path}: {where}: unknown key '{key}' (known: {', '.join(_FIELDS)})")
        kind = _FIELDS[key][0]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise UserError(f"{path}: {where}: '{key}' must be a {kind.__name__}, got {value!r}")
    if not allow_missing:
        for key, (_, default) in _FIELDS.items():
            if default is None and key not in table:
                raise UserError(f"{path}: {where}: missing '{key}'")


def _check_host(host: Host, path: Path, where: str) -> None:
    if not HOST_NAME.match(host.name):
        raise UserError(f"{path}: {where}: name '{host.name}' must be 1 to 64 of A-Z a-z 0-9 _ . -")
    try:
        ipaddress.ip_address(host.address)
    except ValueError:
        raise UserError(f"{path}: {where}: address '{host.address}' is not an IP address") from None
    if not 0 < host.port < 65536:
        raise UserError(f"{path}: {where}: port {host.port} is not between 1 and 65535")
    if host.host_key_checking not in HOST_KEY_CHECKING:
        raise UserError(
            f"{path}: {where}: host_key_checking '{host.host_key_checking}' "
            f"is not one of {', '.join(HOST_KEY_CHECKING)}"
        )
    if host.clock not in CLOCKS:
        raise UserError(f"{path}: {where}: clock '{host.clock}' is not one of {', '.join(CLOCKS)}")
    if host.pause not in PAUSES:
        raise UserError(f"{path}: {where}: pause '{host.pause}' is not one of {', '.join(PAUSES)}")
    if host.pause == "vm" and not host.vm:
        raise UserError(f"{path}: {where}: pause 'vm' needs vm = the directory of `kchaos vagrant up`")
    for key in ("user", "python", "root", "key"):
        value = getattr(host, key)
        if not value or any(c in value for c in "'\"\n\\$`"):
            raise UserError(f"{path}: {where}: '{key}' must be non-empty and free of quotes, $, ` and backslashes")


def _resolve_key(host: Host, path: Path) -> Host:
    """The key (and known_hosts) as absolute paths; the key must exist."""
    key = Path(host.key).expanduser()
    if not key.is_absolute():
        key = (path.parent / key).resolve()
    if not key.is_file():
        raise UserError(f"{path}: host {host.name}: key '{host.key}' not found (looked at {key})")
    known = host.known_hosts
    if known:
        known_path = Path(known).expanduser()
        known = str(known_path if known_path.is_absolute() else (path.parent / known_path).resolve())
    vm = host.vm
    if vm:
        vm_path = Path(vm).expanduser()
        vm = str(vm_path if vm_path.is_absolute() else (path.parent / vm_path).resolve())
    return Host(**{**host.to_dict(), "key": str(key), "known_hosts": known, "vm": vm})
