"""One key's verdict: the search with a small budget first, the model's zone analysis for a key it
has not shown valid, the full search after that, and an explanation of a key that is not valid."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from checkers.history import Op
from checkers.linearizable.memory import no_gc
from checkers.linearizable.native import available as native_available
from checkers.linearizable.native import native_search
from checkers.linearizable.prepared import INF, Prepared, Tools, make_tools, prepare
from checkers.linearizable.report import KeyResult, depth, explain, zone_counterexample
from checkers.linearizable.search import Limits, Outcome, search
from checkers.models import Model, NativeSpec
from checkers.progress import Tracker
from checkers.register_search import undecided_window
from checkers.verdict import UNKNOWN

DEFAULT_MAX_STATES = 12_000_000  # memoised configurations per key (~1 GB compiled); beyond that: unknown
PURE_PYTHON_MAX_STATES = 4_000_000  # the default for the pure-Python search (~250 bytes a configuration)
QUICK_STATES = 5_000  # the first search's state budget: easy keys need about one state per op
QUICK_STATES_PER_OP = 2
QUICK_SECONDS = 0.25  # and its time budget: a state of a hard key can cost a millisecond
EXPLAIN_SECONDS = 0.5  # extra search for a longer partial linearization of a bad key
EXPLAIN_STATES = 50_000


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
    tracker: Tracker | None = None,
) -> KeyResult:
    """Decide one key's sub-history: the model's zone analysis first if it has one (and `zones`),
    then the search. `prune=False` turns off every model cut; `native=False` runs the Python search even
    where the compiled one could (the reference of the tests). `tracker` hears the states searched."""
    with no_gc():
        return _KeyCheck(model, key, ops, prune, native, tracker).run(deadline, max_states, zones and prune)


class _KeyCheck:
    """One key being decided. The compiled search needs no step functions, so they are only made
    for a key that needs explaining (or when the Python search runs)."""

    def __init__(
        self, model: Model, key: Any, ops: Iterable[Op], prune: bool, use_native: bool, tracker: Tracker | None
    ) -> None:
        self.started = time.monotonic()
        self.model, self.key, self.prune, self.tracker = model, key, prune, tracker
        self.p: Prepared = prepare(model, ops)
        self.native: NativeSpec | None = (
            model.native(self.p.ops, self.p.info) if use_native and native_available() else None
        )
        self._tools: Tools | None = None

    @property
    def tools(self) -> Tools:
        if self._tools is None:
            self._tools = make_tools(self.model, self.p, self.prune)
        return self._tools

    def search(self, until: float, states: int) -> Outcome:
        limits = Limits(until, states, self.tracker)
        if self.native is not None:
            return native_search(self.p, self.native, self.prune, self.prune and self.native.unique, limits)
        return search(self.p, self.tools, limits)

    def run(self, deadline: float, max_states: int, zones: bool) -> KeyResult:
        """The search, first with a small state budget (most keys are decided there); a key it has
        not shown valid then gets the model's zone analysis, which may decide it (with a proof of
        why), and else the search again with the full budget."""
        model, p = self.model, self.p
        if self.native is None and max_states == DEFAULT_MAX_STATES:
            max_states = PURE_PYTHON_MAX_STATES  # the default, sized for the compiled memo
        zones = zones and type(model).zones is not Model.zones  # no zones to fall back on: no quick search
        quick = min(max_states, QUICK_STATES + QUICK_STATES_PER_OP * len(p.ops)) if zones else max_states
        soon = min(deadline, time.monotonic() + QUICK_SECONDS) if zones else deadline
        out = self.search(soon, quick)
        if zones and out.valid is not True:
            zv = model.zones(p.ops, p.info)
            if zv is not None and zv.valid is not None:
                if zv.valid is True and out.valid is False:  # impossible unless one of them is wrong
                    raise AssertionError("zone analysis said valid, the search proved the key invalid")
                result = KeyResult(self.key, zv.valid, len(p.ops) + len(p.info), len(p.info), method="zones")
                if not zv.valid:
                    zone_counterexample(model, p, zv, self.tools, out, result)
                result.elapsed = time.monotonic() - self.started
                return result
            if (out.reason == "state budget" and quick < max_states) or (out.reason == "timeout" and soon < deadline):
                out = self.search(deadline, max_states)
        result = KeyResult(
            key=self.key,
            valid=out.valid,
            ops=len(p.ops) + len(p.info),
            info_ops=len(p.info),
            states=out.states,
            reason=out.reason,
        )
        if out.valid is not True:
            t = self.tools
            if t.doomed is not None and out.valid is False:
                out = self._longer_partial(deadline, out)
            explain(model, p, t, out, result)
            if out.valid == UNKNOWN:
                at = {op.id: k for k, op in enumerate(p.ops)}
                reached = [at[i] for i in result.linearization if i in at] + [
                    at[s["id"]] for s in result.stuck if s["id"] in at
                ]
                result.undecided = undecided_window(p.ops, out.node[0], reached, out.states, len(result.linearization))
        result.elapsed = time.monotonic() - self.started
        return result

    def _longer_partial(self, deadline: float, out: Outcome) -> Outcome:
        """Pruning stops a doomed branch early, so its partial linearizations are short. A short,
        budgeted search without the pruner usually finds a longer one, which explains more."""
        limits = Limits(min(deadline, time.monotonic() + EXPLAIN_SECONDS), EXPLAIN_STATES, self.tracker)
        if self.native is not None:
            alt = native_search(self.p, self.native, False, False, limits)
        else:
            alt = search(self.p, self.tools.unpruned(), limits)
        if alt.valid is True:  # impossible unless the pruner is wrong; keep the proven verdict honest
            raise AssertionError("pruned search said invalid, unpruned search found a linearization")
        if depth(alt.path) > depth(out.path):
            return Outcome(out.valid, out.reason, out.states, alt.path, alt.node)
        return out
