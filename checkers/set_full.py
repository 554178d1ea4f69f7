"""Committed-data loss, after Jepsen's set-full checker.

Input: add ops (`f` in `add_fs`, default "add" / "write"; the invoke value is one unique element) and
read ops (`f` in `read_fs`, default "read"; an `ok` read's value is the list of elements present, and
its `node` says which node answered; reads without a node count as one anonymous view, "*").

Definitions, per element e (times are the history's; a read "follows" a time when it was invoked
strictly after it):

- attempted: some add of e exists (ok, info or fail). acknowledged: some add of e is `ok`; its ack
  time is the earliest such completion.
- known time: the earlier of the ack time and the completion of the first read that contained e.
- final read of a node: its `ok` read that completed last.
- lost on node n: e is known, n's final read follows e's known time and does not contain e. e is
  *lost* if it is lost on any node (`lost_on_all`: on every node whose final read follows it).
- never-read: e is acknowledged and no `ok` read follows its ack time.
- stale: e is known and not lost, some read following its known time lacked e, and a read invoked
  later than that one contained it again.
- unexpected: e was read but never attempted. failed-present: every add of e failed, yet e was read
  (a `fail` certainly did not happen). recovered: no add of e was acknowledged, one was `info`, and e
  was read.
- visibility latency (acknowledged, read elements): from the ack time to the invocation of the first
  read containing e (0 when that read began before the ack). Stable latency: to the invocation of the
  first read containing e after the last read (following the known time) that lacked it.

Valid: no lost, no unexpected, no failed-present elements; "unknown" without any `ok` read, or when
every acknowledged element is never-read.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from checkers.history import History, HistoryError, Op
from checkers.verdict import UNKNOWN, Verdict

CHECKER = "set-full"
ANONYMOUS_NODE = "*"
MAX_LISTED = 32
QUANTILES = (0.0, 0.5, 0.95, 0.99, 1.0)


def _hashable(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return tuple(_hashable(v) for v in value)
    return value


def _sort_key(value: Any) -> tuple[str, Any]:
    return (type(value).__name__, value if isinstance(value, int | float | str) else repr(value))


@dataclass
class _Element:
    attempts: set[str] = field(default_factory=set)  # add outcomes seen: ok / info / fail
    ack_time: int | None = None
    known_time: int | None = None
    first_present: int | None = None  # invoke time of the first read containing it
    last_present: int | None = None
    first_absent: int | None = None  # invoke time of the first read (after known) lacking it
    last_absent: int | None = None
    stable_from: int | None = None


@dataclass(frozen=True)
class _Read:
    invoke: int
    complete: int
    index: int
    node: str
    present: frozenset[Any]


def _reads(history: History, read_fs: frozenset[str]) -> list[_Read]:
    reads = []
    for op in history.ops:
        if op.f not in read_fs or op.type != "ok":
            continue
        if not isinstance(op.value, list | tuple):
            raise HistoryError(f"{history.source}: read at index {op.invoke_index} returned {op.value!r}, not a list")
        assert op.complete_time is not None and op.complete_index is not None
        reads.append(
            _Read(
                invoke=op.invoke_time,
                complete=op.complete_time,
                index=op.complete_index,
                node=op.node or ANONYMOUS_NODE,
                present=frozenset(_hashable(v) for v in op.value),
            )
        )
    reads.sort(key=lambda r: (r.invoke, r.index))
    return reads


def _element_of(op: Op) -> Any:
    return _hashable(op.invoke_value if op.invoke_value is not None else op.value)


def quantiles(values: Iterable[float]) -> dict[str, float] | None:
    """Nearest-rank quantiles, or None for no values."""
    ordered = sorted(values)
    if not ordered:
        return None
    out = {}
    for q in QUANTILES:
        rank = max(0, math.ceil(q * len(ordered)) - 1)
        out[str(q)] = ordered[rank]
    return out


def _listing(elements: Iterable[Any]) -> dict[str, Any]:
    ordered = sorted(elements, key=_sort_key)
    return {"count": len(ordered), "elements": ordered[:MAX_LISTED]}


def check_set_full(
    history: History, add_fs: Iterable[str] = ("add", "write"), read_fs: Iterable[str] = ("read",)
) -> Verdict:
    """Committed loss (see the module docstring for the definitions)."""
    adds, read_set = frozenset(add_fs), frozenset(read_fs)
    elements: dict[Any, _Element] = {}
    for op in history.ops:
        if op.f not in adds:
            continue
        el = elements.setdefault(_element_of(op), _Element())
        el.attempts.add(op.type)
        if op.type == "ok" and op.complete_time is not None:
            el.ack_time = op.complete_time if el.ack_time is None else min(el.ack_time, op.complete_time)
    reads = _reads(history, read_set)

    unexpected: set[Any] = set()
    for r in reads:
        for e in r.present:
            el = elements.get(e)
            if el is None:
                unexpected.add(e)
                el = elements[e] = _Element()
            if el.first_present is None:
                el.first_present = r.invoke
            el.last_present = r.invoke
            if el.known_time is None or r.complete < el.known_time:
                el.known_time = r.complete
    for el in elements.values():
        if el.ack_time is not None and (el.known_time is None or el.ack_time < el.known_time):
            el.known_time = el.ack_time

    # absences: walk reads in invoke order, with the elements known strictly before each one
    by_known = sorted(
        ((el.known_time, e) for e, el in elements.items() if el.known_time is not None),
        key=lambda pair: pair[0],
    )
    known: set[Any] = set()
    cursor = 0
    for r in reads:
        while cursor < len(by_known) and by_known[cursor][0] < r.invoke:
            known.add(by_known[cursor][1])
            cursor += 1
        for e in known - r.present:
            el = elements[e]
            if el.first_absent is None:
                el.first_absent = r.invoke
            el.last_absent = r.invoke
    for r in reads:  # the first present read after the last absence starts the stable window
        for e in r.present:
            el = elements[e]
            if el.stable_from is None and (el.last_absent is None or r.invoke > el.last_absent):
                el.stable_from = r.invoke

    finals: dict[str, _Read] = {}
    for r in reads:
        best = finals.get(r.node)
        if best is None or (r.complete, r.index) > (best.complete, best.index):
            finals[r.node] = r

    lost: set[Any] = set()
    lost_on_all: set[Any] = set()
    lost_by_node: dict[str, set[Any]] = {n: set() for n in sorted(finals)}
    stale, never_read, failed_present, recovered = set(), set(), set(), set()
    visible_ms, stable_ms = [], []
    last_invoke = max((r.invoke for r in reads), default=None)
    for e, el in elements.items():
        if e in unexpected:
            continue
        read_ever = el.first_present is not None
        if read_ever and el.attempts == {"fail"}:
            failed_present.add(e)
        if read_ever and "ok" not in el.attempts and "info" in el.attempts:
            recovered.add(e)
        if el.known_time is None:
            continue
        following = [n for n, r in finals.items() if r.invoke > el.known_time]
        missing = [n for n in following if e not in finals[n].present]
        for n in missing:
            lost_by_node[n].add(e)
        if missing:
            lost.add(e)
            if len(missing) == len(following):
                lost_on_all.add(e)
        elif el.first_absent is not None and el.last_present is not None and el.first_absent < el.last_present:
            stale.add(e)
        if el.ack_time is not None:
            if last_invoke is None or last_invoke <= el.ack_time:
                never_read.add(e)
            if read_ever and not missing:
                assert el.first_present is not None
                visible_ms.append(max(0, el.first_present - el.ack_time) / 1e6)
                if el.stable_from is not None:
                    stable_ms.append(max(0, el.stable_from - el.ack_time) / 1e6)

    acknowledged = [e for e, el in elements.items() if el.ack_time is not None]
    if lost or unexpected or failed_present:
        valid: bool | str = False
    elif not reads or (acknowledged and len(never_read) == len(acknowledged)):
        valid = UNKNOWN
    else:
        valid = True
    details: dict[str, Any] = {
        "attempt_count": sum(1 for el in elements.values() if el.attempts),
        "acknowledged_count": len(acknowledged),
        "read_count": len(reads),
        "final_reads": {n: {"index": r.index, "size": len(r.present)} for n, r in sorted(finals.items())},
        "lost": {**_listing(lost), "on_all_nodes": _listing(lost_on_all)},
        "lost_by_node": {n: _listing(s) for n, s in lost_by_node.items()},
        "stale": _listing(stale),
        "never_read": _listing(never_read),
        "unexpected": _listing(unexpected),
        "failed_present": _listing(failed_present),
        "recovered": _listing(recovered),
        "latency_ms": {"visible": quantiles(visible_ms), "stable": quantiles(stable_ms)},
    }
    return Verdict(checker=CHECKER, valid=valid, details=details)


def add_check_arguments(parser: Any) -> None:
    group = parser.add_argument_group("set-full")
    group.add_argument(
        "--add-f", action="append", help="f of the ops that add an element (repeatable; default add, write)"
    )
    group.add_argument("--read-f", action="append", help="f of the ops that read the set (repeatable; default read)")


def check_from_args(history: History, args: Any) -> Verdict:
    return check_set_full(
        history,
        add_fs=getattr(args, "add_f", None) or ("add", "write"),
        read_fs=getattr(args, "read_f", None) or ("read",),
    )


def summarize(verdict: Verdict) -> list[str]:
    d = verdict.details
    counts = ", ".join(
        f"{name.replace('_', '-')} {d[name]['count']}"
        for name in ("lost", "stale", "never_read", "unexpected", "failed_present", "recovered")
    )
    lines = [
        f"{verdict.checker}: {verdict.valid} ({d['acknowledged_count']} acknowledged of {d['attempt_count']} "
        f"attempted, {d['read_count']} reads)",
        f"  {counts}; lost on every node {d['lost']['on_all_nodes']['count']}",
    ]
    for node, lost in d["lost_by_node"].items():
        if lost["count"]:
            lines.append(f"  lost on {node}: {lost['count']} e.g. {lost['elements'][:8]}")
    for kind, q in d["latency_ms"].items():
        if q:
            lines.append(f"  {kind} latency ms: p50 {q['0.5']:.1f}  p95 {q['0.95']:.1f}  max {q['1.0']:.1f}")
    return lines
