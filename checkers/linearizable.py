"""Linearizability: Wing & Gong / Lowe just-in-time search, memoised, one key at a time.

The history is split by key (P-compositionality: it is linearizable iff every key's sub-history is).
For one key the search walks linearizations depth-first. At each point only the ops that no pending
op precedes in real time are candidates (an op is a candidate iff it was invoked no later than the
earliest completion among the pending ops). Visited configurations (set of linearized ops, model
state) are memoised so no configuration is explored twice.

What makes it fast enough in Python:
- the linearized set is an int bitmask relative to `lo`, the first op not yet linearized, so it stays
  window-sized instead of history-sized;
- a candidate that is legal and leaves the state unchanged (a read that sees the current value, a cas
  whose compare fails) is taken without branching: moving such an op to the front of any valid
  continuation keeps it valid, so no alternative needs exploring;
- indeterminate (`info`) ops never have to be linearized (they may never have happened). They are
  kept apart, only tried after every determinate candidate has failed, and a configuration that used
  a superset of the info ops of an already-visited one with the same ops and state is pruned;
- per-op step functions are closures compiled once by the model;
- with unique written values (register), a value once left never comes back, so leaving it while an
  op that needs it is pending is a dead end (the model's guard).
Budgets (wall-clock deadline, number of memoised configurations) end a key's search with "unknown"
and the longest partial linearization found, never a hang.

A key whose quick first search does not show it valid gets the model's zone analysis
(`checkers.zones`), which proves the usual violations in O(n log n). For the register model the
search runs compiled (`checkers/_lincore.c`, the same walk step for step; this Python one is the
reference the tests compare it with).
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

from checkers.history import History, Op
from checkers.models import ILLEGAL, Canonicalizer, Guard, Model, NativeSpec, Pruner, get_model
from checkers.progress import Tracker
from checkers.register_search import Symmetry, info_shadowed, shadowed, undecided_window
from checkers.verdict import UNKNOWN, Verdict, merge_validity
from checkers.zones import ZoneVerdict

try:  # the compiled search (setup.py builds it); without it, the pure-Python one, with a notice
    from checkers import _lincore
except ImportError:  # pragma: no cover - depends on the build
    _lincore = None

CHECKER = "linearizable"
NATIVE_MISSING = (
    "note: the compiled linearizability search (checkers/_lincore) is not built, so the pure-Python "
    "search runs (slower); build it with `pip install -e .` (setup.sh; needs gcc and python3-dev)"
)
INF = float("inf")
DEFAULT_MAX_STATES = 4_000_000  # memoised configurations per key (~1 GB); beyond that: unknown
DEFAULT_TIMEOUT_S = 60.0  # `kchaos check` and a run's checking phase: undecided keys are unknown after this
_CHECK_EVERY = 1024  # nodes between budget checks


@dataclass
class KeyResult:
    """The verdict on one key's sub-history."""

    key: Any
    valid: bool | str
    ops: int  # ops that constrain the search (after the model dropped failed / indeterminate reads)
    info_ops: int  # of which indeterminate
    states: int = 0  # memoised configurations
    elapsed: float = 0.0
    reason: str | None = None  # why unknown: "timeout", "state budget", "not checked"
    linearization: list[int] = field(default_factory=list)  # op ids: the longest partial one (invalid)
    states_after: list[str] = field(default_factory=list)  # model state after each op of it
    final_state: str | None = None  # state after the longest partial linearization
    stuck: list[dict[str, Any]] = field(default_factory=list)  # ops that could not be linearized next
    method: str = "search"  # "zones": decided by the zone analysis (checkers.zones), else the search
    undecided: dict[str, Any] = field(default_factory=dict)  # unknown: the window it could not linearize

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "key": self.key,
            "valid": self.valid,
            "ops": self.ops,
            "info_ops": self.info_ops,
            "states": self.states,
            "elapsed": round(self.elapsed, 4),
            "method": self.method,
        }
        if self.reason:
            out["reason"] = self.reason
        if self.undecided:
            out["undecided"] = self.undecided
        if self.valid is not True and self.reason != "not checked":
            out["linearization"] = self.linearization
            out["states_after"] = self.states_after
            out["final_state"] = self.final_state
            out["stuck"] = self.stuck
        return out


