"""Nemesis schedules and the final phase, as generators.

Fault kinds are plain strings from the fault vocabulary (BRIEF §3.2); a schedule emits
`start-<kind>` / `stop-<kind>` ops on the nemesis worker and leaves choosing targets to the nemesis
(the op's value carries an optional `mode`, e.g. {"mode": "isolate-leader"}).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.generators.combinators import (
    AnyOf,
    Once,
    Seq,
    any_of,
    clients,
    nemesis,
    phases,
    sleep,
    time_limit,
)
from harness.generators.core import EXHAUSTED, NEMESIS, PENDING, Context, Gen, Op, Rng, Step, seconds

# The fault kinds a nemesis may start and stop (BRIEF §3.2): the allowed names wherever a test names
# its nemesis, unless the caller passes the registry of what its backend implements.
FAULT_KINDS: tuple[str, ...] = (
    "partition",
    "kill",
    "pause",
    "clock",
    "disk_stall",
    "disk_fail",
    "lose_unsynced",
)

_IDLE, _STARTING, _ACTIVE, _STOPPING = "idle", "starting", "active", "stopping"


@dataclass(frozen=True, slots=True)
class NemesisSchedule(Gen):
    """Forever: wait `interval`, start a fault of a random kind, wait `duration` after its start
    completed, stop it. One fault at a time; the next interval counts from the stop's completion.

    A start completed with `fail` opened no fault, so no stop follows it. Waiting is expressed as ops
    due in the future, so a surrounding `time_limit` cuts the schedule cleanly (the final phase then
    heals whatever is still active).
    """

    kinds: tuple[str, ...]
    interval: int  # ns
    duration: int  # ns
    modes: tuple[tuple[str, tuple[str, ...]], ...] = ()
    state: str = _IDLE
    kind: str | None = None
    due: int | None = None  # when the next op is due; None: `interval` after the first query
    rand: int = 0

    def op(self, ctx: Context) -> Step:
        if not self.kinds:
            return EXHAUSTED
        free = ctx.first_free()
        if free is None or self.state in (_STARTING, _STOPPING):
            return PENDING
        due = self.due if self.due is not None else ctx.time + self.interval
        time = max(due, ctx.time)
        if self.state == _ACTIVE:
            stop = Op(f"stop-{self.kind}", None, free[1], "invoke", time)
            return stop, self._with(_STOPPING, self.kind, None, self.rand)
        rng = Rng(self.rand)
        kind = rng.choice(self.kinds)
        modes = dict(self.modes).get(kind)
        value = {"mode": rng.choice(modes)} if modes else None
        start = Op(f"start-{kind}", value, free[1], "invoke", time)
        return start, self._with(_STARTING, kind, None, rng.state)

    def update(self, ctx: Context, event: Op) -> Gen:
        if event.process != NEMESIS or event.type == "invoke":
            return self
        if self.state == _STARTING and event.f == f"start-{self.kind}":
            if event.type == "fail":
                return self._with(_IDLE, None, event.time + self.interval, self.rand)
            return self._with(_ACTIVE, self.kind, event.time + self.duration, self.rand)
        if self.state == _STOPPING and event.f == f"stop-{self.kind}":
            return self._with(_IDLE, None, event.time + self.interval, self.rand)
        return self

    def _with(self, state: str, kind: str | None, due: int | None, rand: int) -> NemesisSchedule:
        return NemesisSchedule(self.kinds, self.interval, self.duration, self.modes, state, kind, due, rand)


def nemesis_schedule(
    kinds: Sequence[str],
    interval_s: float,
    duration_s: float,
    modes: Mapping[str, Sequence[str]] | None = None,
) -> NemesisSchedule:
    """Start a fault every `interval_s`, stop it after `duration_s` (see `NemesisSchedule`)."""
    mode_items = tuple((k, tuple(v)) for k, v in sorted((modes or {}).items()) if v)
    return NemesisSchedule(tuple(kinds), seconds(interval_s), seconds(duration_s), mode_items)


def heal_all(kinds: Iterable[str]) -> Seq:
    """`stop-<kind>` for every kind (sorted, once each): a nemesis treats stopping an inactive fault
    as a no-op, so this heals everything whatever the schedule left running."""
    return Seq(tuple(Once(Op(f"stop-{kind}")) for kind in sorted(set(kinds))))


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
