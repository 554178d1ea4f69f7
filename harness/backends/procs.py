"""Process identity by PID *and* start time, so a recycled PID is never mistaken for one of ours."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")


@dataclass(frozen=True)
class ProcStat:
    pid: int
    state: str
    ppid: int
    pgid: int
    session: int
    starttime: int  # clock ticks after boot: unique per PID lifetime


def read_stat(pid: int) -> ProcStat | None:
    """The parts of /proc/<pid>/stat we need, or None when there is no such process."""
    try:
        raw = (PROC / str(pid) / "stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # The command name (field 2) is in parentheses and may itself contain spaces or ')'.
    rest = raw[raw.rindex(")") + 2 :].split()
    # rest[0] is field 3 (state); field N is rest[N - 3].
    return ProcStat(
        pid=pid, state=rest[0], ppid=int(rest[1]), pgid=int(rest[2]), session=int(rest[3]), starttime=int(rest[19])
    )


def start_time(pid: int) -> int | None:
    stat = read_stat(pid)
    return stat.starttime if stat else None


def is_same_process(pid: int, starttime: int) -> bool:
    """True while `pid` is still the process that had `starttime` (and has not become a zombie)."""
    stat = read_stat(pid)
    return stat is not None and stat.starttime == starttime and stat.state not in ("Z", "X")


def group_members(pgid: int) -> list[int]:
    """PIDs whose process group is `pgid` (a group keeps its number reserved while any member lives)."""
    members = []
    for entry in PROC.iterdir():
        if entry.name.isdigit():
            stat = read_stat(int(entry.name))
            if stat is not None and stat.pgid == pgid and stat.state not in ("Z", "X"):
                members.append(stat.pid)
    return members


def kill_verified(pid: int, starttime: int, sig: int = signal.SIGKILL) -> bool:
    """Signal the process group led by (pid, starttime) if it is still ours; return whether anything was hit.

    Our processes are started in a session of their own, so their PID is also their process-group id.
    If the leader is gone but members of its group remain, the number cannot have been reused (Linux keeps
    a PID reserved while a group of that id exists), so the group is still ours.
    """
    stat = read_stat(pid)
    if stat is not None and stat.starttime != starttime:
        return False  # the PID now belongs to someone else; their group is not ours either
    if stat is not None and stat.state not in ("Z", "X"):
        try:
            os.killpg(pid, sig) if stat.pgid == pid else os.kill(pid, sig)
        except ProcessLookupError:
            return False
        return True
    hit = False
    for member in group_members(pid):
        try:
            os.kill(member, sig)
            hit = True
        except ProcessLookupError:
            pass
    return hit


def wait_gone(pid: int, starttime: int, timeout: float = 5.0) -> bool:
    """Wait until (pid, starttime) has exited (it may be someone else's child, so we cannot waitpid)."""
    deadline = time.monotonic() + timeout
    while is_same_process(pid, starttime):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


# libfaketime makes a shared-memory file and a semaphore named after the PID of every process it is
# preloaded into, and removes them only when that process exits normally: a node killed by a signal (a
# kill fault, a power loss, teardown, heal) leaves both in /dev/shm for good.
SHM_DIR = Path("/dev/shm")
FAKETIME_SHM_NAMES = ("faketime_shm_{pid}", "sem.faketime_sem_{pid}")


def remove_faketime_files(pid: int) -> int:
    """Remove what libfaketime left of the dead process `pid`; how many files went. Nothing is touched
    while a live process has that PID (it may be another one's by now, with live files of its own)."""
    stat = read_stat(pid)
    if stat is not None and stat.state not in ("Z", "X"):
        return 0
    removed = 0
    for name in FAKETIME_SHM_NAMES:
        try:
            (SHM_DIR / name.format(pid=pid)).unlink()
            removed += 1
        except FileNotFoundError:
            pass
    return removed


def find_by_argv(argv: list[str]) -> list[ProcStat]:
    """Live processes whose command line is exactly `argv`. How heal finds a daemon the harness started
    but was killed before it ledgered the PID: such an argv names files of that run only, so it is ours."""
    return [stat for stat, _ in find_where(lambda found: found == argv)]


def find_where(wanted: Callable[[list[str]], bool]) -> list[tuple[ProcStat, list[str]]]:
    """Live processes whose command line (split into its arguments) satisfies `wanted`, with it."""
    found = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        argv = [a.decode("utf-8", "surrogateescape") for a in raw.split(b"\0")[:-1]]
        stat = read_stat(int(entry.name)) if argv and wanted(argv) else None
        if stat is not None and stat.state not in ("Z", "X"):
            found.append((stat, argv))
    return found