@dataclass
class _Prepared:
    """One key's ops in search form: determinate ops by invoke time, then indeterminate ones."""

    ops: list[Op]  # determinate, sorted by invoke time
    inv: list[int]
    ret: list[int]
    info: list[Op]  # indeterminate, sorted by invoke time
    iinv: list[int]


_INVOKE_TIME = attrgetter("invoke_time")


def _prepare(model: Model, ops: Iterable[Op]) -> _Prepared:
    ops = ops if isinstance(ops, list) else list(ops)
    fast = model.split(ops)
    if fast is not None:
        return _Prepared(*fast)
    det: list[Op] = []
    info: list[Op] = []
    for op in ops:
        if model.keep(op):
            (info if op.complete_time is None else det).append(op)
    det.sort(key=_INVOKE_TIME)
    info.sort(key=_INVOKE_TIME)
    return _Prepared(
        ops=det,
        inv=[o.invoke_time for o in det],
        ret=[o.complete_time for o in det],  # type: ignore[misc]
        info=info,
        iinv=[o.invoke_time for o in info],
    )


@dataclass
class _Outcome:
    valid: bool | str
    reason: str | None
    states: int
    path: tuple | None  # linked list (local index, parent) of the result / longest partial linearization
    node: tuple  # (lo, dmask, imask, state) at the end of `path`


def _search(
    p: _Prepared,
    fns: list,
    ifns: list,
    init: Any,
    pure: list[bool],
    blind: list[bool],
    doomed: Pruner | None,
    canon: Canonicalizer | None,
    deadline: float,
    max_states: int,
    guard: Guard | None = None,
    sym: Symmetry | None = None,
) -> _Outcome:
    """Depth-first just-in-time linearization; see the module docstring for the pruning rules."""
    inv, ret, iinv = p.inv, p.ret, p.iinv
    n, ni = len(inv), len(iinv)
    seen: dict[tuple, Any] = {}
    stack: list[list] = []
    lo, dmask, imask, state, path, depth = 0, 0, 0, init, None, 0
    best_depth, best = -1, (None, (0, 0, 0, init))
    nodes = 0
    check_at = _CHECK_EVERY
    clock = time.monotonic
    while True:
        # Expand the current configuration.
        if lo == n:
            return _Outcome(True, None, len(seen), path, (lo, dmask, imask, state))
        nodes += 1
        if nodes >= check_at:
            check_at += _CHECK_EVERY
            tracker = _JOB.get("tracker")  # `check`'s; what a forked worker writes, nobody reads
            if tracker is not None:
                tracker.states = len(seen)
            if clock() > deadline:
                return _Outcome(UNKNOWN, "timeout", len(seen), best[0], best[1])
            if len(seen) > max_states:
                return _Outcome(UNKNOWN, "state budget", len(seen), best[0], best[1])
        if depth > best_depth:
            best_depth, best = depth, (path, (lo, dmask, imask, state))
        i, m, minret = lo, dmask, INF
        cands = []
        while i < n:
            if inv[i] > minret:
                break
            if not m & 1:
                cands.append(i)
                r = ret[i]
                if r < minret:
                    minret = r
            m >>= 1
            i += 1
        if len(cands) > 1:
            cands = [c for c in cands if inv[c] <= minret]
            cands.sort(key=ret.__getitem__)  # earliest deadline first
        children = []
        forced = False
        if doomed is not None and doomed(state, lo, dmask, cands) >= 0:
            cands = []
            forced = True  # dead end: not even indeterminate ops can save it
        for c in cands:
            if sym is not None and shadowed(sym, ret, cands, c):
                continue
            ns = fns[c](state)
            if ns is ILLEGAL:
                continue
            if pure[c]:  # an observer that is legal now: taking it first loses nothing
                children = [(c, ns)]
                forced = True
                break
            if guard is not None and ns != state and guard(state, lo, dmask, c):
                continue  # leaves a value that a pending op still needs, for good
            children.append((c, ns))
        stack.append([children, 0, lo, dmask, imask, state, path, depth, minret, forced or not ni, cands])
        # Move to the next unexplored child, backtracking as needed.
        while stack:
            fr = stack[-1]
            children = fr[0]
            k = fr[1]
            if k == len(children):
                if fr[9]:
                    stack.pop()
                    continue
                fr[9] = True  # determinate candidates exhausted: now try indeterminate ops
                if guard is None or not guard(fr[5], fr[2], fr[3], -1):
                    children.extend(_info_children(fns, ifns, blind, iinv, fr[10], fr[4], fr[5], fr[8], n, sym))
                continue
            fr[1] = k + 1
            c, ns = children[k]
            nlo, ndm, nim = fr[2], fr[3], fr[4]
            if c < n:
                ndm |= 1 << (c - nlo)
                while ndm & 1:
                    ndm >>= 1
                    nlo += 1
            else:
                nim |= 1 << (c - n)
            if canon is not None:
                ns = canon(ns, nlo, ndm)
            key = (nlo, ndm, ns)
            prev = seen.get(key)
            if prev is None:
                seen[key] = nim
            elif type(prev) is int:
                if not prev & ~nim:
                    continue  # visited with no more info ops used: dominated
                seen[key] = [prev, nim]
            else:
                if any(not q & ~nim for q in prev):
                    continue
                prev.append(nim)
            lo, dmask, imask, state = nlo, ndm, nim, ns
            path = (c, fr[6])
            depth = fr[7] + 1
            break
        else:
            return _Outcome(False, None, len(seen), best[0], best[1])


