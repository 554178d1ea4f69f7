"""Zones: a fast decision for registers whose written values are unique (Gibbons & Korach).

When every value is written by at most one op (and nobody writes the initial nil), a value names its
writer, and the ops that observed it (ok reads of it, successful cas from it) form its *cluster*. In
any linearization a cluster occupies one stretch of time: from its writer's point to the point of the
write that replaces it, and two clusters' stretches never overlap. Each cluster has a *zone*:

- forward, when some op of it returns before another is invoked (min return < max invoke): the
  stretch must cover [min return, max invoke];
- backward otherwise: all its ops could share one point in [max invoke, min return].

Necessary conditions, each checked in O(n log n):
1. an observed value has a writer (or is the initial nil), and no observer returns before that writer
   is invoked; at most one successful cas consumes a value;
2. no two forward zones overlap;
3. no backward zone of a cluster that must exist (it has observers, or a determinate writer) lies
   strictly inside another cluster's forward zone.
A violation is a proof that the key is not linearizable. For histories of reads and writes only (no
cas at all) the conditions are also sufficient (Gibbons & Korach 1997; the zone form is from Golab,
Li & Shah 2011), so the key is decided without any search. With cas, a clean result decides nothing
and the general search runs (with the guard `RegisterModel.guard` derives from the same uniqueness).

Times follow Porcupine: A precedes B iff A returns strictly before B is invoked, so zones that only
touch at an end do not conflict. An indeterminate op returns at +infinity; the nil "writer" is a
virtual op at -infinity.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from checkers.history import Op

INF = float("inf")


@dataclass
class ZoneVerdict:
    """What the zone analysis found: `valid` True (decided), False (a proof), None (no conflict, but
    with cas in the history that decides nothing)."""

    valid: bool | None
    doomed: list[int] = field(default_factory=list)  # ops that cannot be linearized (search indices)
    because: list[int] = field(default_factory=list)  # ops that force it; info op j is len(ops) + j
    why: str = ""


@dataclass
class _Cluster:
    value: Any
    writer: int | None  # index into ops, or len(ops) + j for info op j; None: the nil's virtual writer
    observers: list[int]  # determinate op indices
    lo: float = 0.0  # forward: min return; backward: max invoke
    hi: float = 0.0  # forward: max invoke; backward: min return
    forward: bool = False
    first: int = -1  # the op returning at `lo` (forward) / at `hi` (backward)
    last: int = -1  # the op invoked at `hi` (forward) / at `lo` (backward)


def analyse(
    ops: list[Op],
    info: list[Op],
    parts: list[tuple[str, Any, Any]],
    iparts: list[tuple[str, Any, Any]],
    show: Callable[[Any], str] = repr,
) -> ZoneVerdict:
    """Zone analysis of one key's determinate `ops` and indeterminate `info` ops of a unique-value
    register; `parts`, `iparts` give each op's (f, a, b) as `RegisterModel._parts` does."""
    writer: dict[Any, int] = {}
    observers: dict[Any, list[int]] = {}
    consumer: dict[Any, int] = {}
    has_cas = False
    for i, (op, (f, a, b)) in enumerate(zip(ops, parts, strict=True)):
        if f == "read":
            observers.setdefault(a, []).append(i)
        elif f == "write":
            writer[a] = i
        else:
            has_cas = True
            if op.type == "ok":
                writer[b] = i
                if a in consumer:
                    return ZoneVerdict(
                        False, [i], [consumer[a]], f"two successful cas from {show(a)}: the first consumed it for good"
                    )
                consumer[a] = i
                observers.setdefault(a, []).append(i)
    n = len(ops)
    for j, (f, a, b) in enumerate(iparts):
        has_cas = has_cas or f == "cas"
        writer[a if f == "write" else b] = n + j
    invs = [op.invoke_time for op in ops] + [op.invoke_time for op in info]
    rets: list[float] = [op.complete_time for op in ops] + [INF] * len(info)  # type: ignore[misc]
    inv, ret = invs.__getitem__, rets.__getitem__

    clusters: list[_Cluster] = []
    for v, obs in observers.items():
        w = writer.get(v)
        if v is not None and w is None:
            return ZoneVerdict(False, [obs[0]], [], f"nobody writes {show(v)}")
        if w is not None:
            for x in obs:
                if ret(x) < inv(w):
                    return ZoneVerdict(False, [x], [w], f"it returned before the write of {show(v)} began")
        clusters.append(_Cluster(v, w, obs))
    for v, w in writer.items():
        if w < n and v not in observers:
            clusters.append(_Cluster(v, w, []))  # a determinate write nobody observed still happens
    for c in clusters:
        members = c.observers if c.writer is None else [c.writer, *c.observers]
        first = min(members, key=ret)
        last = max(members, key=inv)
        lo = -INF if c.writer is None else ret(first)  # nil: written at -infinity
        hi = inv(last)
        if c.writer is None and c.value is None:
            first = -1
        if lo < hi:
            c.lo, c.hi, c.forward, c.first, c.last = lo, hi, True, first, last
        else:
            c.lo, c.hi, c.forward, c.first, c.last = hi, lo, False, first, last
    fwd = sorted((c for c in clusters if c.forward), key=lambda c: c.lo)
    for prev, c in pairwise(fwd):  # sorted by start: any overlap shows between neighbours
        if c.lo < prev.hi:
            return ZoneVerdict(
                False,
                sorted((x for x in (prev.last, c.last) if x >= 0), key=inv, reverse=True),  # the later read first
                [x for x in (prev.first, c.first) if x >= 0],
                f"the values {show(prev.value)} and {show(c.value)} must each hold across overlapping spans "
                "(each was read after an op that observed the other had returned)",
            )
    starts = [c.lo for c in fwd]
    for c in clusters:
        if c.forward:
            continue
        k = bisect_left(starts, c.lo) - 1  # the forward zone starting last before this one
        if k >= 0 and c.hi < fwd[k].hi:
            outer = fwd[k]
            inside = c.first if c.first >= 0 else c.last
            return ZoneVerdict(
                False,
                [outer.last],
                [x for x in (inside, outer.first) if x >= 0],
                f"{show(outer.value)} must hold from op {_id(ops, info, outer.first)} to op "
                f"{_id(ops, info, outer.last)}, but {show(c.value)} is written (or seen) strictly in between",
            )
    return ZoneVerdict(None if has_cas else True)


def _id(ops: list[Op], info: list[Op], k: int) -> str:
    if k < 0:
        return "(initial nil)"
    return str(ops[k].id if k < len(ops) else info[k - len(ops)].id)
