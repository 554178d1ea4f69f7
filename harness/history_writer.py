"""Append-only history.jsonl writer, and its conversion to history.parquet (results/SCHEMA.md).

Each event is one line, written and flushed to the OS before `write` returns, so a harness killed
at any moment leaves every earlier event readable. A kill *during* a write can leave a partial last
line; `checkers.history` then reports that line as invalid JSON and the reports pipeline skips the
run as truncated. `repair_tail(path)` cuts such a line off (the run loses only the event being
written); `to_parquet` skips it by itself.
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

EVENT_TYPES = ("invoke", "ok", "fail", "info")
_OPTIONAL = ("key", "node", "error")


def _fallback(obj: Any) -> Any:
    """JSON for values json cannot encode: sets as sorted lists, dataclasses as objects, else str."""
    if isinstance(obj, set | frozenset):
        try:
            return sorted(obj)
        except TypeError:
            return sorted(obj, key=repr)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    if isinstance(obj, bytes):
        return obj.hex()
    return str(obj)


def encode_event(index: int, event: Mapping[str, Any]) -> str:
    """One history line (no newline): index, time, process, type, f, value, then key/node/error when set."""
    time, process, kind, f = event.get("time"), event.get("process"), event.get("type"), event.get("f")
    if type(time) is not int:
        raise ValueError(f"history event time must be an int (ns), got {time!r}")
    if isinstance(process, bool) or not isinstance(process, int | str):
        raise ValueError(f"history event process must be an int or a string, got {process!r}")
    if kind not in EVENT_TYPES:
        raise ValueError(f"history event type must be one of {', '.join(EVENT_TYPES)}, got {kind!r}")
    if not isinstance(f, str):
        raise ValueError(f"history event f must be a string, got {f!r}")
    line: dict[str, Any] = {"index": index, "time": time, "process": process, "type": kind, "f": f}
    line["value"] = event.get("value")
    for name in _OPTIONAL:
        if event.get(name) is not None:
            line[name] = event[name]
    return json.dumps(line, separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=_fallback)


class HistoryWriter:
    """Writes history events to a new JSONL file, numbering them 0, 1, 2... (thread-safe).

    `fsync=True` also forces each line to disk (survives power loss, costs a disk flush per event);
    the default only survives the harness dying, which is what the history needs.
    """

    def __init__(self, path: str | Path, *, fsync: bool = False) -> None:
        self.path = Path(path)
        self._fsync = fsync
        self._lock = threading.Lock()
        self._next = 0
        self._file: IO[str] | None = self.path.open("x", encoding="utf-8", newline="\n")

    @property
    def count(self) -> int:
        """Events written so far (= the index the next one gets)."""
        return self._next

    def write(self, event: Mapping[str, Any]) -> dict[str, Any]:
        """Append `event` (time, process, type, f, value[, key, node, error]); returns it with its index.
        An `index` in `event` is ignored: the writer numbers events in the order they are written."""
        with self._lock:
            if self._file is None:
                raise ValueError(f"{self.path}: history writer is closed")
            index = self._next
            text = encode_event(index, event)  # raises before anything is written
            self._file.write(text + "\n")
            self._file.flush()
            if self._fsync:
                os.fsync(self._file.fileno())
            self._next = index + 1
        return {**event, "index": index}

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def repair_tail(path: str | Path) -> bool:
    """Cut off a partial last line left by a kill mid-write; True when something was cut."""
    path = Path(path)
    with path.open("rb+") as fh:
        data = fh.read()
        if not data or data.endswith(b"\n"):
            return False
        cut = data.rfind(b"\n") + 1
        fh.truncate(cut)
        return True


def _json_text(value: Any, *, plain_strings: bool, sort_keys: bool = False) -> str | None:
    if value is None:
        return None
    if plain_strings and isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=sort_keys)


def to_parquet(jsonl_path: str | Path, parquet_path: str | Path) -> int:
    """Convert a history.jsonl to history.parquet (reports.schema.HISTORY_ARROW_SCHEMA); returns rows.

    Conversions follow results/SCHEMA.md: process as text, value as JSON text, key and error as plain
    text when strings (JSON text otherwise). A partial last line (no newline) is skipped; any other
    bad line raises ValueError naming `file:line`. The file appears atomically (written, then renamed).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    from reports.schema import HISTORY_ARROW_SCHEMA, HISTORY_COLUMNS

    source = Path(jsonl_path)
    cols: dict[str, list[Any]] = {c: [] for c in HISTORY_COLUMNS}
    raw = source.read_bytes()
    lines = raw.split(b"\n")
    complete = len(lines) - 1  # the piece after the last newline is partial (or empty)
    for number, line in enumerate(lines[:complete], start=1):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except ValueError as exc:
            raise ValueError(f"{source}:{number}: not a complete JSON event ({exc})") from None
        if not isinstance(event, dict) or type(event.get("index")) is not int or type(event.get("time")) is not int:
            raise ValueError(f"{source}:{number}: not a history event (needs integer index and time)")
        cols["index"].append(event["index"])
        cols["time"].append(event["time"])
        cols["process"].append(None if event.get("process") is None else str(event["process"]))
        cols["type"].append(event.get("type"))
        cols["f"].append(event.get("f"))
        cols["value"].append(_json_text(event.get("value"), plain_strings=False))
        cols["key"].append(_json_text(event.get("key"), plain_strings=True))
        cols["node"].append(event.get("node"))
        cols["error"].append(_json_text(event.get("error"), plain_strings=True, sort_keys=True))
    table = pa.table({c: pa.array(cols[c], type=HISTORY_ARROW_SCHEMA.field(c).type) for c in HISTORY_COLUMNS})
    target = Path(parquet_path)
    tmp = target.with_name(f".{target.name}.tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, target)
    return table.num_rows
