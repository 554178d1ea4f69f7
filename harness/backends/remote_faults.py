"""The SSH backend's faults on a host, and how each is undone from a ledger entry (also by `kchaos heal`).

- partition: this run's own nft table `inet kchaos_TAG` (a set of blocked source addresses, one
  transaction per change) or, where nft is missing or iptables is the legacy one, a chain `KC_TAG`
  jumped to from INPUT. Only the peers' addresses are blocked, never the harness's, so the harness
  keeps reaching every host during a partition.
- clock: libfaketime on the host reads the node's clock file, which `RemoteClock` rewrites over SSH (the
  same `ClockControl` model as netns, only the file is remote).
- disk: the kchaos_disk shim maps a control file on the host that `RemoteDisk` rewrites in place with
  `dd conv=notrunc` (switch off, parameters, switch on; the same order as `disks.set_fault`).
- processes and pauses: by PID *and* start time through `kchaos-ctl` (remote_ctl.sh).

Every ledger entry carries the host's inventory fields, so heal can log in again after the harness died.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from harness.backends import disks
from harness.backends.clocks import TRUE_TIME, ClockControl
from harness.backends.disks import DiskControl, encode_params
from harness.backends.inventory import Host
from harness.backends.ledger import Ledger, register_undo
from harness.backends.remote_shell import Remote
from vocab.faults.kinds import ClockFault, DiskFault, FaultNotSupported

# Live connections of this process, so an undo during teardown rides the open connection.
_LIVE: dict[tuple[str, str, int, str], Remote] = {}
_LIVE_LOCK = threading.Lock()


def _key(host: Host) -> tuple[str, str, int, str]:
    return (host.name, host.target, host.port, host.user)


def register_live(remote: Remote) -> None:
    with _LIVE_LOCK:
        _LIVE[_key(remote.host)] = remote


def forget_live(remote: Remote) -> None:
    with _LIVE_LOCK:
        _LIVE.pop(_key(remote.host), None)


@contextlib.contextmanager
def remote_for(fields: dict[str, Any]) -> Iterator[Remote]:
    """The host of a ledger entry: this process's open connection, else a new one closed afterwards."""
    host = Host.from_dict(fields["host"])
    with _LIVE_LOCK:
        live = _LIVE.get(_key(host))
    if live is not None:
        yield live
        return
    remote = Remote(host)
    try:
        yield remote
    finally:
        remote.close()


def make_control_dir(ledger: Ledger, tag: str) -> Path:
    """This run's directory for the shared connections' sockets (ledgered, so heal removes it after a
    killed harness). In the temp dir, not the run dir: a socket path must stay under 108 bytes."""
    path = Path(tempfile.gettempdir()) / f"kcssh-{tag}-{os.getpid()}"
    ledger.record("ssh_control", path=str(path))
    path.mkdir(mode=0o700)
    return path


@register_undo("ssh_control")
def undo_control(fields: dict[str, Any]) -> str | None:
    """End any shared connection still listening in the directory, then remove it."""
    path = Path(fields["path"])
    if not path.is_dir():
        return None
    for sock in path.glob("*.sock"):
        subprocess.run(["ssh", "-o", f"ControlPath={sock}", "-O", "exit", "kchaos"], capture_output=True, timeout=10)
    shutil.rmtree(path, ignore_errors=True)
    return f"ssh connection directory {path}"


def privileged(host: Host, command: str) -> str:
    return f"sudo -n {command}" if host.sudo else command


# -- partitions ---------------------------------------------------------------------------------------


