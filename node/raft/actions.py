"""What `RaftNode.handle` asks its runtime to do.

A runtime carries out the actions in the order given. `PersistQuorumState` must be durable before
any later action runs (a vote is stored before it is granted). `AppendBatches` and `TruncateLog` only
change the log's contents; durability comes from `Flush`, answered by a `FlushCompleted` event when
fsync returns, and may happen asynchronously while other events are handled.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

from node.protocol.messages import Request, Response
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


Action = (
    SendRequest
    | Respond
    | AppendBatches
    | TruncateLog
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
)
