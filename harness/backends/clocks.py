"""Clock faults for real processes: libfaketime reads the node's wall clock from a file we rewrite.

A node started with clock faults enabled has `LD_PRELOAD=kchaos_clock.so:libfaketime.so.1` and
`FAKETIME_TIMESTAMP_FILE` pointing at its own file; with `FAKETIME_NO_CACHE=1` libfaketime reads
that file on every wall-clock call, so rewriting it moves the running process's clock at once.
`FAKETIME_DONT_FAKE_MONOTONIC=1` leaves the monotonic clock (asyncio's) alone, and the kchaos_clock
shim sends every sleep and wait to the C library, so only the wall clock is ever faked.

libfaketime's file says "+OFFSET xRATE" and means: fake(t) = t + (t - start) * (RATE - 1) + OFFSET,
where `start` is when the process began. The host's clock here is continuous instead: a rate change
takes effect from *now*, and a bump moves the clock by delta from where it is. `HostClock` holds that
model; `faketime_spec` turns it into the file's text for a process that started at `start`, so a
restarted node gets its host's clock, not a jump.
"""

from __future__ import annotations

import contextlib
import glob
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.backends import native
from harness.backends.ledger import Ledger, register_undo
from harness.backends.shell import BackendError
from vocab.faults.kinds import ClockFault

LIBFAKETIME_GLOBS = (
    "/usr/lib/*/faketime/libfaketime.so.1",
    "/usr/lib/faketime/libfaketime.so.1",
    "/usr/local/lib/faketime/libfaketime.so.1",
)
TRUE_TIME = "+0.000 x1\n"
MIN_STROBE_PERIOD_MS = 10  # each flip rewrites a file; faster than this is not a clock any node has


def find_libfaketime() -> Path:
    """libfaketime.so.1 ($KCHAOS_LIBFAKETIME, else where Debian's `faketime` package installs it)."""
    override = os.environ.get("KCHAOS_LIBFAKETIME")
    if override:
        if not Path(override).is_file():
            raise BackendError(f"KCHAOS_LIBFAKETIME={override}: no such file")
        return Path(override)
    for pattern in LIBFAKETIME_GLOBS:
        found = sorted(glob.glob(pattern))
        if found:
            return Path(found[0])
    raise BackendError("libfaketime not found: clock faults need it (apt-get install faketime)")


def preload_env(timestamp_file: Path) -> dict[str, str]:
    """The environment that puts a process's wall clock under `timestamp_file`."""
    libs = [str(native.build("kchaos_clock")), str(find_libfaketime())]
    return {
        "LD_PRELOAD": ":".join(libs),
        "FAKETIME_TIMESTAMP_FILE": str(timestamp_file),
        "FAKETIME_NO_CACHE": "1",
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        "NO_FAKE_STAT": "1",  # file times stay real: the nodes never look at them
    }


@dataclass(frozen=True)
class HostClock:
    """A host's wall clock as an offset from the true time: `offset_s` at true time `anchor`, then
    running at `rate` (the offset grows by rate - 1 seconds per second)."""

    offset_s: float = 0.0
    rate: float = 1.0
    anchor: float = 0.0

    def offset_at(self, t: float) -> float:
        return self.offset_s + (t - self.anchor) * (self.rate - 1.0)

    def bumped(self, now: float, delta_s: float) -> HostClock:
        return HostClock(self.offset_at(now) + delta_s, self.rate, now)

    def with_rate(self, now: float, rate: float) -> HostClock:
        return HostClock(self.offset_at(now), rate, now)

    @property
    def is_true(self) -> bool:
        return self.offset_s == 0.0 and self.rate == 1.0

    def faketime_spec(self, start: float) -> str:
        """libfaketime's "+OFFSET xRATE" for a process that started at true time `start`."""
        return f"{self.offset_at(start):+.3f} x{self.rate:.6g}\n"


