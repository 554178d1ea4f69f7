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
  op that needs it is pending is a dead end (the model's guard);
- with repeated values (register), equal ops are tried in one order and a state's value that no
  pending op can observe before a write overwrites it is forgotten (`checkers.register_search`).
Budgets (wall-clock deadline, number of memoised configurations) end a key's search with "unknown"
and the longest partial linearization found, never a hang.

A key whose quick first search does not show it valid gets the model's zone analysis
(`checkers.zones`), which proves the usual violations in O(n log n). For the register model the
search runs compiled (`checkers/_lincore.c`, the same walk step for step; this Python one is the
reference the tests compare it with).

The modules, after Porcupine's split (model / checker / visualization):
- `prepared`: the model side: a key's ops in search form, the step functions and cuts for them;
- `search`: the pure-Python search (named `Frame`s on an explicit stack, `Limits`, `Outcome`);
- `native`: the glue to the compiled search, and the notice when it is not built;
- `keys`: one key's verdict (quick search, zones, full search, explanation);
- `parallel`: keys in forked workers, the job handed over by fork rather than a module global;
- `report`: `KeyResult`, the longest partial linearization and stuck ops, the console summary;
- `memory`: the garbage collector paused around a check.
This module puts them together for a whole history (`check`). The `kchaos check` flags are in
`checkers.cli`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from typing import Any

from checkers.history import History, Op
from checkers.linearizable.keys import DEFAULT_MAX_STATES, check_key
from checkers.linearizable.memory import enable_gc, no_gc
from checkers.linearizable.native import NATIVE_OPS_PER_JOB, model_has_native, notice_if_pure_python
from checkers.linearizable.native import available as native_available
from checkers.linearizable.parallel import KeyJob, run_keys
from checkers.linearizable.prepared import INF, prepare
from checkers.linearizable.report import BUDGET_HINTS, KeyResult, summarize
from checkers.models import Model, get_model
from checkers.progress import Tracker
from checkers.verdict import UNKNOWN, Verdict, merge_validity

__all__ = [
    "BUDGET_HINTS",
    "CHECKER",
    "DEFAULT_MAX_STATES",
    "DEFAULT_TIMEOUT_S",
    "KeyResult",
    "check",
    "check_from_args",
    "check_key",
    "default_jobs",
    "enable_gc",
    "native_available",
    "no_gc",
    "prepare",
    "summarize",
]

CHECKER = "linearizable"
DEFAULT_TIMEOUT_S = 60.0  # `kchaos check` and a run's checking phase: undecided keys are unknown after this


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
    notice_if_pure_python(model)
    ops = history.ops if isinstance(history, History) else list(history)
    parts = list(model.partition(ops).items())
    deadline = started + timeout if timeout is not None else INF
    results: dict[int, KeyResult] = {}
    order = sorted(range(len(parts)), key=lambda i: -len(parts[i][1]))  # biggest first: balance
    if model_has_native(model):
        jobs = min(jobs, 1 + len(ops) // NATIVE_OPS_PER_JOB)  # a worker costs more than it saves
    jobs = max(1, min(jobs, len(parts)))
    if tracker is not None:
        tracker.key_done(0, len(parts))
    job = KeyJob(parts, model, deadline, max_states)
    with no_gc():  # once for all keys: turning it back on after each key costs a full collection
        decided = run_keys(job, order, jobs, tracker)
        try:
            for i, res in decided:
                results[i] = res
                if tracker is not None:
                    tracker.key_done(len(results), len(parts))
                if res.valid is False and not all_keys:
                    break
        finally:
            decided.close()  # stops the workers still deciding keys
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


def default_jobs() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


def check_from_args(history: History, args: Any) -> Verdict:
    """The registry's entry (`kchaos check --checker linearizable`; flags in `checkers.cli`)."""
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
