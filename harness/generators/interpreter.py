"""Driving a generator: the worker table every driver needs, and a deterministic virtual-time driver.

`WorkerPool` keeps Jepsen's worker/process bookkeeping (a worker continues under a fresh process id
after an `info`). `run_virtual` is the reference driver of the protocol in `core`: with a
deterministic `execute` model it turns (generator, seed) into the same history every time, which is
how the combinators are tested and how a no-network dry run of a test's schedule can be printed.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness.generators.core import EXHAUSTED, NEMESIS, PENDING, Context, Op, Process, Rng, Worker, prepare


class WorkerPool:
    """Workers 0..concurrency-1 (clients) and optionally "nemesis"; which are free; their processes."""

    def __init__(self, concurrency: int, with_nemesis: bool = True) -> None:
        self.concurrency = concurrency
        self.processes: dict[Worker, Process] = {w: w for w in range(concurrency)}
        if with_nemesis:
            self.processes[NEMESIS] = NEMESIS
        self.free: set[Worker] = set(self.processes)
        self._ctx_workers: tuple[tuple[Worker, Process], ...] | None = None

    def context(self, now: int) -> Context:
        if self._ctx_workers is None:
            self._ctx_workers = Context.of(now, self.processes, ()).workers
        return Context(now, self._ctx_workers, frozenset(self.free))

    def worker_of(self, process: Process) -> Worker:
        if isinstance(process, int) and not isinstance(process, bool):
            return process % self.concurrency
        return process

    def reserve(self, worker: Worker) -> None:
        self.free.discard(worker)

    def release(self, worker: Worker) -> None:
        self.free.add(worker)

    def crash(self, worker: Worker) -> Process:
        """After an `info`: the worker's next process id (client workers only)."""
        if isinstance(worker, int):
            self.processes[worker] = self.processes[worker] + self.concurrency  # type: ignore[operator]
            self._ctx_workers = None
        return self.processes[worker]


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a (modelled) client or nemesis made of an op."""

    type: str  # ok | fail | info
    latency: int  # ns from invoke to completion
    value: Any = None
    node: str | None = None
    error: Any = None


Execute = Callable[[Op, Rng], Outcome]


def event_of(op: Op, type_: str, time: int, value: Any, node: str | None = None, error: Any = None) -> dict:
    """A history line (results/SCHEMA.md) without its index; optional fields only when set."""
    event: dict[str, Any] = {"time": time, "process": op.process, "type": type_, "f": op.f, "value": value}
    if op.key is not None:
        event["key"] = op.key
    if node is not None:
        event["node"] = node
    if error is not None:
        event["error"] = error
    return event


def run_virtual(
    gen: Any,
    execute: Execute,
    *,
    concurrency: int,
    seed: int,
    with_nemesis: bool = True,
    sink: Callable[[dict], Any] | None = None,
    max_events: int = 1_000_000,
) -> list[dict]:
    """Drive `gen` in virtual time (ns from 0); returns the history events (with `index`).

    `execute(op, rng)` models the system: it returns the op's outcome and latency, drawing any
    randomness from `rng` (one stream for the whole run, seeded from `seed`). `sink` also gets each
    event as it happens (e.g. a `HistoryWriter.write`). A generator still PENDING with nothing in
    flight is stuck: the run ends there.
    """
    gen = prepare(gen, seed)
    pool = WorkerPool(concurrency, with_nemesis)
    rng = Rng(seed ^ 0x5DEECE66D)
    queue: list[tuple[int, int, str, Any]] = []  # (time, tiebreak, action, payload)
    order = 0
    now = 0
    history: list[dict] = []

    def record(event: dict) -> None:
        event = {"index": len(history), **event}
        history.append(event)
        if sink is not None:
            sink(event)

    while len(history) < max_events:
        while True:  # hand out every op the generator has for the free workers
            step = gen.op(pool.context(now))
            if step is PENDING or step is EXHAUSTED:
                break
            op, gen = step
            worker = pool.worker_of(op.process)
            pool.reserve(worker)
            at = max(op.time, now)
            action = "wake" if op.type == "sleep" else "invoke"
            heapq.heappush(queue, (at + op.value if action == "wake" else at, order, action, op))
            order += 1
        if not queue:
            break
        now, _, action, payload = heapq.heappop(queue)
        if action == "wake":
            pool.release(pool.worker_of(payload.process))
        elif action == "invoke":
            op = payload.at(now)
            ctx = pool.context(now)
            record(event_of(op, "invoke", now, op.value))
            gen = gen.update(ctx, op)
            outcome = execute(op, rng)
            heapq.heappush(queue, (now + max(0, outcome.latency), order, "complete", (op, outcome)))
            order += 1
        else:
            op, outcome = payload
            ctx = pool.context(now)
            record(event_of(op, outcome.type, now, outcome.value, outcome.node, outcome.error))
            done = Op(op.f, outcome.value, op.process, outcome.type, now, op.key)
            gen = gen.update(ctx, done)
            worker = pool.worker_of(op.process)
            if outcome.type == "info":
                pool.crash(worker)
            pool.release(worker)
    return history
