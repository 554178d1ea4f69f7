"""The clocks a run is driven by: the simulator's event queue (virtual time) or an asyncio loop (real time).

The runner is written once against `Scheduler`: it asks for the time, schedules callbacks at a time,
hands blocking work (a nemesis shelling out to iptables) to `blocking`, and says when it is `finish`ed.
Times are integer nanoseconds since the run started (history times, results/SCHEMA.md).

- `VirtualScheduler` runs on a `Simulation`'s queue. The queue counts milliseconds, so a callback due
  at t ns runs at the first millisecond >= t; blocking work runs inline (nothing blocks in a
  simulation). Everything happens in one thread in a fixed order: same seed, same history.
- `RealtimeScheduler` runs on an asyncio loop of its own in the caller's thread; blocking work goes
  to a small thread pool and its result comes back on the loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Coroutine
from typing import Any

NS_PER_MS = 1_000_000
NS_PER_S = 1_000_000_000

Done = Callable[[Any, BaseException | None], None]  # (result, exception)


class Scheduler(ABC):
    """Time and callbacks for one run phase (see the module docstring)."""

    virtual: bool = False

    @abstractmethod
    def now(self) -> int:
        """ns since `reset` (the run's start)."""

    @abstractmethod
    def reset(self) -> None:
        """Make now the run's time zero."""

    @abstractmethod
    def call_at(self, t_ns: int, fn: Callable[..., None], *args: Any) -> None:
        """Run `fn(*args)` at run time `t_ns` (at once if that has passed)."""

    @abstractmethod
    def blocking(self, fn: Callable[[], Any], done: Done) -> None:
        """Run `fn()` (which may block), then `done(result, exception)` on the scheduler."""

    @abstractmethod
    def run(self) -> None:
        """Drive callbacks until `finish()` is called (or nothing can happen any more)."""

    @abstractmethod
    def finish(self) -> None:
        """End the current `run()`."""

    def close(self) -> None:  # noqa: B027 - optional
        """Release what the scheduler holds."""


class VirtualScheduler(Scheduler):
    """The simulator's queue (see the module docstring). `run` stops early when the simulation does
    (an invariant violated): `stopped_by_simulation` then says so."""

    virtual = True

    def __init__(self, sim: Any) -> None:
        self.sim = sim
        self._t0_ms = sim.now
        self._finished = False
        self.stopped_by_simulation = False

    def now(self) -> int:
        return (self.sim.now - self._t0_ms) * NS_PER_MS

    def reset(self) -> None:
        self._t0_ms = self.sim.now

    def call_at(self, t_ns: int, fn: Callable[..., None], *args: Any) -> None:
        self.sim.queue.schedule(self._t0_ms + math.ceil(t_ns / NS_PER_MS), fn, *args)

    def blocking(self, fn: Callable[[], Any], done: Done) -> None:
        try:
            result, error = fn(), None
        except Exception as exc:  # the caller turns it into an outcome
            result, error = None, exc
        self.sim.queue.after(0, done, result, error)

    def run(self) -> None:
        self._finished = False
        while not self._finished:
            if not self.sim.step():
                self.stopped_by_simulation = True
                return

    def finish(self) -> None:
        self._finished = True

    def run_until(self, predicate: Callable[[], bool], timeout_s: float) -> bool:
        """Advance the simulation until `predicate()` (polled every 100 ms of virtual time)."""
        return bool(self.sim.run_until_true(predicate, int(timeout_s * 1000), poll_ms=100))


class RealtimeScheduler(Scheduler):
    """An asyncio loop owned by this scheduler, in the calling thread (see the module docstring)."""

    def __init__(self, workers: int = 4) -> None:
        self.loop = asyncio.new_event_loop()
        self._t0 = self.loop.time()
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kchaos-blocking")
        self._done: asyncio.Future[None] | None = None

    def now(self) -> int:
        return int((self.loop.time() - self._t0) * NS_PER_S)

    def reset(self) -> None:
        self._t0 = self.loop.time()

    def call_at(self, t_ns: int, fn: Callable[..., None], *args: Any) -> None:
        self.loop.call_at(self._t0 + t_ns / NS_PER_S, self._guarded, fn, args)

    def blocking(self, fn: Callable[[], Any], done: Done) -> None:
        future = self.loop.run_in_executor(self._pool, fn)

        def finished(f: asyncio.Future[Any]) -> None:
            exc = f.exception()
            self._guarded(done, (None if exc else f.result(), exc))

        future.add_done_callback(finished)

    def _guarded(self, fn: Callable[..., None], args: tuple[Any, ...]) -> None:
        """asyncio only logs what a callback raises and goes on: a generator or driver bug would leave
        `run` waiting forever with nothing scheduled. End `run` with the exception instead, as the
        virtual scheduler does (there it propagates out of the simulation)."""
        try:
            fn(*args)
        except Exception as exc:
            if self._done is None or self._done.done():
                raise
            self._done.set_exception(exc)

    def run(self) -> None:
        self._done = self.loop.create_future()
        try:
            self.loop.run_until_complete(self._done)
        finally:
            self._done = None

    def finish(self) -> None:
        if self._done is not None and not self._done.done():
            self._done.set_result(None)

    def run_coroutine(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """Run a coroutine to completion on this loop (setup and teardown steps outside `run`)."""
        return self.loop.run_until_complete(coro)

    def close(self) -> None:
        if self.loop.is_closed():
            return
        pending = [t for t in asyncio.all_tasks(self.loop) if not t.done()]
        for task in pending:
            task.cancel()
        if pending:
            self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        self.loop.close()
        self._pool.shutdown(wait=False, cancel_futures=True)
