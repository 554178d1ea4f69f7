"""Elle's list-append analysis: transactions of `["append", k, v]` and `["r", k, [v ...]]` micro-ops.

Appended values must be unique per key. Every read of a key returns a prefix of that key's one version
order, so the longest read *is* the known order and each shorter read must be a prefix of it (else
`incompatible-order`). From the order:

- ww: the writers of consecutive elements, earlier -> later;
- wr: the writer of the last element a transaction read (ignoring its own appends) -> the reader;
- rw: a reader -> the writer of the first element its read did not include.

Appends that no read observed came, if they happened, after every element any read saw: when a read
(or the known order) is complete up to its end, they follow it (rw / ww edges to each, their mutual
order unknown). As in Elle this includes `info` transactions' appends: an edge into one matters only
in a cycle, which needs an edge out of it, which needs one of its writes observed, so it happened
(and, being atomic, made all its appends).

Anomalies found directly: G1a (a read includes a value appended by a failed transaction), G1b (a read
ends with a value its writer later followed with another append to the same key in the same
transaction), internal (a read disagrees with the transaction's own earlier reads and appends),
future-read (a read shows an append its own transaction makes later), future-read-realtime (one by a
transaction invoked after the reader completed), dirty-update (a committed append follows a failed
one in the order), lost-update, duplicate-elements (a read lists a value twice), garbage-read (a value
nobody appended).
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from checkers.elle.anomalies import DEFAULT_MODEL, check_model, uses_realtime_edges
from checkers.elle.core import SEARCH_BUDGET, AnomalyLog, Inference, analyse, lost_updates
from checkers.elle.explain import show
from checkers.elle.graph import RW, WR, WW, DepGraph
from checkers.elle.txn import TXN_F, Txn, extract_txns, hashable, where
from checkers.history import History, HistoryError
from checkers.verdict import Verdict

APPEND, READ = "append", "r"
CHECKER = "elle-list-append"


@dataclass(slots=True)
class _Read:
    txn: int
    key: Any
    values: tuple[Any, ...]
    ext: int  # length of the prefix written by other transactions (the rest are its own appends)


@dataclass
class ListAppendEvidence:
    """Indexes that justify each ww / wr / rw edge in a cycle's explanation."""

    writer: dict[tuple[Any, Any], int]
    orders: dict[Any, tuple[Any, ...]]
    positions: dict[Any, dict[Any, int]]
    reads_of: dict[int, list[_Read]]
    unread: dict[Any, dict[Any, int]]  # key -> ok / info appends no read observed -> writer

    def explain(self, a: Txn, b: Txn, kind: int, name_a: str, name_b: str) -> str | None:
        if kind == WW:
            for f, k, v in a.mops:
                p = self.positions.get(k, {}).get(hashable(v)) if f == APPEND else None
                order = self.orders.get(k, ())
                if p is not None and p + 1 < len(order) and self.writer.get((k, order[p + 1])) == b.id:
                    return (
                        f"{name_a} appended {show(v)} to {show(k)}, and {name_b} appended "
                        f"{show(order[p + 1])} right after it ({show(k)} = {show(order[: p + 2])})"
                    )
                if p is not None and p + 1 == len(order) and (late := self._unread_by(k, b)) is not None:
                    return (
                        f"{name_a} appended {show(v)}, the last element any read of {show(k)} saw, and "
                        f"{name_b} appended {show(late)} to {show(k)}{_committed(b)}, and no read saw it"
                    )
        elif kind == WR:
            for r in self.reads_of.get(b.id, ()):
                if r.ext and self.writer.get((r.key, r.values[r.ext - 1])) == a.id:
                    return (
                        f"{name_a} appended {show(r.values[r.ext - 1])} to {show(r.key)}, and {name_b} "
                        f"read {show(r.key)} = {show(r.values[: r.ext])}{_own(r)}, ending with it"
                    )
        elif kind == RW:
            for r in self.reads_of.get(a.id, ()):
                order = self.orders[r.key]
                if r.ext < len(order) and self.writer.get((r.key, order[r.ext])) == b.id:
                    return (
                        f"{name_a} read {show(r.key)} = {show(r.values[: r.ext])}{_own(r)} without "
                        f"{show(order[r.ext])}, which {name_b} appended"
                    )
                if r.ext == len(order) and (late := self._unread_by(r.key, b)) is not None:
                    return (
                        f"{name_a} read {show(r.key)} = {show(r.values[: r.ext])}{_own(r)} without "
                        f"{show(late)}, which {name_b} appended{_committed(b)}"
                    )
        return None

    def _unread_by(self, k: Any, b: Txn) -> Any:
        for element, w in self.unread.get(k, {}).items():
            if w == b.id:
                return element
        return None


