"""Joining the appends of a burst of requests into one Raft `Append`.

When the runtime hands a process several requests at once (`InboundRequests`: the frames of one read
from a connection, e.g. a broker's burst of forwarded writes), the controller's appends for them are
held and then fed to the Raft core as one `Append` (within the core's per-batch limits) instead of
one each. The core then does its per-event work (deadlines, timers, the next batch) once per burst.
Each request's records stay consecutive and in arrival order inside the group, so each gets its own
`(base, last)` back; all of a group share one fate, as records of one batch always do, and nothing
is acknowledged before the Raft core commits it (after fsync on a majority).

`within_limits` and `shares` are also what the real runtime's embedding API (`runtime.appends`)
uses for the appends of one event-loop turn.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from node.process.ports import AppendOutcome
from node.raft.records import MAX_BATCH_BYTES

BATCH_OVERHEAD = 64  # what the Raft core reserves for a batch's header
T = TypeVar("T")


def within_limits(items: Sequence[T], records_of: Callable[[T], Sequence[bytes]], max_records: int) -> list[list[T]]:
    """Split `items` (in arrival order) into runs whose records fit one batch of the core. An item over a
    limit on its own gets a run of its own, which the core refuses as it would have anyway."""
    runs: list[list[T]] = []
    current: list[T] = []
    count = size = 0
    for item in items:
        records = records_of(item)
        n, nbytes = len(records), sum(4 + len(r) for r in records)
        if current and (count + n > max_records or size + nbytes + BATCH_OVERHEAD > MAX_BATCH_BYTES):
            runs.append(current)
            current, count, size = [], 0, 0
        current.append(item)
        count += n
        size += nbytes
    if current:
        runs.append(current)
    return runs


def shares(base_offset: int, last_offset: int, counts: Sequence[int]) -> list[tuple[int, int]]:
    """Each member's `(base, last)` within a group written as one batch at `base_offset..last_offset`."""
    if last_offset - base_offset + 1 != sum(counts):
        raise ValueError(f"group of {sum(counts)} records committed as offsets {base_offset}..{last_offset}")
    out = []
    offset = base_offset
    for n in counts:
        out.append((offset, offset + n - 1))
        offset += n
    return out


@dataclass(slots=True)
class HeldAppend:
    records: tuple[bytes, ...]
    on_done: Callable[[AppendOutcome], None]


@dataclass(slots=True)
class HeldGroup:
    """Several requests' appends fed to the Raft core as one `Append`."""

    members: list[HeldAppend] = field(default_factory=list)

    @property
    def records(self) -> tuple[bytes, ...]:
        return tuple(r for m in self.members for r in m.records)

    def done(self, outcome: AppendOutcome) -> None:
        """The group's outcome, handed to each member with its share of the consecutive offsets."""
        if not outcome.committed:
            for member in self.members:
                member.on_done(outcome)
            return
        counts = [len(m.records) for m in self.members]
        for member, (base, last) in zip(
            self.members, shares(outcome.base_offset, outcome.last_offset, counts), strict=True
        ):
            member.on_done(AppendOutcome(True, base, last))


def group_held(held: list[HeldAppend], max_records: int) -> list[HeldGroup]:
    return [HeldGroup(run) for run in within_limits(held, lambda h: h.records, max_records)]


__all__ = ["HeldAppend", "HeldGroup", "group_held", "shares", "within_limits"]
