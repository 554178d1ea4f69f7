"""What `NodeProcess.handle` asks its runtime to do beyond the Raft core's own actions.

A process passes the Raft core's I/O actions through in order (`SendRequest` with its own
correlation ids, `Respond`, `AppendBatches`, `TruncateLog`, `Flush`, `PersistQuorumState`,
`PersistClusterId`, `SetTimer` merged over every component, `Fatal`, the snapshot actions) and the
observations `LeaderChanged` and `HighWatermarkAdvanced`; it consumes the append and read-barrier
outcomes itself.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ShutDown:
    """The process must stop, cleanly (unlike `Fatal`): a controlled shutdown finished, or the
    controller refused this broker's identity. Exit status 0 after a requested stop, else non-zero."""

    reason: str
    requested: bool = False


@dataclass(frozen=True, slots=True)
class MetadataApplied:
    """The committed image now reflects every record below `next_offset` (for dumps and invariants)."""

    next_offset: int


__all__ = ["MetadataApplied", "ShutDown"]
