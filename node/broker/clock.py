"""The broker's notion of now, shared by its parts.

The port's callbacks (`send`'s on_reply) carry no time, so a part that must time-stamp a reply uses
the latest `now_ms` the broker was called with: never later than the truth, and never going back.
"""

from __future__ import annotations


class Clock:
    __slots__ = ("now_ms",)

    def __init__(self, now_ms: int = 0) -> None:
        self.now_ms = now_ms

    def advance(self, now_ms: int) -> int:
        if now_ms > self.now_ms:
            self.now_ms = now_ms
        return self.now_ms


__all__ = ["Clock"]
