"""Pause: SIGSTOP a node's process group, SIGCONT to resume. The ledger lists every stopped process
(by PID and start time), so heal continues it even after the harness was killed: a stopped process
left behind would hold its ports, files and locks for ever without showing up as running anything.
"""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass
from typing import Any

from harness.backends.ledger import Ledger, register_undo
from harness.backends.procs import is_same_process, kill_verified, read_stat
from harness.backends.shell import BackendError

STOPPED_STATES = ("T", "t")
SETTLE_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Paused:
    pid: int
    starttime: int
    ledger_id: int


class Pauses:
    """The paused processes of one run, by node."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self._paused: dict[str, Paused] = {}

    def pause(self, node: str, pid: int, starttime: int) -> None:
        """SIGSTOP the process and wait until the kernel reports it stopped."""
        old = self._paused.get(node)
        if old is not None and (old.pid, old.starttime) == (pid, starttime):
            return
        self._forget(node)
        rid = self.ledger.record("paused", node=node, pid=pid, starttime=starttime)
        self._paused[node] = Paused(pid, starttime, rid)
        if not kill_verified(pid, starttime, signal.SIGSTOP):
            self._forget(node)
            return  # it died in the meantime: nothing to pause
        _wait_state(pid, starttime, stopped=True)

    def resume(self, node: str) -> None:
        """SIGCONT the node's paused process (if any, and if it still lives)."""
        paused = self._paused.pop(node, None)
        if paused is None:
            return
        if kill_verified(paused.pid, paused.starttime, signal.SIGCONT):
            _wait_state(paused.pid, paused.starttime, stopped=False)
        self.ledger.mark_done(paused.ledger_id)

    def is_paused(self, node: str) -> bool:
        paused = self._paused.get(node)
        return paused is not None and is_same_process(paused.pid, paused.starttime)

    def resume_all(self) -> None:
        for node in list(self._paused):
            self.resume(node)

    def _forget(self, node: str) -> None:
        """A pause of a process that is gone (killed and restarted since) is over."""
        paused = self._paused.pop(node, None)
        if paused is not None:
            kill_verified(paused.pid, paused.starttime, signal.SIGCONT)
            self.ledger.mark_done(paused.ledger_id)


def _wait_state(pid: int, starttime: int, *, stopped: bool) -> None:
    """Signals are delivered asynchronously: wait until /proc shows the process (un)stopped."""
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while True:
        stat = read_stat(pid)
        if stat is None or stat.starttime != starttime or stat.state in ("Z", "X"):
            return  # gone
        if (stat.state in STOPPED_STATES) == stopped:
            return
        if time.monotonic() > deadline:
            raise BackendError(f"process {pid} still in state {stat.state} {SETTLE_TIMEOUT_S:g} s after the signal")
        time.sleep(0.002)


@register_undo("paused")
def undo_paused(fields: dict[str, Any]) -> str | None:
    pid, start = fields["pid"], fields["starttime"]
    stat = read_stat(pid)
    if stat is None or stat.starttime != start or stat.state not in STOPPED_STATES:
        return None
    kill_verified(pid, start, signal.SIGCONT)
    return f"paused process {pid} ({fields.get('node', '?')}) continued"
