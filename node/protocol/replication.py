"""ReplicaHeartbeat: kraft-chaos's light stand-in for a follower's Fetch of partition data.

kraft-chaos replicates no partition data, yet a partition leader must still know which followers keep
up (KIP-497: the leader shrinks and expands its ISR with AlterPartition). A follower sends this to
each leader it follows, every replica heartbeat interval, naming the partitions it follows there and
the leader epoch it knows for each; hearing it is what "caught up" means. A private extension API key
(9001, outside Kafka's range) keeps it apart from Kafka's APIs; broker <-> broker, ClusterAction.

The wire layout is defined here, next to the messages, so the extension stays in one file.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from node.protocol.fields import ERROR, INT32, INT64, UUID, define, struct_array

REPLICA_HEARTBEAT_API_KEY = 9001


@dataclass(frozen=True, slots=True)
class ReplicaHeartbeatPartition:
    topic_id: uuid.UUID
    partition_index: int
    leader_epoch: int  # the leader epoch the follower knows; the leader counts only its own epoch


@dataclass(frozen=True, slots=True)
class ReplicaHeartbeatRequest:
    replica_id: int  # the follower's broker id
    broker_epoch: int  # the follower's registration epoch: a stale incarnation is not added to an ISR
    metadata_offset: int  # the follower's applied metadata offset (for diagnostics)
    partitions: tuple[ReplicaHeartbeatPartition, ...]


@dataclass(frozen=True, slots=True)
class ReplicaHeartbeatResponse:
    error_code: int  # NONE; STALE_BROKER_EPOCH when the leader knows a newer registration of the follower


define(
    ReplicaHeartbeatPartition,
    ("topic_id", UUID),
    ("partition_index", INT32),
    ("leader_epoch", INT32),
)
define(
    ReplicaHeartbeatRequest,
    ("replica_id", INT32),
    ("broker_epoch", INT64),
    ("metadata_offset", INT64),
    ("partitions", struct_array(ReplicaHeartbeatPartition)),
)
define(ReplicaHeartbeatResponse, ("error_code", ERROR))

__all__ = [
    "REPLICA_HEARTBEAT_API_KEY",
    "ReplicaHeartbeatPartition",
    "ReplicaHeartbeatRequest",
    "ReplicaHeartbeatResponse",
]