class RemoteFirewall:
    """This run's packet filter on one host (see the module docstring)."""

    def __init__(self, remote: Remote, tool: str, tag: str) -> None:
        self.remote, self.tool, self.tag = remote, tool, tag

    @property
    def name(self) -> str:
        return f"kchaos_{self.tag}" if self.tool == "nft" else f"KC_{self.tag}"

    def install(self, ledger: Ledger) -> int:
        rid = ledger.record("ssh_firewall", host=self.remote.host.to_dict(), tool=self.tool, name=self.name)
        if self.tool == "nft":
            script = (
                f"table inet {self.name} {{\n"
                "  set blocked { type ipv4_addr; }\n"
                "  chain input { type filter hook input priority -10; policy accept; ip saddr @blocked drop; }\n"
                "}\n"
            )
            self._nft(script)
        else:
            self._run(f"iptables -w -N {self.name} && {self._sudo('iptables')} -w -I INPUT -j {self.name}")
        return rid

    def block(self, sources: Iterable[str]) -> None:
        """Drop everything from `sources`, replacing what was blocked (nft: in one transaction)."""
        addrs = sorted(set(sources))
        if self.tool == "nft":
            script = f"flush set inet {self.name} blocked\n"
            if addrs:
                script += f"add element inet {self.name} blocked {{ {', '.join(addrs)} }}\n"
            self._nft(script)
            return
        ipt = self._sudo("iptables")
        parts = [f"{ipt} -w -F {self.name}"] + [f"{ipt} -w -A {self.name} -s {a} -j DROP" for a in addrs]
        self.remote.run(" && ".join(parts))

    def blocked(self) -> set[str]:
        if self.tool == "nft":
            out = self.remote.out(self._sudo(f"nft list set inet {self.name} blocked"))
            if "elements" not in out:
                return set()
            inside = out.split("elements = {", 1)[1].split("}", 1)[0]
            return {a.strip() for a in inside.replace("\n", " ").split(",") if a.strip()}
        found = set()
        for line in self.remote.out(self._sudo(f"iptables -w -S {self.name}")).splitlines():
            parts = line.split()
            if parts[:2] == ["-A", self.name] and "-s" in parts:
                found.add(parts[parts.index("-s") + 1].removesuffix("/32"))
        return found

    def _nft(self, script: str) -> None:
        self.remote.run(self._sudo("nft -f -"), input_bytes=script.encode())

    def _run(self, command: str) -> None:
        self.remote.run(self._sudo(command))

    def _sudo(self, command: str) -> str:
        return privileged(self.remote.host, command)


@register_undo("ssh_block")
def undo_block(fields: dict[str, Any]) -> str | None:
    """Empty the partition's blocked set (the table itself is the ssh_firewall entry's)."""
    with remote_for(fields) as remote:
        firewall = RemoteFirewall(remote, fields["tool"], fields["tag"])
        try:
            if not firewall.blocked():
                return None
        except Exception:  # the table is gone already
            return None
        firewall.block(())
    return f"partition rules on {fields['host']['name']}"


@register_undo("ssh_firewall")
def undo_firewall(fields: dict[str, Any]) -> str | None:
    name, host = fields["name"], Host.from_dict(fields["host"])
    ipt, nft = privileged(host, "iptables"), privileged(host, "nft")
    if fields["tool"] == "nft":
        script = f"{nft} list table inet {name} >/dev/null 2>&1 || exit 7; {nft} delete table inet {name}"
    else:
        script = (
            f"{ipt} -w -S {name} >/dev/null 2>&1 || exit 7; "
            f"while {ipt} -w -D INPUT -j {name} 2>/dev/null; do :; done; {ipt} -w -F {name} && {ipt} -w -X {name}"
        )
    return undo_script(fields, script, f"{fields['tool']} {name}")


def undo_script(fields: dict[str, Any], script: str, what: str) -> str | None:
    """Run an undo's `script` on the entry's host: exit 7 means `what` was gone already (None), any
    other failure raises; else what was removed."""
    host = fields["host"]["name"]
    with remote_for(fields) as remote:
        proc = remote.run(script, check=False)
    if proc.returncode == 7:
        return None
    if proc.returncode != 0:
        raise RuntimeError(f"host {host}: removing {what} failed: {proc.stderr.decode(errors='replace').strip()}")
    return f"{what} on {host}"


# -- processes and pauses --------------------------------------------------------------------------------


