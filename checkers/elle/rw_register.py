"""Elle's rw-register analysis: transactions of `["w", k, v]` and `["r", k, v]` micro-ops.

Written values must be unique per key (a repeated value makes the history an error), and nil is the
initial state, never written. A read names the version it saw, so wr edges are exact; the version
*order* of a register is not visible and is inferred, as Elle does, only from:

- the initial state: nil precedes every written version;
- with `wfr_keys` (an assumption, off by default): a transaction that read v1 and then wrote v2 puts
  v1 before v2;
- with `sequential_keys` / `linearizable_keys` (assumptions, off by default): the last version a
  transaction saw of a key precedes the first version the next transaction touching that key on the
  same process / after it in real time saw of it (read or wrote).
A source that would make some key's order cyclic is left out, and reported as `cyclic-versions`.

ww edges follow the inferred version order between writers; rw edges run from a reader of a version
to the writers of the versions known to come after it. Only a transaction's external reads (its
first access to a key, when that is a read) and final writes count; anomalies found directly: G1a,
G1b (a read of a version its writer overwrote within the transaction), internal, unwritten-read (a
value nobody in the history wrote: Elle takes it for an initial state the history does not show, so it
is reported but forbidden by no model, and ordered after nil like any version),
lost-update, cyclic-versions.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from checkers.elle.anomalies import DEFAULT_MODEL, check_model
from checkers.elle.core import SEARCH_BUDGET, AnomalyLog, Inference, analyse, completed_at, lost_updates, occurred
from checkers.elle.explain import show
from checkers.elle.graph import RW, WR, WW, DepGraph, realtime_edges, strongly_connected_components
from checkers.elle.txn import TXN_F, Txn, extract_txns, hashable, where
from checkers.history import History, HistoryError
from checkers.verdict import Verdict

WRITE, READ = "w", "r"
CHECKER = "elle-rw-register"

Reason = tuple[Any, ...]  # ("initial",) | ("wfr", txn) | ("process", a, b) | ("realtime", a, b)


@dataclass
class _Index:
    writer: dict[tuple[Any, Any], int] = field(default_factory=dict)  # ok / info writes
    failed: dict[tuple[Any, Any], int] = field(default_factory=dict)
    intermediate: set[tuple[Any, Any]] = field(default_factory=set)  # overwritten in the same txn
    final: dict[int, dict[Any, Any]] = field(default_factory=lambda: defaultdict(dict))
    ext_read: dict[int, dict[Any, Any]] = field(default_factory=lambda: defaultdict(dict))
    # key -> version -> next version -> why the one precedes the other
    versions: dict[Any, dict[Any, dict[Any, Reason]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(dict))
    )

    def order(self, k: Any, v1: Any, v2: Any, reason: Reason) -> None:
        if v1 != v2:
            self.versions[k][v1].setdefault(v2, reason)

    def last_seen(self, t: int, k: Any) -> tuple[bool, Any]:
        if k in self.final.get(t, {}):
            return True, self.final[t][k]
        if k in self.ext_read.get(t, {}):
            return True, self.ext_read[t][k]
        return False, None


def _index(history: History, txns: list[Txn], log: AnomalyLog) -> _Index:
    ix = _Index()
    for t in txns:
        target = ix.failed if t.op.type == "fail" else ix.writer
        seen: dict[Any, Any] = {}  # key -> the value this txn must now read
        for f, k, v in t.mops:
            hv = hashable(v)
            if f == WRITE:
                if hv is None:
                    raise HistoryError(f"{where(history, t.op)}: writes nil to {show(k)}; nil is the initial state")
                kv = (k, hv)
                if kv in ix.writer or kv in ix.failed:
                    raise HistoryError(
                        f"{where(history, t.op)}: writes {show(v)} to {show(k)} again; rw-register needs "
                        "unique written values per key"
                    )
                target[kv] = t.id
                if k in ix.final[t.id]:
                    ix.intermediate.add((k, ix.final[t.id][k]))
                ix.final[t.id][k] = hv
                seen[k] = hv
            elif t.op.type == "ok":
                if k in seen:
                    if seen[k] != hv:
                        log.add(
                            "internal",
                            {
                                "op": t.to_json(),
                                "mop": [f, k, v],
                                "expected": seen[k],
                                "explanation": f"the txn at index {t.op.invoke_index} read {show(k)} = {show(v)} "
                                f"after it had itself seen or written {show(seen[k])}",
                            },
                        )
                else:
                    ix.ext_read[t.id][k] = hv
                seen[k] = hv
        if t.op.type == "fail":
            ix.final.pop(t.id, None)
    return ix


def _first_seen(ix: _Index, t: int, k: Any) -> tuple[bool, Any]:
    """The version of `k` a transaction observed first: its external read, else its final write."""
    if k in ix.ext_read.get(t, {}):
        return True, ix.ext_read[t][k]
    if k in ix.final.get(t, {}):
        return True, ix.final[t][k]
    return False, None


Versions = dict[Any, dict[Any, dict[Any, Reason]]]  # key -> version -> later version -> why


def _link(stage: Versions, k: Any, v1: Any, v2: Any, reason: Reason) -> None:
    if v1 != v2:
        stage.setdefault(k, {}).setdefault(v1, {}).setdefault(v2, reason)


def _initial(ix: _Index, txns: list[Txn], stage: Versions) -> None:
    for k, v in ix.writer:
        if (k, v) not in ix.intermediate:
            _link(stage, k, None, v, ("initial",))
    for reads in ix.ext_read.values():
        for k, v in reads.items():
            if v is not None and (k, v) not in ix.writer:
                _link(stage, k, None, v, ("initial",))


def _wfr(ix: _Index, txns: list[Txn], stage: Versions) -> None:
    for t, reads in ix.ext_read.items():
        for k, v1 in reads.items():
            if k in ix.final.get(t, {}):
                _link(stage, k, v1, ix.final[t][k], ("wfr", t))


def _sequential(ix: _Index, txns: list[Txn], stage: Versions) -> None:
    last: dict[tuple[Any, Any], tuple[Any, int]] = {}  # (process, key) -> (version, txn)
    for t in txns:
        if not occurred(t):
            continue
        for k in dict.fromkeys(k for _, k, _ in t.mops):
            prior = last.get((t.process, k))
            here, first = _first_seen(ix, t.id, k)
            if prior is not None and here:
                _link(stage, k, prior[0], first, ("process", prior[1], t.id))
            here, seen = ix.last_seen(t.id, k)
            if here:
                last[(t.process, k)] = (seen, t.id)


def _linearizable(ix: _Index, txns: list[Txn], stage: Versions) -> None:
    touching: dict[Any, list[Txn]] = defaultdict(list)
    for t in txns:
        if occurred(t):
            for k in dict.fromkeys(k for _, k, _ in t.mops):
                if ix.last_seen(t.id, k)[0]:
                    touching[k].append(t)
    for k, group in touching.items():
        spans = ((t.id, t.op.invoke_time, completed_at(t)) for t in group)
        for a, b in realtime_edges(spans):
            _link(stage, k, ix.last_seen(a, k)[1], _first_seen(ix, b, k)[1], ("realtime", a, b))


def _infer_versions(
    ix: _Index,
    txns: list[Txn],
    log: AnomalyLog,
    wfr_keys: bool,
    sequential_keys: bool,
    linearizable_keys: bool,
) -> list[str]:
    """Version orders from the sources in force, as Elle combines them: the initial state (nil before
    every version) always; `wfr_keys` a transaction's read of a key precedes its own write of it;
    `sequential_keys` / `linearizable_keys` the last version a transaction saw of a key precedes the
    first version the next transaction touching it on its process / in real time saw (read or wrote).

    Sources are added one at a time; one that would make some key's order cyclic is left out and
    reported as `cyclic-versions` (with the sources that disagree). Returns the sources used."""
    sources = [("initial-state", _initial)]
    if wfr_keys:
        sources.append(("wfr-keys", _wfr))
    if sequential_keys:
        sources.append(("sequential-keys", _sequential))
    if linearizable_keys:
        sources.append(("linearizable-keys", _linearizable))
    used: list[str] = []
    for name, source in sources:
        stage: Versions = {}
        source(ix, txns, stage)
        cycles = []
        for k, succ in stage.items():
            union = {v: {**ix.versions.get(k, {}).get(v, {}), **nxt} for v, nxt in succ.items()}
            for v, nxt in ix.versions.get(k, {}).items():
                union.setdefault(v, nxt)
            cycles += [(k, c) for c in _cycles_of(union)]
        if cycles:
            for k, cycle in cycles:
                log.add(
                    "cyclic-versions",
                    {
                        "key": k,
                        "versions": cycle,
                        "sources": [*used, name],
                        "explanation": f"with {', '.join([*used, name])}, the order of {show(k)}'s versions "
                        f"{show(cycle)} is cyclic; {name} was left out of the analysis",
                    },
                )
            continue
        for k, succ in stage.items():
            for v1, nxt in succ.items():
                for v2, reason in nxt.items():
                    ix.order(k, v1, v2, reason)
        used.append(name)
    return used


def _cycles_of(succ: dict[Any, dict[Any, Reason]]) -> list[list[Any]]:
    versions = list(dict.fromkeys([*succ, *(v for nxt in succ.values() for v in nxt)]))
    number = {v: i for i, v in enumerate(versions)}
    adjacency = [[number[v2] for v2 in succ.get(v, {})] for v in versions]
    return [[versions[i] for i in c] for c in strongly_connected_components(adjacency)]


@dataclass
class RwRegisterEvidence:
    ix: _Index
    txns: list[Txn]
    sources: list[str] = field(default_factory=list)

    def reason(self, k: Any, v1: Any, v2: Any, why: Reason) -> str:
        def at(t: int) -> str:
            return f"the txn at index {self.txns[t].op.invoke_index}"

        if why[0] == "initial":
            return f"{show(k)} starts as nil"
        if why[0] == "wfr":
            return f"{at(why[1])} read {show(k)} = {show(v1)} and then wrote {show(v2)} (assuming wfr-keys)"
        rule = "sequential-keys" if why[0] == "process" else "linearizable-keys"
        order = "on the same process" if why[0] == "process" else "in real time"
        return f"{at(why[1])} saw {show(k)} = {show(v1)} before {at(why[2])} saw {show(v2)} {order} (assuming {rule})"

    def explain(self, a: Txn, b: Txn, kind: int, name_a: str, name_b: str) -> str | None:
        ix = self.ix
        if kind == WW:
            for f, k, v1 in a.mops:
                succ = ix.versions.get(k, {}).get(hashable(v1), {}) if f == WRITE else {}
                for v2, why in succ.items():
                    if ix.writer.get((k, v2)) == b.id:
                        return (
                            f"{name_a} wrote {show(k)} = {show(v1)} and {name_b} wrote {show(v2)}, a later "
                            f"version since {self.reason(k, v1, v2, why)}"
                        )
        elif kind == WR:
            for k, v in ix.ext_read.get(b.id, {}).items():
                if v is not None and ix.writer.get((k, v)) == a.id:
                    return f"{name_a} wrote {show(k)} = {show(v)}, and {name_b} read it"
        elif kind == RW:
            for k, v1 in ix.ext_read.get(a.id, {}).items():
                for v2, why in ix.versions.get(k, {}).get(v1, {}).items():
                    if ix.writer.get((k, v2)) == b.id:
                        return (
                            f"{name_a} read {show(k)} = {show(v1)}, which {name_b}'s write of {show(v2)} "
                            f"overwrote, since {self.reason(k, v1, v2, why)}"
                        )
        return None


def infer(
    history: History,
    txns: list[Txn],
    sequential_keys: bool = False,
    linearizable_keys: bool = False,
    log: AnomalyLog | None = None,
    wfr_keys: bool = False,
) -> Inference:
    log = log or AnomalyLog()
    ix = _index(history, txns, log)
    sources = _infer_versions(ix, txns, log, wfr_keys, sequential_keys, linearizable_keys)
    lost_updates(txns, WRITE, log)
    graph = DepGraph(len(txns))
    for k, succ in ix.versions.items():
        for v1, nxt in succ.items():
            w1 = ix.writer.get((k, v1)) if v1 is not None else None
            if w1 is None:
                continue
            for v2 in nxt:
                w2 = ix.writer.get((k, v2))
                if w2 is not None:
                    graph.add(w1, w2, WW)
    for t, reads in ix.ext_read.items():
        for k, v in reads.items():
            if v is not None:
                w = ix.writer.get((k, v))
                example = {"key": k, "value": v, "reader": txns[t].to_json()}
                if w is None:
                    if (k, v) in ix.failed:
                        w = txns[ix.failed[(k, v)]]
                        why = f"{show(k)} = {show(v)} was written only by the failed txn at index {w.op.invoke_index}"
                        log.add("G1a", {**example, "writer": w.to_json(), "explanation": why})
                    else:
                        why = f"nobody in the history wrote {show(k)} = {show(v)}: an initial state, or garbage"
                        log.add("unwritten-read", {**example, "explanation": why})
                elif w != t:
                    graph.add(w, t, WR)
                    if (k, v) in ix.intermediate:
                        why = (
                            f"the txn at index {txns[w].op.invoke_index} wrote {show(k)} = {show(v)} and then "
                            "overwrote it itself"
                        )
                        log.add("G1b", {**example, "writer": txns[w].to_json(), "explanation": why})
            for v2 in ix.versions.get(k, {}).get(v, {}):
                w2 = ix.writer.get((k, v2))
                if w2 is not None:
                    graph.add(t, w2, RW)
    evidence = RwRegisterEvidence(ix, txns)
    evidence.sources = sources
    return Inference(graph=graph, anomalies=log, evidence=evidence)


def check_rw_register(
    history: History,
    consistency_model: str = DEFAULT_MODEL,
    sequential_keys: bool = False,
    linearizable_keys: bool = False,
    txn_f: str = TXN_F,
    wfr_keys: bool = False,
    cycle_search_budget: int = SEARCH_BUDGET,
) -> Verdict:
    """Check an rw-register history against `consistency_model` (see checkers.elle.anomalies)."""
    check_model(consistency_model)
    txns = extract_txns(history, (WRITE, READ), txn_f)
    inference = infer(history, txns, sequential_keys, linearizable_keys, wfr_keys=wfr_keys)
    verdict = analyse(CHECKER, txns, inference, consistency_model, cycle_search_budget)
    verdict.details["version_sources"] = inference.evidence.sources  # type: ignore[attr-defined]
    verdict.details["assumptions"] = {
        "unique_values_per_key": True,
        "wfr_keys": wfr_keys,
        "sequential_keys": sequential_keys,
        "linearizable_keys": linearizable_keys,
    }
    return verdict
