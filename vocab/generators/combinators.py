"""Jepsen-style combinators. Each is a frozen dataclass plus a lower-case constructor function.

Times given to constructors are seconds (floats); inside, everything is integer nanoseconds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from vocab.generators.core import (
    EXHAUSTED,
    NEMESIS,
    PENDING,
    Context,
    Gen,
    Op,
    Rng,
    Step,
    Worker,
    root_state,
    seconds,
    split,
)


def prepare(gen: Any, seed: int) -> Gen:
    """The generator a driver starts with: coerced (see `as_gen`) and seeded for `seed`."""
    return as_gen(gen).seeded(root_state(seed))


def as_gen(value: Any) -> Gen:
    """Coerce: a Gen stays; an Op template is emitted once; a list/tuple runs its items in sequence;
    a callable `fn(rng, i) -> Op | None` is called for each op (i counts its ops; None ends it).
    It lives here, beside the leaves it builds (`Once`, `seq`, `Fn`), so `core` needs no combinator."""
    if isinstance(value, Gen):
        return value
    if isinstance(value, Op):
        return Once(value)
    if isinstance(value, list | tuple):
        return seq(*value)
    if callable(value):
        return Fn(value)
    raise TypeError(f"not a generator: {value!r}")


def _update_all(gens: tuple[Gen, ...], ctx: Context, event: Op) -> tuple[Gen, ...]:
    """Every generator updated; the very same tuple when none changed (updates are mostly no-ops)."""
    updated = tuple(g.update(ctx, event) for g in gens)
    return gens if all(a is b for a, b in zip(updated, gens)) else updated


def _soonest(candidates: Iterable[tuple[Any, Gen, Context] | None]) -> Any:
    """(key, op, next generator) of the soonest op among (key, generator, context) candidates (ties:
    the first); else PENDING if one is pending (a None candidate counts as pending), else EXHAUSTED."""
    best: tuple[Any, Op, Gen] | None = None
    pending = False
    for candidate in candidates:
        if candidate is None:
            pending = True
            continue
        key, gen, sub = candidate
        step = gen.op(sub)
        if step is EXHAUSTED:
            continue
        if step is PENDING:
            pending = True
            continue
        op, after = step
        if best is None or op.time < best[1].time:
            best = (key, op, after)
    if best is None:
        return PENDING if pending else EXHAUSTED
    return best


class Wrapper(Gen):
    """A combinator around one child generator, its `gen` field: the single place where such a
    combinator asks its child, passes PENDING/EXHAUSTED up, and rebuilds itself around the child's
    next generator (on an op, and on an event that changed the child).

    A subclass says what it does differently: `sees` (the context its child sees; None = exhausted),
    `emit` (what it makes of the child's op), and `rewrap` (itself around another child)."""

    __slots__ = ()
    gen: Gen

    def rewrap(self, gen: Gen) -> Gen:
        raise NotImplementedError

    def sees(self, ctx: Context) -> Context | None:
        return ctx

    def emit(self, ctx: Context, op: Op, after: Gen) -> Step | None:
        """The step for the child's `op` (`after` its next generator); None drops the op and asks
        `after` instead."""
        return op, self.rewrap(after)

    def op(self, ctx: Context) -> Step:
        sub = self.sees(ctx)
        if sub is None:
            return EXHAUSTED
        gen = self.gen
        while True:
            step = gen.op(sub)
            if step is EXHAUSTED or step is PENDING:
                return step
            op, gen = step
            out = self.emit(ctx, op, gen)
            if out is not None:
                return out

    def update(self, ctx: Context, event: Op) -> Gen:
        gen = self.gen.update(ctx, event)
        return self if gen is self.gen else self.rewrap(gen)


# --- leaves ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Empty(Gen):
    """Emits nothing."""

    def op(self, ctx: Context) -> Step:
        return EXHAUSTED


EMPTY = Empty()


@dataclass(frozen=True, slots=True)
class Once(Gen):
    """Emits its op template once, on the first free worker."""

    template: Op

    def op(self, ctx: Context) -> Step:
        free = ctx.first_free()
        if free is None:
            return PENDING
        return self.template.bind(free[1], ctx.time), EMPTY


def once(f: str, value: Any = None, *, key: Any = None) -> Once:
    return Once(Op(f, value, key=key))


def sleep(secs: float) -> Once:
    """A worker that does nothing for `secs` (op type "sleep": not recorded). Used between phases."""
    return Once(Op("sleep", seconds(secs), type="sleep"))


@dataclass(frozen=True, slots=True)
class Fn(Gen):
    """Calls `fn(rng, i)` for each op (i = ops emitted so far); `None` ends it. `fn` must be pure:
    all its randomness from `rng` (a `core.Rng`), so that asking twice gives the same op."""

    fn: Callable[[Rng, int], Op | None]
    rand: int = 0
    count: int = 0

    def op(self, ctx: Context) -> Step:
        free = ctx.first_free()
        if free is None:
            return PENDING
        rng = Rng(self.rand)
        template = self.fn(rng, self.count)
        if template is None:
            return EXHAUSTED
        return template.bind(free[1], ctx.time), Fn(self.fn, rng.state, self.count + 1)


# --- sequencing ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Seq(Gen):
    """Each generator until it is exhausted, then the next; no waiting in between. Updates go to the
    current head."""

    gens: tuple[Gen, ...]

    def op(self, ctx: Context) -> Step:
        for i, gen in enumerate(self.gens):
            step = gen.op(ctx)
            if step is EXHAUSTED:
                continue
            if step is PENDING:
                return PENDING
            op, after = step
            return op, Seq((after, *self.gens[i + 1 :]))
        return EXHAUSTED

    def update(self, ctx: Context, event: Op) -> Gen:
        if not self.gens:
            return self
        head = self.gens[0].update(ctx, event)
        return self if head is self.gens[0] else Seq((head, *self.gens[1:]))


def seq(*gens: Any) -> Seq:
    return Seq(tuple(as_gen(g) for g in gens))


@dataclass(frozen=True, slots=True)
class Synchronize(Wrapper):
    """Waits until every worker it can see is free, then behaves as `gen` (worker barrier)."""

    gen: Gen

    def rewrap(self, gen: Gen) -> Gen:
        return Synchronize(gen)

    def op(self, ctx: Context) -> Step:
        if not ctx.all_free():
            return PENDING
        return self.gen.op(ctx)  # once an op is out, the barrier is gone: `after` is unwrapped


def synchronize(gen: Any) -> Synchronize:
    return Synchronize(as_gen(gen))


def phases(*gens: Any) -> Seq:
    """Run each generator to exhaustion, and start the next only once every worker is free."""
    return Seq(tuple(Synchronize(as_gen(g)) for g in gens))


def then(first: Any, second: Any) -> Seq:
    """`first`, then (after all workers are free) `second`."""
    return Seq((as_gen(first), Synchronize(as_gen(second))))


@dataclass(frozen=True, slots=True)
class Cycle(Gen):
    """Runs a fresh copy of `template` each time the current one is exhausted; `times` None = forever.
    Copy k gets its own random stream, so random generators do not repeat themselves."""

    template: Gen
    times: int | None
    current: Gen | None = None
    k: int = 0
    rand: int = 0

    def op(self, ctx: Context) -> Step:
        current, k = self.current, self.k
        fresh_tries = 0
        while True:
            if current is None:
                if self.times is not None and k >= self.times:
                    return EXHAUSTED
                current, k = self.template.seeded(split(self.rand, k)), k + 1
                fresh_tries += 1
            step = current.op(ctx)
            if step is EXHAUSTED:
                if fresh_tries:  # a fresh copy that yields nothing: stop rather than spin
                    return EXHAUSTED
                current = None
                continue
            if step is PENDING:
                return PENDING
            op, after = step
            return op, Cycle(self.template, self.times, after, k, self.rand)

    def update(self, ctx: Context, event: Op) -> Gen:
        if self.current is None:
            return self
        current = self.current.update(ctx, event)
        return self if current is self.current else Cycle(self.template, self.times, current, self.k, self.rand)


def cycle(gen: Any, times: int | None = None) -> Cycle:
    return Cycle(as_gen(gen), times)


@dataclass(frozen=True, slots=True)
class Repeat(Wrapper):
    """Emits the first op of `gen` again and again without advancing it; `times` None = forever."""

    gen: Gen
    times: int | None = None

    def rewrap(self, gen: Gen) -> Gen:
        return Repeat(gen, self.times)

    def sees(self, ctx: Context) -> Context | None:
        return None if self.times is not None and self.times <= 0 else ctx

    def emit(self, ctx: Context, op: Op, after: Gen) -> Step:
        return op, Repeat(self.gen, None if self.times is None else self.times - 1)

    def update(self, ctx: Context, event: Op) -> Gen:
        return self  # the child is never advanced, so it is not told either


def repeat(gen: Any, times: int | None = None) -> Repeat:
    return Repeat(as_gen(gen), times)


# --- choosing between generators -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Mix(Gen):
    """Each op from a randomly chosen generator; exhausted ones drop out. Updates go to all."""

    gens: tuple[Gen, ...]
    rand: int = 0

    def op(self, ctx: Context) -> Step:
        gens = self.gens
        while gens:
            rng = Rng(self.rand)
            i = rng.below(len(gens))
            step = gens[i].op(ctx)
            if step is EXHAUSTED:
                gens = gens[:i] + gens[i + 1 :]
                continue
            if step is PENDING:
                return PENDING
            op, after = step
            return op, Mix((*gens[:i], after, *gens[i + 1 :]), rng.state)
        return EXHAUSTED

    def update(self, ctx: Context, event: Op) -> Gen:
        gens = _update_all(self.gens, ctx, event)
        return self if gens is self.gens else Mix(gens, self.rand)


def mix(*gens: Any) -> Mix:
    return Mix(tuple(as_gen(g) for g in gens))


@dataclass(frozen=True, slots=True)
class AnyOf(Gen):
    """The soonest op of any generator (ties: the first listed). Updates go to all."""

    gens: tuple[Gen, ...]

    def op(self, ctx: Context) -> Step:
        found = _soonest((i, gen, ctx) for i, gen in enumerate(self.gens))
        if found is PENDING or found is EXHAUSTED:
            return found
        i, op, after = found
        return op, AnyOf((*self.gens[:i], after, *self.gens[i + 1 :]))

    def update(self, ctx: Context, event: Op) -> Gen:
        gens = _update_all(self.gens, ctx, event)
        return self if gens is self.gens else AnyOf(gens)


def any_of(*gens: Any) -> AnyOf:
    return AnyOf(tuple(as_gen(g) for g in gens))


@dataclass(frozen=True, slots=True)
class Outlast(Gen):
    """`rest` and `leader` side by side (the soonest op of either, ties to `rest`, as `any_of`) for `dt`
    ns from the first op, and past that for as long as `leader` is not exhausted: a replayed fault
    timeline that falls behind its recorded times (each fault takes longer where it is replayed) keeps
    the clients running until its last fault has been carried out. Bound it with `time_limit`.

    The pair is held as `any_of` holds its generators, so both draw the same random streams as in
    `any_of(rest, leader)`: when `leader` keeps to its times, the ops are those of
    `time_limit(dt, any_of(rest, leader))`, one for one."""

    gens: tuple[Gen, Gen]  # (rest, leader)
    dt: int
    cutoff: int | None = None  # the first op's time + dt

    def op(self, ctx: Context) -> Step:
        rest, lead = self.gens[0].op(ctx), self.gens[1].op(ctx)
        ready = [step for step in (rest, lead) if step is not PENDING and step is not EXHAUSTED]
        if not ready:
            return EXHAUSTED if rest is EXHAUSTED and lead is EXHAUSTED else PENDING
        chosen = min(ready, key=lambda step: step[0].time)  # the first of equals: `rest`'s
        op, after = chosen
        cutoff = self.cutoff if self.cutoff is not None else op.time + self.dt
        if lead is EXHAUSTED and op.time >= cutoff:
            # As `time_limit`: a busy worker's completion may still bring an earlier op.
            return EXHAUSTED if ctx.all_free() else PENDING
        gens = (after, self.gens[1]) if chosen is rest else (self.gens[0], after)
        return op, Outlast(gens, self.dt, cutoff)

    def update(self, ctx: Context, event: Op) -> Gen:
        gens = _update_all(self.gens, ctx, event)
        return self if gens is self.gens else Outlast((gens[0], gens[1]), self.dt, self.cutoff)


def outlast(secs: float, leader: Any, rest: Any) -> Outlast:
    return Outlast((as_gen(rest), as_gen(leader)), seconds(secs))


# --- routing ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OnWorkers(Wrapper):
    """`gen` sees only the workers `keep` accepts, and only their events."""

    keep: Callable[[Worker], bool]
    gen: Gen

    def rewrap(self, gen: Gen) -> Gen:
        return OnWorkers(self.keep, gen)

    def sees(self, ctx: Context) -> Context | None:
        sub = ctx.restrict(self.keep)
        return sub if sub.workers else None

    def update(self, ctx: Context, event: Op) -> Gen:
        worker = ctx.worker_of(event.process) if event.process is not None else None
        if worker is None or not self.keep(worker):
            return self
        return Wrapper.update(self, ctx.restrict(self.keep), event)


def is_client(worker: Worker) -> bool:
    return isinstance(worker, int)


def is_nemesis(worker: Worker) -> bool:
    return worker == NEMESIS


def clients(gen: Any) -> OnWorkers:
    """`gen` runs on the client workers only."""
    return OnWorkers(is_client, as_gen(gen))


def nemesis(gen: Any) -> OnWorkers:
    """`gen` runs on the nemesis worker only."""
    return OnWorkers(is_nemesis, as_gen(gen))


def on_workers(keep: Callable[[Worker], bool], gen: Any) -> OnWorkers:
    return OnWorkers(keep, as_gen(gen))


@dataclass(frozen=True, slots=True)
class EachProcess(Gen):
    """Every process (or, with `by_worker`, every worker) runs its own copy of `template`.

    A worker that gets a fresh process after an `info` starts a fresh copy (keyed by process). Copies
    get random streams derived from their key, so the result does not depend on who asked first.
    """

    template: Gen
    by_worker: bool = False
    copies: dict[Any, Gen] = field(default_factory=dict)  # never mutated: replaced on change
    rand: int = 0

    def _copy(self, key: Any) -> Gen:
        gen = self.copies.get(key)
        return gen if gen is not None else self.template.seeded(split(self.rand, key))

    def op(self, ctx: Context) -> Step:
        found = _soonest(
            # a busy worker counts as pending: its copy may still have ops once it is free
            None if worker not in ctx.free else (key, self._copy(key), ctx.only(worker, process))
            for worker, process in ctx.workers
            for key in (worker if self.by_worker else process,)
        )
        if found is PENDING or found is EXHAUSTED:
            return found
        key, op, after = found
        return op, EachProcess(self.template, self.by_worker, {**self.copies, key: after}, self.rand)

    def update(self, ctx: Context, event: Op) -> Gen:
        worker = ctx.worker_of(event.process) if event.process is not None else None
        if worker is None:
            return self
        key = worker if self.by_worker else event.process
        gen = self.copies.get(key)
        if gen is None:
            return self
        updated = gen.update(ctx.only(worker, event.process), event)
        if updated is gen:
            return self
        return EachProcess(self.template, self.by_worker, {**self.copies, key: updated}, self.rand)

    def seeded(self, state: int) -> Gen:
        return EachProcess(self.template, self.by_worker, {}, state)


def each_process(gen: Any) -> EachProcess:
    return EachProcess(as_gen(gen))


def each_worker(gen: Any) -> EachProcess:
    return EachProcess(as_gen(gen), by_worker=True)


# --- shaping the stream ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Limit(Wrapper):
    """At most `n` ops."""

    n: int
    gen: Gen

    def rewrap(self, gen: Gen) -> Gen:
        return Limit(self.n, gen)

    def sees(self, ctx: Context) -> Context | None:
        return ctx if self.n > 0 else None

    def emit(self, ctx: Context, op: Op, after: Gen) -> Step:
        return op, Limit(self.n - 1, after)


def limit(n: int, gen: Any) -> Limit:
    return Limit(n, as_gen(gen))


@dataclass(frozen=True, slots=True)
class TimeLimit(Wrapper):
    """Ops due before `dt` ns after the first op's time; exhausted from then on."""

    dt: int
    gen: Gen
    cutoff: int | None = None

    def rewrap(self, gen: Gen) -> Gen:
        return TimeLimit(self.dt, gen, self.cutoff)

    def sees(self, ctx: Context) -> Context | None:
        return None if self.cutoff is not None and ctx.time >= self.cutoff else ctx

    def emit(self, ctx: Context, op: Op, after: Gen) -> Step:
        cutoff = self.cutoff if self.cutoff is not None else op.time + self.dt
        if op.time >= cutoff:
            # Too late; but a busy worker's completion may still bring an earlier op (e.g. clients
            # pending while only the nemesis has a late op): only with every worker free is it over.
            return EXHAUSTED if ctx.all_free() else PENDING
        return op, TimeLimit(self.dt, after, cutoff)


def time_limit(secs: float, gen: Any) -> TimeLimit:
    return TimeLimit(seconds(secs), as_gen(gen))


@dataclass(frozen=True, slots=True)
class EndAfterOk(Wrapper):
    """`gen` until `tail` ns after the first op that `counts` completed ok, then exhausted: Jepsen's
    until-ok, with a tail to see the system on. Only an op invoked `settle` ns or more after this
    generator's first op counts (a recovery window's ops from before a fault's after-effect ended do
    not, as the availability checker does not count them). Without such an op it is `gen`."""

    counts: Callable[[Op], bool]
    tail: int
    settle: int
    gen: Gen
    start: int | None = None  # the first op's time
    fresh: frozenset[Any] = frozenset()  # processes whose op in flight was invoked after the settle
    cutoff: int | None = None

    def rewrap(self, gen: Gen) -> Gen:
        return EndAfterOk(self.counts, self.tail, self.settle, gen, self.start, self.fresh, self.cutoff)

    def seeded(self, state: int) -> Gen:
        """Its child gets the very stream it would get unwrapped: up to the cutoff, the same ops."""
        return self.rewrap(self.gen.seeded(state))

    def sees(self, ctx: Context) -> Context | None:
        return None if self.cutoff is not None and ctx.time >= self.cutoff else ctx

    def emit(self, ctx: Context, op: Op, after: Gen) -> Step:
        if self.cutoff is not None and op.time >= self.cutoff:
            return EXHAUSTED if ctx.all_free() else PENDING  # as TimeLimit: a busy worker may bring an earlier op
        start = op.time if self.start is None else self.start
        fresh = self.fresh | {op.process} if op.time >= start + self.settle else self.fresh - {op.process}
        return op, EndAfterOk(self.counts, self.tail, self.settle, after, start, fresh, self.cutoff)

    def update(self, ctx: Context, event: Op) -> Gen:
        gen = self.gen.update(ctx, event)
        cutoff = self.cutoff
        if cutoff is None and event.type == "ok" and event.process in self.fresh and self.counts(event):
            cutoff = ctx.time + self.tail
        if gen is self.gen and cutoff == self.cutoff:
            return self
        return EndAfterOk(self.counts, self.tail, self.settle, gen, self.start, self.fresh, cutoff)


def end_after_ok(counts: Callable[[Op], bool], tail_s: float, gen: Any, settle_s: float = 0.0) -> EndAfterOk:
    return EndAfterOk(counts, seconds(tail_s), seconds(settle_s), as_gen(gen))


@dataclass(frozen=True, slots=True)
class Stagger(Wrapper):
    """Spaces ops by random delays, uniform in [0, 2·dt) (mean dt), across all workers: ~1/dt ops/s
    when workers keep up. With `jitter` False the spacing is exactly dt (`delay`)."""

    dt: int
    gen: Gen
    jitter: bool = True
    next_time: int | None = None
    rand: int = 0

    def rewrap(self, gen: Gen) -> Gen:
        return Stagger(self.dt, gen, self.jitter, self.next_time, self.rand)

    def emit(self, ctx: Context, op: Op, after: Gen) -> Step:
        if self.next_time is not None and self.next_time > op.time:
            op = op.at(self.next_time)
        rng = Rng(self.rand)
        gap = int(rng.random() * 2 * self.dt) if self.jitter else self.dt
        return op, Stagger(self.dt, after, self.jitter, op.time + gap, rng.state)


def stagger(secs: float, gen: Any) -> Stagger:
    return Stagger(seconds(secs), as_gen(gen))


def rate(ops_per_s: float, gen: Any) -> Gen:
    """About `ops_per_s` ops per second in total (random spacing); 0 or less = no throttle."""
    if ops_per_s <= 0:
        return as_gen(gen)
    return Stagger(seconds(1.0 / ops_per_s), as_gen(gen))


def delay(secs: float, gen: Any) -> Stagger:
    """Ops exactly `secs` apart (across all workers)."""
    return Stagger(seconds(secs), as_gen(gen), jitter=False)


@dataclass(frozen=True, slots=True)
class Filter(Wrapper):
    """Only the ops `pred` accepts (others are dropped; an infinite source never accepted spins)."""

    pred: Callable[[Op], bool]
    gen: Gen

    def rewrap(self, gen: Gen) -> Gen:
        return Filter(self.pred, gen)

    def emit(self, ctx: Context, op: Op, after: Gen) -> Step | None:
        return (op, Filter(self.pred, after)) if self.pred(op) else None


def filter_ops(pred: Callable[[Op], bool], gen: Any) -> Filter:
    return Filter(pred, as_gen(gen))


@dataclass(frozen=True, slots=True)
class Map(Wrapper):
    """Each op transformed by `fn` (which must keep its process and not move its time earlier)."""

    fn: Callable[[Op], Op]
    gen: Gen

    def rewrap(self, gen: Gen) -> Gen:
        return Map(self.fn, gen)

    def emit(self, ctx: Context, op: Op, after: Gen) -> Step:
        return self.fn(op), Map(self.fn, after)


def map_ops(fn: Callable[[Op], Op], gen: Any) -> Map:
    return Map(fn, as_gen(gen))