@register_undo("ssh_process")
def undo_process(fields: dict[str, Any]) -> str | None:
    """kill -9 the node's process if its PID still has the recorded start time."""
    if "pid" not in fields:
        return _undo_by_dir(fields)
    with remote_for(fields) as remote:
        ctl = fields["ctl"]
        proc = remote.run(f"{ctl} verify {int(fields['pid'])} {int(fields['starttime'])} KILL", check=False)
    return (
        f"process {fields['pid']} ({fields.get('node', '?')}) on {fields['host']['name']}"
        if not proc.returncode
        else None
    )


def _undo_by_dir(fields: dict[str, Any]) -> str | None:
    """The harness died between asking for a start and learning the PID: the pid file knows it."""
    with remote_for(fields) as remote:
        proc = remote.run(f"{fields['ctl']} kill {shlex.quote(fields['dir'])}", check=False)
    return f"process of {fields.get('node', '?')} on {fields['host']['name']}" if not proc.returncode else None


@register_undo("ssh_paused")
def undo_paused(fields: dict[str, Any]) -> str | None:
    with remote_for(fields) as remote:
        proc = remote.run(f"{fields['ctl']} verify {int(fields['pid'])} {int(fields['starttime'])} CONT", check=False)
    return f"paused process {fields['pid']} ({fields.get('node', '?')}) continued" if not proc.returncode else None


# -- clocks ---------------------------------------------------------------------------------------------


def _write_remote_file(remote: Remote, path: str, text: str) -> None:
    """Replace a small remote file in one rename (libfaketime must never read it half written)."""
    q = shlex.quote(path)
    remote.run(f"printf %s {shlex.quote(text)} > {q}.tmp && mv -f {q}.tmp {q}")


class RemoteClock(ClockControl):
    """A node's libfaketime file on its host; the clock model is `ClockControl`'s."""

    def __init__(self, ledger: Ledger, node: str, remote: Remote, path: str) -> None:
        super().__init__(ledger, node, Path(path))
        self.remote = remote

    def create(self) -> None:
        self.remote.run(f"mkdir -p {shlex.quote(str(self.path.parent))}")
        _write_remote_file(self.remote, str(self.path), TRUE_TIME)

    def _write(self) -> None:
        _write_remote_file(self.remote, str(self.path), self.clock.faketime_spec(self.process_start or _now()))

    def _track(self, off_true_time: bool) -> None:
        if off_true_time and self._ledger_id is None:
            self._ledger_id = self.ledger.record(
                "ssh_clock", node=self.node, host=self.remote.host.to_dict(), path=str(self.path)
            )
        elif not off_true_time and self._ledger_id is not None:
            self.ledger.mark_done(self._ledger_id)
            self._ledger_id = None


class GuestClock(ClockControl):
    """The host's own kernel clock, for `clock = "guest"` hosts (a VM that runs only its node): `date -s`
    steps CLOCK_REALTIME for everything on the guest, as a wrong NTP step would, and leaves the
    monotonic clock alone. No libfaketime and no preload. A bump steps the guest's clock by delta from
    where it is (measured on the guest, so ssh's delay does not count); the true time is the harness's
    clock sent over ssh (off by about one one-way delay). A rate fault would need adjtimex's tick: not
    supported."""

    def __init__(self, ledger: Ledger, node: str, remote: Remote) -> None:
        super().__init__(ledger, node, Path("/"))
        self.remote = remote
        self._applied = 0.0  # the offset (s) the guest's clock was last stepped to

    def create(self) -> None:
        """Start from the true time (an emulated guest's clock drifts from the host's)."""
        self._step(0.0)

    def process_starting(self) -> None:
        """Nothing to do: the kernel's clock is continuous across the node's restarts."""

    def rebooted(self) -> None:
        """The guest booted again (a power loss): its clock starts from the true time; put the fault back."""
        with self._lock:
            self._applied = 0.0
            self._write()

    def apply(self, fault: ClockFault) -> None:
        if fault.mode == "rate":
            raise FaultNotSupported("a guest's clock rate cannot be changed with date -s (clock = guest)")
        super().apply(fault)

    def _write(self) -> None:
        self._step(self.clock.offset_at(_now()))

    def _step(self, offset: float) -> None:
        if offset == 0.0:
            command = set_guest_time_command(self.remote.host)
        else:
            delta_ns = round((offset - self._applied) * 1e9)
            script = (
                f"t=$(( $(date +%s%N) + ({delta_ns}) )); "
                'date -u -s "@$((t / 1000000000)).$(printf %09d $((t % 1000000000)))" >/dev/null'
            )
            command = privileged(self.remote.host, f"sh -c {shlex.quote(script)}")
        self.remote.run(command)
        self._applied = offset

    def _track(self, off_true_time: bool) -> None:
        if off_true_time and self._ledger_id is None:
            self._ledger_id = self.ledger.record("guest_clock", node=self.node, host=self.remote.host.to_dict())
        elif not off_true_time and self._ledger_id is not None:
            self.ledger.mark_done(self._ledger_id)
            self._ledger_id = None


