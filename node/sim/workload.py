"""The built-in workload: a client that appends small records to whoever it believes is leader.

It keeps up to `concurrency` appends in flight, each a fresh unique record. An append that is
acknowledged (`AppendCompleted`) is recorded with its offsets: the world checks at the end that every
acknowledged record is in every node's committed log at exactly those offsets. `AppendFailed`
means it certainly did not commit; a timeout or a crash of the target leaves it indeterminate.
On a failure the client asks the node it talked to for its current leader (the `CurrentLeader`
hint a real error response carries) and retries there.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class WorkloadConfig:
    interval_ms: int = 20  # one new append every interval while fewer than `concurrency` are open
    concurrency: int = 4
    timeout_ms: int = 5000  # no answer by then: indeterminate
    records_per_append: int = 1


@dataclass(slots=True)
class AppendOp:
    handle: int
    records: tuple[bytes, ...]
    target: int
    invoked_ms: int
    status: str = "pending"  # pending | ok | fail | info
    base_offset: int = -1
    last_offset: int = -1
    completed_ms: int = -1


@dataclass
class AppendClient:
    rng: random.Random
    node_ids: tuple[int, ...]  # whom to try when no leader is known (the voters)
    send: Callable[[int, int, tuple[bytes, ...]], None]  # (target, handle, records)
    config: WorkloadConfig = field(default_factory=WorkloadConfig)
    leader_guess: int = -1
    ops: dict[int, AppendOp] = field(default_factory=dict)
    acked: list[AppendOp] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=lambda: {"ok": 0, "fail": 0, "info": 0})
    _next_handle: int = 0
    running: bool = False

    @property
    def open_ops(self) -> int:
        return len(self.ops)

    def pick_target(self) -> int:
        if self.leader_guess >= 0:
            return self.leader_guess
        return self.node_ids[self.rng.randrange(len(self.node_ids))]

    def invoke(self, now: int, target: int | None = None) -> AppendOp:
        self._next_handle += 1
        handle = self._next_handle
        n = self.config.records_per_append
        records = tuple(f"r{handle}.{i}".encode() for i in range(n))
        op = AppendOp(handle, records, self.pick_target() if target is None else target, now)
        self.ops[handle] = op
        self.send(op.target, handle, records)
        return op

    def completed(self, now: int, handle: int, base_offset: int, last_offset: int) -> AppendOp | None:
        op = self.ops.pop(handle, None)
        if op is None:  # already timed out: the late answer does not change the history
            return None
        op.status, op.base_offset, op.last_offset, op.completed_ms = "ok", base_offset, last_offset, now
        self.counts["ok"] += 1
        self.acked.append(op)
        self.leader_guess = op.target
        return op

    def failed(self, now: int, handle: int, leader_hint: int) -> AppendOp | None:
        op = self.ops.pop(handle, None)
        if op is None:
            return None
        op.status, op.completed_ms = "fail", now
        self.counts["fail"] += 1
        self.leader_guess = leader_hint if leader_hint >= 0 and leader_hint != op.target else -1
        return op

    def lost(self, now: int, handle: int) -> AppendOp | None:
        """No answer will come (timeout or the target crashed): the outcome is unknown."""
        op = self.ops.pop(handle, None)
        if op is None:
            return None
        op.status, op.completed_ms = "info", now
        self.counts["info"] += 1
        self.leader_guess = -1
        return op
