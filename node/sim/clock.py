"""Per-node clocks: map the simulator's virtual time onto each node's own `now`.

A node's clock is a piecewise-linear function of virtual time with an offset and a rate, changed by
clock faults. The node core only measures durations, so what matters is that its clock never runs
backwards: after a backward jump the clock stands still until virtual time catches up, as a
monotonic clock would. A faster or slower rate makes the node's timers fire early or late.

`wall` is the raw skewed clock (what a wall clock would read, backward jumps included); `local` is
what the node's core is given (`wall`, never decreasing), like the real runtime's clock.
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

    def wall(self, virtual: int) -> int:
        """The skewed wall clock at virtual time `virtual` (it may run backwards after a jump)."""
        return self._raw(virtual)

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

    def reset(self, virtual_now: int) -> None:
        """The true time at normal speed from `virtual_now` on (`local` stays monotonic)."""
        self._anchor_local = virtual_now
        self._anchor_virtual = virtual_now
        self.rate = 1.0

    def steady(self, virtual_now: int) -> None:
        """Normal speed from `virtual_now` on, continuing from where the node's clock stands (after a
        backward jump: from the value it last saw, so it stops standing still). Offsets stay."""
        self._anchor_local = max(self._raw(virtual_now), self._last)
        self._anchor_virtual = virtual_now
        self.rate = 1.0

    def frozen(self, virtual: int) -> bool:
        """Standing still after a backward jump: the node has seen a later time than `wall` reads."""
        return self._last > self._raw(virtual)

    @property
    def skewed(self) -> bool:
        return self.rate != 1.0 or self._anchor_local != self._anchor_virtual
