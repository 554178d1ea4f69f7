"""Consistency models, the anomalies each forbids, and what each anomaly means.

Three small graphs, following the lattice Elle documents (Adya's PL levels, Cerone et al.'s
atomic-visibility models, Bailis et al.'s HATs, Daudjee and Salem's strong / strong-session variants):

- `_WEAKER`: a model -> the models it directly implies (a history satisfying the first satisfies them);
- `_DIRECT`: a model -> the anomalies it forbids beyond what the models it implies already forbid;
- `_IMPLIES`: an anomaly -> the anomalies its presence implies (G0 is also a G1c; a lost update is also
  a G2-item; a `-process` cycle is also a `-realtime` one, since a process runs one op at a time).

A model forbids every anomaly directly proscribed by it or by any model it implies, and every anomaly
that implies one of those. Our G-single, G-nonadjacent and G2-item are cycles of item (key) edges only
(Elle's newer names add an `-item` suffix): so a G-single is also a G2-item, which repeatable read
forbids, as Adya defines it.
"""

from __future__ import annotations

from collections.abc import Iterable

# --- the model lattice ----------------------------------------------------------------------------
_WEAKER: dict[str, tuple[str, ...]] = {
    "strict-serializable": (
        "serializable",
        "snapshot-isolation",
        "strong-snapshot-isolation",
        "strong-session-serializable",
        "session-serializable",
        "linearizable",
    ),
    "strong-session-serializable": ("serializable", "strong-session-snapshot-isolation"),
    "session-serializable": ("1SR",),
    "serializable": ("repeatable-read", "snapshot-isolation", "update-serializable", "view-serializable"),
    "update-serializable": ("forward-consistent-view",),
    "strong-snapshot-isolation": ("strong-session-snapshot-isolation", "strong-read-committed"),
    "strong-session-snapshot-isolation": ("snapshot-isolation", "strong-session-read-committed"),
    "snapshot-isolation": (
        "forward-consistent-view",
        "monotonic-atomic-view",
        "monotonic-snapshot-read",
        "parallel-snapshot-isolation",
        "prefix",
    ),
    "forward-consistent-view": ("consistent-view",),
    "consistent-view": ("cursor-stability", "monotonic-view"),
    "repeatable-read": ("cursor-stability", "monotonic-atomic-view"),
    "parallel-snapshot-isolation": ("causal-cerone", "ROLA"),
    "prefix": ("causal-cerone",),
    "causal-cerone": ("read-atomic",),
    "ROLA": ("read-atomic",),
    "read-atomic": ("monotonic-atomic-view",),
    "monotonic-atomic-view": ("read-committed",),
    "cursor-stability": ("read-committed",),
    "monotonic-view": ("read-committed",),
    "monotonic-snapshot-read": ("read-committed",),
    "strong-read-committed": ("strong-session-read-committed", "strong-read-uncommitted"),
    "strong-session-read-committed": ("read-committed", "strong-session-read-uncommitted"),
    "strong-read-uncommitted": ("strong-session-read-uncommitted",),
    "strong-session-read-uncommitted": ("read-uncommitted",),
    "read-committed": ("read-uncommitted",),
    # single-object models: in Elle's lattice, but they forbid no transactional anomaly
    "linearizable": ("sequential",),
    "sequential": ("causal",),
    "causal": ("writes-follow-reads", "PRAM"),
    "PRAM": ("monotonic-reads", "monotonic-writes", "read-your-writes"),
}

# Other names for the same models (Adya's PL levels, and synonyms Elle accepts).
ALIASES: dict[str, str] = {
    "PL-1": "read-uncommitted",
    "PL-2": "read-committed",
    "PL-2L": "monotonic-view",
    "PL-2+": "consistent-view",
    "PL-CS": "cursor-stability",
    "PL-MSR": "monotonic-snapshot-read",
    "PL-FCV": "forward-consistent-view",
    "PL-2.99": "repeatable-read",
    "PL-SI": "snapshot-isolation",
    "PL-3": "serializable",
    "PL-3U": "update-serializable",
    "PL-SS": "strict-serializable",
    "conflict-serializable": "serializable",
    "strong-serializable": "strict-serializable",
    "strong-session-PL-1": "strong-session-read-uncommitted",
    "strong-session-PL-2": "strong-session-read-committed",
    "strong-PL-1": "strong-read-uncommitted",
    "strong-PL-2": "strong-read-committed",
}

