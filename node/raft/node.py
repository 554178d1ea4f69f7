"""A KIP-595 quorum member as a pure state machine.

`RaftNode.handle(now_ms, event)` is the only way in; it returns the actions the runtime must carry
out, in order. Everything else on the class is a read-only view for runtimes, metrics, dumps and the
simulator's invariant checks.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from node.raft.actions import Action
from node.raft.config import RaftConfig
from node.raft.events import Event
from node.raft.quorum_state import Role
from node.raft.records import RecordBatch
from node.raft.storage import LoadedState


class RaftNode:
    def __init__(
        self,
        config: RaftConfig,
        loaded: LoadedState,
        rng: random.Random,
        cluster_id_factory: Callable[[random.Random], str] | None = None,
    ) -> None:
        raise NotImplementedError

    def handle(self, now: int, event: Event) -> list[Action]:
        raise NotImplementedError

    # --- read-only views ---
    node_id: int
    role: Role
    epoch: int
    leader_id: int  # -1 when unknown
    voted_id: int  # -1 when none
    high_watermark: int
    cluster_id: str | None

    @property
    def log_end_offset(self) -> int:
        raise NotImplementedError

    @property
    def log_start_offset(self) -> int:
        raise NotImplementedError

    @property
    def last_epoch(self) -> int:
        raise NotImplementedError

    def read_committed(self, start_offset: int, max_records: int | None = None) -> list[RecordBatch]:
        """Committed batches (data and control) from `start_offset`, below the high watermark."""
        raise NotImplementedError

    def batches(self) -> list[RecordBatch]:
        """Every batch in the log, committed or not (for dumps and invariant checks)."""
        raise NotImplementedError

    def metrics(self, now: int) -> dict[str, float | str]:
        """KIP-595's raft-manager metrics that the core can know (names as in the KIP)."""
        raise NotImplementedError
