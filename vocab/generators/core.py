"""The generator protocol: ops, contexts, the pure random stream and the `Gen` base class.

A generator is an immutable value. The driver (runner or `interpreter.run_virtual`) asks it for the
next operation and, when it dispatches that operation, replaces the generator with the one returned:

    step = gen.op(ctx)       -> (op, next_gen)  an op to dispatch; the driver adopts next_gen
                             -> PENDING         nothing now; ask again after the next event
                             -> EXHAUSTED       nothing more (final once no op is in flight; while
                                                one is, the driver may simply ask again later)
    gen = gen.update(ctx, event)                every recorded event (invokes and completions)

Rules the driver follows:
1. `op` is a pure query: asking twice with the same context gives the same answer and changes
   nothing. Combinators rely on this (`any_of` asks every branch, takes the soonest op and keeps the
   other branches as they were).
2. A returned op is *committed*: its worker is busy from then on. `op.time` (ns since run start) may
   lie in the future; the driver invokes the op at that time (a real driver: no earlier than that).
   An op of type `"sleep"` is not recorded: its worker just stays busy for `op.value` ns.
3. `update(ctx, event)` gets each event the driver records, with the context as it was *before* the
   event changed the workers (so `event.process` is still in `ctx.workers`). It returns the new
   generator; most combinators pass events to their children, only reactive ones (the nemesis
   schedule) use them.
4. After an `info` completion the worker continues under a fresh process id (Jepsen semantics); the
   nemesis worker is `"nemesis"` and keeps its process.

Randomness is part of the generator's value (an integer state of a SplitMix64 stream, assigned to
every node of the tree by `prepare(gen, seed)`), never a shared mutable RNG: so the ops are a pure
function of the seed and the sequence of contexts and events, whatever the driver's polling pattern.
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

Worker: TypeAlias = int | str
Process: TypeAlias = int | str

NEMESIS = "nemesis"  # the nemesis's worker and process id
NS_PER_S = 1_000_000_000
NS_PER_MS = 1_000_000


def seconds(value: float) -> int:
    """Seconds (as combinators take them) to integer nanoseconds (as times are kept)."""
    return round(value * NS_PER_S)


@dataclass(frozen=True, slots=True)
class Op:
    """One operation: a template (process/time unset) inside a generator, or an emitted op."""

    f: str
    value: Any = None
    process: Process | None = None
    type: str = "invoke"
    time: int | None = None  # ns since run start; in a template: "not before", None = "now"
    key: Any = None

    def due(self, now: int) -> int:
        """When this op is to happen, asked at `now`: its own time if later, else now (None = now).
        The one reading of `time` that templates and both drivers share."""
        time = self.time
        return now if time is None or time < now else time

    def bind(self, process: Process, now: int) -> Op:
        """This template as an emitted op: given its process, due at `self.due(now)`."""
        return Op(self.f, self.value, process, self.type, self.due(now), self.key)

    def at(self, time: int) -> Op:
        return Op(self.f, self.value, self.process, self.type, time, self.key)


class _Sentinel:
    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name


PENDING: Any = _Sentinel("PENDING")
EXHAUSTED: Any = _Sentinel("EXHAUSTED")

Step: TypeAlias = "tuple[Op, Gen] | Any"  # (op, next generator) | PENDING | EXHAUSTED


def _worker_order(worker: Worker) -> tuple[int, Any]:
    """Client workers (ints) first, in order, then named ones such as the nemesis."""
    return (0, worker) if isinstance(worker, int) else (1, str(worker))


class Workers(tuple[tuple[Worker, Process], ...]):
    """(worker, current process) pairs in worker order, with the views routing asks of them.

    Drivers hand the same `Workers` to every context until a process changes, and routing
    combinators ask the same questions of it on every query; so each view is computed once and kept
    on the tuple it was computed from (it goes when the tuple goes)."""

    _by_process: dict[Process, Worker]
    _restricted: dict[Callable[[Worker], bool], Workers]

    def by_process(self) -> dict[Process, Worker]:
        try:
            return self._by_process
        except AttributeError:
            self._by_process = {process: worker for worker, process in self}
            return self._by_process

    def restricted(self, keep: Callable[[Worker], bool]) -> Workers:
        """The pairs whose worker `keep` accepts."""
        try:
            views = self._restricted
        except AttributeError:
            views = self._restricted = {}
        found = views.get(keep)
        if found is None:
            found = views[keep] = Workers(wp for wp in self if keep(wp[0]))
        return found


def _views(workers: tuple[tuple[Worker, Process], ...]) -> Workers:
    return workers if type(workers) is Workers else Workers(workers)


@dataclass(frozen=True, slots=True)
class Context:
    """What a generator may look at: the time and which workers (and their processes) are free."""

    time: int
    workers: Workers  # (worker, current process), in worker order (a plain tuple works, uncached)
    free: frozenset[Worker]

    @staticmethod
    def of(time: int, workers: dict[Worker, Process], free: Iterable[Worker]) -> Context:
        ordered = Workers(sorted(workers.items(), key=lambda wp: _worker_order(wp[0])))
        return Context(time, ordered, frozenset(free))

    def first_free(self) -> tuple[Worker, Process] | None:
        """The first free worker (lowest client id, then the nemesis): deterministic process choice."""
        for worker, process in self.workers:
            if worker in self.free:
                return worker, process
        return None

    def all_free(self) -> bool:
        return all(worker in self.free for worker, _ in self.workers)

    def restrict(self, keep: Callable[[Worker], bool]) -> Context:
        return Context(self.time, _views(self.workers).restricted(keep), self.free)

    def only(self, worker: Worker, process: Process) -> Context:
        return Context(self.time, Workers(((worker, process),)), self.free)

    def worker_of(self, process: Process) -> Worker | None:
        return _views(self.workers).by_process().get(process)


# --- the pure random stream ----------------------------------------------------------------------

_MASK = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15


def _mix64(z: int) -> int:
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


def split(state: int, k: int | str) -> int:
    """An independent stream for child `k` of the node whose stream is `state`."""
    if isinstance(k, str):
        k = zlib.crc32(k.encode()) | (1 << 40)  # never equal to a small int child index
    return _mix64((state ^ _mix64((k * _GOLDEN + 1) & _MASK)) & _MASK)


class Rng:
    """A cursor over a SplitMix64 stream: read `state` afterwards and store it in the next generator."""

    __slots__ = ("state",)

    def __init__(self, state: int) -> None:
        self.state = state

    def next64(self) -> int:
        self.state = (self.state + _GOLDEN) & _MASK
        return _mix64(self.state)

    def random(self) -> float:
        """Uniform in [0, 1)."""
        return (self.next64() >> 11) * (1.0 / (1 << 53))

    def below(self, n: int) -> int:
        """Uniform in [0, n)."""
        return (self.next64() * n) >> 64

    def randint(self, a: int, b: int) -> int:
        """Uniform in [a, b], both included (like random.randint)."""
        return a + self.below(b - a + 1)

    def choice(self, seq: Sequence[Any]) -> Any:
        return seq[self.below(len(seq))]

    def uniform(self, a: float, b: float) -> float:
        return a + (b - a) * self.random()


# --- the base class --------------------------------------------------------------------------------


class Gen:
    """Base of every generator. Subclasses are frozen dataclasses; see the module docstring."""

    __slots__ = ()

    def op(self, ctx: Context) -> Step:
        raise NotImplementedError

    def update(self, ctx: Context, event: Op) -> Gen:
        return self

    def seeded(self, state: int) -> Gen:
        """A copy whose `rand` field and child generators get streams derived from `state`."""
        if not dataclasses.is_dataclass(self):
            return self
        changes: dict[str, Any] = {}
        for i, field in enumerate(dataclasses.fields(self)):
            value = getattr(self, field.name)
            if field.name == "rand":
                changes["rand"] = state
            elif isinstance(value, Gen):
                changes[field.name] = value.seeded(split(state, i))
            elif isinstance(value, tuple) and value and all(isinstance(v, Gen) for v in value):
                changes[field.name] = tuple(g.seeded(split(split(state, i), j)) for j, g in enumerate(value))
        return dataclasses.replace(self, **changes) if changes else self  # type: ignore[type-var]


def root_state(seed: int) -> int:
    """The RNG state a driver seeds the root generator with for `seed` (see `combinators.prepare`)."""
    return _mix64(seed & _MASK)
