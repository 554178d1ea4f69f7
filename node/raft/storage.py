"""The persistent storage a Raft node needs, as an interface both runtimes implement.

The real runtime writes segment files and a quorum-state file with real fsync
(`node.runtime.file_storage`); the simulator keeps bytes in memory and forgets what was not flushed
when a node crashes (`node.sim.disk`). The core never calls these methods itself: it returns actions,
and the runtime maps them onto this interface.

Snapshots (KIP-630) are opaque bytes to both: the state machine above produces and loads them, the
core ships them and decides where the log starts. A storage keeps at least its latest durable
snapshot and hands it back at `load`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

from node.protocol.broker_api import SnapshotId
from node.raft.quorum_state import QuorumStateData
from node.raft.records import RecordBatch


@dataclass(frozen=True, slots=True)
class LoadedSnapshot:
    """A durable snapshot: the state machine's image of every record below `snapshot_id.end_offset`,
    whose last record has epoch `snapshot_id.epoch`."""

    snapshot_id: SnapshotId
    data: bytes


@dataclass(frozen=True, slots=True)
class LoadedState:
    """What a node starts from.

    `batches` may still hold records below the snapshot's end (a crash came between writing the
    snapshot and deleting the log before it): the core drops them and asks the runtime to delete them.
    """

    quorum_state: QuorumStateData | None  # None: a fresh data dir
    batches: tuple[RecordBatch, ...]
    cluster_id: str | None
    recovered: str | None = None  # a note on what start-up recovery did (torn tail truncated, ...)
    snapshot: LoadedSnapshot | None = None  # the latest valid snapshot, if any


class StorageError(Exception):
    """Persistent state that cannot be trusted: the node must not start (never silently reset)."""


@dataclass(frozen=True, slots=True)
class TrimmedLog:
    """The loaded log cut to start at the snapshot end, and what the storage must do to match."""

    batches: tuple[RecordBatch, ...]
    delete_before: bool  # batches below the snapshot end were dropped: delete them
    reset: bool  # the stored log cannot continue at the snapshot end: empty it


def trim_to_snapshot(snapshot: SnapshotId | None, batches: tuple[RecordBatch, ...]) -> TrimmedLog:
    """Cut a loaded log so that it starts exactly at the snapshot end.

    A log that starts above the snapshot end (or above 0 without a snapshot) has lost records nobody
    else may hold: StorageError. A batch straddling the snapshot end, or a log that ends before it, is
    what is left of a log that a fetched snapshot replaced (ResetLog removes the newest segments
    first, so a crash leaves an older prefix): the log restarts empty at the snapshot end. So does a
    log that goes on past the snapshot end in an epoch older than the snapshot's: the record before
    the end is of the snapshot's epoch, so those records diverged from the log the snapshot was taken
    of (a crash between installing a fetched snapshot and the ResetLog after it; Kafka's
    `truncateToLatestSnapshot` resets such a log too).
    """
    start = snapshot.end_offset if snapshot is not None else 0
    if batches and batches[0].base_offset > start:
        covered = f"snapshot {snapshot.end_offset}-{snapshot.epoch}" if snapshot else "no snapshot"
        raise StorageError(
            f"the log starts at offset {batches[0].base_offset} but {covered} covers the records before it; "
            "refusing to start"
        )
    if snapshot is None or not batches:
        return TrimmedLog(batches, False, False)
    keep = [b for b in batches if b.next_offset > start]
    if not keep:
        # Everything is below the snapshot: ends exactly at it (delete) or before it (reset).
        return TrimmedLog((), batches[-1].next_offset == start, batches[-1].next_offset != start)
    if keep[0].base_offset != start or keep[0].epoch < snapshot.epoch:
        return TrimmedLog((), False, True)
    return TrimmedLog(tuple(keep), len(keep) < len(batches), False)


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

    @abstractmethod
    def write_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        """Store a snapshot atomically (all or nothing); durable once the runtime says so (see
        `actions.WriteSnapshot`). Older snapshots may be removed, the latest must be kept."""

    @abstractmethod
    def delete_before(self, offset: int) -> None:
        """The log may drop every record below `offset` (a snapshot covers them). Whole segments
        only: records below `offset` may stay, `load` returns them and the core ignores them."""

    @abstractmethod
    def reset(self, offset: int) -> None:
        """Remove every record: the log restarts empty at `offset` (a fetched snapshot ends there)."""
