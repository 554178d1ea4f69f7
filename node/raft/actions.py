"""What `RaftNode.handle` asks its runtime to do.

A runtime carries out the actions in the order given. `PersistQuorumState` must be durable before
any later action runs (a vote is stored before it is granted). `AppendBatches` and `TruncateLog` only
change the log's contents; durability comes from `Flush`, answered by a `FlushCompleted` event when
fsync returns, and may happen asynchronously while other events are handled.

Snapshots (KIP-630): `WriteSnapshot` is answered by a `SnapshotWritten` event once the snapshot is
durable; only then does the core move its log start (`DeleteLogBefore`, or `ResetLog` after a
snapshot fetched from the leader) and serve the snapshot. `LoadSnapshot` tells the state machine
above to replace its image.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

from node.protocol.messages import Request, Response, SnapshotId
from node.raft.quorum_state import QuorumStateData
from node.raft.records import RecordBatch


@dataclass(frozen=True, slots=True)
class SendRequest:
    destination: int
    correlation_id: int
    message: Request


@dataclass(frozen=True, slots=True)
class Respond:
    reply_to: Hashable
    correlation_id: int
    message: Response


@dataclass(frozen=True, slots=True)
class AppendBatches:
    batches: tuple[RecordBatch, ...]


@dataclass(frozen=True, slots=True)
class TruncateLog:
    """Remove every record at or after `offset`."""

    offset: int


@dataclass(frozen=True, slots=True)
class WriteSnapshot:
    """Store `data` as snapshot `snapshot_id` atomically and durably (FileStorage: temp file, fsync,
    rename, fsync the dir), then feed `SnapshotWritten(snapshot_id)`. May run asynchronously; a
    crash before it completes leaves the previous snapshot in place."""

    snapshot_id: SnapshotId
    data: bytes


@dataclass(frozen=True, slots=True)
class DeleteLogBefore:
    """The log now starts at `offset` (a durable snapshot covers what is below it): the storage may
    delete every segment entirely below `offset`. `offset` is at most the log end."""

    offset: int


@dataclass(frozen=True, slots=True)
class ResetLog:
    """Remove every record: the log restarts empty at `offset`, the end of a snapshot that was
    fetched from the leader and is durable. Appends at `offset` follow."""

    offset: int


@dataclass(frozen=True, slots=True)
class LoadSnapshot:
    """Replace the state machine's image with the snapshot `data`: it holds every committed record
    below `snapshot_id.end_offset`; read the log from there with `RaftNode.read_committed`. Comes
    first at Start when storage held a snapshot, and after a snapshot fetched from the leader."""

    snapshot_id: SnapshotId
    data: bytes


@dataclass(frozen=True, slots=True)
class Flush:
    """fsync the log; answer with FlushCompleted(end_offset)."""

    end_offset: int


@dataclass(frozen=True, slots=True)
class PersistQuorumState:
    state: QuorumStateData


@dataclass(frozen=True, slots=True)
class PersistClusterId:
    """The committed clusterId, for meta.properties."""

    cluster_id: str


@dataclass(frozen=True, slots=True)
class SetTimer:
    """Deliver a Tick at `deadline_ms`. Each SetTimer REPLACES the previous one: the core re-announces
    its earliest deadline whenever it changes, including when it moves later."""

    deadline_ms: int


@dataclass(frozen=True, slots=True)
class AppendCompleted:
    handle: Hashable
    base_offset: int
    last_offset: int


@dataclass(frozen=True, slots=True)
class AppendFailed:
    """The append certainly did not commit (leadership was lost before it was written, or refused)."""

    handle: Hashable
    error: int
    message: str = ""


@dataclass(frozen=True, slots=True)
class ReadBarrierCompleted:
    """Leadership was confirmed after the barrier arrived: a read of the state machine applied up to
    `read_offset` (the high watermark now) is linearizable."""

    handle: Hashable
    read_offset: int


@dataclass(frozen=True, slots=True)
class ReadBarrierFailed:
    """Not (or no longer) the leader: the read must go elsewhere. Reads have no effect, so this is safe."""

    handle: Hashable
    error: int
    message: str = ""


@dataclass(frozen=True, slots=True)
class HighWatermarkAdvanced:
    """Records below `high_watermark` are committed; read them with `RaftNode.read_committed`."""

    high_watermark: int


@dataclass(frozen=True, slots=True)
class LeaderChanged:
    epoch: int
    leader_id: int  # -1 when unknown


@dataclass(frozen=True, slots=True)
class Fatal:
    """The node must stop (e.g. a leader of another cluster): log `reason` and exit non-zero."""

    reason: str


@dataclass(frozen=True, slots=True)
class Warn:
    """Something the operator must know but that does not stop the node (e.g. the epochs are used
    up): log `message` as one warning line."""

    message: str


Action = (
    SendRequest
    | Respond
    | AppendBatches
    | TruncateLog
    | WriteSnapshot
    | DeleteLogBefore
    | ResetLog
    | LoadSnapshot
    | Flush
    | PersistQuorumState
    | PersistClusterId
    | SetTimer
    | AppendCompleted
    | AppendFailed
    | ReadBarrierCompleted
    | ReadBarrierFailed
    | HighWatermarkAdvanced
    | LeaderChanged
    | Fatal
    | Warn
)
