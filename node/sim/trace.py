"""The simulation trace: one JSON line per event processed, and a SHA-256 digest over all of them.

The digest is taken over exactly the bytes written to the trace file, so `sha256sum trace.jsonl`
reproduces it. Summaries are built only from the events' own fields (never `id()`, never the order
of an unordered collection), so the same seed gives the same bytes in any process.
"""

from __future__ import annotations

import hashlib
import json
from collections import deque
from collections.abc import Callable
from dataclasses import fields, is_dataclass
from typing import IO, Any

from node.raft.records import RecordBatch

_SKIP = frozenset({"cluster_id", "max_bytes", "log_start_offset"})  # the same in every message
_Formatter = Callable[[Any], str]
_FORMATTERS: dict[type, _Formatter] = {}
_PLAIN = (int, str, bool, float, type(None))


def _value(value: Any) -> str:
    kind = type(value)
    if kind in _PLAIN:
        return repr(value)
    if kind is tuple:
        if not value:
            return "()"
        first = value[0]
        if type(first) is RecordBatch:
            return f"[{first.base_offset}..{value[-1].next_offset})e{value[-1].epoch}x{len(value)}"
        if type(first) is bytes:
            return f"{len(value)}recs"
        return "(" + ",".join(_value(v) for v in value) + ")"
    if kind is bytes:
        return f"{len(value)}B"
    if kind is RecordBatch:
        return f"[{value.base_offset}..{value.next_offset})e{value.epoch}"
    if kind is frozenset or kind is set:
        return repr(sorted(value))
    if is_dataclass(value):
        return summarize(value)
    return repr(value)


def _formatter(cls: type) -> _Formatter:
    """Compile `Type(a=..,b=..)` for one dataclass: int fields inline, the rest through `_value`.

    (The trace summarises every event, so this is on the simulator's hottest path.)
    """
    parts = []
    for f in fields(cls):
        if f.name in _SKIP:
            continue
        inline = f.type in ("int", "bool", int, bool)
        parts.append(f"{f.name}={{o.{f.name}}}" if inline else f"{f.name}={{_value(o.{f.name})}}")
    source = f"def fmt(o):\n    return f'{cls.__name__}({','.join(parts)})'\n"
    namespace: dict[str, Any] = {"_value": _value}
    exec(source, namespace)  # field and class names are identifiers: nothing to escape
    fmt = namespace["fmt"]
    _FORMATTERS[cls] = fmt
    return fmt


def summarize(obj: Any) -> str:
    """`Type(field=value, ...)` with record payloads reduced to offsets and counts."""
    fmt = _FORMATTERS.get(type(obj))
    if fmt is None:
        if not (is_dataclass(obj) and not isinstance(obj, type)):
            return repr(obj)
        fmt = _formatter(type(obj))
    return fmt(obj)


def _json_string(text: str) -> str:
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        return f'"{text}"'
    return json.dumps(text)


class Trace:
    def __init__(self, path: str | None = None, keep_last: int = 200) -> None:
        self._hash = hashlib.sha256()
        self._file: IO[str] | None = open(path, "w", encoding="utf-8") if path else None  # noqa: SIM115
        self.last: deque[str] = deque(maxlen=keep_last)
        self.count = 0

    def record(self, time: int, node: int | str, kind: str, summary: str) -> str:
        who = node if type(node) is int else _json_string(str(node))
        line = f'{{"i":{self.count},"t":{time},"node":{who},"ev":"{kind}","s":{_json_string(summary)}}}\n'
        self.count += 1
        self._hash.update(line.encode())
        self.last.append(line)
        if self._file is not None:
            self._file.write(line)
        return line

    @property
    def digest(self) -> str:
        return self._hash.hexdigest()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