NATIVE_OPS_PER_JOB = 300_000  # the compiled search does ~1M ops a second: forking pays off beyond this

_RESULTS = {1: (True, None), 0: (False, None), 2: (UNKNOWN, "timeout"), 3: (UNKNOWN, "state budget")}


def _native_search(
    p: _Prepared, spec: NativeSpec, prune: bool, guard: bool, deadline: float, max_states: int
) -> _Outcome:
    """`_search` in C (checkers/_lincore.c) for the models that give a `NativeSpec`: the same walk,
    the same configurations, the same longest partial linearization. `prune`: the model's pruner
    (and observer shortcut stays on either way, as in `_search`); `guard`: the unique-value guard."""
    code, states, order = _lincore.search(
        p.inv, p.ret, spec.kind, spec.a, spec.b, spec.pure, p.iinv, spec.ikind, spec.ia, spec.ib, spec.blind,
        spec.values, prune, guard, deadline, max_states, *_symmetry_flag(prune and spec.symmetric),
    )  # fmt: skip
    valid, reason = _RESULTS[code]
    path = None
    n = len(p.inv)
    done, info = set(), 0
    for c in order:
        path = (c, path)
        if c < n:
            done.add(c)
        else:
            info |= 1 << (c - n)
    lo = 0
    while lo in done:
        lo += 1
    dmask = sum(1 << (c - lo) for c in done if c > lo)
    return _Outcome(valid, reason, states, path, (lo, dmask, info, None))


def _symmetry_flag(on: bool) -> tuple[bool, ...]:
    """The compiled search's symmetry argument; a build older than it (no `SYMMETRY`) gets none."""
    return (on,) if on and hasattr(_lincore, "SYMMETRY") else ()


EXPLAIN_SECONDS = 0.5  # extra search for a longer partial linearization of a bad key
EXPLAIN_STATES = 50_000