_DIRECT: dict[str, tuple[str, ...]] = {
    "read-uncommitted": ("G0", "duplicate-elements", "cyclic-versions", "garbage-read"),
    "read-committed": ("G1",),
    "monotonic-view": ("G1", "G-monotonic"),
    "monotonic-snapshot-read": ("G1", "G-MSR"),
    "cursor-stability": ("G1", "G-cursor", "lost-update"),
    "consistent-view": ("G1", "G-single"),
    "forward-consistent-view": ("G1", "G-SIb"),
    "update-serializable": ("G1", "G-update"),
    "repeatable-read": ("G1", "G2-item", "lost-update"),
    "read-atomic": ("internal", "G1a", "future-read"),
    "causal-cerone": ("internal", "G1a"),
    "prefix": ("internal", "G1a"),
    "parallel-snapshot-isolation": ("internal", "G1a"),
    "ROLA": ("lost-update",),
    "snapshot-isolation": ("internal", "G1", "G-SI", "G-nonadjacent"),
    "serializable": ("internal", "G1", "G2"),
    "strong-session-read-uncommitted": ("G0-process",),
    "strong-session-read-committed": ("G1c-process",),
    "strong-read-uncommitted": ("G0-realtime",),
    "strong-read-committed": ("G1c-realtime",),
    "strong-session-snapshot-isolation": ("internal", "G1-process", "G-nonadjacent-process"),
    "strong-snapshot-isolation": ("internal", "G1-realtime", "G-nonadjacent-realtime"),
    "strong-session-serializable": ("G1-process", "G2-process"),
    "strict-serializable": ("G1", "G1c-realtime", "G2-realtime"),
}

_IMPLIES: dict[str, tuple[str, ...]] = {
    "G0": ("G1c", "G0-process"),
    "G0-process": ("G1c-process", "G0-realtime"),
    "G0-realtime": ("G1c-realtime",),
    "G1a": ("G1",),
    "G1b": ("G1",),
    "G1c": ("G1", "G1c-process"),
    "G1c-process": ("G1c-realtime", "G1-process"),
    "G1c-realtime": ("G1-realtime",),
    "G1": ("G1-process",),
    "G1-process": ("G1-realtime",),
    "G-single": ("G-nonadjacent", "G-SIb", "G-single-process"),
    "G-single-process": ("G-nonadjacent-process", "G-single-realtime"),
    "G-single-realtime": ("G-nonadjacent-realtime",),
    "G-nonadjacent": ("G2-item", "G-nonadjacent-process"),
    "G-nonadjacent-process": ("G2-item-process", "G-nonadjacent-realtime"),
    "G-nonadjacent-realtime": ("G2-item-realtime",),
    "G2-item": ("G2", "G2-item-process"),
    "G2-item-process": ("G2-process", "G2-item-realtime"),
    "G2-item-realtime": ("G2-realtime",),
    "G2": ("G2-process",),
    "G2-process": ("G2-realtime",),
    "G-SIa": ("G-SI",),
    "G-SIb": ("G-SI",),
    "incompatible-order": ("G1a",),
    "dirty-update": ("G1a",),
    "future-read": ("G1c",),
    "future-read-realtime": ("G1c-realtime",),
    "lost-update": ("write-skew", "G2-item"),
    "write-skew": ("G2",),
}

