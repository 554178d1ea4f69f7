"""Per-node clocks: map the simulator's virtual time onto each node's own `now`.

A node's clock is a piecewise-linear function of virtual time with an offset and a rate, changed by
clock faults. The node core only measures durations, so what matters is that its clock never runs
backwards: after a backward jump the clock stands still until virtual time catches up, as a
monotonic clock would. A faster or slower rate makes the node's timers fire early or late.
"""

from __future__ import annotations

import math


class NodeClock:
    def __init__(self, offset_ms: int = 0, rate: float = 1.0) -> None:
        if rate <= 0:
            raise ValueError("clock rate must be > 0")
        self._anchor_virtual = 0  # virtual time of the last change
        self._anchor_local = offset_ms  # raw local time at that moment
        self.rate = rate
        self._last = offset_ms  # the largest value ever returned: the monotonic floor

    def _raw(self, virtual: int) -> int:
        return self._anchor_local + math.floor((virtual - self._anchor_virtual) * self.rate)

    def local(self, virtual: int) -> int:
        """The node's `now` at virtual time `virtual` (non-decreasing over successive calls)."""
        value = self._raw(virtual)
        if value < self._last:
            return self._last
        self._last = value
        return value

    def virtual_for(self, local_deadline: int, virtual_now: int) -> int:
        """The earliest virtual time (>= virtual_now) at which the node's clock reads `local_deadline`."""
        if self._raw(virtual_now) >= local_deadline:
            return virtual_now
        delta = (local_deadline - self._anchor_local) / self.rate
        at = self._anchor_virtual + math.ceil(delta)
        while self._raw(at) < local_deadline:  # guard against float rounding
            at += 1
        return max(at, virtual_now)

    def set(self, virtual_now: int, *, jump_ms: int = 0, rate: float | None = None) -> None:
        """Jump the clock by `jump_ms` (either sign) and/or change its rate from `virtual_now` on."""
        if rate is not None and rate <= 0:
            raise ValueError("clock rate must be > 0")
        self._anchor_local = self._raw(virtual_now) + jump_ms
        self._anchor_virtual = virtual_now
        if rate is not None:
            self.rate = rate

    @property
    def skewed(self) -> bool:
        return self.rate != 1.0 or self._anchor_local != self._anchor_virtual