def set_guest_time_command(host: Host) -> str:
    """Shell that sets the host's clock to the harness's true time, as of now."""
    return privileged(host, f"date -u -s @{_now():.6f} >/dev/null")


@register_undo("guest_clock")
def undo_guest_clock(fields: dict[str, Any]) -> str | None:
    host = Host.from_dict(fields["host"])
    with remote_for(fields) as remote:
        remote.run(set_guest_time_command(host))
    return f"clock of {host.name} back to the true time"


def _now() -> float:
    import time

    return time.time()


@register_undo("ssh_clock")
def undo_clock(fields: dict[str, Any]) -> str | None:
    with remote_for(fields) as remote:
        current = remote.get(fields["path"], check=False)
        if current is None or current.decode("ascii", "replace") == TRUE_TIME:
            return None
        _write_remote_file(remote, fields["path"], TRUE_TIME)
    return f"clock of {fields.get('node', '?')} on {fields['host']['name']} back to the true time"


# -- disks ----------------------------------------------------------------------------------------------


def _poke(path: str, offset: int, data: bytes) -> str:
    """Shell that overwrites bytes of a file in place (the shim maps it: never replace the inode)."""
    return (
        f"printf %s {shlex.quote(data.decode('ascii'))} | "
        f"dd of={shlex.quote(path)} bs=1 seek={offset} conv=notrunc status=none"
    )


class RemoteDisk(DiskControl):
    """A node's kchaos_disk control file on its host."""

    def __init__(self, ledger: Ledger, node: str, remote: Remote, path: str) -> None:
        super().__init__(ledger, node, Path(path))
        self.remote = remote

    def create(self) -> None:
        healthy = disks.OFF + b" " * (disks.CONTROL_BYTES - 2) + b"\n"
        self.remote.put(healthy, str(self.path))

    def apply(self, fault: DiskFault) -> None:
        if self._ledger_id is None:
            self._ledger_id = self.ledger.record(
                "ssh_disk", node=self.node, host=self.remote.host.to_dict(), path=str(self.path)
            )
        path = str(self.path)
        steps = [_poke(path, 0, disks.OFF), _poke(path, 2, encode_params(fault)), _poke(path, 0, disks.ON)]
        self.remote.run(" && ".join(steps))
        self.fault = fault

    def heal(self) -> None:
        if self._ledger_id is None:
            return
        self.remote.run(_poke(str(self.path), 0, disks.OFF))
        self.fault = None
        self.ledger.mark_done(self._ledger_id)
        self._ledger_id = None


@register_undo("ssh_disk")
def undo_disk(fields: dict[str, Any]) -> str | None:
    with remote_for(fields) as remote:
        head = remote.run(f"head -c 1 {shlex.quote(fields['path'])}", check=False)
        if head.returncode != 0 or head.stdout != disks.ON:
            return None
        remote.run(_poke(fields["path"], 0, disks.OFF))
    return f"disk fault on {fields.get('node', '?')} ({fields['host']['name']})"