# --- what each anomaly means (the docs and verdicts use these) ----------------------------------------
MEANINGS: dict[str, str] = {
    "G0": "write cycle: a cycle of write-write (ww) edges alone; transactions' writes interleave",
    "G1a": "aborted read: a read saw a value written by a transaction that failed",
    "G1b": "intermediate read: a read saw a value its writer overwrote later in the same transaction",
    "G1c": "circular information flow: a cycle of ww and wr edges with at least one wr",
    "G-single": "read skew: a cycle with exactly one anti-dependency (rw) edge",
    "G-nonadjacent": "a cycle with two or more rw edges, no two of them adjacent (snapshot isolation forbids it)",
    "G2-item": "anti-dependency cycle: two or more rw edges, some adjacent (write skew)",
    "lost-update": "two committed transactions read the same version of a key and both wrote that key",
    "future-read": "a read saw an append its own transaction made only later in the transaction",
    "future-read-realtime": "a read saw an append by a transaction invoked only after the reader completed "
    "(a G1c cycle through real time)",
    "dirty-update": "a failed transaction's write sits in a key's version order below a committed write",
    "internal": "a read disagrees with the transaction's own earlier reads and writes of the key",
    "duplicate-elements": "a list-append read lists one element twice",
    "garbage-read": "a list-append read saw an element nobody appended",
    "unwritten-read": "an rw-register read saw a value nobody in the history wrote (as in Elle, taken for an "
    "initial state the history does not show; forbidden by no model)",
    "incompatible-order": "two list-append reads of a key are not prefixes of one order",
    "cyclic-versions": "the version order inferred for a key (with the assumed --*-keys) contains a cycle",
    # in the lattice (what models forbid) but not observable by list-append / rw-register, as in Elle
    "G1": "any of G1a, G1b, G1c (Adya's dirty reads)",
    "G2": "an anti-dependency cycle, predicate reads included (list-append / rw-register have no predicates)",
    "write-skew": "two transactions each read what the other then overwrote (implies G2)",
    "G-SI": "G-SIa or G-SIb: Adya's snapshot-isolation anomalies, on start-ordered graphs",
    "G-SIa": "interference: a transaction saw another's writes without starting after it committed",
    "G-SIb": "missed effects: a cycle with one anti-dependency in the start-ordered graph",
    "G-cursor": "Adya's cursor lost update, on labelled cursor reads",
    "G-monotonic": "Adya's monotonic-view violation, on the unfolded serialization graph",
    "G-MSR": "Adya's monotonic-snapshot-read violation",
    "G-update": "Adya's update-serializability violation, on the graph with read-only transactions removed",
    "cycle-search-timeout": "a component's search gave up before trying every cycle class (see `searched`)",
    "empty-transaction-graph": "no transaction depends on another, so the history cannot show any cycle "
    "(verdict unknown, as in Elle)",
}
SUFFIX_MEANINGS = {
    "-process": "the cycle needs process-order edges: a process's transactions out of their own order",
    "-realtime": "the cycle needs real-time edges: a transaction ordered before one that completed earlier",
}

# --- derived sets -----------------------------------------------------------------------------------
MODELS: tuple[str, ...] = tuple(
    sorted(set(_WEAKER) | {m for weaker in _WEAKER.values() for m in weaker} | set(_DIRECT))
)
DEFAULT_MODEL = "strict-serializable"


def _closure(start: Iterable[str], edges: dict[str, tuple[str, ...]]) -> set[str]:
    seen: set[str] = set()
    todo = list(start)
    while todo:
        x = todo.pop()
        if x not in seen:
            seen.add(x)
            todo.extend(edges.get(x, ()))
    return seen


def _reverse(edges: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
    back: dict[str, list[str]] = {}
    for a, bs in edges.items():
        for b in bs:
            back.setdefault(b, []).append(a)
    return {k: tuple(v) for k, v in back.items()}


_IMPLIED_BY = _reverse(_IMPLIES)
_STRONGER = _reverse(_WEAKER)


def canonical(model: str) -> str:
    return ALIASES.get(model, model)


def check_model(model: str) -> str:
    """The model's canonical name; a one-line error naming the known ones for anything else."""
    name = canonical(model)
    if name not in MODELS:
        raise ValueError(
            f"unknown consistency model {model!r}; known models: {', '.join(MODELS)} "
            f"(and the aliases {', '.join(sorted(ALIASES))})"
        )
    return name


def implied_models(model: str) -> set[str]:
    return _closure([canonical(model)], _WEAKER)


def implied_anomalies(anomalies: Iterable[str]) -> set[str]:
    return _closure(anomalies, _IMPLIES)


def _forbids(model: str) -> frozenset[str]:
    direct = {a for m in implied_models(model) for a in _DIRECT.get(m, ())}
    return frozenset(_closure(direct, _IMPLIED_BY))


FORBIDS: dict[str, frozenset[str]] = {m: _forbids(m) for m in MODELS}


def forbids(model: str) -> frozenset[str]:
    return FORBIDS[check_model(model)]


def uses_process_edges(model: str) -> bool:
    return any(a.endswith("-process") for a in forbids(model))


def uses_realtime_edges(model: str) -> bool:
    return any(a.endswith("-realtime") for a in forbids(model))


def meaning(name: str) -> str:
    if name in MEANINGS:
        return MEANINGS[name]
    for suffix, text in SUFFIX_MEANINGS.items():
        if name.endswith(suffix) and name[: -len(suffix)] in MEANINGS:
            return f"{MEANINGS[name[: -len(suffix)]]}; {text}"
    return name


def ruled_out(found: Iterable[str]) -> tuple[list[str], list[str]]:
    """Elle's `not` (the weakest models the anomalies rule out) and `also-not` (the stronger ones)."""
    present = set(found)
    impossible = {m for m in MODELS if FORBIDS[m] & present}
    weakest = sorted(m for m in impossible if not (implied_models(m) - {m}) & impossible)
    return weakest, sorted(impossible - set(weakest))


def stronger_models(model: str) -> set[str]:
    return _closure([canonical(model)], _STRONGER)
