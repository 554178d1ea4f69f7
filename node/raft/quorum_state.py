"""The persisted election state and one state object per role (after Kafka's `QuorumState`).

`QuorumStateData` carries the fields of KIP-595's `QuorumStateMessage`; it is what the quorum-state
file holds. The role objects hold what each role keeps in memory; the transitions live in `election`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

NO_ID = -1


@dataclass(frozen=True, slots=True)
class QuorumStateData:
    leader_id: int = NO_ID
    leader_epoch: int = 0
    voted_id: int = NO_ID
    applied_offset: int = 0
    current_voters: tuple[int, ...] = ()


class Role(Enum):
    UNATTACHED = "unattached"
    VOTED = "voted"
    PROSPECTIVE = "prospective"
    CANDIDATE = "candidate"
    LEADER = "leader"
    FOLLOWER = "follower"
    RESIGNED = "resigned"


@dataclass(slots=True)
class Unattached:
    """Knows an epoch but neither a leader nor a vote of its own in it."""

    epoch: int
    election_deadline: int  # voters only; observers use it as the "retry discovery" deadline
    role = Role.UNATTACHED


@dataclass(slots=True)
class Voted:
    """Granted its vote in `epoch` to `voted_id` and waits for the election to resolve."""

    epoch: int
    voted_id: int
    election_deadline: int
    role = Role.VOTED


@dataclass(slots=True)
class Prospective:
    """Asks the voters for pre-votes (KIP-996) before standing: same epoch, nothing persisted.

    Only a majority of pre-votes makes it a candidate and bumps the epoch, so a voter that cannot
    reach a majority (partitioned, or behind) never inflates the epoch nor disrupts the leader."""

    epoch: int
    leader_id: int  # the leader it followed in this epoch (it keeps fetching from it), or NO_ID
    retries: int  # elections this node started in a row (carried from a failed candidacy)
    election_deadline: int  # when this round of pre-votes is deemed failed and another starts
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)
    backing_off: bool = False  # a majority refused: ask nobody more until the deadline (fetching goes on)
    role = Role.PROSPECTIVE


@dataclass(slots=True)
class Candidate:
    epoch: int
    retries: int  # elections this node started in a row, for the backoff
    election_deadline: int  # when this election is deemed failed
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)
    backing_off_until: int | None = None  # failed election: wait, then start the next
    role = Role.CANDIDATE


@dataclass(slots=True)
class ReplicaProgress:
    """What the leader knows of one replica's replication."""

    replica_id: int
    end_offset: int = -1  # acknowledged log end offset (its fetch offset), -1 when unknown
    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1
    end_at_last_fetch: int = -1  # the leader's log end when this replica last fetched


@dataclass(slots=True)
class Leader:
    epoch: int
    epoch_start_offset: int  # the offset of this epoch's LeaderChange record
    voters: dict[int, ReplicaProgress]
    observers: dict[int, ReplicaProgress]
    unendorsed: set[int]  # voters that have not yet endorsed this epoch (BeginQuorumEpoch)
    granted: tuple[int, ...]
    check_quorum_deadline: int  # zombie-leader rule: a majority must fetch before this
    fetched_since_check: set[int] = field(default_factory=set)
    # The end of what this leader has sent in Fetch responses: entries at or above it reached no one
    # yet, so a Fetch acknowledging one was sent after now (read_barrier.py).
    shipped_end: int = 0
    role = Role.LEADER


@dataclass(slots=True)
class Follower:
    epoch: int
    leader_id: int
    fetch_deadline: int  # quorum.fetch.timeout.ms without a successful fetch -> election
    # A Fetch to the leader succeeded in this epoch (and fetch_deadline has not passed since): the
    # leader is alive, so this voter refuses pre-votes (KIP-996).
    heard_from_leader: bool = False
    role = Role.FOLLOWER


@dataclass(slots=True)
class Resigned:
    """A leader that sent EndQuorumEpoch and waits for a successor (or its election timeout)."""

    epoch: int
    leader_id: int
    election_deadline: int
    preferred_successors: tuple[int, ...]
    unacknowledged: set[int] = field(default_factory=set)
    role = Role.RESIGNED


RoleState = Unattached | Voted | Prospective | Candidate | Leader | Follower | Resigned
