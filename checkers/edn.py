"""Read Jepsen's `history.edn` (and Knossos's / Elle's EDN fixtures) into our events (issue 29).

A Jepsen history is a sequence of op maps, one per line, either bare or inside one vector
(`[{...}\n {...}]`, as Knossos's data files are). Each map becomes an `Event` with the JSONL
meanings: `:type` :invoke/:ok/:fail/:info, `:f`, `:process` (an integer, or `:nemesis`), `:time`
(nanoseconds; the position when a file has none, as Knossos's don't), `:index`, `:value`.

Shapes are detected by content, once for the whole file:
- independent keys: every register op's value is a `[k v]` tuple (a cas's v itself `[old new]`),
  so the key goes to `key` and v to `value`, as our JSONL writes them;
- Elle transactions: a value that is a vector of micro-ops (`[:append k v]`, `[:r k ...]`,
  `[:w k v]`) is a transaction, f `txn` whatever the map says. In a list-append history (one with
  an :append), an ok read of nil read the empty list, as Elle reads it (our JSONL writes `[]`).
Parsing is `edn_format`'s (no hand-written parser); what does not fit is a one-line `HistoryError`
naming the line and the form.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence, Set
from pathlib import Path
from types import ModuleType
from typing import Any

from checkers.history import EVENT_TYPES, Event, History, HistoryError, pair


@functools.cache
def _edn() -> ModuleType:
    """edn_format, imported on the first EDN file: it costs a fifth of a second (its parser tables and
    their dependencies) that `kchaos check --help` and JSONL histories need not pay."""
    import edn_format

    edn_format.add_tag("jepsen.history.Op", lambda m: m)  # newer Jepsen writes ops as this record
    return edn_format


REGISTER_FS = frozenset({"read", "write", "cas"})
MICRO_FS = frozenset({"append", "r", "w"})
JEPSEN_FAIL = "did not happen (Jepsen :fail)"


def is_edn(path: str | Path) -> bool:
    """Whether a history file is EDN: by its name, or by how it starts (`{` of a map would be JSON
    too, so a map whose first key is a keyword, a vector, a tagged record or a comment)."""
    if str(path).endswith(".edn"):
        return True
    if str(path).endswith(".jsonl"):
        return False
    try:
        with Path(path).open("rb") as handle:
            head = handle.read(64).lstrip()
    except OSError:
        return False
    return head.startswith((b"[", b"{:", b"#", b";"))


def _plain(value: Any) -> Any:
    """EDN values as our JSONL loader gives them: keywords and symbols as their names, vectors and
    lists as lists, maps as dicts, sets as sorted lists where they sort."""
    edn = _edn()
    if isinstance(value, edn.Keyword | edn.Symbol):
        return value.name
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return {_plain(k): _plain(v) for k, v in value.items()}
    if isinstance(value, Set):
        items = [_plain(v) for v in value]
        try:
            return sorted(items)
        except TypeError:
            return items
    if isinstance(value, Sequence):
        return [_plain(v) for v in value]
    return value


MAX_FORM_LINES = 200  # a form spread over more lines than this is a broken one


def _forms(text: str, source: str) -> list[tuple[int, str, Any]]:
    """(first line, text, parsed map) of each op form: maps one after another (a map may span
    lines), optionally all inside one vector."""
    out = []
    lines = text.splitlines()
    first, last = _first(lines), _last(lines)
    pending: list[str] = []
    start = 0
    for line_no, raw in enumerate(lines, start=1):
        form = raw.strip()
        if line_no == first and form.startswith(("[", "(")):
            form = form[1:].strip()
        if line_no == last and form.endswith(("]", ")")):
            form = form[:-1].strip()
        if not pending:
            form = form.lstrip(",").strip()
            if not form or form.startswith(";"):
                continue
            start = line_no
        pending.append(form)
        whole = " ".join(pending)
        try:
            parsed = _edn().loads(whole)
        except Exception as exc:  # edn_format raises its own and lexer / parser errors
            if "EOF" in str(exc) and len(pending) < MAX_FORM_LINES and line_no < last:
                continue  # a map spread over lines: read on
            raise HistoryError(f"{source}:{start}: not an EDN op map: {_cut(whole)} ({_first_line(exc)})") from None
        pending = []
        if not isinstance(parsed, Mapping):
            raise HistoryError(f"{source}:{start}: expected an op map {{:type ... :f ...}}, got {_cut(whole)}")
        out.append((start, whole, parsed))
    return out


def _first(lines: list[str]) -> int:
    return next((k for k, raw in enumerate(lines, start=1) if raw.strip() and not raw.strip().startswith(";")), 0)


def _last(lines: list[str]) -> int:
    for k in range(len(lines), 0, -1):
        if lines[k - 1].strip():
            return k
    return 0


def _cut(form: str, limit: int = 80) -> str:
    return form if len(form) <= limit else form[: limit - 1] + "…"


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _is_txn(value: Any) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(m, list) and len(m) == 3 and m[0] in MICRO_FS for m in value)
    )


def _independent(ops: list[tuple[int, str, dict[str, Any]]]) -> bool:
    """Whether register values are `[k v]` tuples: every read/write/cas value is a pair, and every
    cas's second element is itself a pair (a plain cas is `[old new]` of scalars)."""
    seen = False
    for _, _, m in ops:
        f, value = m.get("f"), m.get("value")
        if f not in REGISTER_FS or (value is None and f == "read"):
            continue
        if not isinstance(value, list) or len(value) != 2:
            return False
        if f == "cas" and not (isinstance(value[1], list) and len(value[1]) == 2):
            return False
        seen = True
    return seen


