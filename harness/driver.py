"""Drives a generator against clients and a nemesis on a `Scheduler`: the heart of a run's run phase.

One code path for both backends: the scheduler is the simulator's queue (virtual time) or an asyncio
loop (real time); clients and the nemesis are `Handler`s that complete ops by callback. The loop
itself (asking the generator, reserving workers, recording, ending the phase) is
`vocab.generators.interpreter.Loop`, the same one `run_virtual` drives the combinator tests with;
this module adds the handlers, timeouts and faults nobody asked for. Semantics (Jepsen's, BRIEF §3.3):

- `concurrency` client workers plus the nemesis worker. A worker busy with an op gets no other op.
- An op due in the future keeps its worker reserved until then; `sleep` ops are not recorded.
- Every invoke and completion is recorded (the `sink`, e.g. `HistoryWriter.write`, flushes each line)
  and passed to the generator's `update`.
- A client op that does not complete within `op_timeout_ns` is recorded `info` (a late completion is
  ignored); after an `info` the worker continues under a fresh process id. A handler that raises is
  an `info` too: the harness cannot know whether the op took effect.
- The phase ends when the generator is exhausted and every worker is idle, or when it is stuck
  (nothing in flight, nothing due, and the generator still pending).
- Faults that no op asked for (the simulator's targeted faults) enter the history through
  `record_external` as nemesis invoke + completion pairs; while a nemesis op is in flight they wait
  for its completion, so a nemesis invoke is always followed by its own completion.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from vocab.generators import NEMESIS, Op, WorkerPool
from vocab.generators.interpreter import Loop, event_of
from vocab.invocation import Completion, Handler, error_text
from vocab.schedulers import Scheduler

Sink = Callable[[dict[str, Any]], Any]


@dataclass
class DriverStats:
    invoked: int = 0
    completed: dict[str, int] = field(default_factory=lambda: {"ok": 0, "fail": 0, "info": 0})
    timed_out: int = 0
    stuck: bool = False


class Driver:
    """One generator, run to its end (see the module docstring). Reusable across phases: `run` may be
    called again with the next phase's generator; process ids carry on."""

    def __init__(
        self,
        scheduler: Scheduler,
        client: Handler,
        nemesis: Handler | None,
        *,
        concurrency: int,
        sink: Sink,
        op_timeout_s: float = 30.0,
        on_event: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.scheduler = scheduler
        self.client = client
        self.nemesis = nemesis
        self.pool = WorkerPool(concurrency, with_nemesis=nemesis is not None)
        self.sink = sink
        self.op_timeout_ns = int(op_timeout_s * 1e9)
        self.on_event = on_event
        self.stats = DriverStats()
        self.loop = Loop(scheduler, self.pool, self._record, self._dispatch, on_end=self._ended)
        self._pending: dict[int, Op] = {}  # token -> invoked op
        self._next_token = 0
        self._nemesis_busy = False
        self._external: list[tuple[str, Any]] = []  # (f, value) waiting for the nemesis op to complete

    # --- running ---------------------------------------------------------------------------------

    def run(self, gen: Any, seed: int) -> DriverStats:
        """Run `gen` (seeded with `seed`) until it ends; returns the cumulative stats."""
        self.loop.start(gen, seed)
        self.scheduler.run()
        self.loop.finished = True
        return self.stats

    def _ended(self, stuck: bool) -> None:
        self.stats.stuck = stuck

    # --- ops -------------------------------------------------------------------------------------

    def _record(self, event: dict[str, Any]) -> None:
        self.sink(event)
        if self.on_event is not None:
            self.on_event(event)

    def _dispatch(self, op: Op) -> None:
        """Start an invoked op: the nemesis's on the nemesis, a client's on the client with a timeout."""
        now = self.scheduler.now()
        self.stats.invoked += 1
        token = self._next_token
        self._next_token += 1
        self._pending[token] = op
        is_nemesis = op.process == NEMESIS
        if is_nemesis:
            self._nemesis_busy = True
        handler = self.nemesis if is_nemesis else self.client
        if not is_nemesis:
            self.scheduler.call_at(now + self.op_timeout_ns, self._timed_out, token)
        try:
            handler.invoke(op, lambda completion, token=token: self._complete(token, completion))  # type: ignore[union-attr]
        except Exception as exc:  # an op whose fate we cannot know
            self._complete(token, Completion("info", error=error_text(exc)))

    def _timed_out(self, token: int) -> None:
        if token in self._pending:
            self.stats.timed_out += 1
            self._complete(token, Completion("info", error="timeout: no completion from the client"))

    def _complete(self, token: int, completion: Completion) -> None:
        op = self._pending.pop(token, None)
        if op is None:
            return  # completed already (a late answer after the harness's own timeout)
        kind = completion.type if completion.type in ("ok", "fail", "info") else "info"
        value = completion.value if kind == "ok" or op.process == NEMESIS else _failed_value(op, completion)
        self.loop.complete(op, kind, value, completion.node, completion.error)
        self.stats.completed[kind] += 1
        if op.process == NEMESIS:
            self._nemesis_busy = False
            self._flush_external()
        self.loop.pump()

    # --- faults nobody asked for -------------------------------------------------------------------

    def record_external(self, f: str, value: Any) -> None:
        """Record a fault that happened by itself (e.g. `start-buggify`) as a nemesis invoke and its
        `info` completion, now or right after the nemesis op in flight completes. The generator is
        not told: these are not its ops."""
        self._external.append((f, value))
        if not self._nemesis_busy:
            self._flush_external()

    def _flush_external(self) -> None:
        while self._external:
            f, value = self._external.pop(0)
            now = self.scheduler.now()
            op = Op(f, None, NEMESIS, "invoke", now)
            self._record(event_of(op, "invoke", now, None))
            self._record(event_of(op, "info", now, value))


def _failed_value(op: Op, completion: Completion) -> Any:
    """A fail/info completion carries the invoke's value unless the handler said otherwise."""
    return op.value if completion.value is None else completion.value