def _committed(t: Txn) -> str:
    return " and committed" if t.op.type == "ok" else " (outcome unknown, but it happened: the cycle leaves it)"


def _own(r: _Read) -> str:
    return " (before its own appends)" if r.ext < len(r.values) else ""


def _index_appends(
    history: History, txns: list[Txn]
) -> tuple[dict[tuple[Any, Any], int], dict[tuple[Any, Any], int], set[tuple[Any, Any]]]:
    """(key, value) -> writer for ok/info and for failed transactions; non-final appends in a txn."""
    writer: dict[tuple[Any, Any], int] = {}
    failed: dict[tuple[Any, Any], int] = {}
    intermediate: set[tuple[Any, Any]] = set()
    for t in txns:
        target = failed if t.op.type == "fail" else writer
        last: dict[Any, tuple[Any, Any]] = {}
        for f, k, v in t.mops:
            if f != APPEND:
                continue
            kv = (k, hashable(v))
            if kv in writer or kv in failed:
                raise HistoryError(
                    f"{where(history, t.op)}: appends {show(v)} to {show(k)} again; list-append needs "
                    "unique appended values per key"
                )
            target[kv] = t.id
            if k in last:
                intermediate.add(last[k])
            last[k] = kv
    return writer, failed, intermediate


def _reads(history: History, txns: list[Txn], log: AnomalyLog) -> dict[Any, list[_Read]]:
    """Every ok transaction's reads, checked against its own earlier reads and appends (internal) and
    against its own later appends (future-read)."""
    by_key: dict[Any, list[_Read]] = defaultdict(list)
    for t in txns:
        if t.op.type != "ok":
            continue
        known: dict[Any, list[Any]] = {}  # the key as this txn must now see it, once it has read it
        own: dict[Any, list[Any]] = {}  # its own appends so far
        shown: dict[Any, list[tuple[Any, ...]]] = {}  # what its reads of each key showed so far
        for f, k, v in t.mops:
            if f == APPEND:
                hv = hashable(v)
                if k in shown and any(hv in values for values in shown[k]):
                    log.add(
                        "future-read",
                        {
                            "op": t.to_json(),
                            "key": k,
                            "element": hv,
                            "explanation": f"the txn at index {t.op.invoke_index} read {show(k)} containing "
                            f"{show(hv)} before it appended {show(hv)} itself",
                        },
                    )
                own.setdefault(k, []).append(hv)
                if k in known:
                    known[k].append(hv)
                continue
            if v is None:
                continue  # an ok txn that did not report this read
            if not isinstance(v, list | tuple):
                raise HistoryError(f"{where(history, t.op)}: read of {show(k)} returned {v!r}, not a list")
            values = tuple(hashable(x) for x in v)
            shown.setdefault(k, []).append(values)
            mine = own.get(k, [])
            if k in known:
                bad = list(values) != known[k]
            else:
                bad = len(values) < len(mine) or (bool(mine) and list(values[-len(mine) :]) != mine)
            if bad:
                expected = show(known[k]) if k in known else f"a list ending with {show(mine)}"
                log.add(
                    "internal",
                    {
                        "op": t.to_json(),
                        "mop": [f, k, list(values)],
                        "expected": expected,
                        "explanation": f"the txn at index {t.op.invoke_index} read {show(k)} = {show(values)}, "
                        f"but its own earlier reads and appends make it {expected}",
                    },
                )
            else:
                by_key[k].append(_Read(t.id, k, values, len(values) - len(mine)))
            known[k] = list(values)
    return by_key


