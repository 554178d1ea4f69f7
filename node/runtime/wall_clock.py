"""The node's clock: the wall clock as this process sees it, never going backwards.

Kafka's raft client and quorum controller read `Time.milliseconds()`, the wall clock, so that is what
the real runtime feeds the core: a skewed host clock (libfaketime under the harness's clock faults)
then reaches the node as it would reach Kafka. The core needs a clock that does not go back, so a
backward step freezes the node's time until the wall clock catches up (the simulator's `NodeClock`
has the same rule); a forward step expires every timer it passes at once. asyncio keeps running on
the real monotonic clock; the runtime re-checks its deadline against this clock (see `NodeServer`).
"""

from __future__ import annotations

import time


class WallClock:
    def __init__(self) -> None:
        self._last = 0

    @staticmethod
    def wall_ms() -> int:
        """The process's wall clock right now (may jump either way)."""
        return time.time_ns() // 1_000_000

    def now_ms(self) -> int:
        """The node's time: the largest wall-clock reading so far."""
        wall = self.wall_ms()
        if wall > self._last:
            self._last = wall
        return self._last