def _depth(path: tuple | None) -> int:
    depth = 0
    while path is not None:
        depth += 1
        path = path[1]
    return depth


def _longer_partial(native: NativeSpec | None, p: _Prepared, t: _Tools, deadline: float, out: _Outcome) -> _Outcome:
    """Pruning stops a doomed branch early, so its partial linearizations are short. A short,
    budgeted search without the pruner usually finds a longer one, which explains more."""
    budget = min(deadline, time.monotonic() + EXPLAIN_SECONDS)
    if native is not None:
        alt = _native_search(p, native, False, False, budget, EXPLAIN_STATES)
    else:
        alt = _search(p, t.fns, t.ifns, t.init, t.pure, t.blind, None, t.canon, budget, EXPLAIN_STATES)
    if alt.valid is True:  # impossible unless the pruner is wrong; keep the proven verdict honest
        raise AssertionError("pruned search said invalid, unpruned search found a linearization")
    if _depth(alt.path) > _depth(out.path):
        return _Outcome(out.valid, out.reason, out.states, alt.path, alt.node)
    return out


def _info_children(
    fns: list,
    ifns: list,
    blind: list[bool],
    iinv: list[int],
    cands: list[int],
    imask: int,
    state: Any,
    minret: float,
    n: int,
    sym: Symmetry | None = None,
) -> list[tuple[int, Any]]:
    """The indeterminate ops worth linearizing next, with the states they lead to.

    Info op j is only worth it if it changes what some next op y can do: y legal after j and either
    illegal before it or ending in another state. Otherwise any valid continuation "j, y, ..." can
    drop j (an info op may never happen) and is found through y directly.
    """
    avail = [j for j in range(len(iinv)) if iinv[j] <= minret and not (imask >> j) & 1]
    nexts = [fns[y] for y in cands if not blind[y]] + [ifns[k] for k in avail if not blind[n + k]]
    out = []
    for i, j in enumerate(avail):
        if sym is not None and info_shadowed(sym, avail, i, j):
            continue
        sj = ifns[j](state)
        if sj is ILLEGAL or sj == state:
            continue
        own = ifns[j]
        for fn in nexts:
            if fn is own:
                continue
            after = fn(sj)
            if after is not ILLEGAL:
                before = fn(state)
                if before is ILLEGAL or before != after:
                    out.append((n + j, sj))
                    break
    return out


@contextmanager
def no_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector. The search allocates many small acyclic objects while
    millions of ops are alive, and each full collection would walk all of them: with it on, time
    grows quadratically with history size. Nothing here makes cycles, so nothing leaks."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            enable_gc()


def enable_gc() -> None:
    """Turn the collector back on without it scanning, at its next allocation, every object made
    while it was off (a million ops: a third of a second): they join the oldest generation."""
    gc.freeze()
    gc.enable()
    gc.unfreeze()


def _unlink(path: tuple | None) -> list[int]:
    out = []
    while path is not None:
        out.append(path[0])
        path = path[1]
    out.reverse()
    return out


def _candidates(p: _Prepared, lo: int, dmask: int) -> tuple[list[int], float]:
    """The determinate ops that may be linearized next at (lo, dmask), earliest deadline first."""
    cands: list[int] = []
    minret = INF
    i, m = lo, dmask
    while i < len(p.inv) and p.inv[i] <= minret:
        if not m & 1:
            cands.append(i)
            minret = min(minret, p.ret[i])
        m >>= 1
        i += 1
    cands = [c for c in cands if p.inv[c] <= minret]
    cands.sort(key=p.ret.__getitem__)
    return cands, minret


def check_key(
    model: Model,
    key: Any,
    ops: Iterable[Op],
    *,
    deadline: float = INF,
    max_states: int = DEFAULT_MAX_STATES,
    prune: bool = True,
    zones: bool = True,
    native: bool = True,
) -> KeyResult:
    """Decide one key's sub-history: the model's zone analysis first if it has one (and `zones`),
    then the search. `prune=False` turns off every model cut; `native=False` runs the Python search even
    where the compiled one could (the reference of the tests)."""
    with no_gc():
        return _check_key(model, key, ops, deadline, max_states, prune, zones and prune, native)