def write_spec(path: Path, spec: str) -> None:
    """Replace the file in one rename: libfaketime re-reads it on every call and must never see it half
    written (a torn read would be taken for another time)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(spec, encoding="ascii")
    os.replace(tmp, path)


class ClockControl:
    """One node's clock file and the fault on it (see the module docstring)."""

    def __init__(self, ledger: Ledger, node: str, path: Path) -> None:
        self.ledger = ledger
        self.node = node
        self.path = path
        self.clock = HostClock()
        self.process_start: float | None = None  # when the current process began (None: none yet)
        self._ledger_id: int | None = None
        self._lock = threading.Lock()
        self._strobe: _Strobe | None = None

    def create(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_spec(self.path, TRUE_TIME)

    def process_starting(self) -> None:
        """A process is about to start under this file: rewrite it for that start time."""
        with self._lock:
            self.process_start = time.time()
            self._write()

    def apply(self, fault: ClockFault) -> None:
        if fault.mode == "strobe" and fault.period_ms < MIN_STROBE_PERIOD_MS:
            raise ValueError(f"clock strobe period must be >= {MIN_STROBE_PERIOD_MS} ms, got {fault.period_ms}")
        self.stop_strobe()
        now = time.time()
        with self._lock:
            match fault.mode:
                case "bump":
                    self._set(self.clock.bumped(now, fault.delta_ms / 1000))
                case "rate":
                    self._set(self.clock.with_rate(now, fault.rate))
                case _:  # reset, and the true time a strobe starts from
                    self._set(HostClock())
        if fault.mode == "strobe":
            self._track(True)
            self._strobe = _Strobe(self, fault.delta_ms / 1000, fault.period_ms / 1000, fault.duration_ms / 1000)
            self._strobe.start()

    def stop_strobe(self) -> None:
        """End a strobe early (the clock is left at the true time)."""
        strobe, self._strobe = self._strobe, None
        if strobe is not None:
            strobe.stop()

    @property
    def strobing(self) -> bool:
        return self._strobe is not None and self._strobe.is_alive()

    def _set(self, clock: HostClock) -> None:
        self.clock = clock
        self._write()
        self._track(not clock.is_true)

    def _track(self, off_true_time: bool) -> None:
        """The ledger lists this clock exactly while it may be off the true time."""
        if off_true_time and self._ledger_id is None:
            self._ledger_id = self.ledger.record("clock", node=self.node, path=str(self.path))
        elif not off_true_time and self._ledger_id is not None:
            self.ledger.mark_done(self._ledger_id)
            self._ledger_id = None

    def _write(self) -> None:
        write_spec(self.path, self.clock.faketime_spec(self.process_start or time.time()))


class _Strobe(threading.Thread):
    """Flip between +delta and the true time every period, for duration; then the true time."""

    def __init__(self, control: ClockControl, delta_s: float, period_s: float, duration_s: float) -> None:
        super().__init__(name=f"clock-strobe-{control.node}", daemon=True)
        self.control, self.delta_s, self.period_s, self.duration_s = control, delta_s, period_s, duration_s
        self._stop_event = threading.Event()

    def run(self) -> None:
        control = self.control
        end = time.monotonic() + self.duration_s
        skewed = False
        while not self._stop_event.is_set() and time.monotonic() < end:
            skewed = not skewed
            with control._lock:
                control.clock = HostClock(self.delta_s if skewed else 0.0)
                control._write()
            self._stop_event.wait(min(self.period_s, max(0.0, end - time.monotonic())))
        with control._lock:
            control._set(HostClock())

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=5)


@register_undo("clock")
def undo_clock(fields: dict[str, Any]) -> str | None:
    """Back to the true time (a node still running under this file follows at once)."""
    path = Path(fields["path"])
    with contextlib.suppress(FileNotFoundError):
        if path.read_text(encoding="ascii") != TRUE_TIME:
            write_spec(path, TRUE_TIME)
            return f"clock of {fields.get('node', '?')} back to the true time"
    return None
