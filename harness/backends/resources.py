"""Host resources the netns backend creates, each with the undo that `kchaos heal` runs for it.

Every `create_*` writes its ledger entry first and only then touches the host. Every undo checks the
resource still exists (and, for a process, that its PID still has the recorded start time) before
removing it, and returns None when there was nothing left, so healing twice is a no-op.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
from pathlib import Path
from typing import Any

from harness.backends.ledger import Ledger, register_undo
from harness.backends.procs import is_same_process, kill_verified, read_stat, remove_faketime_files, wait_gone
from harness.backends.shell import run, succeeds

TMPDIR_PREFIX = "kchaos-"

# -- network namespaces --------------------------------------------------------------------------------


def netns_names() -> set[str]:
    # `ip netns list` prints "name" or "name (id: N)" per line.
    return {line.split()[0] for line in run(["ip", "netns", "list"]).splitlines() if line.strip()}


def netns_pids(name: str) -> list[int]:
    return [int(p) for p in run(["ip", "netns", "pids", name], check=False).split()]


def create_netns(ledger: Ledger, name: str) -> int:
    rid = ledger.record("netns", name=name)
    run(["ip", "netns", "add", name])
    run(["ip", "-n", name, "link", "set", "lo", "up"])
    return rid


@register_undo("netns")
def undo_netns(fields: dict[str, Any]) -> str | None:
    name = fields["name"]
    if name not in netns_names():
        return None
    # Anything running inside a namespace this run created is ours, including a process started in the
    # instant between spawning it and writing its PID to the ledger.
    killed = kill_all(netns_pids(name))
    run(["ip", "netns", "del", name])
    return with_killed(f"namespace {name}", killed)


def with_killed(what: str, killed: int) -> str:
    return what + (f" (killed {killed} process{'es' * (killed != 1)})" if killed else "")


def kill_all(pids: list[int]) -> int:
    """SIGKILL every process of `pids` and wait until each is gone; how many there were."""
    stats = [s for s in (read_stat(p) for p in pids) if s is not None]
    for s in stats:
        with contextlib.suppress(ProcessLookupError):
            os.kill(s.pid, signal.SIGKILL)
    for s in stats:
        wait_gone(s.pid, s.starttime)
        remove_faketime_files(s.pid)
    return len(stats)


# -- links (bridge, veth) ------------------------------------------------------------------------------


def link_exists(name: str, netns: str | None = None) -> bool:
    prefix = ["ip", "-n", netns] if netns else ["ip"]
    return succeeds([*prefix, "link", "show", "dev", name])


def link_names() -> set[str]:
    return {line.split(":")[1].strip().split("@")[0] for line in run(["ip", "-o", "link", "show"]).splitlines()}


def create_bridge(ledger: Ledger, name: str, cidr: str) -> int:
    rid = ledger.record("link", name=name, type="bridge")
    run(["ip", "link", "add", name, "type", "bridge"])
    run(["ip", "addr", "add", cidr, "dev", name])
    run(["ip", "link", "set", name, "up"])
    return rid


def create_veth(ledger: Ledger, host_name: str, netns: str, bridge: str, cidr: str, inner: str = "eth0") -> int:
    """A veth pair: `host_name` enslaved to the bridge, its peer `inner` inside `netns` with `cidr`."""
    rid = ledger.record("link", name=host_name, type="veth", peer_netns=netns)
    run(["ip", "link", "add", host_name, "type", "veth", "peer", "name", inner, "netns", netns])
    run(["ip", "link", "set", host_name, "master", bridge, "up"])
    run(["ip", "-n", netns, "addr", "add", cidr, "dev", inner])
    run(["ip", "-n", netns, "link", "set", inner, "up"])
    return rid


@register_undo("link")
def undo_link(fields: dict[str, Any]) -> str | None:
    name = fields["name"]
    if not link_exists(name):
        return None
    run(["ip", "link", "del", name])  # deleting one end of a veth pair deletes both
    return f"{fields.get('type', 'link')} {name}"


# -- processes -----------------------------------------------------------------------------------------


@register_undo("process")
def undo_process(fields: dict[str, Any]) -> str | None:
    pid, start = fields.get("pid"), fields.get("starttime")
    if pid is None or start is None:
        return None  # died before its PID was written; its namespace's undo kills whatever is in there
    killed = kill_verified(pid, start)
    if killed:
        wait_gone(pid, start)
    # also when it died by itself (a fail-stop) after the harness that would have reaped it was killed
    files = remove_faketime_files(pid)
    if not killed:
        return f"libfaketime files of process {pid}" if files else None
    return f"process {pid} ({fields.get('node', '?')})"


def process_alive(fields: dict[str, Any]) -> bool:
    pid, start = fields.get("pid"), fields.get("starttime")
    return pid is not None and start is not None and is_same_process(pid, start)


# -- temp dirs and mounts --------------------------------------------------------------------------------


def create_tmpdir(ledger: Ledger, parent: Path | None = None) -> tuple[int, Path]:
    """A fresh directory named kchaos-*; the name is chosen (and ledgered) before mkdir."""
    base = Path(parent) if parent else Path(tempfile.gettempdir())
    while True:
        path = base / f"{TMPDIR_PREFIX}{os.urandom(6).hex()}"
        if not path.exists():
            break
    rid = ledger.record("tmpdir", path=str(path))
    path.mkdir(mode=0o700)
    return rid, path


@register_undo("tmpdir")
def undo_tmpdir(fields: dict[str, Any]) -> str | None:
    path = Path(fields["path"])
    if not path.name.startswith(TMPDIR_PREFIX):
        raise ValueError(f"refusing to remove {path}: not a {TMPDIR_PREFIX}* directory")
    if not path.exists():
        return None
    shutil.rmtree(path)
    return f"directory {path}"


def is_mounted(path: str) -> bool:
    target = os.path.realpath(path)
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        # field 5 is the mount point, with spaces etc. escaped as octal
        return any(_unescape(line.split()[4]) == target for line in f)


def _unescape(field: str) -> str:
    return field.encode().decode("unicode_escape")


def record_mount(ledger: Ledger, path: str) -> int:
    """Ledger a mount at `path` before the caller mounts it (a FUSE or tmpfs fault, say)."""
    return ledger.record("mount", path=os.path.realpath(path))


@register_undo("mount")
def undo_mount(fields: dict[str, Any]) -> str | None:
    path = fields["path"]
    if not is_mounted(path):
        return None
    run(["umount", "-l", path])
    return f"mount {path}"
