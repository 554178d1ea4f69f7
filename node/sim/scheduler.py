"""The simulator's event queue: virtual time in ms, ties broken by insertion order.

Determinism rests on this ordering: two entries due at the same millisecond run in the order they
were scheduled, never in an order that depends on object identity or hashing.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any


class EventQueue:
    def __init__(self) -> None:
        self._heap: list[tuple[int, int, Callable[..., None], tuple[Any, ...]]] = []
        self._seq = 0
        self.now = 0

    def __len__(self) -> int:
        return len(self._heap)

    def schedule(self, at: int, fn: Callable[..., None], *args: Any) -> None:
        """Run `fn(*args)` at virtual time `at` (never earlier than now)."""
        if at < self.now:
            at = self.now
        self._seq += 1
        heapq.heappush(self._heap, (at, self._seq, fn, args))

    def after(self, delay: int, fn: Callable[..., None], *args: Any) -> None:
        self.schedule(self.now + max(0, delay), fn, *args)

    def next_time(self) -> int | None:
        return self._heap[0][0] if self._heap else None

    def pop(self) -> tuple[Callable[..., None], tuple[Any, ...]]:
        """Advance the clock to the earliest entry and return it (the caller runs it)."""
        at, _seq, fn, args = heapq.heappop(self._heap)
        self.now = at
        return fn, args
