"""A progress line for checks that take a while: silent for the first second, then on a terminal one
line redrawn a few times a second (cleared at the end), elsewhere (CI logs, a pipe) a line every
`every_s` seconds. It only reads what the check publishes (`Tracker`), from a thread of its own, so
the search pays nothing but a few integer stores."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO


@dataclass
class Tracker:
    """What a running check has done so far; the check writes, the progress line reads."""

    keys: int = 0  # keys to decide
    done: int = 0  # keys decided (or given up on)
    states: int = 0  # configurations searched in the key being decided here (in-process search only)

    def key_done(self, done: int, keys: int) -> None:
        self.done, self.keys, self.states = done, keys, 0


class ProgressLine:
    """`with ProgressLine(tracker):` around a check (see the module docstring)."""

    def __init__(
        self,
        tracker: Tracker,
        stream: TextIO | None = None,
        *,
        after_s: float = 1.0,
        every_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.tracker = tracker
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty()
        self.after_s = after_s
        self.every_s = every_s if every_s is not None else (0.25 if self.live else 10.0)
        self.clock = clock
        self.lines = 0
        self._started = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def line(self) -> str:
        t = self.tracker
        searching = f", {t.states:,} configurations searched in the current key" if t.states else ""
        return f"checking: {t.done}/{t.keys} keys decided, {self.clock() - self._started:.0f} s{searching}"

    def __enter__(self) -> ProgressLine:
        self._started = self.clock()
        self._thread = threading.Thread(target=self._run, name="check-progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.live and self.lines:
            self.stream.write("\r\x1b[2K")  # the verdict follows on a clean line
            self.stream.flush()

    def _run(self) -> None:
        if self._stop.wait(self.after_s):
            return
        while True:
            self.lines += 1
            self.stream.write(("\r\x1b[2K" + self.line()) if self.live else self.line() + "\n")
            self.stream.flush()
            if self._stop.wait(self.every_s):
                return
