"""What the node holds while it waits: requests parked, appends and reads not yet decided, snapshots
being copied or written.

These are plain records with no behaviour of the node in them, so the role objects (`quorum_state`)
and the shared state (`base`) can hold them without importing the sections that handle them.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

from node.protocol.messages import FetchRequest, FetchSnapshotResponse, SnapshotId


@dataclass(slots=True)
class ParkedFetch:
    """A leader's Fetch with nothing new to send, held until `deadline` or the next write (fetch.py)."""

    reply_to: Hashable
    correlation_id: int
    request: FetchRequest
    deadline: int


@dataclass(slots=True)
class Barrier:
    """A read barrier waiting for the high watermark to pass `floor` (read_barrier.py)."""

    handle: Hashable
    floor: int  # the first offset unshipped when the barrier arrived: the high watermark must pass it
    heard: set[int] = field(default_factory=set)  # planted bug only: voters whose Fetch came after it


@dataclass(slots=True)
class PendingAppend:
    """A leader's append waiting for the flush in flight before it is written (append.py)."""

    handle: Hashable
    records: tuple[bytes, ...]
    size: int
    received_ms: int


@dataclass(slots=True)
class WrittenAppend:
    """An append that is in the log and waits for the high watermark to pass it."""

    handle: Hashable
    base_offset: int
    last_offset: int
    epoch: int
    received_ms: int


@dataclass(frozen=True, slots=True)
class PendingSnapshot:
    """A WriteSnapshot that has not reported back yet."""

    data: bytes
    fetched: bool  # copied from the leader (install it), or made here (advance the log start)
    cluster_id: str | None = None  # the leader's, for a fetched snapshot


@dataclass(slots=True)
class SnapshotFetch:
    """A follower copying the leader's snapshot chunk by chunk (KIP-630 FetchSnapshot)."""

    snapshot_id: SnapshotId
    cluster_id: str | None
    parts: list[bytes]
    position: int = 0
    size: int = -1

    def accept(self, resp: FetchSnapshotResponse) -> str | None:
        """Add the chunk; returns why it does not fit, if it does not."""
        if resp.snapshot_id != self.snapshot_id:
            return f"chunk of snapshot {resp.snapshot_id}, fetching {self.snapshot_id}"
        if resp.position != self.position:
            return f"chunk at position {resp.position}, expected {self.position}"
        if resp.size <= 0 or (self.size >= 0 and resp.size != self.size):
            return f"snapshot size {resp.size}, expected {self.size}"
        if not resp.unaligned_records or resp.position + len(resp.unaligned_records) > resp.size:
            return f"chunk of {len(resp.unaligned_records)} bytes at {resp.position} does not fit {resp.size}"
        self.size = resp.size
        self.parts.append(resp.unaligned_records)
        self.position += len(resp.unaligned_records)
        return None

    @property
    def done(self) -> bool:
        return self.position == self.size
