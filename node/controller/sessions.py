"""Broker sessions as the active controller sees them (KIP-631): last contact per broker and the one
session timer. The controller owns them; the registration handlers read and touch them through
`node.controller.context.ControllerContext`."""

from __future__ import annotations

from collections.abc import Mapping

from node.bugs import NO_BUGS, Bugs
from node.metadata.image import BrokerRegistration, MetadataImage


class Sessions:
    """Last contact per broker, as seen by this active controller, and the one timer it keeps armed."""

    def __init__(self, timeout_ms: int, bugs: Bugs = NO_BUGS) -> None:
        self.timeout_ms = timeout_ms
        self.retry_ms = max(1, timeout_ms // 10)  # a lapsed broker whose fence was refused is tried again
        self.bugs = bugs
        self._last: dict[int, int] = {}
        self._armed: int | None = None

    def reset(self, now_ms: int, brokers: Mapping[int, BrokerRegistration]) -> None:
        self._last = dict.fromkeys(brokers, now_ms)
        if "ctl-no-fence-after-failover" in self.bugs:  # KAFKA-13841: only brokers heard from are tracked
            self._last = {}
        self._armed = None

    def clear(self) -> None:
        self._last.clear()
        self._armed = None

    def touch(self, broker_id: int, now_ms: int) -> None:
        self._last[broker_id] = now_ms

    def live(self, broker_id: int, now_ms: int) -> bool:
        last = self._last.get(broker_id)
        return last is not None and now_ms < last + self.timeout_ms

    def expired(self, view: MetadataImage, now_ms: int) -> list[int]:
        """Unfenced brokers whose session has lapsed."""
        tracked = self._last if "ctl-no-fence-after-failover" in self.bugs else view.brokers
        lapsed = [b for b, reg in sorted(view.brokers.items()) if not reg.fenced and not self.live(b, now_ms)]
        return [b for b in lapsed if b in tracked]

    def next_deadline(self, view: MetadataImage) -> int | None:
        last = self._last
        deadlines = [last[b] + self.timeout_ms for b, reg in view.brokers.items() if not reg.fenced and b in last]
        return min(deadlines, default=None)

    def arm(self, deadline_ms: int) -> bool:
        """Remember the timer; True when the port must be asked for it (earlier than the armed one)."""
        if self._armed is not None and self._armed <= deadline_ms:
            return False
        self._armed = deadline_ms
        return True

    def timer_fired(self) -> None:
        self._armed = None
