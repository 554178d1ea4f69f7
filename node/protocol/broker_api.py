"""The APIs nodes speak among themselves; each needs ClusterAction on the cluster.

- BrokerRegistration / BrokerHeartbeat (KIP-631): a broker joins, keeps its lease, asks to be fenced
  or to shut down; the controller answers with its next state.
- AlterPartition (KIP-497's AlterIsr, by topic id): a partition leader asks the controller to change
  an ISR; `partition_epoch` is the KIP's zkVersion.
- Envelope (KIP-590): a broker forwards a client's admin write to the active controller. The inner
  request travels as a whole frame of the same codec (length prefix and header included), so the
  controller sees the client's API key, version and correlation id unchanged.
- FetchSnapshot (KIP-630): a replica whose fetch offset is below the log start copies a snapshot in
  chunks; the single metadata partition is flattened into the message as in `messages.FetchRequest`.

Field names are Kafka's, in snake_case; `ThrottleTimeMs` is left out.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from node.protocol.common import NO_BROKER, UNKNOWN_EPOCH

# --- BrokerRegistration (62) -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Listener:
    name: str  # "PLAINTEXT", "SASL_PLAINTEXT", ...
    host: str
    port: int  # uint16
    security_protocol: int  # int16, Kafka's SecurityProtocol id: 0 PLAINTEXT, 2 SASL_PLAINTEXT


@dataclass(frozen=True, slots=True)
class BrokerRegistrationFeature:
    name: str  # "metadata.version", ...
    min_supported_version: int  # int16
    max_supported_version: int  # int16


@dataclass(frozen=True, slots=True)
class BrokerRegistrationRequest:
    broker_id: int
    cluster_id: str
    incarnation_id: uuid.UUID  # new on every process start: tells a restart from a duplicate id
    listeners: tuple[Listener, ...]
    features: tuple[BrokerRegistrationFeature, ...] = ()
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class BrokerRegistrationResponse:
    error_code: int
    broker_epoch: int = -1  # the offset of the registration record; -1 when refused


# --- BrokerHeartbeat (63) ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BrokerHeartbeatRequest:
    broker_id: int
    broker_epoch: int
    current_metadata_offset: int  # the highest metadata offset the broker has applied
    want_fence: bool = False
    want_shut_down: bool = False


@dataclass(frozen=True, slots=True)
class BrokerHeartbeatResponse:
    error_code: int
    is_caught_up: bool = False
    is_fenced: bool = True
    should_shut_down: bool = False


# --- AlterPartition (56) -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AlterPartitionPartitionData:
    partition_index: int
    leader_epoch: int
    new_isr: tuple[int, ...]
    partition_epoch: int
    # KIP-903: the broker epoch of each member of `new_isr` as the leader saw it catch up (its
    # NewIsrWithEpochs), so the controller refuses a member that has registered again since (a new
    # incarnation, maybe with an empty log: KAFKA-14617). -1 for a member the leader has no epoch
    # for; empty: not given. Neither is checked.
    new_isr_epochs: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class AlterPartitionTopicData:
    topic_id: uuid.UUID
    partitions: tuple[AlterPartitionPartitionData, ...]


@dataclass(frozen=True, slots=True)
class AlterPartitionRequest:
    broker_id: int  # the partition leader asking
    broker_epoch: int
    topics: tuple[AlterPartitionTopicData, ...]


@dataclass(frozen=True, slots=True)
class AlterPartitionPartitionResult:
    partition_index: int
    error_code: int
    leader_id: int = NO_BROKER
    leader_epoch: int = UNKNOWN_EPOCH
    isr: tuple[int, ...] = ()
    partition_epoch: int = UNKNOWN_EPOCH


@dataclass(frozen=True, slots=True)
class AlterPartitionTopicResult:
    topic_id: uuid.UUID
    partitions: tuple[AlterPartitionPartitionResult, ...]


@dataclass(frozen=True, slots=True)
class AlterPartitionResponse:
    error_code: int  # request-level: STALE_BROKER_EPOCH, NOT_CONTROLLER, CLUSTER_AUTHORIZATION_FAILED
    topics: tuple[AlterPartitionTopicResult, ...] = ()


# --- Envelope (58) -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EnvelopeRequest:
    request_data: bytes  # the client's whole request frame, as the forwarding broker received it
    request_principal: str  # the client's authenticated principal, "User:alice"
    client_host_address: str  # the client's IP address, as text
    listener_name: str  # the listener the client came in on
    security_protocol: str  # that listener's protocol: "PLAINTEXT", "SASL_PLAINTEXT"


@dataclass(frozen=True, slots=True)
class EnvelopeResponse:
    error_code: int  # NOT_CONTROLLER, CLUSTER_AUTHORIZATION_FAILED, PRINCIPAL_DESERIALIZATION_FAILURE
    response_data: bytes | None = None  # the inner response frame when error_code is NONE


# --- FetchSnapshot (59) ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SnapshotId:
    end_offset: int
    epoch: int


@dataclass(frozen=True, slots=True)
class FetchSnapshotRequest:
    cluster_id: str | None
    replica_id: int
    max_bytes: int
    current_leader_epoch: int
    snapshot_id: SnapshotId
    position: int  # byte offset into the snapshot to read from


@dataclass(frozen=True, slots=True)
class FetchSnapshotResponse:
    error_code: int
    leader_id: int  # CurrentLeader.LeaderId
    leader_epoch: int  # CurrentLeader.LeaderEpoch
    snapshot_id: SnapshotId
    size: int = 0  # the whole snapshot's size in bytes
    position: int = 0  # where `unaligned_records` starts
    unaligned_records: bytes = b""


__all__ = [
    "AlterPartitionPartitionData",
    "AlterPartitionPartitionResult",
    "AlterPartitionRequest",
    "AlterPartitionResponse",
    "AlterPartitionTopicData",
    "AlterPartitionTopicResult",
    "BrokerHeartbeatRequest",
    "BrokerHeartbeatResponse",
    "BrokerRegistrationFeature",
    "BrokerRegistrationRequest",
    "BrokerRegistrationResponse",
    "EnvelopeRequest",
    "EnvelopeResponse",
    "FetchSnapshotRequest",
    "FetchSnapshotResponse",
    "Listener",
    "SnapshotId",
]
