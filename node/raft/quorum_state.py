"""The persisted election state and one state object per role (after Kafka's `QuorumState`).

`QuorumStateData` carries the fields of KIP-595's `QuorumStateMessage`; it is what the quorum-state
file holds. The role objects hold what each role keeps in memory, and that state goes when the role
goes: a leader's parked Fetches, read barriers and unwritten appends live in its `Leader` object, a
follower's snapshot copy in its `Follower` object. `check_transition` says which role may follow
which (`ENTERED_FROM`); the transitions themselves live in `election`.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from enum import Enum
from typing import TypeVar

from node.raft.waiting import Barrier, ParkedFetch, PendingAppend, SnapshotFetch

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
    # An observer whose fetch timeout fired on this epoch's leader: other nodes naming that leader
    # (voters that have not timed out yet) are not followed; only its own answer makes it the leader
    # again. Following the hearsay cost a whole fetch timeout more on a dead leader. NO_ID: none.
    lost_leader: int = NO_ID
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
    # What only a leader waits on; it vanishes with the leadership (`election._leave_role` answers it).
    parked: list[ParkedFetch] = field(default_factory=list)  # Fetches with nothing new yet (fetch.py)
    barriers: list[Barrier] = field(default_factory=list)  # reads waiting for the commit (read_barrier.py)
    pending: deque[PendingAppend] = field(default_factory=deque)  # appends waiting for the flush (append.py)
    role = Role.LEADER


@dataclass(slots=True)
class Follower:
    epoch: int
    leader_id: int
    fetch_deadline: int  # quorum.fetch.timeout.ms without a successful fetch -> election
    # A Fetch to the leader succeeded in this epoch (and fetch_deadline has not passed since): the
    # leader is alive, so this voter refuses pre-votes (KIP-996).
    heard_from_leader: bool = False
    # The leader's snapshot being copied (KIP-630); a new role or epoch starts over from a Fetch.
    snapshot_fetch: SnapshotFetch | None = None
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


class IllegalStateError(RuntimeError):
    """The core reached a role or state its own code never produces: a bug in this package, never bad
    input from a peer (that is answered with an error code). Like Kafka's IllegalStateException."""


_ANY = frozenset(Role)

# Which roles each role may be entered from (after Kafka's QuorumState, which refuses any other with
# an IllegalStateException). A newer epoch may reach any role from any role; the rest is narrow.
ENTERED_FROM: dict[Role, frozenset[Role]] = {
    Role.UNATTACHED: _ANY,  # a newer epoch; or an observer whose leader went quiet
    # A grant at the vote's epoch. Voted -> Voted only with the planted bug that grants twice.
    Role.VOTED: frozenset({Role.UNATTACHED, Role.VOTED, Role.PROSPECTIVE}),
    # An election or fetch timeout, or a check-quorum failure (a prospective re-runs its round in place).
    Role.PROSPECTIVE: _ANY - {Role.PROSPECTIVE},
    Role.CANDIDATE: _ANY,  # a won pre-vote, a handed-over leadership, or a timeout without pre-vote
    Role.LEADER: frozenset({Role.CANDIDATE}),  # a won election
    Role.FOLLOWER: _ANY,  # a leader named in a message of this or a newer epoch
    Role.RESIGNED: frozenset({Role.LEADER}),  # a Resign event
}

# Roles entered without a new epoch, and the one that bumps it by one.
_SAME_EPOCH = frozenset({Role.PROSPECTIVE, Role.LEADER, Role.RESIGNED})


def check_transition(old: RoleState, new: RoleState) -> None:
    """Raise IllegalStateError unless `new` may follow `old` (role, and epoch where it is fixed)."""
    if old.role not in ENTERED_FROM[new.role]:
        raise IllegalStateError(f"illegal role change {old.role.value} -> {new.role.value} in epoch {old.epoch}")
    if new.role in _SAME_EPOCH and new.epoch != old.epoch:
        raise IllegalStateError(f"{new.role.value} must keep epoch {old.epoch}, not move to {new.epoch}")
    if new.role is Role.CANDIDATE and new.epoch != old.epoch + 1:
        raise IllegalStateError(f"a candidacy must bump epoch {old.epoch} by one, not move to {new.epoch}")


R = TypeVar("R", Unattached, Voted, Prospective, Candidate, Leader, Follower, Resigned)


def expect_role(state: RoleState, role: type[R], doing: str) -> R:
    """`state` narrowed to `role`, or IllegalStateError naming what needed it (a real check, not an
    `assert`, which `python -O` strips)."""
    if not isinstance(state, role):
        raise IllegalStateError(f"{doing} needs the {role.role.value} role, not {state.role.value}")
    return state
