"""Host side of lazyfs: start a daemon and its mount, ledgered first, and take them down again.

Ledger entries, in the order written: `lazyfs_daemon` (pid and start time added once known) and `mount`
(the mount point). Undo runs newest first, so heal unmounts (`umount -l`) first; the daemon then exits
by itself (its undo waits for that, then sends SIGTERM, then SIGKILL), and a daemon whose pid never
reached the ledger exits by itself once unmounted.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.backends.lazyfs.control import LazyfsClient, LazyfsError
from harness.backends.lazyfs.layout import StateDir
from harness.backends.ledger import Ledger, register_undo
from harness.backends.procs import find_by_argv, is_same_process, kill_verified, start_time, wait_gone
from harness.backends.resources import is_mounted, record_mount
from harness.backends.shell import BackendError, run

REPO_ROOT = Path(__file__).resolve().parents[3]
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 20.0
EXIT_WAIT_S = 5.0  # per step of a daemon's stop: exit by itself, after SIGTERM, after SIGKILL


@dataclass
class LazyMount:
    """One lazyfs: a daemon serving `state.disk` at `mountpoint`."""

    state: StateDir
    mountpoint: Path
    popen: subprocess.Popen[bytes]
    process_id: int  # ledger entries
    mount_id: int

    @property
    def client(self) -> LazyfsClient:
        return LazyfsClient(self.state.control)

    def power_loss(self, torn_seed: int | None = None) -> dict[str, Any]:
        return self.client.power_loss(torn_seed)

    def status(self) -> dict[str, Any]:
        return self.client.status()

    def alive(self) -> bool:
        return self.popen.poll() is None


def start_lazyfs(
    ledger: Ledger, state_dir: Path, mountpoint: Path, *, backing_sync: bool = True, label: str = "lazyfs"
) -> LazyMount:
    """Mount a lazyfs at `mountpoint` (created if missing) backed by `state_dir`; returns once it serves."""
    state = StateDir(Path(state_dir))
    state.make()
    mountpoint = Path(mountpoint)
    mountpoint.mkdir(parents=True, exist_ok=True)
    if is_mounted(str(mountpoint)):
        raise BackendError(f"{mountpoint} is already a mount point")
    argv = [sys.executable, "-m", "harness.backends.lazyfs", str(state.root), str(mountpoint)]
    if not backing_sync:
        argv.append("--no-backing-sync")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    process_id = ledger.record("lazyfs_daemon", node=label, argv=argv)
    mount_id = record_mount(ledger, str(mountpoint))
    log = open(state.log, "ab")  # noqa: SIM115 - the child holds its own copy
    try:
        popen = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, cwd=REPO_ROOT, start_new_session=True
        )
    except OSError as exc:
        ledger.mark_done(mount_id)
        ledger.mark_done(process_id)
        raise BackendError(f"{label}: cannot start the lazyfs daemon: {exc.strerror}") from exc
    finally:
        log.close()
    ledger.update(process_id, pid=popen.pid, starttime=start_time(popen.pid))
    lazy = LazyMount(state, mountpoint, popen, process_id, mount_id)
    try:
        _wait_ready(lazy, label)
    except BaseException:
        stop_lazyfs(ledger, lazy)
        raise
    return lazy


@register_undo("lazyfs_daemon")
def undo_daemon(fields: dict[str, Any]) -> str | None:
    """Stop a lazyfs daemon: after the unmount it exits by itself; else SIGTERM (libfuse unmounts and
    exits), else SIGKILL. A daemon whose PID was never ledgered (the harness was killed right after
    starting it) is found by its command line, and whatever it mounted since is unmounted too."""
    pid, start = fields.get("pid"), fields.get("starttime")
    if pid is None or start is None:
        found = find_by_argv(fields["argv"])
        if not found:
            return None
        for stat in found:
            _stop(stat.pid, stat.starttime)
        mountpoint = fields["argv"][4]  # [python, -m, module, state dir, mountpoint, ...]
        if is_mounted(mountpoint):
            run(["umount", "-l", mountpoint])
        return f"lazyfs daemon {found[0].pid} ({fields.get('node', '?')}), found by its command line"
    if not is_same_process(pid, start):
        return None
    _stop(pid, start)
    return f"lazyfs daemon {pid} ({fields.get('node', '?')})"


def _stop(pid: int, start: int) -> None:
    for sig in (None, signal.SIGTERM, signal.SIGKILL):
        if sig is not None:
            kill_verified(pid, start, sig)
            kill_verified(pid, start, signal.SIGCONT)  # a stopped daemon (a pause fault) must run to exit
        if wait_gone(pid, start, timeout=EXIT_WAIT_S):
            break


def _wait_ready(lazy: LazyMount, label: str) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    problem = "not mounted yet"
    while time.monotonic() < deadline:
        if not lazy.alive():
            raise BackendError(f"{label}: the lazyfs daemon exited with {lazy.popen.returncode}: {_log_tail(lazy)}")
        if is_mounted(str(lazy.mountpoint)):
            try:
                lazy.client.ping()
                return
            except LazyfsError as exc:
                problem = str(exc)
        time.sleep(0.05)
    raise BackendError(f"{label}: lazyfs not serving {lazy.mountpoint} after {READY_TIMEOUT_S:.0f} s: {problem}")


def _log_tail(lazy: LazyMount, lines: int = 5) -> str:
    with contextlib.suppress(OSError):
        return " | ".join(lazy.state.log.read_text(errors="replace").strip().splitlines()[-lines:]) or "no output"
    return "no output"


def stop_lazyfs(ledger: Ledger, lazy: LazyMount) -> None:
    """Unmount (lazily: a process still holding a file must not keep the mount alive) and stop the daemon."""
    report = ledger.undo(lazy.mount_id)
    ledger.undo(lazy.process_id, report)
    with contextlib.suppress(subprocess.TimeoutExpired):
        lazy.popen.wait(timeout=STOP_TIMEOUT_S)
    if report.failed:
        raise BackendError(f"lazyfs at {lazy.mountpoint}: " + "; ".join(report.failed))
