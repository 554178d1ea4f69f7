"""The model side of the search: one key's ops in the form the search walks, and the per-op step
functions and cuts the model gives for them (Porcupine's "model" part).

Nothing here searches; `search` and `native` walk what this module prepares.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from operator import attrgetter
from typing import Any

from checkers.history import Op
from checkers.models import Canonicalizer, Guard, Model, Pruner
from checkers.register_search import Symmetry

INF = float("inf")


@dataclass
class Prepared:
    """One key's ops in search form: determinate ops by invoke time, then indeterminate ones."""

    ops: list[Op]  # determinate, sorted by invoke time
    inv: list[int]
    ret: list[int]
    info: list[Op]  # indeterminate, sorted by invoke time
    iinv: list[int]


_INVOKE_TIME = attrgetter("invoke_time")


def prepare(model: Model, ops: Iterable[Op]) -> Prepared:
    ops = ops if isinstance(ops, list) else list(ops)
    fast = model.split(ops)
    if fast is not None:
        return Prepared(*fast)
    det: list[Op] = []
    info: list[Op] = []
    for op in ops:
        if model.keep(op):
            (info if op.complete_time is None else det).append(op)
    det.sort(key=_INVOKE_TIME)
    info.sort(key=_INVOKE_TIME)
    return Prepared(
        ops=det,
        inv=[o.invoke_time for o in det],
        ret=[o.complete_time for o in det],  # type: ignore[misc]
        info=info,
        iinv=[o.invoke_time for o in info],
    )


@dataclass(frozen=True, slots=True)
class Tools:
    """What the Python search (and any explanation) needs of the model for one key: step functions
    (determinate, indeterminate), the initial state, which ops are observers and which are blind,
    and the model's cuts (None: that cut is off)."""

    fns: list
    ifns: list
    init: Any
    pure: list[bool]
    blind: list[bool]
    doomed: Pruner | None
    canon: Canonicalizer | None
    guard: Guard | None
    sym: Symmetry | None = None  # repeated-value registers: interchangeable ops tried in one order

    def unpruned(self) -> Tools:
        """The same without the pruner, the guard and the symmetry cut (the canonicalizer only merges
        equal states)."""
        return replace(self, doomed=None, guard=None, sym=None)


def make_tools(model: Model, p: Prepared, prune: bool) -> Tools:
    fns = [model.compile(op) for op in p.ops]
    ifns = [model.compile(op) for op in p.info]
    pure = [model.observer(op) for op in p.ops]
    blind = [model.blind(op) for op in p.ops] + [model.blind(op) for op in p.info]
    return Tools(
        fns,
        ifns,
        model.init(),
        pure,
        blind,
        model.pruner(p.ops, p.info) if prune else None,
        model.canonicalizer(p.ops, p.info) if prune else None,
        model.guard(p.ops, p.info) if prune else None,
        model.symmetry(p.ops, p.info) if prune else None,
    )


def candidates(p: Prepared, lo: int, dmask: int) -> tuple[list[int], float]:
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
