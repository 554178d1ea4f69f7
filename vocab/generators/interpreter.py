"""Driving a generator: the worker table every driver needs, and a deterministic virtual-time driver.

`WorkerPool` keeps Jepsen's worker/process bookkeeping (a worker continues under a fresh process id
after an `info`). `Loop` is the one driving loop of the protocol in `core`: it runs on a clock and
hands each op to a dispatcher. The runner's `harness.driver.Driver` puts it on a backend's scheduler
with real clients and a nemesis; `run_virtual` puts it on a `VirtualClock` with a deterministic
`execute` model, which turns (generator, seed) into the same history every time: how the combinators
are tested (against both drivers) and how a no-network dry run of a test's schedule can be printed.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from vocab.generators.combinators import prepare
from vocab.generators.core import EXHAUSTED, NEMESIS, PENDING, Context, Op, Process, Rng, Worker


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


class Clock(Protocol):
    """What `Loop` needs of a driver's time: `vocab.schedulers.Scheduler` is one, `VirtualClock` another."""

    def now(self) -> int: ...

    def call_at(self, t_ns: int, fn: Callable[..., None], *args: Any) -> None: ...

    def finish(self) -> None: ...


class Loop:
    """The driving core both drivers share (`run_virtual` and `harness.driver.Driver`): it asks the
    generator for ops, keeps the workers busy while an op is due or in flight, records invokes and
    completions, tells the generator each event, and ends the phase. What an op *does* is the
    driver's: `dispatch(op)` starts it, and the driver calls `complete` (then `pump`) when it ends.

    An op is due at `op.due(now)` (so a time of None means now); a `sleep` op keeps its worker busy
    for `op.value` ns and is not recorded. The phase ends when no worker is busy after a pump: the
    generator is exhausted, or pending with nothing that could change its mind (`stuck`)."""

    def __init__(
        self,
        clock: Clock,
        pool: WorkerPool,
        record: Callable[[dict], Any],
        dispatch: Callable[[Op], Any],
        on_end: Callable[[bool], Any] | None = None,
    ) -> None:
        self.clock = clock
        self.pool = pool
        self.record = record
        self.dispatch = dispatch
        self.on_end = on_end  # gets `stuck` when the phase ends by itself
        self.gen: Any = None
        self.busy = 0  # reserved workers
        self.exhausted = False
        self.finished = True
        self._pumping = False
        self._pump_again = False

    def start(self, gen: Any, seed: int) -> None:
        """Begin a phase with `gen` (seeded with `seed`); the clock's run then drives it."""
        self.gen = prepare(gen, seed)
        self.exhausted = False
        self.finished = False
        self.clock.call_at(self.clock.now(), self.pump)

    def pump(self) -> None:
        """Hand out every op the generator has for the free workers; end the phase when it is over."""
        if self.finished:
            return
        if self._pumping:  # called from inside a dispatch: hand out again once this pass is done
            self._pump_again = True
            return
        self._pumping = True
        try:
            while True:
                self._pump_again = False
                self._hand_out()
                if not self._pump_again:
                    break
        finally:
            self._pumping = False
        if self.busy == 0:  # exhausted, or pending with nothing that could change its mind: stuck
            self.finished = True
            if self.on_end is not None:
                self.on_end(not self.exhausted)
            self.clock.finish()

    def _hand_out(self) -> None:
        pool, clock = self.pool, self.clock
        while True:
            now = clock.now()
            step = self.gen.op(pool.context(now))
            if step is PENDING:
                return
            if step is EXHAUSTED:
                self.exhausted = True
                return
            op, self.gen = step
            worker = pool.worker_of(op.process)
            pool.reserve(worker)
            self.busy += 1
            at = op.due(now)
            if op.type == "sleep":
                clock.call_at(at + int(op.value), self._wake, worker)
            else:
                clock.call_at(at, self._invoke, op)

    def _wake(self, worker: Worker) -> None:
        self._release(worker)
        self.pump()

    def _release(self, worker: Worker) -> None:
        self.pool.release(worker)
        self.busy -= 1

    def _invoke(self, op: Op) -> None:
        now = self.clock.now()
        op = op.at(now)
        ctx = self.pool.context(now)
        self.record(event_of(op, "invoke", now, op.value))
        self.gen = self.gen.update(ctx, op)
        self.dispatch(op)
        self.pump()

    def complete(self, op: Op, type_: str, value: Any, node: str | None = None, error: Any = None) -> None:
        """Record how `op` ended and free its worker (under a fresh process after an `info`); the
        caller then calls `pump`."""
        now = self.clock.now()
        ctx = self.pool.context(now)
        self.record(event_of(op, type_, now, value, node, error))
        self.gen = self.gen.update(ctx, Op(op.f, value, op.process, type_, now, op.key))
        worker = self.pool.worker_of(op.process)
        if type_ == "info":
            self.pool.crash(worker)
        self._release(worker)


class VirtualClock:
    """Virtual time in ns for `run_virtual`: callbacks run in (time, scheduling order)."""

    def __init__(self) -> None:
        self.time = 0
        self._queue: list[tuple[int, int, Callable[..., None], tuple[Any, ...]]] = []
        self._order = 0
        self._finished = False

    def now(self) -> int:
        return self.time

    def call_at(self, t_ns: int, fn: Callable[..., None], *args: Any) -> None:
        heapq.heappush(self._queue, (max(t_ns, self.time), self._order, fn, args))
        self._order += 1

    def finish(self) -> None:
        self._finished = True

    def run(self, more: Callable[[], bool] = lambda: True) -> None:
        """Run callbacks until `finish()`, the queue runs dry, or `more()` says stop."""
        self._finished = False
        while not self._finished and self._queue and more():
            self.time, _, fn, args = heapq.heappop(self._queue)
            fn(*args)


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
    clock = VirtualClock()
    rng = Rng(seed ^ 0x5DEECE66D)
    history: list[dict] = []

    def record(event: dict) -> None:
        event = {"index": len(history), **event}
        history.append(event)
        if sink is not None:
            sink(event)

    def dispatch(op: Op) -> None:
        outcome = execute(op, rng)
        clock.call_at(clock.now() + max(0, outcome.latency), completed, op, outcome)

    def completed(op: Op, outcome: Outcome) -> None:
        loop.complete(op, outcome.type, outcome.value, outcome.node, outcome.error)
        loop.pump()

    loop = Loop(clock, WorkerPool(concurrency, with_nemesis), record, dispatch)
    loop.start(gen, seed)
    clock.run(lambda: len(history) < max_events)
    return history
