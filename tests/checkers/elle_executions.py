"""Histories of known-valid executions for the Elle-style checkers' no-false-alarm tests.

A small in-memory database runs random list-append / rw-register transactions over a few keys on a
few threads, under one of four concurrency controls, each of which yields histories that satisfy a
known set of consistency models:

- `serial`: each transaction runs atomically at one point inside its invoke..complete interval
  (strict serializable);
- `serializable`: the same serial execution, but transactions are dealt to the intervals at random,
  so real-time order says nothing (serializable, not strict);
- `snapshot`: reads see the state committed at the transaction's start, writes install at its commit,
  first committer wins (strong snapshot isolation);
- `read-committed`: each read sees the latest committed state when it runs, writes install at commit
  (strong read committed: non-repeatable reads, lost updates and read skew happen); a key's writer
  holds it until commit, and a second writer gives up (no dirty writes).

`info` transactions take effect or not at random, at any time after their invocation (possibly after
their completion); `fail` ones never take effect. Reads are reported only by `ok` transactions.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

CONTROLS = ("serial", "serializable", "snapshot", "read-committed")


@dataclass
class _Txn:
    thread: int
    process: int
    invoke: int
    complete: int
    outcome: str  # ok | info | fail
    steps: list[tuple[str, Any]]  # (write | r, key)
    mops: list[list[Any]] = field(default_factory=list)


class _Store:
    """Committed state: key -> list (list-append) or value (rw-register), plus the commit time of
    each key's latest version (snapshot isolation's first-committer-wins rule)."""

    def __init__(self, workload: str) -> None:
        self.append = workload == "list-append"
        self.data: dict[Any, Any] = {}
        self.committed_at: dict[Any, int] = {}

    def read(self, k: Any) -> Any:
        v = self.data.get(k)
        return list(v or []) if self.append else v

    def apply(self, writes: list[tuple[Any, Any]], now: int) -> None:
        for k, v in writes:
            if self.append:
                self.data.setdefault(k, []).append(v)
            else:
                self.data[k] = v
            self.committed_at[k] = now

    def snapshot(self) -> dict[Any, Any]:
        return {k: list(v) if self.append else v for k, v in self.data.items()}


def _schedule(rng: random.Random, count: int, threads: int, keys: int, max_mops: int) -> list[_Txn]:
    """Threads issue transactions back to back with random gaps and durations (overlapping in time)."""
    free = [0] * threads
    process = list(range(threads))
    txns = []
    for _ in range(count):
        thread = rng.randrange(threads)
        invoke = free[thread] + rng.randint(1, 30)
        complete = invoke + rng.randint(1, 60)
        free[thread] = complete
        roll = rng.random()
        outcome = "fail" if roll < 0.06 else "info" if roll < 0.12 else "ok"
        steps = [(rng.choice(("write", "r")), f"k{rng.randrange(keys)}") for _ in range(rng.randint(1, max_mops))]
        txns.append(_Txn(thread, process[thread], invoke, complete, outcome, steps))
        if outcome == "info":
            process[thread] += threads  # Jepsen: the thread carries on as a new process
    return txns


def _effect_time(rng: random.Random, t: _Txn) -> int:
    """When a transaction's effects land: inside its interval if ok, any time after invoke if info."""
    if t.outcome == "ok":
        return rng.randint(t.invoke, t.complete)
    return t.invoke + rng.randint(0, 200)


def execute(control: str, workload: str, seed: int, count: int = 30) -> list[dict[str, Any]]:
    """History events of one execution."""
    rng = random.Random(seed)
    txns = _schedule(rng, count, threads=rng.randint(2, 5), keys=rng.randint(1, 4), max_mops=4)
    store = _Store(workload)
    write_f = "append" if workload == "list-append" else "w"
    counter: dict[Any, int] = {}

    def fresh(k: Any) -> int:
        counter[k] = counter.get(k, 0) + 1
        return counter[k]

    if control in ("serial", "serializable"):
        for t in sorted(txns, key=lambda t: _effect_time(rng, t)):
            writes: list[tuple[Any, Any]] = []
            local = store.snapshot()
            for f, k in t.steps:
                if f == "write":
                    v = fresh(k)
                    t.mops.append([write_f, k, v])
                    writes.append((k, v))
                    _local_write(local, k, v, store.append)
                else:
                    t.mops.append(["r", k, _local_read(local, k, store.append)])
            if t.outcome == "ok" or (t.outcome == "info" and rng.random() < 0.5):
                store.apply(writes, 0)
        if control == "serializable":
            _deal_to_random_intervals(rng, txns)
    else:
        _run_concurrently(control, rng, txns, store, write_f, fresh)
    return _events(txns)