@dataclass
class _Tools:
    """What the Python search (and any explanation) needs of the model for one key."""

    fns: list
    ifns: list
    init: Any
    pure: list[bool]
    blind: list[bool]
    doomed: Pruner | None
    canon: Canonicalizer | None
    guard: Guard | None
    sym: Symmetry | None = None


def _tools(model: Model, p: _Prepared, prune: bool) -> _Tools:
    fns, ifns, init, pure, blind = _compiled(model, p)
    return _Tools(
        fns,
        ifns,
        init,
        pure,
        blind,
        model.pruner(p.ops, p.info) if prune else None,
        model.canonicalizer(p.ops, p.info) if prune else None,
        model.guard(p.ops, p.info) if prune else None,
        model.symmetry(p.ops, p.info) if prune else None,
    )


def _check_key(
    model: Model,
    key: Any,
    ops: Iterable[Op],
    deadline: float,
    max_states: int,
    prune: bool,
    zones: bool,
    use_native: bool,
) -> KeyResult:
    """The search, first with a small state budget (most keys are decided there); a key it has not
    shown valid then gets the model's zone analysis, which may decide it (with a proof of why), and
    else the search again with the full budget. The compiled search needs no step functions, so
    they are only made for a key that needs explaining (or when the Python search runs)."""
    started = time.monotonic()
    p = _prepare(model, ops)
    native = model.native(p.ops, p.info) if use_native and _lincore is not None else None
    made: list[_Tools] = []

    def tools() -> _Tools:
        if not made:
            made.append(_tools(model, p, prune))
        return made[0]

    def search(until: float, states: int) -> _Outcome:
        if native is not None:
            return _native_search(p, native, prune, prune and native.unique, until, states)
        t = tools()
        return _search(p, t.fns, t.ifns, t.init, t.pure, t.blind, t.doomed, t.canon, until, states, t.guard, t.sym)

    zones = zones and type(model).zones is not Model.zones  # no zones to fall back on: no quick search
    quick = min(max_states, QUICK_STATES + QUICK_STATES_PER_OP * len(p.ops)) if zones else max_states
    soon = min(deadline, time.monotonic() + QUICK_SECONDS) if zones else deadline
    out = search(soon, quick)
    if zones and out.valid is not True:
        zv = model.zones(p.ops, p.info)
        if zv is not None and zv.valid is not None:
            if zv.valid is True and out.valid is False:  # impossible unless one of them is wrong
                raise AssertionError("zone analysis said valid, the search proved the key invalid")
            result = KeyResult(key, zv.valid, len(p.ops) + len(p.info), len(p.info), method="zones")
            if not zv.valid:
                t = tools()
                _zone_counterexample(model, p, zv, t.fns, t.ifns, t.doomed, out, result)
            result.elapsed = time.monotonic() - started
            return result
        if (out.reason == "state budget" and quick < max_states) or (out.reason == "timeout" and soon < deadline):
            out = search(deadline, max_states)
    result = KeyResult(
        key=key,
        valid=out.valid,
        ops=len(p.ops) + len(p.info),
        info_ops=len(p.info),
        states=out.states,
        reason=out.reason,
    )
    if out.valid is not True:
        t = tools()
        if t.doomed is not None and out.valid is False:
            out = _longer_partial(native, p, t, deadline, out)
        _explain(model, p, t.fns, t.ifns, t.init, t.doomed, out, result)
        if out.valid == UNKNOWN:
            at = {op.id: k for k, op in enumerate(p.ops)}
            reached = [at[i] for i in result.linearization if i in at] + [
                at[s["id"]] for s in result.stuck if s["id"] in at
            ]
            result.undecided = undecided_window(p.ops, out.node[0], reached, out.states, len(result.linearization))
    result.elapsed = time.monotonic() - started
    return result