def read_edn_events(path: str | Path) -> list[Event]:
    """The events of an EDN history file (see the module docstring)."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise HistoryError(f"{source}: cannot read history: {getattr(exc, 'strerror', None) or exc}") from None
    maps = [(line, form, _plain(m)) for line, form, m in _forms(text, source)]
    independent = _independent(maps)
    appends = any(_is_txn(m.get("value")) and any(mop[0] == "append" for mop in m["value"]) for _, _, m in maps)
    timed = all(isinstance(m.get("time"), int) for _, _, m in maps)
    events = []
    for ordinal, (line, form, m) in enumerate(maps):
        where = f"{source}:{line}"
        if appends and m.get("type") == "ok" and _is_txn(m.get("value")):
            m["value"] = [[f, k, [] if f == "r" and v is None else v] for f, k, v in m["value"]]  # Elle: nil is ()
        events.append(_event(m, where, form, ordinal, line, independent, timed))
    return events


def _event(m: dict[str, Any], where: str, form: str, ordinal: int, line: int, independent: bool, timed: bool) -> Event:
    kind, f, value, process = m.get("type"), m.get("f"), m.get("value"), m.get("process")
    if kind not in EVENT_TYPES:
        raise HistoryError(f"{where}: :type must be :invoke, :ok, :fail or :info in {_cut(form)}")
    if _is_txn(value):
        f = "txn"
    if not isinstance(f, str):
        raise HistoryError(f"{where}: :f must be a keyword in {_cut(form)}")
    if type(process) is not int and not isinstance(process, str):
        raise HistoryError(f"{where}: :process must be an integer or :nemesis in {_cut(form)}")
    index = m.get("index", ordinal)
    if type(index) is not int:
        raise HistoryError(f"{where}: :index must be an integer in {_cut(form)}")
    key = None
    if independent and f in REGISTER_FS and process != "nemesis" and value is not None:
        key, value = value
        key = tuple(key) if isinstance(key, list) else key
    if f == "cas" and process != "nemesis" and not (isinstance(value, list) and len(value) == 2):
        raise HistoryError(f"{where}: a cas :value must be [old new] in {_cut(form)}")
    error = m.get("error")
    if f == "cas" and kind == "fail" and error is None:
        error = JEPSEN_FAIL  # Jepsen's :fail: it did not happen (Knossos reads no compare from it)
    time = m["time"] if timed else ordinal
    return Event(index, time, process, kind, f, value, key, None, error, line)  # node: EDN names none


def load_edn(path: str | Path) -> History:
    """Read and pair an EDN history, as `load_history` does a JSONL one."""
    return pair(read_edn_events(path), str(path))
