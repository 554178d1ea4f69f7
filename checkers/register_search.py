"""Registers with small repeated values (issue 29): Jepsen's cas-register shape.

With values drawn from a handful (Jepsen writes `rand-int 5`), many pending ops are equal, the
unique-value guard and zones do not apply, and the plain search drowns in the orders of equal ops.
Two things here decide that shape:

- Symmetry: ops with the same step (same f, values and outcome) are interchangeable. If x was invoked
  no later and returns no later than c, swapping them in a linearization that has c first gives one
  that has x first (x can stand where c stood: it was invoked by then; c where x stood: it has not
  returned by then). So the search never tries c while such an x is pending (`shadowed`); for
  indeterminate ops, open to the end, the earliest invoked of equal ones goes first. Sound for any
  model whose steps are functions of the signature; used for registers whose values repeat.
- Forgetting a value nobody can observe (`forgetter`): when every pending op that observes the
  state's value v (a read of v, a cas from v, failed or not) must come after some pending write
  returns, v is overwritten before anyone sees it. All such states have the same future, so the
  search keeps one of them (`FORGOTTEN`) instead of one per value; with many values, the orders of
  concurrent writes no longer multiply by the value the last one left.
- The order children are tried in (`urgent_first`): the write that the most urgent candidate needs
  first. Not a cut: it decides nothing by itself, it only finds valid orders sooner.
- Read-from witnesses (`stale_observations`): an ok read of v (or an ok cas from v) needs some op
  that may set v to be linearized before it with nothing in between. If every such op returned
  before some op certainly setting another value began, and that op returned before the read began,
  the read is stale whatever the order: invalid without a search, with the ops that prove it.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from checkers.history import Op


@dataclass(frozen=True)
class Symmetry:
    """Per determinate op and per indeterminate op, a signature; equal signatures, equal steps.
    `forget(state, lo, dmask)`: the state, or `FORGOTTEN` if nobody can observe it (`forgetter`)."""

    sig: list[Any]
    isig: list[Any]
    forget: Callable[[Any, int, int], Any] | None = None
    needs: list[Any] | None = None  # per determinate op: the value it must see (read, ok cas), or NO_NEED


NO_NEED = object()


def urgent_first(needs: list[Any], children: list[tuple[int, Any]], first: int, state: Any) -> list[tuple[int, Any]]:
    """The order children are tried in: those leaving the value that `first`, the candidate with the
    earliest deadline, needs go first; the rest keep their order. Only the order changes, not what
    is tried, so no verdict can; but with many values the search finds the write a read is waiting
    for at once instead of after the subsets of the other concurrent writes."""
    want = needs[first]
    if want is NO_NEED or want == state:
        return children
    ahead = [ch for ch in children if ch[0] != first and ch[1] == want]
    if not ahead:
        return children
    return ahead + [ch for ch in children if not (ch[0] != first and ch[1] == want)]


class _Forgotten:
    """The register state "a value no pending op can observe before it is overwritten"."""

    def __repr__(self) -> str:
        return "<a value nobody observes>"


FORGOTTEN = _Forgotten()


def forgetter(
    parts: Sequence[tuple[str, Any, Any]], iparts: Sequence[tuple[str, Any, Any]], inv: list[int], ret: list[int]
) -> Callable[[Any, int, int], Any]:
    """`Symmetry.forget` for a register key. State v is forgotten when no indeterminate cas is from v
    and the earliest unlinearized op observing v (a read of v, a cas from v) was invoked after some
    unlinearized write returned, or there is none. Sound: from two such states x and y, any
    completion's ops before its first write observe neither (each observer waits for a write), so
    they are failed cas from other values, legal from both and keeping the state; after that write
    the states agree. And the same op leaves x and y alike, so every completion from x is one from y."""
    observers: dict[Any, list[int]] = {}  # value -> determinate ops with it as `a` (not writes), by index
    writes: list[int] = []
    for i, (f, a, _) in enumerate(parts):
        if f == "write":
            writes.append(i)
        else:
            observers.setdefault(a, []).append(i)
    seen_by_info = {a for f, a, _ in iparts if f == "cas"}
    empty: list[int] = []

    def forget(state: Any, lo: int, dmask: int) -> Any:
        if state is FORGOTTEN or state in seen_by_info:
            return state
        obs = observers.get(state, empty)
        for k in range(bisect_left(obs, lo), len(obs)):
            o = obs[k]
            if not (dmask >> (o - lo)) & 1:
                limit = inv[o]
                break
        else:
            return FORGOTTEN  # nobody left to observe it
        for k in range(bisect_left(writes, lo), len(writes)):
            w = writes[k]
            if inv[w] >= limit:
                break
            if ret[w] < limit and not (dmask >> (w - lo)) & 1:
                return FORGOTTEN
        return state

    return forget


def signatures(ops: Sequence[Op], parts: Sequence[tuple[str, Any, Any]]) -> list[Any]:
    """A register op's step signature: (f, a, b), and whether a cas failed (a failed cas steps
    differently from one that succeeded or may have)."""
    return [(f, a, b, op.type == "fail") for op, (f, a, b) in zip(ops, parts, strict=True)]


def shadowed(sym: Symmetry, ret: Sequence[float], cands: Sequence[int], c: int) -> bool:
    """Whether candidate c waits for an equal candidate invoked (index) and returning no later."""
    sig, mine, r = sym.sig, sym.sig[c], ret[c]
    return any(x < c and ret[x] <= r and sig[x] == mine for x in cands)


def info_shadowed(sym: Symmetry, avail: Sequence[int], i: int, j: int) -> bool:
    """Whether indeterminate op j (avail[i]) waits for an equal one available before it."""
    isig, mine = sym.isig, sym.isig[j]
    return any(isig[x] == mine for x in avail[:i])


@dataclass(frozen=True)
class Stale:
    """An observer that no order can satisfy: op `reader` needs `value`; every op that may set it
    (`setters`) returned before `overwriter` began, which returned before `reader` began."""

    reader: int
    value: Any
    overwriter: int
    setters: list[int]


def stale_observations(
    ops: Sequence[Op], parts: Sequence[tuple[str, Any, Any]], info: Sequence[Op], iparts: Sequence[tuple[str, Any, Any]]
) -> list[Stale]:
    """Every read / ok cas whose value was provably overwritten before it began (see the module
    docstring); indices are search indices (determinate ops by invoke time, info op j is n + j).
    O(n log n): per value, the latest return of a setter invoked before the reader returns, then
    the earliest-returning certain setter invoked after that."""
    n = len(ops)
    setters: dict[Any, list[tuple[float, float, int]]] = {None: [(float("-inf"), float("-inf"), -1)]}
    certain: list[tuple[float, float, int]] = []  # (invoke, return, index) of ops that surely set a value
    for i, (op, (f, a, b)) in enumerate(zip(ops, parts, strict=True)):
        if f == "write" or (f == "cas" and op.type == "ok"):
            v = a if f == "write" else b
            setters.setdefault(v, []).append((op.invoke_time, op.complete_time, i))  # type: ignore[arg-type]
            certain.append((op.invoke_time, op.complete_time, i))  # type: ignore[arg-type]
    for j, (op, (f, a, b)) in enumerate(zip(info, iparts, strict=True)):
        if f in ("write", "cas"):
            setters.setdefault(a if f == "write" else b, []).append((op.invoke_time, float("inf"), n + j))
    certain.sort()
    cinv = [c[0] for c in certain]
    suffix: list[tuple[float, int]] = [(float("inf"), -1)] * (len(certain) + 1)  # earliest return after
    for k in range(len(certain) - 1, -1, -1):
        suffix[k] = min(suffix[k + 1], (certain[k][1], certain[k][2]))
    by_value: dict[Any, tuple[list[float], list[float], list[tuple[float, float, int]]]] = {}
    for v, ws in setters.items():
        ws.sort()
        running, best = [], float("-inf")
        for w in ws:
            best = max(best, w[1])
            running.append(best)
        by_value[v] = ([w[0] for w in ws], running, ws)
    found = []
    for i, (op, (f, a, _)) in enumerate(zip(ops, parts, strict=True)):
        if not (f == "read" or (f == "cas" and op.type == "ok")):
            continue
        invs, running, ws = by_value.get(a, ([], [], []))
        k = bisect_right(invs, op.complete_time)  # setters invoked before the reader returned
        last = running[k - 1] if k else float("-inf")
        if last == float("inf"):
            continue  # an indeterminate setter may land any time
        earliest, w2 = suffix[bisect_right(cinv, last)]
        if earliest < op.invoke_time:
            found.append(Stale(i, a, w2, [w[2] for w in ws[:k] if w[2] >= 0]))
    return found


def undecided_window(ops: Sequence[Op], lo: int, reached: Sequence[int], states: int, depth: int) -> dict[str, Any]:
    """What an undecided key's search learned, for the report: the window it could not linearize,
    from the first op it had not linearized (`lo`) to the last op its longest partial linearization
    took or got stuck at (`reached`), and about how many configurations deciding the key may take,
    its rate (configurations per op linearized) extrapolated over the whole key. An estimate: the
    hard spots are not spread evenly."""
    if lo >= len(ops):
        return {}
    last = max([lo, *reached])
    return {
        "from_op": ops[lo].id,
        "to_op": ops[last].id,
        "window_ops": last - lo + 1,
        "estimated_states": int(states * len(ops) / max(depth, 1)),
    }
