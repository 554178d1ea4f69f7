"""Generators of large transactional histories (list-append, rw-register) for the Elle benchmarks.

Transactions execute one at a time against an in-memory store, each at its own "linearization point";
every transaction's invoke/complete interval is drawn around its point, so the history is strictly
serializable by construction while ~`processes` transactions overlap. Keys rotate: a key retires after
`writes_per_key` writes and a fresh one takes its place, as Elle's generators do. Optionally a fraction
of reads is made stale (a strictly shorter prefix / an older value), which makes the history invalid.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass
class _Schedule:
    """Processes and times: a transaction runs on a free process, its interval around its point."""

    processes: int
    rng: random.Random
    free_at: list[int] = field(default_factory=list)
    ids: list[int] = field(default_factory=list)
    point: int = 0

    def __post_init__(self) -> None:
        self.free_at = [-1] * self.processes
        self.ids = list(range(self.processes))

    def slot(self) -> tuple[int, int, int, int]:
        """(thread, invoke time, point, complete time) for the next transaction."""
        thread = min(range(self.processes), key=self.free_at.__getitem__)
        self.point = max(self.point + 10, self.free_at[thread] + 1)
        spread = 8 * self.processes
        invoke = max(self.free_at[thread] + 1, self.point - self.rng.randint(0, spread))
        complete = self.point + self.rng.randint(0, spread)
        self.free_at[thread] = complete
        return thread, invoke, self.point, complete

    def crash(self, thread: int) -> None:
        """After an `info`, the thread carries on as a new logical process (Jepsen's convention)."""
        self.ids[thread] += self.processes


@dataclass
class _Keys:
    active: int
    writes_per_key: int
    rng: random.Random
    pool: list[int] = field(default_factory=list)
    writes: dict[int, int] = field(default_factory=dict)
    next_key: int = 0

    def __post_init__(self) -> None:
        for _ in range(self.active):
            self._fresh()

    def _fresh(self) -> None:
        self.pool.append(self.next_key)
        self.writes[self.next_key] = 0
        self.next_key += 1

    def pick(self) -> int:
        return self.rng.choice(self.pool)

    def wrote(self, key: int) -> int:
        """Counts a write; returns its 1-based number on that key (unique values) and rotates."""
        self.writes[key] += 1
        n = self.writes[key]
        if n >= self.writes_per_key and key in self.pool:
            self.pool.remove(key)
            self._fresh()
        return n


def transactional_events(
    workload: str,
    txns: int,
    processes: int = 10,
    active_keys: int = 10,
    writes_per_key: int = 32,
    max_mops: int = 4,
    info_rate: float = 0.005,
    fail_rate: float = 0.005,
    stale_rate: float = 0.0,
    seed: int = 0,
) -> Iterator[dict[str, Any]]:
    """History events (dicts, index order) for `workload` "list-append" or "rw-register"."""
    rng = random.Random(seed)
    schedule = _Schedule(processes, rng)
    keys = _Keys(active_keys, writes_per_key, rng)
    lists: dict[int, list[int]] = {}
    registers: dict[int, int | None] = {}
    events: list[tuple[int, int, dict[str, Any]]] = []
    write_f = "append" if workload == "list-append" else "w"
    for _ in range(txns):
        thread, invoke, _point, complete = schedule.slot()
        outcome = rng.random()
        kind = "fail" if outcome < fail_rate else "info" if outcome < fail_rate + info_rate else "ok"
        applied = kind == "ok" or (kind == "info" and rng.random() < 0.5)
        mops: list[list[Any]] = []
        undo: list[tuple[int, Any]] = []
        for _ in range(rng.randint(1, max_mops)):
            key = keys.pick()
            if rng.random() < 0.5:
                value = keys.wrote(key)
                mops.append([write_f, key, value])
                if workload == "list-append":
                    undo.append((key, list(lists.get(key, []))))
                    lists.setdefault(key, []).append(value)
                else:
                    undo.append((key, registers.get(key)))
                    registers[key] = value
            elif workload == "list-append":
                seen = list(lists.get(key, []))
                if seen and rng.random() < stale_rate:
                    seen = seen[: rng.randrange(len(seen))]
                mops.append(["r", key, seen])
            else:
                mops.append(["r", key, registers.get(key)])
        if not applied:  # a failed (or lost) transaction leaves no trace in the store
            for key, before in reversed(undo):
                if workload == "list-append":
                    lists[key] = before
                else:
                    registers[key] = before
        process = schedule.ids[thread]
        invocation = [[f, k, None if f == "r" else v] for f, k, v in mops]
        events.append((invoke, 0, {"process": process, "type": "invoke", "f": "txn", "value": invocation}))
        done = mops if kind == "ok" else invocation
        events.append((complete, 1, {"process": process, "type": kind, "f": "txn", "value": done}))
        if kind == "info":
            schedule.crash(thread)
    events.sort(key=lambda e: (e[0], e[1]))
    for index, (time, _, event) in enumerate(events):
        yield {"index": index, "time": time, **event}