def _dirty_updates(
    k: Any, order: tuple[Any, ...], writer: dict, failed: dict, txns: list[Txn], log: AnomalyLog
) -> None:
    """A failed append below a committed one in the key's order: the committed transaction built on
    state that never existed (Elle's dirty update; an `info` writer in between decides nothing)."""
    aborted: Any = None
    for v in order:
        if (k, v) in failed:
            aborted = v
        elif (k, v) in writer:
            w = txns[writer[(k, v)]]
            if w.op.type == "ok":
                if aborted is not None:
                    log.add(
                        "dirty-update",
                        {
                            "key": k,
                            "failed_element": aborted,
                            "element": v,
                            "failed_writer": txns[failed[(k, aborted)]].to_json(),
                            "writer": w.to_json(),
                            "explanation": f"{show(k)} = {show(order[: order.index(v) + 1])}: the failed txn at "
                            f"index {txns[failed[(k, aborted)]].op.invoke_index} appended {show(aborted)}, and "
                            f"the committed txn at index {w.op.invoke_index} appended {show(v)} after it",
                        },
                    )
                aborted = None


def _future_reads(
    k: Any, order: tuple[Any, ...], writers: list[int | None], reads: list[_Read], txns: list[Txn], log: AnomalyLog
) -> None:
    """A read showing an append by a transaction invoked only after the reader completed: a G1c cycle
    through real time (reader -realtime-> writer -wr-> reader), found without building the real-time
    graph, so models that do not care about real time still see it reported."""
    latest: list[tuple[int, int]] = []  # per position: (latest writer invoke time so far, its position)
    best = (-1, -1)
    for i, w in enumerate(writers):
        if w is not None and txns[w].op.invoke_time > best[0]:
            best = (txns[w].op.invoke_time, i)
        latest.append(best)
    for r in reads:
        if not r.values:
            continue
        done = txns[r.txn].op.complete_time
        invoked, i = latest[len(r.values) - 1]
        if done is not None and invoked > done:
            w = txns[writers[i]]  # type: ignore[index]
            log.add(
                "future-read-realtime",
                {
                    "op": txns[r.txn].to_json(),
                    "key": k,
                    "element": order[i],
                    "writer": w.to_json(),
                    "explanation": f"the txn at index {txns[r.txn].op.invoke_index} read {show(k)} = "
                    f"{show(r.values)} and completed (index {txns[r.txn].op.complete_index}) before the txn "
                    f"appending {show(order[i])} was invoked (index {w.op.invoke_index})",
                },
            )


