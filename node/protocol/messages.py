"""The quorum RPCs of KIP-595 as dataclasses.

Field names are the KIP's, in snake_case (`CandidateEpoch` -> `candidate_epoch`). The KIP nests each
request in Topics/Partitions for a future multi-raft; kraft-chaos runs a single metadata partition,
so the per-partition fields are flattened into the message. `NO_LEADER` (-1) stands for an unknown
leader or replica, as in the KIP.
"""

from __future__ import annotations

from dataclasses import dataclass

from node.protocol.broker_api import FetchSnapshotRequest, FetchSnapshotResponse, SnapshotId
from node.raft.records import RecordBatch

NO_LEADER = -1
NO_REPLICA = -1


@dataclass(frozen=True, slots=True)
class VoteRequest:
    cluster_id: str | None
    candidate_epoch: int
    candidate_id: int
    last_offset_epoch: int
    last_offset: int
    # KIP-996 (VoteRequest v2): a pre-vote asks whether the voter would vote for the candidate in the
    # next epoch; candidate_epoch is then the prospective's current epoch, not a bumped one.
    pre_vote: bool = False


@dataclass(frozen=True, slots=True)
class VoteResponse:
    error_code: int
    leader_id: int
    leader_epoch: int
    vote_granted: bool


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochRequest:
    cluster_id: str | None
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochResponse:
    error_code: int
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class EndQuorumEpochRequest:
    cluster_id: str | None
    replica_id: int
    leader_id: int
    leader_epoch: int
    preferred_successors: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class EndQuorumEpochResponse:
    error_code: int
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class EpochEndOffset:
    """FetchResponse.DivergingEpoch: truncate to `end_offset` and drop anything of a later epoch."""

    epoch: int
    end_offset: int


@dataclass(frozen=True, slots=True)
class FetchRequest:
    cluster_id: str | None
    replica_id: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    max_wait_ms: int = 0
    max_bytes: int = 1 << 20


@dataclass(frozen=True, slots=True)
class FetchResponse:
    error_code: int
    leader_id: int  # CurrentLeader.LeaderId
    leader_epoch: int  # CurrentLeader.LeaderEpoch
    high_watermark: int
    log_start_offset: int = 0
    diverging_epoch: EpochEndOffset | None = None
    records: tuple[RecordBatch, ...] = ()
    # KIP-630: the fetch offset is below the leader's log start; fetch this snapshot (FetchSnapshot) first.
    snapshot_id: SnapshotId | None = None
    # extension: the leader's clusterId with a snapshot_id, whose ClusterId record the snapshot replaced
    cluster_id: str | None = None


@dataclass(frozen=True, slots=True)
class DescribeQuorumRequest:
    pass


@dataclass(frozen=True, slots=True)
class ReplicaState:
    replica_id: int
    log_end_offset: int  # -1 when unknown
    last_fetch_timestamp: int = -1  # ms on the leader's clock, -1 when unknown
    last_caught_up_timestamp: int = -1


@dataclass(frozen=True, slots=True)
class DescribeQuorumResponse:
    error_code: int
    leader_id: int
    leader_epoch: int
    high_watermark: int
    current_voters: tuple[ReplicaState, ...] = ()
    observers: tuple[ReplicaState, ...] = ()
    cluster_id: str | None = None  # extension: lets `quorum describe --status` print ClusterId
    leader_time_ms: int = -1  # extension: the leader's clock, so lag times can be computed remotely


REQUESTS = (VoteRequest, BeginQuorumEpochRequest, EndQuorumEpochRequest, FetchRequest, DescribeQuorumRequest)
RESPONSES = (
    VoteResponse,
    BeginQuorumEpochResponse,
    EndQuorumEpochResponse,
    FetchResponse,
    DescribeQuorumResponse,
)

# FetchSnapshot (KIP-630) lives in `broker_api` with the other inter-node APIs; the core serves it too.
Request = (
    VoteRequest
    | BeginQuorumEpochRequest
    | EndQuorumEpochRequest
    | FetchRequest
    | DescribeQuorumRequest
    | FetchSnapshotRequest
)
Response = (
    VoteResponse
    | BeginQuorumEpochResponse
    | EndQuorumEpochResponse
    | FetchResponse
    | DescribeQuorumResponse
    | FetchSnapshotResponse
)

# Kafka's API keys, so frames look familiar in a capture.
API_KEYS: dict[type, int] = {
    FetchRequest: 1,
    FetchResponse: 1,
    VoteRequest: 52,
    VoteResponse: 52,
    BeginQuorumEpochRequest: 53,
    BeginQuorumEpochResponse: 53,
    EndQuorumEpochRequest: 54,
    EndQuorumEpochResponse: 54,
    DescribeQuorumRequest: 55,
    DescribeQuorumResponse: 55,
}

RESPONSE_FOR: dict[type, type] = dict(zip(REQUESTS, RESPONSES, strict=True))

__all__ = [
    "API_KEYS",
    "NO_LEADER",
    "NO_REPLICA",
    "REQUESTS",
    "RESPONSES",
    "RESPONSE_FOR",
    "BeginQuorumEpochRequest",
    "BeginQuorumEpochResponse",
    "DescribeQuorumRequest",
    "DescribeQuorumResponse",
    "EndQuorumEpochRequest",
    "EndQuorumEpochResponse",
    "EpochEndOffset",
    "FetchRequest",
    "FetchResponse",
    "ReplicaState",
    "Request",
    "Response",
    "SnapshotId",
    "VoteRequest",
    "VoteResponse",
]