QUICK_STATES = 5_000  # the first search's state budget: easy keys need about one state per op
QUICK_STATES_PER_OP = 2
QUICK_SECONDS = 0.25  # and its time budget: a state of a hard key can cost a millisecond


def _compiled(model: Model, p: _Prepared) -> tuple[list, list, Any, list[bool], list[bool]]:
    """What the search needs of the model per op: step functions (determinate, indeterminate), the
    initial state, which ops are observers and which are blind."""
    fns = [model.compile(op) for op in p.ops]
    ifns = [model.compile(op) for op in p.info]
    pure = [model.observer(op) for op in p.ops]
    blind = [model.blind(op) for op in p.ops] + [model.blind(op) for op in p.info]
    return fns, ifns, model.init(), pure, blind


def _zone_counterexample(
    model: Model,
    p: _Prepared,
    zv: ZoneVerdict,
    fns: list,
    ifns: list,
    doomed: Pruner | None,
    out: _Outcome,
    result: KeyResult,
) -> None:
    """A zone violation shown as the viewer expects: the longest partial linearization the (quick)
    search found, and the ops the analysis proved doomed first in the stuck list, with why."""
    result.states = out.states
    _explain(model, p, fns, ifns, model.init(), doomed, out, result)
    n = len(p.ops)
    because = [(p.ops[k] if k < n else p.info[k - n]).id for k in zv.because]
    proven = []
    for k in zv.doomed:
        op = p.ops[k]
        proven.append(
            {
                "id": op.id,
                "op": model.describe_op(op),
                "process": op.process,
                "needs": model.requirement(op),
                "state": result.final_state,
                "legal": False,
                "deadline": False,
                "doomed": True,
                "why": zv.why,
                "because": because,
            }
        )
    ids = {s["id"] for s in proven}
    result.stuck = proven + [s for s in result.stuck if s["id"] not in ids]


def _explain(
    model: Model,
    p: _Prepared,
    fns: list,
    ifns: list,
    init: Any,
    doomed: Pruner | None,
    out: _Outcome,
    result: KeyResult,
) -> None:
    """Fill in the longest partial linearization and the ops stuck after it."""
    n = len(p.ops)
    order = _unlink(out.path)
    state = init
    for c in order:
        state = (fns[c] if c < n else ifns[c - n])(state)
        op = p.ops[c] if c < n else p.info[c - n]
        result.linearization.append(op.id)
        result.states_after.append(model.describe_state(state))
    result.final_state = model.describe_state(state)
    lo, dmask, _imask, _ = out.node
    cands, _ = _candidates(p, lo, dmask)
    hopeless = doomed(state, lo, dmask, cands) if doomed is not None and lo < n else -1
    shown = cands if hopeless < 0 or hopeless in cands else [hopeless, *cands]
    for c in shown:
        op = p.ops[c]
        result.stuck.append(
            {
                "id": op.id,
                "op": model.describe_op(op),
                "process": op.process,
                "needs": model.requirement(op),
                "state": result.final_state,
                # legal now, but every continuation after it failed
                "legal": fns[c](state) is not ILLEGAL and c != hopeless,
                # the op that must be linearized before anything invoked later
                "deadline": bool(cands) and c == cands[0],
                # can never become legal from here (a read whose value nobody can write any more)
                "doomed": c == hopeless,
            }
        )
    # Ops that cannot be linearized come first: doomed ones, then illegal ones, the deadline first.
    result.stuck.sort(key=lambda s: (not s["doomed"], s["legal"], not s["deadline"]))


# --- whole histories: partition, parallel keys, verdict -------------------------------------------

_JOB: dict[str, Any] = {}  # inherited by forked workers: no pickling of ops or closures