def infer(history: History, txns: list[Txn], log: AnomalyLog | None = None, realtime: bool = True) -> Inference:
    """Version orders, non-cycle anomalies and the ww / wr / rw graph of a list-append history.
    `realtime`: whether to look for future-read-realtime (as Elle, only where real time matters)."""
    log = log or AnomalyLog()
    writer, failed, intermediate = _index_appends(history, txns)
    appended: dict[Any, list[Any]] = defaultdict(list)
    for k, v in writer:
        appended[k].append(v)
    graph = DepGraph(len(txns))
    evidence = ListAppendEvidence(writer, {}, {}, defaultdict(list), {})

    def bad_element(k: Any, v: Any, r: _Read) -> None:
        if (k, v) in writer:
            return
        example = {"key": k, "element": v, "reader": txns[r.txn].to_json(), "read": list(r.values)}
        if (k, v) in failed:
            w = txns[failed[(k, v)]]
            why = f"{show(v)} was appended only by the failed txn at index {w.op.invoke_index}"
            log.add("G1a", {**example, "writer": w.to_json(), "explanation": why})
        else:
            log.add("garbage-read", {**example, "explanation": f"no transaction appended {show(v)} to {show(k)}"})

    for k, reads in _reads(history, txns, log).items():
        clean = []
        for r in reads:
            if len(set(r.values)) != len(r.values):
                twice = sorted({v for v in r.values if r.values.count(v) > 1}, key=str)
                at = txns[r.txn].op.invoke_index
                why = f"the txn at index {at} read {show(k)} = {show(r.values)}, listing {show(twice)} twice"
                log.add(
                    "duplicate-elements",
                    {"key": k, "op": txns[r.txn].to_json(), "read": list(r.values), "explanation": why},
                )
            else:
                clean.append(r)
        if not clean:
            continue
        order = max(clean, key=lambda r: len(r.values)).values
        _dirty_updates(k, order, writer, failed, txns, log)
        evidence.orders[k] = order
        evidence.positions[k] = {v: i for i, v in enumerate(order)}
        writers = [writer.get((k, v)) for v in order]
        unwritten = [i for i, w in enumerate(writers) if w is None]
        for a, b in itertools.pairwise(writers):
            if a is not None and b is not None:
                graph.add(a, b, WW)
        unread = evidence.unread[k] = {v: writer[(k, v)] for v in appended.get(k, ()) if v not in evidence.positions[k]}
        if unread and writers and writers[-1] is not None:
            for late in unread.values():
                graph.add(writers[-1], late, WW)
        compatible: list[_Read] = []
        for r in clean:
            n = len(r.values)
            if r.values != order[:n]:
                log.add(
                    "incompatible-order",
                    {
                        "key": k,
                        "op": txns[r.txn].to_json(),
                        "read": list(r.values),
                        "longest": list(order),
                        "explanation": f"the txn at index {txns[r.txn].op.invoke_index} read {show(k)} = "
                        f"{show(r.values)}, which is not a prefix of the longest read {show(order)}",
                    },
                )
                for v in r.values:
                    bad_element(k, v, r)
                continue
            for i in unwritten:
                if i >= n:
                    break
                bad_element(k, order[i], r)
            evidence.reads_of[r.txn].append(r)
            compatible.append(r)
            if r.ext:
                w = writers[r.ext - 1]
                if w is not None and w != r.txn:
                    graph.add(w, r.txn, WR)
                    if (k, order[r.ext - 1]) in intermediate:
                        log.add(
                            "G1b",
                            {
                                "key": k,
                                "element": order[r.ext - 1],
                                "writer": txns[w].to_json(),
                                "reader": txns[r.txn].to_json(),
                                "explanation": f"{show(k)} = {show(r.values[: r.ext])} ends with "
                                f"{show(order[r.ext - 1])}, which the txn at index {txns[w].op.invoke_index} "
                                "overwrote with a later append of its own",
                            },
                        )
            if r.ext < len(order):
                w = writers[r.ext]
                if w is not None and w != r.txn:
                    graph.add(r.txn, w, RW)
            else:
                for late in unread.values():
                    graph.add(r.txn, late, RW)
        if realtime:
            _future_reads(k, order, writers, compatible, txns, log)
    lost_updates(txns, APPEND, log)
    return Inference(graph=graph, anomalies=log, evidence=evidence)


def check_list_append(
    history: History,
    consistency_model: str = DEFAULT_MODEL,
    txn_f: str = TXN_F,
    cycle_search_budget: int = SEARCH_BUDGET,
) -> Verdict:
    """Check a list-append history against `consistency_model` (see checkers.elle.anomalies)."""
    check_model(consistency_model)
    txns = extract_txns(history, (APPEND, READ), txn_f)
    inference = infer(history, txns, realtime=uses_realtime_edges(consistency_model))
    return analyse(CHECKER, txns, inference, consistency_model, cycle_search_budget)
