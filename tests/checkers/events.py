"""Hand-built histories with explicit times, for checkers that care about real time and fault windows."""

from __future__ import annotations

from typing import Any

from checkers.history import History, pair, read_events

MS = 1_000_000


class Events:
    """Ops placed at given times (ms); `history()` orders every event by time."""

    def __init__(self) -> None:
        self._events: list[tuple[int, int, dict[str, Any]]] = []

    def _add(self, time_ms: float, event: dict[str, Any]) -> None:
        self._events.append((int(time_ms * MS), len(self._events), event))

    def op(
        self,
        process: Any,
        f: str,
        start_ms: float,
        end_ms: float | None,
        *,
        invoke: Any = None,
        value: Any = None,
        kind: str = "ok",
        node: str | None = None,
        key: Any = None,
    ) -> Events:
        """An op invoked at `start_ms` and completed `kind` at `end_ms` (None: never completed)."""
        head: dict[str, Any] = {"process": process, "f": f}
        if key is not None:
            head["key"] = key
        self._add(start_ms, {**head, "type": "invoke", "value": invoke})
        if end_ms is not None:
            done = {**head, "type": kind, "value": value if kind == "ok" else invoke}
            if node is not None:
                done["node"] = node
            self._add(end_ms, done)
        return self

    def nemesis(self, f: str, time_ms: float, value: Any = None) -> Events:
        self._add(time_ms, {"process": "nemesis", "f": f, "type": "info", "value": value})
        return self

    def raw(self) -> list[dict[str, Any]]:
        out = []
        for index, (t, _, event) in enumerate(sorted(self._events, key=lambda e: (e[0], e[1]))):
            out.append({"index": index, "time": t, **event})
        return out

    def history(self) -> History:
        return pair(read_events(self.raw()))
