"""Small builders for hand-written histories in the linearizability tests."""

from __future__ import annotations

from typing import Any

from checkers.history import History, pair, read_events


def history(*rows: tuple, nemesis: list[dict[str, Any]] | None = None) -> History:
    """Rows are (time, process, type, f, value[, key]); `index` is the row number."""
    return pair(read_events(raw_events(*rows, nemesis=nemesis)))


def raw_events(*rows: tuple, nemesis: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The event dicts `history` reads (what tests.checkers.oracle takes), sorted by time."""
    events = []
    for t, process, type_, f, value, *key in rows:
        ev = {"time": t, "process": process, "type": type_, "f": f, "value": value}
        if key:
            ev["key"] = key[0]
        events.append(ev)
    for ev in nemesis or []:
        events.append(ev)
    events.sort(key=lambda e: e["time"])
    return events


def drawn_register_history(data: Any, max_ops: int = 6, **fixed: Any) -> Any:
    """A tiny generated register history with its shape drawn by hypothesis (`data`); `fixed`
    overrides any of the generator's arguments (value_range, mix, ...)."""
    from hypothesis import strategies as st

    from checkers.gen import register_history

    options = {
        "processes": data.draw(st.integers(1, 4)),
        "crash_rate": data.draw(st.sampled_from([0.0, 0.3])),
        "fail_rate": data.draw(st.sampled_from([0.0, 0.3])),
        "latency": data.draw(st.integers(1, 20)),
        "think": data.draw(st.integers(0, 20)),
        "seed": data.draw(st.integers(0, 2**32)),
    }
    return register_history(data.draw(st.integers(1, max_ops)), **{**options, **fixed})
