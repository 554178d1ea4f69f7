"""What a runtime feeds into `RaftNode.handle(now_ms, event)`."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

from node.protocol.messages import Request, Response, SnapshotId


@dataclass(frozen=True, slots=True)
class Start:
    """First event after construction: arms timers and starts looking for a leader."""


@dataclass(frozen=True, slots=True)
class Tick:
    """A timer set with `SetTimer` is due (or the runtime simply woke up): handle expired deadlines."""


@dataclass(frozen=True, slots=True)
class RequestReceived:
    """An inbound request. `reply_to` is the runtime's token for the connection; echo it in `Respond`."""

    reply_to: Hashable
    correlation_id: int
    message: Request


@dataclass(frozen=True, slots=True)
class ResponseReceived:
    """The answer to a `SendRequest` this node made to node `source`."""

    source: int
    correlation_id: int
    message: Response


@dataclass(frozen=True, slots=True)
class RequestFailed:
    """A `SendRequest` could not be delivered or its connection broke before the answer came.

    `sent` is False when the request certainly never left this node (no connection: refused, still
    backing off, nothing written), so it had no effect at the destination; True when it may have
    reached it (written, then the connection broke or the answer timed out): ambiguous."""

    destination: int
    correlation_id: int
    sent: bool = True


@dataclass(frozen=True, slots=True)
class FlushCompleted:
    """Every log byte up to `end_offset` (exclusive) is durable: fsync returned."""

    end_offset: int


@dataclass(frozen=True, slots=True)
class Append:
    """The state machine above asks the leader to append `records`; `handle` names the completion."""

    handle: Hashable
    records: tuple[bytes, ...]


@dataclass(frozen=True, slots=True)
class ReadBarrier:
    """A linearizable read: answered once this leader has committed an entry that it had shipped to
    no voter when the barrier arrived (appending a `ReadMarker` if it has none; `read_barrier.py`)."""

    handle: Hashable


@dataclass(frozen=True, slots=True)
class Resign:
    """Graceful shutdown: a leader resigns with EndQuorumEpoch, a candidate gives up its election."""


@dataclass(frozen=True, slots=True)
class CreateSnapshot:
    """The state machine above has applied every record below `end_offset` and gives its image as
    `data` (non-empty). `end_offset` must be at most the high watermark and a batch boundary (the end
    of a batch it applied); one at or below the current snapshot's end is ignored (a newer snapshot
    was installed meanwhile). The core answers with `WriteSnapshot`."""

    end_offset: int
    data: bytes


@dataclass(frozen=True, slots=True)
class SnapshotWritten:
    """The `WriteSnapshot` of `snapshot_id` completed: the snapshot is durable."""

    snapshot_id: SnapshotId


Event = (
    Start
    | Tick
    | RequestReceived
    | ResponseReceived
    | RequestFailed
    | FlushCompleted
    | Append
    | ReadBarrier
    | Resign
    | CreateSnapshot
    | SnapshotWritten
)
