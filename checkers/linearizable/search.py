"""The pure-Python search: Wing & Gong / Lowe just-in-time linearization, depth-first, memoised
(Porcupine's "checker" part). The compiled one (`native`) takes the same walk step for step; this
one is the reference the tests compare it with, and the search of every model without a compiled
form.

The pruning rules are in the package docstring. A configuration is (lo, dmask, imask, state): the
first determinate op not yet linearized, the linearized determinate ops above it as a bitmask
relative to `lo`, the linearized indeterminate ops as a bitmask, and the model state.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from checkers.linearizable.prepared import INF, Prepared, Tools
from checkers.models import ILLEGAL
from checkers.progress import Tracker
from checkers.register_search import info_shadowed, shadowed, urgent_first
from checkers.verdict import UNKNOWN

CHECK_EVERY = 1024  # nodes between budget checks

Path = tuple[int, Any] | None  # a linked list (op index, parent): the linearization so far, last first
Node = tuple[int, int, int, Any]  # (lo, dmask, imask, state)


@dataclass
class Outcome:
    valid: bool | str
    reason: str | None  # why unknown: "timeout" or "state budget"
    states: int  # memoised configurations
    path: Path  # the linearization found, or the longest partial one
    node: Node  # the configuration at the end of `path`


@dataclass(frozen=True, slots=True)
class Limits:
    """When a key's search gives up with "unknown", and whom it tells how far it got."""

    deadline: float  # time.monotonic()
    max_states: int
    tracker: Tracker | None = None  # `kchaos check`'s progress line (in-process searches only)


@dataclass(slots=True)
class Frame:
    """A configuration on the depth-first stack, with the children still to try."""

    children: list[tuple[int, Any]]  # (op index, state after it): determinate first, info ops later
    next: int  # index into children of the next one to try
    lo: int
    dmask: int
    imask: int
    state: Any
    path: Path
    depth: int
    minret: float  # the earliest completion among the candidates: info ops invoked later wait
    info_tried: bool  # the indeterminate ops were added to children (or are not worth trying)
    cands: list[int]  # the determinate candidates, earliest deadline first


def search(p: Prepared, t: Tools, limits: Limits) -> Outcome:
    """Depth-first just-in-time linearization of one key; see the package docstring for the cuts."""
    inv, ret, iinv = p.inv, p.ret, p.iinv
    fns, pure = t.fns, t.pure
    doomed, canon, guard, sym = t.doomed, t.canon, t.guard, t.sym
    forget = sym.forget if sym is not None else None
    needs = sym.needs if sym is not None else None
    deadline, max_states, tracker = limits.deadline, limits.max_states, limits.tracker
    n, ni = len(inv), len(iinv)
    seen: dict[tuple, Any] = {}
    stack: list[Frame] = []
    lo, dmask, imask, state, path, depth = 0, 0, 0, t.init, None, 0
    best_depth, best = -1, (None, (0, 0, 0, t.init))
    nodes = 0
    check_at = CHECK_EVERY
    # Locals for what the loops use per node (a local is cheaper to look up than a global or a method).
    clock, illegal, frame, push, lookup = time.monotonic, ILLEGAL, Frame, stack.append, seen.get
    while True:
        # Expand the current configuration.
        if lo == n:
            return Outcome(True, None, len(seen), path, (lo, dmask, imask, state))
        nodes += 1
        if nodes >= check_at:
            check_at += CHECK_EVERY
            if tracker is not None:
                tracker.states = len(seen)
            if clock() > deadline:
                return Outcome(UNKNOWN, "timeout", len(seen), best[0], best[1])
            if len(seen) > max_states:
                return Outcome(UNKNOWN, "state budget", len(seen), best[0], best[1])
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
            if ns is illegal:
                continue
            if pure[c]:  # an observer that is legal now: taking it first loses nothing
                children = [(c, ns)]
                forced = True
                break
            if guard is not None and ns != state and guard(state, lo, dmask, c):
                continue  # leaves a value that a pending op still needs, for good
            children.append((c, ns))
        if needs is not None and len(children) > 1:
            children = urgent_first(needs, children, cands[0], state)
        if children or not (forced or not ni):  # a frame with nothing left to try would pop at once
            push(frame(children, 0, lo, dmask, imask, state, path, depth, minret, forced or not ni, cands))
        # Move to the next unexplored child, backtracking as needed.
        while stack:
            fr = stack[-1]
            children = fr.children
            k = fr.next
            if k == len(children):
                if fr.info_tried:
                    stack.pop()
                    continue
                fr.info_tried = True  # determinate candidates exhausted: now try indeterminate ops
                if guard is None or not guard(fr.state, fr.lo, fr.dmask, -1):
                    children.extend(info_children(p, t, fr.cands, fr.imask, fr.state, fr.minret))
                continue
            fr.next = k + 1
            c, ns = children[k]
            nlo, ndm, nim = fr.lo, fr.dmask, fr.imask
            if c < n:
                ndm |= 1 << (c - nlo)
                while ndm & 1:
                    ndm >>= 1
                    nlo += 1
            else:
                nim |= 1 << (c - n)
            if canon is not None:
                ns = canon(ns, nlo, ndm)
            if forget is not None:
                ns = forget(ns, nlo, ndm)
            key = (nlo, ndm, ns)
            prev = lookup(key)
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
            path = (c, fr.path)
            depth = fr.depth + 1
            break
        else:
            return Outcome(False, None, len(seen), best[0], best[1])


def info_children(
    p: Prepared, t: Tools, cands: list[int], imask: int, state: Any, minret: float
) -> list[tuple[int, Any]]:
    """The indeterminate ops worth linearizing next, with the states they lead to.

    Info op j is only worth it if it changes what some next op y can do: y legal after j and either
    illegal before it or ending in another state. Otherwise any valid continuation "j, y, ..." can
    drop j (an info op may never happen) and is found through y directly.
    """
    fns, ifns, blind, iinv, n = t.fns, t.ifns, t.blind, p.iinv, len(p.inv)
    avail = [j for j in range(len(iinv)) if iinv[j] <= minret and not (imask >> j) & 1]
    nexts = [fns[y] for y in cands if not blind[y]] + [ifns[k] for k in avail if not blind[n + k]]
    sym = t.sym
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
