"""An independent linearizability oracle for tiny histories, for differential tests of the checker.

It shares nothing with `checkers/`: it reads the raw event dicts (as written to history.jsonl), pairs
them itself, states each model's semantics itself, and tries every real-time-respecting order of the
operations that happened (an `info` op may or may not have). A bug in the checker's history loader or
model code therefore cannot hide behind the same bug here. Exponential: keep histories to ~7 ops.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from itertools import combinations, permutations
from typing import Any

NO = object()  # the step is impossible from this state


@dataclass(frozen=True)
class RawOp:
    f: str
    arg: Any  # the invocation's value
    result: Any  # the completion's value
    kind: str  # ok | fail | info
    error: Any
    start: float
    end: float | None  # None: may take effect at any later time


def raw_ops(events: Iterable[Mapping[str, Any]]) -> list[RawOp]:
    """Invocations paired with their completions by process; the nemesis and other keys ignored."""
    open_: dict[Any, Mapping[str, Any]] = {}
    ops = []
    for e in events:
        if not isinstance(e.get("process"), int):
            continue
        if e["type"] == "invoke":
            open_[e["process"]] = e
            continue
        inv = open_.pop(e["process"])
        end = None if e["type"] == "info" else float(e["time"])
        ops.append(RawOp(e["f"], inv.get("value"), e.get("value"), e["type"], e.get("error"), float(inv["time"]), end))
    ops += [RawOp(e["f"], e.get("value"), None, "info", None, float(e["time"]), None) for e in open_.values()]
    return ops


def _freeze(v: Any) -> Any:
    return tuple(_freeze(x) for x in v) if isinstance(v, list) else v


def register_step(op: RawOp) -> Callable[[Any], Any] | None:
    """A register starting at None. None: the op constrains nothing (a failed read or write, a cas
    refused before it compared)."""
    if op.f == "read":
        return None if op.kind != "ok" else (lambda s: s if s == _freeze(op.result) else NO)
    if op.f == "write":
        return None if op.kind == "fail" else (lambda s: _freeze(op.arg))
    old, new = _freeze(op.arg[0]), _freeze(op.arg[1])
    if op.kind == "fail":  # it compared and found another value, unless its error says it never compared
        if op.error is not None and "compare" not in str(op.error).lower():
            return None
        return lambda s: s if s != old else NO
    return lambda s: new if s == old else NO


def kv_step(op: RawOp) -> Callable[[Any], Any] | None:
    """A string starting at "": get / put / append (read / write are get / put)."""
    f = {"read": "get", "write": "put"}.get(op.f, op.f)
    if f == "get":
        seen = "" if op.result is None else str(op.result)
        return None if op.kind != "ok" else (lambda s: s if s == seen else NO)
    if op.kind == "fail":
        return None
    v = "" if op.arg is None else str(op.arg)
    return (lambda s: v) if f == "put" else (lambda s: s + v)


def linearizable(events: Iterable[Mapping[str, Any]], step: Callable[[RawOp], Any], init: Any = None) -> bool:
    ops = [(op, fn) for op in raw_ops(events) if (fn := step(op)) is not None]
    sure = [x for x in ops if x[0].end is not None]
    maybe = [x for x in ops if x[0].end is None]
    for r in range(len(maybe) + 1):
        for chosen in combinations(maybe, r):
            for order in permutations(sure + list(chosen)):
                # real time: nothing placed later may have completed before an earlier one was invoked
                if any(
                    later.end is not None and later.end < first.start
                    for i, (first, _) in enumerate(order)
                    for later, _ in order[i + 1 :]
                ):
                    continue
                state = init
                for _, fn in order:
                    state = fn(state)
                    if state is NO:
                        break
                else:
                    return True
    return False
