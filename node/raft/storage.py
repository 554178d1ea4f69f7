"""The persistent storage a Raft node needs, as an interface both runtimes implement.

The real runtime writes segment files and a quorum-state file with real fsync
(`node.runtime.file_storage`); the simulator keeps bytes in memory and forgets what was not flushed
when a node crashes (`node.sim.disk`). The core never calls these methods itself: it returns actions,
and the runtime maps them onto this interface.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

from node.raft.quorum_state import QuorumStateData
from node.raft.records import RecordBatch


@dataclass(frozen=True, slots=True)
class LoadedState:
    """What a node starts from."""

    quorum_state: QuorumStateData | None  # None: a fresh data dir
    batches: tuple[RecordBatch, ...]
    cluster_id: str | None
    recovered: str | None = None  # a note on what start-up recovery did (torn tail truncated, ...)


class StorageError(Exception):
    """Persistent state that cannot be trusted: the node must not start (never silently reset)."""


class RaftStorage(ABC):
    @abstractmethod
    def load(self) -> LoadedState:
        """Read back the state; truncate a torn log tail; raise StorageError on corruption before it.

        Everything returned must be durable: the node acknowledges a loaded log at once, so data a
        killed process left in the page cache must be fsynced here, before the node starts.
        """

    @abstractmethod
    def append(self, batches: tuple[RecordBatch, ...]) -> None: ...

    @abstractmethod
    def truncate(self, offset: int) -> None:
        """Remove every record at or after `offset`."""

    @abstractmethod
    def flush(self) -> None:
        """Make every appended byte durable (fsync)."""

    @abstractmethod
    def write_quorum_state(self, state: QuorumStateData) -> None:
        """Atomically and durably replace the quorum-state file."""

    @abstractmethod
    def write_cluster_id(self, cluster_id: str) -> None:
        """Durably record the committed clusterId (meta.properties)."""