def _run_key(index: int) -> tuple[int, KeyResult]:
    key, ops = _JOB["parts"][index]
    res = check_key(_JOB["model"], key, ops, deadline=_JOB["deadline"], max_states=_JOB["max_states"])
    return index, res


def check(
    history: History | Iterable[Op],
    model: str | Model = "register",
    *,
    timeout: float | None = None,
    max_states: int = DEFAULT_MAX_STATES,
    jobs: int = 1,
    all_keys: bool = False,
    tracker: Tracker | None = None,
) -> Verdict:
    """Check a whole history, key by key. Without `all_keys`, stop at the first invalid key. A
    `tracker` is kept up to date with the keys decided (and the in-process search's states)."""
    started = time.monotonic()
    model = get_model(model)
    _notice_if_pure_python(model)
    ops = history.ops if isinstance(history, History) else list(history)
    parts = list(model.partition(ops).items())
    deadline = started + timeout if timeout is not None else INF
    results: dict[int, KeyResult] = {}
    order = sorted(range(len(parts)), key=lambda i: -len(parts[i][1]))  # biggest first: balance
    if _lincore is not None and type(model).native is not Model.native:
        jobs = min(jobs, 1 + len(ops) // NATIVE_OPS_PER_JOB)  # a worker costs more than it saves
    jobs = max(1, min(jobs, len(parts)))
    _JOB.update(parts=parts, model=model, deadline=deadline, max_states=max_states, tracker=tracker)
    if tracker is not None:
        tracker.key_done(0, len(parts))
    with no_gc():  # once for all keys: turning it back on after each key costs a full collection
        try:
            if jobs == 1:
                for i in order:
                    results[i] = _run_key(i)[1]
                    if tracker is not None:
                        tracker.key_done(len(results), len(parts))
                    if results[i].valid is False and not all_keys:
                        break
            else:
                ctx = multiprocessing.get_context("fork")
                with ctx.Pool(jobs) as pool:
                    for i, res in pool.imap_unordered(_run_key, order):
                        results[i] = res
                        if tracker is not None:
                            tracker.key_done(len(results), len(parts))
                        if res.valid is False and not all_keys:
                            pool.terminate()
                            break
        finally:
            _JOB.clear()
    key_results = []
    for i, (key, key_ops) in enumerate(parts):
        res = results.get(i)
        if res is None:
            res = KeyResult(key, UNKNOWN, len(key_ops), 0, reason="not checked")
        key_results.append(res)
    valid = merge_validity(r.valid for r in key_results)
    details = {
        "model": model.name,
        "ops": len(ops),
        "keys": len(key_results),
        "invalid_keys": [r.key for r in key_results if r.valid is False],
        "unknown_keys": [r.key for r in key_results if r.valid == UNKNOWN],
        "elapsed": round(time.monotonic() - started, 4),
        "results": [r.to_json() for r in key_results],
    }
    return Verdict(CHECKER, valid, details)


_NOTICED: list[bool] = []


def _notice_if_pure_python(model: Model) -> None:
    """One line on stderr, once per process, when the model could use the compiled search but it
    is not built."""
    if _lincore is None and type(model).native is not Model.native and not _NOTICED:
        _NOTICED.append(True)
        print(NATIVE_MISSING, file=sys.stderr)


def native_available() -> bool:
    """Whether the compiled search is built (`kchaos doctor` reports it)."""
    return _lincore is not None


def default_jobs() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


# --- `kchaos check --checker linearizable` -------------------------------------------------------


def add_check_arguments(parser: Any) -> None:
    group = parser.add_argument_group("linearizable")
    group.add_argument("--model", default="register", help="sequential model: register, kv, ...")
    group.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        help=f"seconds before undecided keys are unknown (default {DEFAULT_TIMEOUT_S:g}; 0: no limit)",
    )
    group.add_argument(
        "--max-states",
        type=int,
        default=DEFAULT_MAX_STATES,
        help=f"memoised configurations per key before it is unknown (default {DEFAULT_MAX_STATES:,})",
    )
    group.add_argument("--jobs", type=int, default=None, help="keys checked in parallel (default: all cores)")
    group.add_argument(
        "--all-keys", action="store_true", help="decide every key instead of stopping at the first bad one"
    )
    group.add_argument("--ignore-f", action="append", help="leave out ops with this f (repeatable), e.g. read-broker")


