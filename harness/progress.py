"""The live progress display of a run: elapsed/remaining, ops ok/fail/info, ops/s, active faults.

On a terminal it is one `rich` live line, redrawn a few times a second from rich's own thread (it only
reads counters). Elsewhere (CI logs, a pipe) it prints a plain line every `every_s` seconds of wall
time. Simulated runs show no live line: they finish in seconds and their clock is virtual.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

NS_PER_S = 1_000_000_000


class Progress:
    """Counts history events (`on_event`) and shows them (see the module docstring)."""

    def __init__(
        self,
        time_limit_s: float,
        *,
        clock_ns: Callable[[], int],
        faults: Callable[[], list[str]] = list,
        live: bool | None = None,
        stream: TextIO | None = None,
        every_s: float = 10.0,
        quiet: bool = False,
    ) -> None:
        self.time_limit_s = time_limit_s
        self.clock_ns = clock_ns
        self.faults = faults
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty() if live is None else live
        self.every_s = every_s
        self.quiet = quiet  # count, show nothing (`--no-progress`, the runs of a suite)
        self.counts = {"ok": 0, "fail": 0, "info": 0}
        self.invoked = 0
        self.phase = "run"
        self._recent: list[tuple[int, int]] = []  # (time ns, completions so far) samples for ops/s
        self._last_print = time.monotonic()
        self._printed: tuple[Any, ...] | None = None  # what the last plain line showed
        # Fault kinds started since the last plain line: a fault that came and went between two lines
        # would never show (the nemesis's grid and the lines' 10 s often meet just before each start).
        self._started: dict[str, None] = {}
        self._live: Any = None

    # -- counting ---------------------------------------------------------------------------------

    def on_event(self, event: dict[str, Any]) -> None:
        if event["process"] == "nemesis":
            f = str(event.get("f", ""))
            if f.startswith("start-") and event["type"] not in ("invoke", "fail"):
                self._started[f.removeprefix("start-")] = None
            return
        kind = event["type"]
        if kind == "invoke":
            self.invoked += 1
        else:
            self.counts[kind] = self.counts.get(kind, 0) + 1
            now = self.clock_ns()
            if not self._recent or now - self._recent[-1][0] >= NS_PER_S // 2:
                self._recent.append((now, sum(self.counts.values())))
                if len(self._recent) > 12:  # the last ~5 s
                    del self._recent[0]
        if not self.live and not self.quiet and time.monotonic() - self._last_print >= self.every_s:
            self._last_print = time.monotonic()
            self._print()

    def ops_per_s(self) -> float:
        """Completions per second over the last few seconds of run time."""
        if not self._recent:
            return 0.0
        now = self.clock_ns()
        t0, d0 = self._recent[0]
        return (sum(self.counts.values()) - d0) / ((now - t0) / NS_PER_S) if now - t0 >= NS_PER_S // 2 else 0.0

    def line(self) -> str:
        elapsed = self.clock_ns() / NS_PER_S
        remaining = max(0.0, self.time_limit_s - elapsed)
        c = self.counts
        active = self.faults()
        faults = ", ".join(active) or "none"
        gone = [kind for kind in self._started if kind not in active] if not self.live else []
        if gone:
            faults += f" (since the last line: {', '.join(gone)})"
        return (
            f"[{self.phase}] {elapsed:6.1f}s elapsed, {remaining:5.1f}s left | ops ok {c['ok']} fail {c['fail']} "
            f"info {c['info']} | {self.ops_per_s():7.1f} ops/s | faults: {faults}"
        )

    # -- showing ----------------------------------------------------------------------------------

    def _state(self) -> tuple[Any, ...]:
        return (self.phase, self.invoked, *self.counts.values(), tuple(self.faults()), tuple(self._started))

    def _print(self) -> None:
        self._printed = self._state()
        print(self.line(), file=self.stream, flush=True)
        self._started.clear()

    def __enter__(self) -> Progress:
        if self.live and not self.quiet:
            from rich.console import Console
            from rich.live import Live
            from rich.text import Text

            self._live = Live(
                get_renderable=lambda: Text(self.line()),
                console=Console(file=self.stream),
                refresh_per_second=4,
                transient=True,
            )
            self._live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
        if not self.quiet and self._printed != self._state():  # closing line, unless the last one said it all
            self._print()
