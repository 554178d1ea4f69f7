"""Synthetic config-register histories and run directories for the results-store tests.

`register_history` simulates clients of a correct per-key register: each op takes effect at one instant
inside its [invoke, complete] interval, so the history is linearizable by construction. `stale=True`
appends, on a fresh key, write a / write b / read a, strictly one after the other: a stale read no
linearization can explain.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from harness import store

MS = 1_000_000


def _event(t: int, process: Any, kind: str, f: str, value: Any, key: str | None = None) -> dict[str, Any]:
    ev: dict[str, Any] = {"time": t, "process": process, "type": kind, "f": f, "value": value}
    if key is not None:
        ev["key"] = key
    return ev


def register_history(
    seed: int = 1,
    processes: int = 3,
    ops_per_process: int = 20,
    keys: tuple[str, ...] = ("retention.ms", "cleanup.policy"),
    stale: bool = False,
    nemesis: list[tuple[int, str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """Events sorted by time with `index` set. `nemesis` is (time_ms, f, value) pairs: each becomes an
    invoke at that time and an `info` completion 1 ms later."""
    rng = random.Random(seed)
    ops = []  # (invoke, effect, complete, process, f, key, value, outcome)
    next_value = 0
    for proc in range(processes):
        t = rng.randrange(0, 5) * MS
        pid = proc
        for _ in range(ops_per_process):
            effect = t + rng.randrange(1, 20) * MS
            complete = effect + rng.randrange(1, 20) * MS
            f = rng.choice(("read", "write"))
            next_value += 1
            outcome = rng.choices(("ok", "fail", "info"), weights=(90, 5, 5))[0] if f == "write" else "ok"
            ops.append([t, effect, complete, pid, f, rng.choice(keys), next_value, outcome])
            if outcome == "info":
                pid += processes  # Jepsen: the worker goes on under a fresh process id
            t = complete + rng.randrange(0, 5) * MS
    state: dict[str, Any] = {}
    for op in sorted(ops, key=lambda o: o[1]):  # apply at the effect instant
        if op[4] == "write" and op[7] != "fail":
            state[op[5]] = op[6]
        elif op[4] == "read":
            op[6] = state.get(op[5])
    events = []
    for invoke, _, complete, pid, f, key, value, outcome in ops:
        events.append(_event(invoke, pid, "invoke", f, value if f == "write" else None, key))
        events.append(_event(complete, pid, outcome, f, value, key))
    end = max(e["time"] for e in events)
    if stale:
        base = max(processes * 3, 100)
        for i, (f, value) in enumerate((("write", "a"), ("write", "b"), ("read", "a"))):
            t = end + (10 * i + 1) * MS
            events.append(_event(t, base, "invoke", f, value if f == "write" else None, "stale.key"))
            events.append(_event(t + 5 * MS, base, "ok", f, value, "stale.key"))
    for t_ms, f, value in nemesis or []:
        events.append(_event(t_ms * MS, "nemesis", "invoke", f, value))
        events.append(_event(t_ms * MS + MS, "nemesis", "info", f, value))
    events.sort(key=lambda e: e["time"])
    for i, ev in enumerate(events):
        ev["index"] = i
    return events


def write_run(
    root: Path,
    events: list[dict[str, Any]],
    name: str = "config-register",
    workload: str = "config-register",
    torn_tail: str | None = None,
    **test: Any,
) -> store.RunDir:
    """A run directory in the store holding test.json and history.jsonl (plus a torn last line)."""
    run = store.create_run(name, root)
    store.write_test(run, {"workload": workload, "nemesis": ["partition"], "backend": "sim", **test})
    text = "".join(json.dumps(ev) + "\n" for ev in events)
    run.history_jsonl.write_text(text + (torn_tail or ""), encoding="utf-8")
    return run