def check_from_args(history: History, args: Any) -> Verdict:
    jobs = args.jobs if getattr(args, "jobs", None) else default_jobs()
    ignored = frozenset(getattr(args, "ignore_f", None) or ())
    if ignored:  # e.g. a workload's image reads, judged elsewhere at the level they promise
        ops = [op for op in history.ops if op.f not in ignored]
        history = History(ops=ops, nemesis=history.nemesis, source=history.source)
    timeout = getattr(args, "timeout", DEFAULT_TIMEOUT_S)
    return check(
        history,
        getattr(args, "model", "register"),
        timeout=timeout if timeout else None,  # 0 or None: no limit
        max_states=getattr(args, "max_states", DEFAULT_MAX_STATES),
        jobs=jobs,
        all_keys=getattr(args, "all_keys", False),
        tracker=getattr(args, "tracker", None),  # `kchaos check` shows its progress from it
    )


def summarize(verdict: Verdict) -> list[str]:
    """A few console lines: the verdict, key counts and, per bad key, where the search got stuck."""
    d = verdict.details
    results = d.get("results", [])
    counts = {True: 0, False: 0, UNKNOWN: 0}
    for r in results:
        if r.get("reason") != "not checked":
            counts[r["valid"]] += 1
    lines = [
        f"linearizable ({d.get('model')}): {_word(verdict.valid)} — {d.get('ops')} ops, {d.get('keys')} keys: "
        f"{counts[True]} valid, {counts[False]} invalid, {counts[UNKNOWN]} unknown ({d.get('elapsed')} s)"
    ]
    for r in results:
        if r["valid"] is True or r.get("reason") == "not checked":
            continue
        why = f" ({r['reason']})" if r.get("reason") else ""
        label = "(single key)" if r["key"] is None else repr(r["key"])
        lines.append(
            f"  key {label}: {_word(r['valid'])}{why}; longest partial linearization "
            f"{len(r['linearization'])} of {r['ops']} ops, state after it {r['final_state']}"
        )
        if r["valid"] == UNKNOWN and r.get("reason") in BUDGET_HINTS:
            lines.append(
                f"    searched {r.get('states', 0):,} configurations in {r.get('elapsed', 0):.1f} s; "
                f"{BUDGET_HINTS[r['reason']]}"
            )
            u = r.get("undecided")
            if u:
                lines.append(
                    f"    could not linearize the window of {u['window_ops']} ops from op {u['from_op']} to op "
                    f"{u['to_op']}; at this rate the key needs about {u['estimated_states']:,} configurations"
                )
        for s in r["stuck"][:3]:
            if s["legal"]:
                continue
            need = f" needs {s['needs']}" if s["needs"] else " cannot follow"
            lines.append(f"    op {s['id']} (process {s['process']}) {s['op']}:{need}")
            if s.get("why"):
                ops = ", ".join(str(i) for i in s.get("because", []))
                lines.append(f"      never possible: {s['why']}" + (f" (ops {ops})" if ops else ""))
    skipped = sum(1 for r in results if r.get("reason") == "not checked")
    if skipped:
        lines.append(f"  {skipped} keys not checked after the first invalid key (use --all-keys)")
    return lines


BUDGET_HINTS = {
    "timeout": "give it longer with --timeout SECONDS (0: no limit)",
    "state budget": "allow more with --max-states N (about 250 bytes each)",
}


def _word(valid: bool | str) -> str:
    return {True: "valid", False: "INVALID"}.get(valid, "unknown")  # type: ignore[call-overload]
