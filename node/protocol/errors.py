"""Error codes used by the quorum RPCs.

Numeric values follow Apache Kafka's `Errors` enum so that a Kafka operator reading a log or a packet
capture sees familiar numbers.
"""

from __future__ import annotations

from enum import IntEnum


class ErrorCode(IntEnum):
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    NOT_LEADER_OR_FOLLOWER = 6  # KIP-595's NOT_LEADER_FOR_PARTITION
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    MESSAGE_TOO_LARGE = 10
    NETWORK_EXCEPTION = 13
    INVALID_REQUEST = 42
    UNSUPPORTED_VERSION = 35
    UNKNOWN_SERVER_ERROR = -1
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    INCONSISTENT_VOTER_SET = 94
    INVALID_UPDATE_VERSION = 95
    INVALID_CLUSTER_ID = 104
    INVALID_QUORUM_STATE = 110  # KIP-595: a request conflicts with the locally known state

    @property
    def retriable(self) -> bool:
        return self in _RETRIABLE


_RETRIABLE = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.BROKER_NOT_AVAILABLE,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
    }
)