def _local_read(local: dict[Any, Any], k: Any, append: bool) -> Any:
    v = local.get(k)
    return list(v or []) if append else v


def _local_write(local: dict[Any, Any], k: Any, v: Any, append: bool) -> None:
    if append:
        local.setdefault(k, []).append(v)
    else:
        local[k] = v


def _deal_to_random_intervals(rng: random.Random, txns: list[_Txn]) -> None:
    """Shuffle which transaction ran in which interval (threads keep their own intervals)."""
    movable = [t for t in txns if t.outcome != "info"]  # process ids were allocated around infos
    contents = [(t.outcome, t.steps, t.mops) for t in movable]
    rng.shuffle(contents)
    for t, (outcome, steps, mops) in zip(movable, contents, strict=True):
        t.outcome, t.steps, t.mops = outcome, steps, mops


def _run_concurrently(control: str, rng: random.Random, txns: list[_Txn], store: _Store, write_f: str, fresh) -> None:
    """Snapshot isolation or read committed, as a timeline of begin / read / commit actions."""
    actions: list[tuple[int, int, int, int]] = []  # (time, order, txn, step index or -1 for commit)
    for i, t in enumerate(txns):
        commit = _effect_time(rng, t)
        start = rng.randint(t.invoke, min(commit, t.complete))
        actions.append((start, 0, i, -2))  # begin: take the snapshot
        times = sorted(rng.randint(start, commit) for _ in t.steps)
        for j, when in enumerate(times):
            actions.append((when, 1, i, j))
        actions.append((commit, 2, i, -1))
    actions.sort()
    snapshot: dict[int, dict[Any, Any]] = {}
    began: dict[int, int] = {}
    local: dict[int, dict[Any, Any]] = {}  # own writes so far
    writes: dict[int, list[tuple[Any, Any]]] = {}
    locks: dict[Any, int] = {}  # read committed: a key's writer holds it until it commits (no G0)
    aborted: set[int] = set()
    for when, _, i, j in actions:
        t = txns[i]
        if j == -2:
            snapshot[i], began[i], local[i], writes[i] = store.snapshot(), when, {}, []
        elif j >= 0:
            f, k = t.steps[j]
            if f == "write":
                v = fresh(k)
                t.mops.append([write_f, k, v])
                if control == "read-committed" and locks.setdefault(k, i) != i:
                    aborted.add(i)  # no-wait locking: the second writer of a key gives up
                writes[i].append((k, v))
                local[i].setdefault(k, []).append(v)
            else:
                base = snapshot[i] if control == "snapshot" else store.snapshot()
                seen = _local_read(base, k, store.append)
                own = local[i].get(k, [])
                if store.append:
                    seen = seen + own
                elif own:
                    seen = own[-1]
                t.mops.append(["r", k, seen])
        else:
            conflict = i in aborted or (
                control == "snapshot" and any(store.committed_at.get(k, -1) >= began[i] for k, _ in writes[i])
            )
            for k in [k for k, holder in locks.items() if holder == i]:
                del locks[k]
            if conflict:
                t.outcome = "fail" if t.outcome == "ok" else t.outcome
            if t.outcome == "ok" or (t.outcome == "info" and not conflict and rng.random() < 0.5):
                store.apply(writes[i], when)


def _events(txns: list[_Txn]) -> list[dict[str, Any]]:
    timed: list[tuple[int, int, dict[str, Any]]] = []
    for t in txns:
        invocation = [[f, k, None if f == "r" else v] for f, k, v in t.mops]
        timed.append((t.invoke, 0, {"process": t.process, "type": "invoke", "f": "txn", "value": invocation}))
        done = t.mops if t.outcome == "ok" else invocation
        timed.append((t.complete, 1, {"process": t.process, "type": t.outcome, "f": "txn", "value": done}))
    timed.sort(key=lambda e: (e[0], e[1]))
    return [{"time": time, **event} for time, _, event in timed]
