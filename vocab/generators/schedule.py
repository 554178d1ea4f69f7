"""Nemesis schedules and the final phase, as generators.

Fault kinds are plain strings from the fault vocabulary (`vocab.faults.kinds.FAULT_KINDS`); a
schedule emits `start-<kind>` / `stop-<kind>` ops on the nemesis worker and leaves choosing targets
and parameters to the nemesis (the op's value carries an optional `mode`, e.g.
{"mode": "isolate-leader"}).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vocab.faults.kinds import FAULT_KINDS
from vocab.generators.combinators import (
    AnyOf,
    Once,
    Seq,
    any_of,
    clients,
    nemesis,
    outlast,
    phases,
    sleep,
    time_limit,
)
from vocab.generators.core import EXHAUSTED, NEMESIS, PENDING, Context, Gen, Op, Rng, Step, seconds

__all__ = [
    "FAULT_KINDS",
    "FaultTimeline",
    "NemesisSchedule",
    "fault_timeline",
    "final_phase",
    "heal_all",
    "main_phase",
    "nemesis_schedule",
    "replay_phase",
    "whole_run",
]

_START, _STOP = "start", "stop"
DRAWS = ("random", "deck")  # how a schedule picks each start's kind (NemesisSchedule)


@dataclass(frozen=True, slots=True)
class NemesisSchedule(Gen):
    """Jepsen's combined nemesis packages as one generator: several kinds, each its own start/stop
    cycle, at most `max_active` faults active at once.

    - A start is due `interval` after the previous start completed; while `max_active` faults are
      active, none is, and a stop that frees a slot makes the next start due `interval` after it.
      (With `max_active` 1: one fault at a time, the next starting `interval` after the stop.)
    - The kind of each start is drawn among the kinds not active now, by `weights` (default 1 each;
      0 never starts); its mode (the op's value `{"mode": ...}`) from `modes` when given.
    - `draw="deck"` deals the kinds like cards instead: each kind once per round, in an order drawn
      anew each round (weights then only say which kinds take part: > 0). The first `len(kinds)` starts
      hold every kind, so a short run misses none, where a random draw may repeat a kind and leave
      another out. A kind still active when it could be dealt sits the round out: a new round begins
      once only dealt kinds could start.
    - Each fault stops `duration` after its start completed; due stops go before a due start.
    - A start completed with `fail` opened no fault, so no stop follows it.

    Waiting is expressed as ops due in the future, so a surrounding `time_limit` cuts the schedule
    cleanly (the final phase then heals whatever is still active). All choices come from the
    generator's own random stream: the same seed and events give the same schedule.
    """

    kinds: tuple[str, ...]
    interval: int  # ns
    duration: int  # ns
    modes: tuple[tuple[str, tuple[str, ...]], ...] = ()
    weights: tuple[tuple[str, float], ...] = ()
    max_active: int = 1
    draw: str = "random"  # or "deck" (see above)
    active: tuple[tuple[str, int], ...] = ()  # (kind, its stop's due time), in start order
    dealt: tuple[str, ...] = ()  # deck: the kinds started in this round
    inflight: tuple[str, str] | None = None  # (start|stop, kind) invoked, not yet completed
    next_start: int | None = None  # None: `interval` after the first query
    rand: int = 0

    def _weight(self, kind: str) -> float:
        return dict(self.weights).get(kind, 1.0)

    def _startable(self) -> list[str]:
        busy = {k for k, _ in self.active}
        return [k for k in self.kinds if k not in busy and self._weight(k) > 0]

    def op(self, ctx: Context) -> Step:
        if self.inflight is not None:
            return PENDING
        startable = self._startable() if len(self.active) < self.max_active else []
        if not self.active and not startable:
            return EXHAUSTED
        free = ctx.first_free()
        if free is None:
            return PENDING
        stop = min(self.active, key=lambda a: a[1], default=None)
        start_due = None
        if startable:
            start_due = self.next_start if self.next_start is not None else ctx.time + self.interval
        if stop is not None and (start_due is None or stop[1] <= start_due):
            kind = stop[0]
            op = Op(f"stop-{kind}", None, free[1], "invoke", max(stop[1], ctx.time))
            return op, self._with(inflight=(_STOP, kind))
        assert start_due is not None
        rng = Rng(self.rand)
        dealt = self.dealt
        if self.draw == "deck":
            undealt = [k for k in startable if k not in dealt]
            if not undealt:  # a new round
                dealt, undealt = (), startable
            kind = rng.choice(undealt)
            dealt = (*dealt, kind)
        else:
            kind = _weighted(rng, startable, [self._weight(k) for k in startable])
        modes = dict(self.modes).get(kind)
        value = {"mode": rng.choice(modes)} if modes else None
        op = Op(f"start-{kind}", value, free[1], "invoke", max(start_due, ctx.time))
        return op, self._with(inflight=(_START, kind), next_start=start_due, rand=rng.state, dealt=dealt)

    def update(self, ctx: Context, event: Op) -> Gen:
        if event.process != NEMESIS or event.type == "invoke" or self.inflight is None:
            return self
        action, kind = self.inflight
        if event.f != f"{action}-{kind}":
            return self
        if action == _START:
            active = self.active if event.type == "fail" else (*self.active, (kind, event.time + self.duration))
            return self._with(inflight=None, active=active, next_start=event.time + self.interval)
        full = len(self.active) >= self.max_active
        active = tuple(a for a in self.active if a[0] != kind)
        next_start = self.next_start
        if full:
            next_start = max(next_start or 0, event.time + self.interval)
        return self._with(inflight=None, active=active, next_start=next_start)

    def _with(self, **changes: Any) -> NemesisSchedule:
        return dataclasses.replace(self, **changes)


TimedFault = tuple[int, str, Any]  # (ns since the run's start, "start-<kind>" | "stop-<kind>", op value)


@dataclass(frozen=True, slots=True)
class FaultTimeline(Gen):
    """A recorded fault timeline replayed (`kchaos reproduce`): each `(time ns, f, value)` is invoked on
    the nemesis worker at its time (or as soon as the previous one completed, if that is later), in
    order, whatever the completions say. The nemesis reads a start's recorded targets and parameters
    from its value's `replay`. No randomness: the run's other generators draw what they always drew."""

    entries: tuple[TimedFault, ...]
    next_index: int = 0
    inflight: bool = False

    def op(self, ctx: Context) -> Step:
        if self.inflight:
            return PENDING
        if self.next_index >= len(self.entries):
            return EXHAUSTED
        free = ctx.first_free()
        if free is None:
            return PENDING
        at, f, value = self.entries[self.next_index]
        op = Op(f, value, free[1], "invoke", max(at, ctx.time))
        return op, dataclasses.replace(self, next_index=self.next_index + 1, inflight=True)

    def update(self, ctx: Context, event: Op) -> Gen:
        if event.process != NEMESIS or event.type == "invoke" or not self.inflight:
            return self
        return dataclasses.replace(self, inflight=False)


def fault_timeline(entries: Iterable[TimedFault]) -> FaultTimeline:
    """The generator of a recorded timeline (see `FaultTimeline`), sorted by time."""
    return FaultTimeline(tuple(sorted(entries, key=lambda e: e[0])))


def _weighted(rng: Rng, items: Sequence[str], weights: Sequence[float]) -> str:
    """One of `items`, each with probability proportional to its weight (all > 0)."""
    point = rng.random() * sum(weights)
    for item, weight in zip(items, weights, strict=True):
        point -= weight
        if point < 0:
            return item
    return items[-1]


def nemesis_schedule(
    kinds: Sequence[str],
    interval_s: float,
    duration_s: float,
    modes: Mapping[str, Sequence[str]] | None = None,
    weights: Mapping[str, float] | None = None,
    max_active: int = 1,
    draw: str = "random",
) -> NemesisSchedule:
    """Start a fault every `interval_s`, stop it after `duration_s`, up to `max_active` at once, each
    start's kind drawn at random or dealt from a deck (see `NemesisSchedule`)."""
    if max_active < 1:
        raise ValueError(f"max_active must be >= 1, got {max_active}")
    if draw not in DRAWS:
        raise ValueError(f"draw must be one of {', '.join(DRAWS)}, got {draw!r}")
    mode_items = tuple((k, tuple(v)) for k, v in sorted((modes or {}).items()) if v)
    weight_items = tuple((k, float(w)) for k, w in sorted((weights or {}).items()))
    if any(w < 0 for _, w in weight_items):
        raise ValueError("nemesis weights must be >= 0")
    kinds = tuple(dict.fromkeys(kinds))
    return NemesisSchedule(kinds, seconds(interval_s), seconds(duration_s), mode_items, weight_items, max_active, draw)


def heal_all(kinds: Iterable[str], order: Sequence[str] | None = None) -> Seq:
    """`stop-<kind>` for every kind, once each: in the order of `order` (kinds it does not name come
    last, sorted), else sorted. A nemesis treats stopping an inactive fault as a no-op, so this heals
    everything whatever the schedule left running."""
    rank = {k: i for i, k in enumerate(order or ())}
    ordered = sorted(set(kinds), key=lambda k: (rank.get(k, len(rank)), k))
    return Seq(tuple(Once(Op(f"stop-{kind}")) for kind in ordered))


def final_phase(kinds: Iterable[str], recovery_s: float, final_reads: Any = None) -> list[Gen]:
    """The phases after the main one: heal everything, let the cluster recover, then final reads
    (a client generator, e.g. `each_worker(read)`; None for none)."""
    out: list[Gen] = [nemesis(heal_all(kinds))]
    if recovery_s > 0:
        out.append(sleep(recovery_s))
    if final_reads is not None:
        out.append(clients(final_reads))
    return out


def main_phase(client_gen: Any, nemesis_gen: Any, time_limit_s: float) -> Gen:
    """Clients and nemesis side by side (each on its own workers) for `time_limit_s`."""
    both: AnyOf = any_of(clients(client_gen), nemesis(nemesis_gen))
    return time_limit(time_limit_s, both)


def replay_phase(client_gen: Any, timeline: Any, time_limit_s: float, max_s: float) -> Gen:
    """Clients beside a replayed fault timeline (`kchaos reproduce`) for `time_limit_s`, and past it
    until the timeline's last op has been carried out, at most `max_s` in all. A fault can take
    longer where it is replayed than where it was recorded (seconds over ssh into a TCG guest), and
    each op waits for the one before: cut at the time limit, a replay that fell behind would lose
    the faults at its end. While the timeline keeps to its times, this is `main_phase`, op for op."""
    return time_limit(max_s, outlast(time_limit_s, nemesis(timeline), clients(client_gen)))


def whole_run(
    client_gen: Any,
    nemesis_gen: Any,
    time_limit_s: float,
    kinds: Iterable[str],
    recovery_s: float,
    final_reads: Any = None,
) -> Gen:
    """The whole run: the main phase, then the final phase, each starting once all workers are free."""
    return phases(main_phase(client_gen, nemesis_gen, time_limit_s), *final_phase(kinds, recovery_s, final_reads))
