"""Hand-made histories for the Kafka checkers' tests: events in time order, indexed, then paired."""

from __future__ import annotations

from typing import Any

from checkers.history import pair, read_events


def paired(events: list[dict[str, Any]]) -> Any:
    events.sort(key=lambda e: e["time"])
    for i, e in enumerate(events):
        e["index"] = i
    return pair(read_events(events))
