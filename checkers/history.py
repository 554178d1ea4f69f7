"""Load Jepsen-style JSONL histories and pair invocations with their completions.

Semantics (BRIEF §3): a process has at most one outstanding operation, completed by that process's
next event; `fail` means it certainly did not happen; `info` means it may take effect at any later
time (its interval stays open to the end of the history) and the process never issues again. An
invoke with no completion by the end counts as `info`. The nemesis (process "nemesis") is kept apart,
and so are side processes (a string process starting with one of SIDE_PROCESSES, e.g. the forger's
"forger", "forger-2", ...): their ops are paired the same way but go to `History.side`, so a
workload's checkers never see them.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, BinaryIO

try:  # a faster parser when present; the standard one otherwise
    import orjson

    _loads = orjson.loads
    _JSONError: tuple[type[Exception], ...] = (orjson.JSONDecodeError, ValueError)
except ImportError:  # pragma: no cover - depends on the environment
    _loads = json.loads
    _JSONError = (ValueError,)

try:  # the compiled loader for the common shape (setup.py builds it with the search)
    from checkers import _lincore
except ImportError:  # pragma: no cover - depends on the build
    _lincore = None

NEMESIS = "nemesis"
SIDE_PROCESSES = ("forger",)  # prefixes of processes that are neither clients nor the nemesis
EVENT_TYPES = frozenset({"invoke", "ok", "fail", "info"})
COMPLETION_TYPES = frozenset({"ok", "fail", "info"})


class HistoryError(ValueError):
    """A history that cannot be read; the message names the file and line: "h.jsonl:17: ..."."""


@dataclass(frozen=True, slots=True)
class Event:
    """One line of a history."""

    index: int
    time: int
    process: int | str
    type: str
    f: str
    value: Any
    key: Any = None
    node: str | None = None
    error: Any = None
    line: int = 0


@dataclass(frozen=True, slots=True)
class Op:
    """An invocation paired with its completion."""

    id: int  # index of the invoke event
    process: int | str
    f: str
    key: Any
    invoke_value: Any
    value: Any  # the completion's value; for info / no completion, the invoke's value
    type: str  # "ok" | "fail" | "info"
    invoke_time: int
    complete_time: int | None  # None: open to the end of the history
    invoke_index: int
    complete_index: int | None
    node: str | None = None
    error: Any = None
    gave_up_time: int | None = None  # an info op's completion time: when the client stopped waiting


@dataclass
class History:
    ops: list[Op]  # client operations, in invoke order
    nemesis: list[Event]  # the nemesis's events, in history order
    source: str = "<memory>"
    side: list[Op] = field(default_factory=list)  # side processes' ops (SIDE_PROCESSES), in invoke order

    def keys(self) -> list[Any]:
        """The keys the ops touch, in order of first appearance."""
        return list(dict.fromkeys(op.key for op in self.ops))

    @property
    def end_time(self) -> int:
        """The latest time any event of the history carries (0 for an empty history)."""
        times = [op.complete_time or op.invoke_time for op in self.ops]
        times += [e.time for e in self.nemesis]
        return max(times, default=0)


@dataclass(frozen=True)
class FaultWindow:
    """A nemesis fault active from `start` to `end` (None: still active at the end of the history)."""

    kind: str  # partition, kill, pause, clock, ...
    start: int
    end: int | None
    value: Any = None  # the start event's value: grudge, nodes, offset...

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "start": self.start, "end": self.end, "value": self.value}

    @property
    def aftereffect_ns(self) -> int:
        """How long the fault still acts after its stop. A clock that was ahead when set back to the
        true time stands still until real time catches up (a node's clock never runs backwards), so its
        timers (sessions, fetch timeouts) lag by as much: a forward bump's delta, a strobe's delta (it
        ends on a step back), a fast rate's gain over the window. Other faults end at their stop."""
        if self.kind != "clock" or not isinstance(self.value, dict):
            return 0
        mode = self.value.get("mode")
        if mode in ("bump", "strobe"):
            delta = self.value.get("delta_ms")
            return max(0, int(delta)) * 1_000_000 if isinstance(delta, int | float) else 0
        rate = self.value.get("rate")
        if mode == "rate" and isinstance(rate, int | float) and rate > 1 and self.end is not None:
            return int((rate - 1) * (self.end - self.start))
        return 0


def _hashable(value: Any) -> Any:
    """Keys must be hashable: JSON arrays become tuples."""
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    return value


def _event_from(obj: Any, where: str, ordinal: int, line: int) -> Event:
    if not isinstance(obj, dict):
        raise HistoryError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    time = obj.get("time")
    if type(time) is not int:
        raise HistoryError(f"{where}: 'time' must be an integer, got {time!r}")
    index = obj.get("index", ordinal)
    if type(index) is not int:
        raise HistoryError(f"{where}: 'index' must be an integer, got {index!r}")
    process = obj.get("process")
    if type(process) is not int and not isinstance(process, str):
        raise HistoryError(f"{where}: 'process' must be an integer or a string, got {process!r}")
    kind = obj.get("type")
    if kind not in EVENT_TYPES:
        raise HistoryError(f"{where}: 'type' must be one of invoke, ok, fail, info, got {kind!r}")
    f = obj.get("f")
    if not isinstance(f, str):
        raise HistoryError(f"{where}: 'f' must be a string, got {f!r}")
    node = obj.get("node")
    if node is not None and not isinstance(node, str):
        raise HistoryError(f"{where}: 'node' must be a string, got {node!r}")
    return Event(
        index=index,
        time=time,
        process=process,
        type=kind,
        f=f,
        value=obj.get("value"),
        key=_hashable(obj.get("key")),
        node=node,
        error=obj.get("error"),
        line=line,
    )


def read_events(path_or_lines: str | Path | Iterable[str | bytes | dict], name: str | None = None) -> Iterator[Event]:
    """Stream the events of a JSONL file (a path) or of an iterable of lines / decoded objects.

    `index` defaults to the event's 0-based position; `time` is required. Blank lines are skipped.
    """
    if isinstance(path_or_lines, str | Path):
        path = Path(path_or_lines)
        source = name or str(path)
        try:
            handle = path.open("rb")
        except OSError as exc:
            raise HistoryError(f"{source}: cannot read history: {exc.strerror or exc}") from None
        with handle:
            yield from _parse(handle, source)
    else:
        yield from _parse(path_or_lines, name or "<memory>")


def _parse(lines: Iterable[str | bytes | dict], source: str) -> Iterator[Event]:
    ordinal = 0
    for line_no, raw in enumerate(lines, start=1):
        where = f"{source}:{line_no}"
        if isinstance(raw, dict):
            obj = raw
        else:
            if not raw.strip():
                continue
            try:
                obj = _loads(raw)
            except _JSONError as exc:
                raise HistoryError(f"{where}: not valid JSON ({exc})") from None
        yield _event_from(obj, where, ordinal, line_no)
        ordinal += 1


# A row is an event as a plain tuple, in Event's field order: the loader's hot path makes no objects.
Row = tuple[int, int, Any, str, str, Any, Any, Any, Any, int]


def _decoded(lines: Iterable[bytes], source: str, first: int = 1) -> Iterator[tuple[int, Any]]:
    """(line number, decoded object) of each non-blank line; `first` is the first line's number."""
    loads = _loads
    for line_no, raw in enumerate(lines, start=first):
        try:
            obj = loads(raw)
        except _JSONError as exc:
            if not raw.strip():
                continue
            raise HistoryError(f"{source}:{line_no}: not valid JSON ({exc})") from None
        yield line_no, obj


def _decoded_at_once(data: bytes) -> list[Any] | None:
    """Every line of a JSONL file decoded by one call, as the elements of one JSON array: one parser
    call instead of one per line (about twice as fast). None if that is not valid JSON (a bad or
    blank line): the caller then goes line by line, which names the line."""
    body = data.rstrip(b"\n")
    breaks = body.count(b"\n")
    # Every line one object: each line break sits between a "}" and a "{" (no blank or CRLF line, no
    # object spread over lines), and there are as many elements as lines.
    if not body or body.count(b"}\n{") != breaks or body[:1] != b"{" or body[-1:] != b"}":
        return None
    try:
        objs = _loads(b"[" + body.replace(b"\n", b",") + b"]")
    except _JSONError:
        return None
    return objs if len(objs) == breaks + 1 else None


CHUNK_BYTES = 1 << 22  # decoded per parser call: few calls, and only one chunk's objects alive at once


def _decoded_chunks(handle: BinaryIO, source: str) -> Iterator[tuple[int, Any]]:
    """(line number, decoded object) of each non-blank line of a JSONL file, a chunk of whole lines
    at a time: one parser call per regular chunk, line by line (naming a bad line) otherwise."""
    done = 0  # lines before the current chunk
    rest = b""
    while True:
        block = handle.read(CHUNK_BYTES)
        if not block:
            if rest.strip():
                yield from _decoded([rest], source, done + 1)
            return
        block = rest + block
        cut = block.rfind(b"\n") + 1
        chunk, rest = block[:cut], block[cut:]
        if not chunk:
            continue
        objs = _decoded_at_once(chunk)
        if objs is None:
            yield from _decoded(chunk.splitlines(), source, done + 1)
        else:
            yield from zip(range(done + 1, done + 1 + len(objs)), objs)
        done += chunk.count(b"\n")


def _fast_rows(decoded: Iterable[tuple[int, Any]], source: str) -> Iterator[Row]:
    """Rows of decoded JSONL lines; any irregular line is re-read by `_event_from` for a precise error."""
    for ordinal, (line_no, obj) in enumerate(decoded):
        try:
            t = obj["time"]
            process = obj["process"]
            kind = obj["type"]
            f = obj["f"]
            index = obj.get("index", ordinal)
            key = obj.get("key")
            node = obj.get("node")
            regular = (
                t.__class__ is int
                and index.__class__ is int
                and (process.__class__ is int or process.__class__ is str)
                and kind in EVENT_TYPES
                and f.__class__ is str
                and (node is None or node.__class__ is str)
            )
        except (KeyError, TypeError, AttributeError):
            regular = False
        if not regular:
            ev = _event_from(obj, f"{source}:{line_no}", ordinal, line_no)  # raises, or is just unusual
            yield (ev.index, ev.time, ev.process, ev.type, ev.f, ev.value, ev.key, ev.node, ev.error, line_no)
        else:
            if key.__class__ is list or key.__class__ is dict:
                key = _hashable(key)
            yield (index, t, process, kind, f, obj.get("value"), key, node, obj.get("error"), line_no)


def pair(events: Iterable[Event], source: str = "<memory>") -> History:
    """Pair each invoke with its process's next event; unfinished invokes become `info` ops."""
    rows = ((e.index, e.time, e.process, e.type, e.f, e.value, e.key, e.node, e.error, e.line) for e in events)
    return _pair_rows(rows, source)


def _pair_rows(rows: Iterable[Row], source: str) -> History:
    slots: list[Any] = []  # in invoke order: an Op once complete, else the pending invoke's row
    outstanding: dict[Any, int] = {}  # process -> slot of its pending invoke
    crashed: dict[Any, int] = {}  # process -> line of its info completion
    nemesis: list[Event] = []
    for row in rows:
        index, t, process, kind, f, value, key, node, error, line = row
        if process == NEMESIS:
            nemesis.append(Event(*row))
            continue
        if process in crashed:
            raise HistoryError(
                f"{source}:{line}: process {process!r} issues again after its 'info' at line {crashed[process]}"
            )
        if kind == "invoke":
            if process in outstanding:
                pending = slots[outstanding[process]]
                raise HistoryError(
                    f"{source}:{line}: process {process!r} invokes while its invoke at line {pending[9]} "
                    "is still outstanding"
                )
            outstanding[process] = len(slots)
            slots.append(row)
            continue
        slot = outstanding.pop(process, None)
        if slot is None:
            raise HistoryError(f"{source}:{line}: {kind} {f!r} by process {process!r} without an invoke")
        i_index, i_time, _, _, i_f, i_value, i_key, i_node, _, i_line = slots[slot]
        if f != i_f:
            raise HistoryError(
                f"{source}:{line}: completion f {f!r} does not match the invoke's {i_f!r} at line {i_line}"
            )
        if kind == "info":
            crashed[process] = line
            slots[slot] = Op(
                i_index, process, f, i_key if i_key is not None else key, i_value, i_value, kind,
                i_time, None, i_index, index, node if node is not None else i_node, error, t,
            )  # fmt: skip
        else:
            slots[slot] = Op(
                i_index, process, f, i_key if i_key is not None else key, i_value, value, kind,
                i_time, t, i_index, index, node if node is not None else i_node, error,
            )  # fmt: skip
    ops: list[Op] = []
    side: list[Op] = []
    for slot in slots:
        if slot.__class__ is tuple:  # never completed: indeterminate
            index, t, process, _, f, value, key, node, error, _ = slot
            slot = Op(index, process, f, key, value, value, "info", t, None, index, None, node, error)
        (side if is_side_process(slot.process) else ops).append(slot)
    return History(ops=ops, nemesis=nemesis, source=source, side=side)


def is_side_process(process: int | str) -> bool:
    return process.__class__ is str and process.startswith(SIDE_PROCESSES)  # type: ignore[union-attr]


def _fast_loader() -> Any:
    """The compiled loader, if it was built for this `Op` (one built before a field was added would
    leave that field unset: then the Python loader reads every history until the extension is rebuilt)."""
    names = tuple(f.name for f in fields(Op))
    return _lincore if _lincore is not None and getattr(_lincore, "OP_FIELDS", None) == names else None


def load_history(path: str | Path) -> History:
    """Read and pair a history.jsonl file (a fast path equivalent to `pair(read_events(path))`).
    `checkers.history_files.load_any` also reads Jepsen's history.edn."""
    source = str(path)
    was_enabled = gc.isenabled()
    gc.disable()  # a million acyclic ops: full collections while loading would cost O(n²)
    try:
        with Path(path).open("rb") as handle:
            fast_loader = _fast_loader()
            if fast_loader is not None:  # the compiled fast path for the common shape (None: not that)
                try:
                    fast = fast_loader.load(handle.read(), Op, _loads)
                except ValueError:  # e.g. bytes that are not UTF-8: the path below names the line
                    fast = None
                if fast is not None:
                    ops, nemesis = fast
                    return History(ops=ops, nemesis=[Event(*row) for row in nemesis], source=source)
                handle.seek(0)
            return _pair_rows(_fast_rows(_decoded_chunks(handle, source), source), source)
    except OSError as exc:
        raise HistoryError(f"{source}: cannot read history: {exc.strerror or exc}") from None
    finally:
        if was_enabled:  # without scanning every op just made (see checkers.linearizable.enable_gc)
            gc.freeze()
            gc.enable()
            gc.unfreeze()


def fault_windows(history: History, *, failed_starts: bool = True, from_invoke: bool = False) -> list[FaultWindow]:
    """Nemesis fault windows: from the completion of `start-<kind>` to that of `stop-<kind>`.

    A start without a completion counts from its invoke; a window never stopped stays open (end None).
    A start that completed `fail` did nothing (results/SCHEMA.md) and no stop follows it; with
    `failed_starts=False` it opens no window (by default it opens one up to the kind's next stop).
    With `from_invoke`, a window starts at its start's invoke: the fault may act from then on.
    """
    open_: dict[str, tuple[int, Any]] = {}
    windows: list[FaultWindow] = []
    pending_start: dict[str, Event] = {}
    for ev in history.nemesis:
        action, _, kind = ev.f.partition("-")
        if not kind or action not in ("start", "stop"):
            continue
        if action == "start":
            if ev.type == "invoke":
                pending_start[kind] = ev
            elif ev.type == "fail" and not failed_starts:
                pending_start.pop(kind, None)
            elif kind not in open_:
                inv = pending_start.pop(kind, None)
                value = ev.value if ev.value is not None else (inv.value if inv else None)
                open_[kind] = (inv.time if from_invoke and inv is not None else ev.time, value)
        elif ev.type != "invoke":  # a stop's window ends at its completion
            if kind not in open_ and kind in pending_start:  # the start never completed
                inv = pending_start.pop(kind)
                open_[kind] = (inv.time, inv.value)
            if kind in open_:
                start, value = open_.pop(kind)
                windows.append(FaultWindow(kind, start, ev.time, value))
    for kind, inv in pending_start.items():
        if kind not in open_:
            open_[kind] = (inv.time, inv.value)
    for kind, (start, value) in open_.items():
        windows.append(FaultWindow(kind, start, None, value))
    windows.sort(key=lambda w: (w.start, w.kind))
    return windows
