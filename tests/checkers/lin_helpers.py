"""Small builders for hand-written histories in the linearizability tests."""

from __future__ import annotations

from typing import Any

from checkers.history import History, pair, read_events


def history(*rows: tuple, nemesis: list[dict[str, Any]] | None = None) -> History:
    """Rows are (time, process, type, f, value[, key]); `index` is the row number."""
    events = []
    for t, process, type_, f, value, *key in rows:
        ev = {"time": t, "process": process, "type": type_, "f": f, "value": value}
        if key:
            ev["key"] = key[0]
        events.append(ev)
    for ev in nemesis or []:
        events.append(ev)
    events.sort(key=lambda e: e["time"])
    return pair(read_events(events))
