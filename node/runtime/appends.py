"""Coalescing the appends that arrive in one event-loop turn into one `Append` event.

Under load, callers' appends arrive in bursts (a commit wakes many waiting writers at once); feeding
the core one event per append costs a full `handle()` each. Appends that arrive in the same loop turn
are instead joined into one `Append` (up to the core's per-batch limits), which the core writes as
one batch with consecutive offsets, so each caller's `(base, last)` is recovered from the group's.
They share one fate, as records of one batch always do.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from node.process.append_batch import shares, within_limits


@dataclass(slots=True)
class PendingAppend:
    records: tuple[bytes, ...]
    future: asyncio.Future[tuple[int, int]]

    @property
    def size(self) -> int:
        return sum(4 + len(r) for r in self.records)


@dataclass(slots=True)
class AppendGroup:
    """Several callers' appends, fed to the core as one `Append`."""

    members: list[PendingAppend] = field(default_factory=list)
    count: int = 0
    size: int = 0

    @property
    def records(self) -> tuple[bytes, ...]:
        return tuple(r for m in self.members for r in m.records)

    def complete(self, base_offset: int, last_offset: int) -> None:
        """Hand each member its share of the group's consecutive offsets."""
        if last_offset - base_offset + 1 != self.count:
            raise ValueError(f"group of {self.count} records committed as offsets {base_offset}..{last_offset}")
        for member, share in zip(
            self.members, shares(base_offset, last_offset, [len(m.records) for m in self.members])
        ):
            if not member.future.done():
                member.future.set_result(share)

    def fail(self, exc: BaseException) -> None:
        for member in self.members:
            if not member.future.done():
                member.future.set_exception(exc)


def group_appends(pending: list[PendingAppend], max_records: int) -> list[AppendGroup]:
    """Split `pending` (in arrival order) into groups within the core's per-batch limits. An append that
    is too large on its own gets a group of its own, for the core to refuse."""
    return [
        AppendGroup(run, sum(len(m.records) for m in run), sum(m.size for m in run))
        for run in within_limits(pending, lambda m: m.records, max_records)
    ]
