"""A KIP-595 quorum member as a pure state machine.

`RaftNode.handle(now_ms, event)` is the only way in; it returns the actions the runtime must carry
out, in order. Everything else on the class is a read-only view for runtimes, metrics, dumps and the
simulator's invariant checks.

Reading guide: `_on_*` methods handle one event or message each and are named after the KIP's
sections; `_become_*` are the role transitions (each persists the quorum state before anything else
is sent); `_drive` sends whatever the current role owes its peers; `_check_deadlines` fires timers.

Snapshots (KIP-630) are opaque bytes from the state machine above. The log starts at the latest
durable snapshot's end (`log_start_offset`); a replica fetching below it is sent the snapshot id, copies
the snapshot with FetchSnapshot, and restarts its log at the snapshot's end.
"""

from __future__ import annotations

import base64
import random
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass, replace
from typing import Any

from node.protocol.errors import ErrorCode
from node.protocol.messages import (
    NO_LEADER,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    EpochEndOffset,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    ReplicaState,
    Request,
    Response,
    SnapshotId,
    VoteRequest,
    VoteResponse,
)
from node.raft.actions import (
    Action,
    AppendBatches,
    AppendCompleted,
    AppendFailed,
    DeleteLogBefore,
    Fatal,
    Flush,
    HighWatermarkAdvanced,
    LeaderChanged,
    LoadSnapshot,
    PersistClusterId,
    PersistQuorumState,
    ReadBarrierCompleted,
    ReadBarrierFailed,
    ResetLog,
    Respond,
    SendRequest,
    SetTimer,
    TruncateLog,
    WriteSnapshot,
)
from node.raft.config import RaftConfig
from node.raft.events import (
    Append,
    CreateSnapshot,
    Event,
    FlushCompleted,
    ReadBarrier,
    RequestFailed,
    RequestReceived,
    Resign,
    ResponseReceived,
    SnapshotWritten,
    Start,
    Tick,
)
from node.raft.log import LogError, RaftLog
from node.raft.metrics import RaftMetrics
from node.raft.quorum_state import (
    NO_ID,
    Candidate,
    Follower,
    Leader,
    QuorumStateData,
    ReplicaProgress,
    Resigned,
    Role,
    RoleState,
    Unattached,
    Voted,
)
from node.raft.records import (
    MAX_BATCH_BYTES,
    ClusterIdMessage,
    ControlMessage,
    CorruptBatchError,
    LeaderChangeMessage,
    RecordBatch,
    decode_control,
    encode_control,
)
from node.raft.storage import LoadedSnapshot, LoadedState, trim_to_snapshot

NEVER = 1 << 62


def random_cluster_id(rng: random.Random) -> str:
    """A Kafka-style clusterId: 16 random bytes, URL-safe base64 without padding (22 chars)."""
    return base64.urlsafe_b64encode(rng.getrandbits(128).to_bytes(16, "big")).decode().rstrip("=")


def _control_messages(batch: RecordBatch) -> list[ControlMessage]:
    """The control messages of a batch this version understands; malformed ones are skipped (every
    replica holds the same bytes, so every replica skips the same records)."""
    out = []
    for record in batch.records:
        try:
            message = decode_control(record)
        except CorruptBatchError:
            continue
        if message is not None:
            out.append(message)
    return out


@dataclass(slots=True)
class _InFlight:
    correlation_id: int
    deadline: int


@dataclass(slots=True)
class _ParkedFetch:
    reply_to: Hashable
    correlation_id: int
    request: FetchRequest
    deadline: int


@dataclass(slots=True)
class _PendingAppend:
    handle: Hashable
    records: tuple[bytes, ...]
    size: int
    received_ms: int


@dataclass(slots=True)
class _Barrier:
    handle: Hashable
    fetch_seq: int  # fetches numbered above this arrived after the barrier


@dataclass(frozen=True, slots=True)
class _PendingSnapshot:
    """A WriteSnapshot that has not reported back yet."""

    data: bytes
    fetched: bool  # copied from the leader (install it), or made here (advance the log start)
    cluster_id: str | None = None  # the leader's, for a fetched snapshot


@dataclass(slots=True)
class _SnapshotFetch:
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


@dataclass(slots=True)
class _WrittenAppend:
    """An append that is in the log and waits for the high watermark to pass it."""

    handle: Hashable
    base_offset: int
    last_offset: int
    epoch: int
    received_ms: int


class RaftNode:
    def __init__(
        self,
        config: RaftConfig,
        loaded: LoadedState,
        rng: random.Random,
        cluster_id_factory: Callable[[random.Random], str] | None = None,
    ) -> None:
        self.config = config
        self.node_id = config.node_id
        self.voters: tuple[int, ...] = tuple(sorted(config.voter_ids))
        self.rng = rng
        self._cluster_id_factory = cluster_id_factory or random_cluster_id
        self.cluster_id: str | None = loaded.cluster_id
        # The latest durable snapshot; the log starts at its end (records below it were dropped).
        self._snapshot: LoadedSnapshot | None = loaded.snapshot
        sid = loaded.snapshot.snapshot_id if loaded.snapshot is not None else None
        self._loaded_log = trim_to_snapshot(sid, loaded.batches)
        if sid is None:
            self.log = RaftLog(self._loaded_log.batches)
        else:
            self.log = RaftLog(self._loaded_log.batches, sid.end_offset, sid.epoch)
        self.high_watermark = self.log.start_offset  # a snapshot holds committed records only
        self._writing: dict[SnapshotId, _PendingSnapshot] = {}
        self._snapshot_fetch: _SnapshotFetch | None = None
        self._installing: SnapshotId | None = None  # a fetched snapshot being written
        self.metrics_state = RaftMetrics()
        self._out: list[Action] = []
        self._now = 0
        self._next_correlation = 1
        self._inflight: dict[int, _InFlight] = {}
        self._backoff_until: dict[int, int] = {}
        self._failures: dict[int, int] = {}
        self._parked: list[_ParkedFetch] = []
        self._pending: deque[_PendingAppend] = deque()
        self._written: deque[_WrittenAppend] = deque()
        self._barriers: list[_Barrier] = []
        self._fetch_seq = 0
        self._flushed_end = self.log.end_offset  # what storage loaded is durable
        self._flush_in_flight = False
        self._flush_cap = NEVER
        self._control_applied = 0  # index into log.control_bases of the next unapplied control batch
        self._timer_armed = NEVER
        self._started = False
        self._shutting_down = False
        self._election_started_ms: int | None = None

        qs = loaded.quorum_state or QuorumStateData(current_voters=self.voters)
        self.quorum_state = qs
        self.state: RoleState = self._restore_role(qs)

    # =============================================================================================
    # public surface
    # =============================================================================================

    def handle(self, now: int, event: Event) -> list[Action]:
        self._now = now
        self._out = []
        match event:
            case Start():
                self._started = True
                self._on_start()
                self._arm_initial_timers(now)
            case Tick():
                pass
            case RequestReceived(reply_to, correlation_id, message):
                self._on_request(now, reply_to, correlation_id, message)
            case ResponseReceived(source, correlation_id, message):
                self._on_response(now, source, correlation_id, message)
            case RequestFailed(destination, correlation_id):
                self._on_request_failed(now, destination, correlation_id)
            case FlushCompleted(end_offset):
                self._on_flush_completed(now, end_offset)
            case Append(handle, records):
                self._on_append(now, handle, records)
            case ReadBarrier(handle):
                self._on_read_barrier(now, handle)
            case Resign():
                self._on_resign(now)
            case CreateSnapshot(end_offset, data):
                self._on_create_snapshot(end_offset, data)
            case SnapshotWritten(snapshot_id):
                self._on_snapshot_written(now, snapshot_id)
            case _:
                raise TypeError(f"unknown event {event!r}")
        if self._started:
            self._check_deadlines(now)
            self._drive(now)
            self._arm_timer(now)
        out, self._out = self._out, []
        return out

    @property
    def role(self) -> Role:
        return self.state.role

    @property
    def epoch(self) -> int:
        return self.state.epoch

    @property
    def leader_id(self) -> int:
        match self.state:
            case Leader():
                return self.node_id
            case Follower(leader_id=leader) | Resigned(leader_id=leader):
                return leader
        return NO_LEADER

    @property
    def voted_id(self) -> int:
        return self.quorum_state.voted_id

    @property
    def is_voter(self) -> bool:
        return self.node_id in self.config.voter_ids

    @property
    def log_end_offset(self) -> int:
        return self.log.end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.start_offset

    @property
    def last_epoch(self) -> int:
        return self.log.last_epoch

    @property
    def flushed_end_offset(self) -> int:
        return self._flushed_end

    @property
    def append_end_offset(self) -> int:
        """The offset after every record appended so far, written or still waiting for the next batch:
        the next `Append` starts here (the controller predicts its records' offsets with it)."""
        return self.log.end_offset + sum(len(p.records) for p in self._pending)

    @property
    def epoch_start_offset(self) -> int:
        """The offset of this leader's first entry in its epoch; -1 when not the leader."""
        return self.state.epoch_start_offset if isinstance(self.state, Leader) else -1

    @property
    def election_voters(self) -> tuple[int, ...]:
        """The voters whose votes made this node leader of its epoch (itself included); () when it is
        not the leader. The same set its LeaderChange record names (KIP-595)."""
        return self.state.granted if isinstance(self.state, Leader) else ()

    @property
    def snapshot_id(self) -> SnapshotId | None:
        """The latest durable snapshot (the one served to replicas below the log start)."""
        return self._snapshot.snapshot_id if self._snapshot is not None else None

    @property
    def snapshot(self) -> LoadedSnapshot | None:
        """The latest durable snapshot with its bytes: the state below `log_start_offset` (for dumps)."""
        return self._snapshot

    def read_committed(self, start_offset: int, max_records: int | None = None) -> list[RecordBatch]:
        """Committed batches (data and control) from `start_offset`, below the high watermark.

        Below the log start the records are gone (a snapshot replaced them) and this returns []: the
        state machine must load the snapshot (`LoadSnapshot`) and read on from its end offset.
        """
        if start_offset < self.log.start_offset:
            return []
        batches = self.log.read(start_offset, max_bytes=1 << 62, below=self.high_watermark)
        if max_records is None:
            return batches
        out, count = [], 0
        for batch in batches:
            out.append(batch)
            count += len(batch.records)
            if count >= max_records:
                break
        return out

    def batches(self) -> list[RecordBatch]:
        """Every batch in the log, committed or not (for dumps and invariant checks)."""
        return self.log.batches()

    def metrics(self, now: int) -> dict[str, float | str]:
        """KIP-595's raft-manager metrics that the core can know (names as in the KIP)."""
        match self.role:
            case Role.FOLLOWER | Role.UNATTACHED if not self.is_voter:
                state = "observer"
            case role:
                state = role.value
        return {
            "current-leader": self.leader_id,
            "current-epoch": self.epoch,
            "current-vote": self.voted_id,
            "log-end-offset": self.log.end_offset,
            "log-end-epoch": self.log.last_epoch,
            "high-watermark": self.high_watermark,
            "current-state": state,
            **self.metrics_state.snapshot(now),
        }

    # =============================================================================================
    # start-up
    # =============================================================================================

    def _restore_role(self, qs: QuorumStateData) -> RoleState:
        """The role a restarted node resumes in (after Kafka's QuorumState.initialize)."""
        epoch = qs.leader_epoch
        if epoch < self.log.last_epoch:
            # The log knows a later epoch than the quorum-state file: trust the log's epoch.
            return Unattached(self.log.last_epoch, NEVER)
        if qs.leader_id == self.node_id and self.is_voter:
            if "raft-leader-reelected-same-epoch" in self.config.bugs:  # KAFKA-10527
                return Candidate(epoch, retries=1, election_deadline=NEVER, granted=set(self.voters))
            # A leader lost its in-memory state when it stopped: it may not lead this epoch again.
            return Resigned(epoch, self.node_id, NEVER, ())
        if qs.voted_id == self.node_id and self.is_voter:
            # It re-asks for votes in the same epoch; voters that granted them grant them again.
            return Candidate(epoch, retries=1, election_deadline=NEVER, granted={self.node_id})
        if qs.leader_id != NO_ID:
            return Follower(epoch, qs.leader_id, NEVER)
        if qs.voted_id != NO_ID and self.is_voter:
            return Voted(epoch, qs.voted_id, NEVER)
        return Unattached(epoch, NEVER)

    def _on_start(self) -> None:
        """Hand the state machine its snapshot first, then make the stored log match the trimmed one."""
        if self._snapshot is not None:
            self._out.append(LoadSnapshot(self._snapshot.snapshot_id, self._snapshot.data))
            if self._loaded_log.reset:
                self._out.append(ResetLog(self.log.start_offset))
            elif self._loaded_log.delete_before:
                self._out.append(DeleteLogBefore(self.log.start_offset))

    def _arm_initial_timers(self, now: int) -> None:
        match self.state:
            case Follower() as s:
                s.fetch_deadline = now + self.config.fetch_timeout_ms
            case Candidate() as s:
                self._election_started_ms = now
                s.election_deadline = now + self._random_election_timeout()
                self._maybe_win_election(now)  # a single voter needs nobody else
            case Unattached() | Voted() | Resigned() as s:
                s.election_deadline = now + self._random_election_timeout()

    # =============================================================================================
    # role transitions
    # =============================================================================================

    def _persist(self, leader_id: int, voted_id: int) -> None:
        self.quorum_state = QuorumStateData(
            leader_id=leader_id,
            leader_epoch=self.state.epoch,
            voted_id=voted_id,
            applied_offset=self.quorum_state.applied_offset,
            current_voters=self.voters,
        )
        self._out.append(PersistQuorumState(self.quorum_state))

    def _leave_role(self) -> None:
        """Clean up what the old role owned before switching to another."""
        old = self.state
        if isinstance(old, Leader):
            for parked in self._parked:
                self._respond_fetch_error(parked.reply_to, parked.correlation_id, ErrorCode.NOT_LEADER_OR_FOLLOWER)
            self._parked.clear()
            self._fail_pending(ErrorCode.NOT_LEADER_OR_FOLLOWER, "leadership lost before the append was written")
            for barrier in self._barriers:
                self._out.append(
                    ReadBarrierFailed(barrier.handle, int(ErrorCode.NOT_LEADER_OR_FOLLOWER), "leadership lost")
                )
            self._barriers.clear()
        # Requests of the old role are moot; their answers will be ignored.
        self._snapshot_fetch = None
        self._inflight.clear()
        self._backoff_until.clear()
        self._failures.clear()

    def _announce(self) -> None:
        self._out.append(LeaderChanged(self.state.epoch, self.leader_id))

    def _become_unattached(self, now: int, epoch: int) -> None:
        # Learning a newer epoch is not hearing from a leader or granting a vote: a voter that had
        # no leader keeps its election timer (as Raft and Kafka's QuorumState do). Resetting it let
        # a disruptive candidate with a stale log, bumping the epoch faster than the others' election
        # timeout, keep every other voter from ever starting an election it could win.
        match self.state:
            case Unattached(election_deadline=deadline) | Voted(election_deadline=deadline):
                pass
            case Candidate(backing_off_until=until, election_deadline=deadline):
                deadline = until if until is not None else deadline
            case _:
                deadline = now + self._random_election_timeout()
        self._leave_role()
        self.state = Unattached(epoch, deadline)
        self._persist(NO_ID, NO_ID)
        self._announce()

    def _become_voted(self, now: int, epoch: int, candidate_id: int) -> None:
        self._leave_role()
        self.state = Voted(epoch, candidate_id, now + self._random_election_timeout())
        self._persist(NO_ID, candidate_id)
        if "raft-vote-not-persisted" in self.config.bugs:  # the vote lives in memory only
            self._out[-1] = PersistQuorumState(replace(self.quorum_state, voted_id=NO_ID))
        self._announce()

    def _become_follower(self, now: int, epoch: int, leader_id: int) -> None:
        voted = self.quorum_state.voted_id if epoch == self.quorum_state.leader_epoch else NO_ID
        self._leave_role()
        self.state = Follower(epoch, leader_id, now + self.config.fetch_timeout_ms)
        self._persist(leader_id, voted)
        self._announce()
        self._election_finished(now)

    def _become_candidate(self, now: int) -> None:
        if not self.is_voter:
            return
        retries = self.state.retries + 1 if isinstance(self.state, Candidate) else 1
        self._leave_role()
        if self._election_started_ms is None:
            self._election_started_ms = now
        self.state = Candidate(
            self.state.epoch + 1,
            retries=retries,
            election_deadline=now + self._random_election_timeout(),
            granted={self.node_id},
        )
        # KIP-595: the vote for itself is persisted before any VoteRequest leaves.
        self._persist(NO_ID, self.node_id)
        self._announce()
        self._maybe_win_election(now)

    def _become_leader(self, now: int) -> None:
        assert isinstance(self.state, Candidate)
        granted = tuple(sorted(self.state.granted))
        self._leave_role()
        epoch = self.state.epoch
        start = self.log.end_offset
        progress = {v: ReplicaProgress(v) for v in self.voters}
        self.state = Leader(
            epoch=epoch,
            epoch_start_offset=start,
            voters=progress,
            observers={},
            unendorsed={v for v in self.voters if v != self.node_id},
            granted=granted,
            check_quorum_deadline=now + self.config.fetch_timeout_ms,
        )
        self._persist(self.node_id, self.node_id)
        self._announce()
        self._election_finished(now)
        # The LeaderChange control record lets the high watermark advance without client writes;
        # the first leader of a cluster also writes the clusterId (KIP-595 "Cluster Bootstrapping").
        control = [encode_control(LeaderChangeMessage(self.node_id, granted))]
        # Above a snapshot the ClusterId record is gone but the cluster certainly has one: never mint.
        if self.cluster_id is None and self.log.start_offset == 0 and not self._log_has_cluster_id():
            control.append(encode_control(ClusterIdMessage(self._cluster_id_factory(self.rng))))
        self._write_batch(RecordBatch(start, epoch, tuple(control), control=True, timestamp_ms=now))

    def _become_resigned(self, now: int) -> None:
        assert isinstance(self.state, Leader)
        leader = self.state
        successors = sorted(
            (v for v in self.voters if v != self.node_id),
            key=lambda v: (-leader.voters[v].end_offset, v),
        )
        self._leave_role()
        self.state = Resigned(
            leader.epoch,
            self.node_id,
            now + self._random_election_timeout(),
            tuple(successors),
            unacknowledged=set(successors),
        )
        self._announce()

    def _election_finished(self, now: int) -> None:
        if self._election_started_ms is not None:
            self.metrics_state.record_election(now, now - self._election_started_ms)
            self._election_started_ms = None

    def _maybe_transition_on_epoch(self, now: int, epoch: int, leader_id: int) -> bool:
        """Learn of a newer epoch (or of the leader of ours) from any message. True if it changed."""
        if epoch > self.epoch:
            if leader_id != NO_LEADER and leader_id != self.node_id:
                self._become_follower(now, epoch, leader_id)
            else:
                self._become_unattached(now, epoch)
            return True
        if (
            epoch == self.epoch
            and leader_id not in (NO_LEADER, self.node_id)
            and isinstance(self.state, Unattached | Voted | Candidate)
        ):
            self._become_follower(now, epoch, leader_id)
            return True
        return False

    # =============================================================================================
    # requests
    # =============================================================================================

    def _on_request(self, now: int, reply_to: Hashable, cid: int, message: Request) -> None:
        match message:
            case VoteRequest():
                self._respond(reply_to, cid, self._on_vote_request(now, message))
            case BeginQuorumEpochRequest():
                self._respond(reply_to, cid, self._on_begin_quorum_epoch_request(now, message))
            case EndQuorumEpochRequest():
                self._respond(reply_to, cid, self._on_end_quorum_epoch_request(now, message))
            case FetchRequest():
                self._on_fetch_request(now, reply_to, cid, message)
            case DescribeQuorumRequest():
                self._respond(reply_to, cid, self.describe_quorum(now))
            case FetchSnapshotRequest():
                self._on_fetch_snapshot_request(reply_to, cid, message)
            case _:
                raise TypeError(f"unknown request {message!r}")

    def _respond(self, reply_to: Hashable, cid: int, message: Response) -> None:
        self._out.append(Respond(reply_to, cid, message))

    def _cluster_id_mismatch(self, cluster_id: str | None) -> bool:
        return cluster_id is not None and self.cluster_id is not None and cluster_id != self.cluster_id

    # --- Vote Request Handling --------------------------------------------------------------------

    def _vote_response(self, error: ErrorCode, granted: bool) -> VoteResponse:
        return VoteResponse(int(error), self.leader_id, self.epoch, granted)

    def _on_vote_request(self, now: int, req: VoteRequest) -> VoteResponse:
        # 1. clusterId must match the cached one when both are known.
        if self._cluster_id_mismatch(req.cluster_id):
            return self._vote_response(ErrorCode.INVALID_CLUSTER_ID, False)
        if not self.is_voter:
            return self._vote_response(ErrorCode.INCONSISTENT_VOTER_SET, False)
        # 2. A larger epoch than the candidate's is known: reject.
        if req.candidate_epoch < self.epoch:
            return self._vote_response(ErrorCode.FENCED_LEADER_EPOCH, False)
        # 4.1 A candidate outside the voter set: accept the epoch bump, reject, and start an election.
        if req.candidate_id not in self.config.voter_ids:
            if req.candidate_epoch > self.epoch:
                self._become_unattached(now, req.candidate_epoch)
                assert isinstance(self.state, Unattached)
                self.state.election_deadline = now
            return self._vote_response(ErrorCode.INCONSISTENT_VOTER_SET, False)
        # 4. A larger epoch: move to it first (a leader or candidate steps down here).
        if req.candidate_epoch > self.epoch:
            self._become_unattached(now, req.candidate_epoch)
        # 3. Already voted in this epoch: only the same candidate gets the vote again.
        match self.state:
            case Voted(voted_id=voted):
                return self._vote_response(ErrorCode.NONE, voted == req.candidate_id)
            case Candidate() | Leader() | Follower() | Resigned():
                return self._vote_response(ErrorCode.NONE, False)
        # 4.2 The candidate's log must be at least as up-to-date as ours.
        if (req.last_offset_epoch, req.last_offset) < (self.log.last_epoch, self.log.end_offset):
            return self._vote_response(ErrorCode.NONE, False)
        self._become_voted(now, req.candidate_epoch, req.candidate_id)  # persisted before granting
        return self._vote_response(ErrorCode.NONE, True)

    # --- BeginQuorumEpoch Request Handling --------------------------------------------------------

    def _on_begin_quorum_epoch_request(self, now: int, req: BeginQuorumEpochRequest) -> BeginQuorumEpochResponse:
        if self._cluster_id_mismatch(req.cluster_id):
            self._out.append(
                Fatal(
                    f"elected leader {req.leader_id} belongs to cluster {req.cluster_id}, "
                    f"but this node's cluster is {self.cluster_id}"
                )
            )
            return BeginQuorumEpochResponse(int(ErrorCode.INVALID_CLUSTER_ID), self.leader_id, self.epoch)
        if not self.is_voter or req.leader_id not in self.config.voter_ids:
            return BeginQuorumEpochResponse(int(ErrorCode.INCONSISTENT_VOTER_SET), self.leader_id, self.epoch)
        if req.leader_epoch < self.epoch:
            return BeginQuorumEpochResponse(int(ErrorCode.FENCED_LEADER_EPOCH), self.leader_id, self.epoch)
        if req.leader_epoch == self.epoch and self.leader_id not in (NO_LEADER, req.leader_id):
            # Two leaders claim one epoch: refuse the conflicting one.
            return BeginQuorumEpochResponse(int(ErrorCode.INVALID_QUORUM_STATE), self.leader_id, self.epoch)
        if not (isinstance(self.state, Follower) and self.epoch == req.leader_epoch):
            self._become_follower(now, req.leader_epoch, req.leader_id)
        return BeginQuorumEpochResponse(int(ErrorCode.NONE), self.leader_id, self.epoch)

    # --- EndQuorumEpoch Request Handling ----------------------------------------------------------

    def _on_end_quorum_epoch_request(self, now: int, req: EndQuorumEpochRequest) -> EndQuorumEpochResponse:
        def answer(error: ErrorCode) -> EndQuorumEpochResponse:
            return EndQuorumEpochResponse(int(error), self.leader_id, self.epoch)

        if self._cluster_id_mismatch(req.cluster_id):
            return answer(ErrorCode.INVALID_CLUSTER_ID)
        if not self.is_voter:
            return answer(ErrorCode.INCONSISTENT_VOTER_SET)
        if req.leader_epoch < self.epoch:
            return answer(ErrorCode.FENCED_LEADER_EPOCH)
        if req.leader_epoch > self.epoch:
            self._maybe_transition_on_epoch(now, req.leader_epoch, req.leader_id)
        elif self.leader_id != req.leader_id:
            self._maybe_transition_on_epoch(now, req.leader_epoch, req.leader_id)
            if self.leader_id != req.leader_id:
                return answer(ErrorCode.INVALID_QUORUM_STATE)  # the leader of this epoch is not known
        if self.node_id not in req.preferred_successors:
            return answer(ErrorCode.INCONSISTENT_VOTER_SET)
        position = req.preferred_successors.index(self.node_id)
        if position == 0:
            backoff = 0
        else:
            backoff = min(self.config.retry_backoff_max_ms, self.config.retry_backoff_ms * 2 ** (position - 1))
        match self.state:
            case Follower() as s:
                s.fetch_deadline = min(s.fetch_deadline, now + backoff)
            case Unattached() | Voted() as s:
                s.election_deadline = min(s.election_deadline, now + backoff)
        if backoff == 0 and isinstance(self.state, Follower | Unattached | Voted):
            self._become_candidate(now)
        return answer(ErrorCode.NONE)

    # --- FetchRequest Handling --------------------------------------------------------------------

    def _respond_fetch_error(self, reply_to: Hashable, cid: int, error: ErrorCode) -> None:
        self._respond(reply_to, cid, FetchResponse(int(error), self.leader_id, self.epoch, self.high_watermark))

    def _on_fetch_request(self, now: int, reply_to: Hashable, cid: int, req: FetchRequest) -> None:
        # 1. clusterId. Only a leader answers INVALID_CLUSTER_ID, which the fetcher treats as fatal:
        # a lone misconfigured non-leader must not be able to stop the voters that ask it for the
        # leader (KIP-595 "Cluster Bootstrapping"); it redirects them like any other non-leader.
        if isinstance(self.state, Leader) and self._cluster_id_mismatch(req.cluster_id):
            self._respond_fetch_error(reply_to, cid, ErrorCode.INVALID_CLUSTER_ID)
            return
        # 2. The epoch must be ours, and we must lead it.
        if req.current_leader_epoch < self.epoch:
            self._respond_fetch_error(reply_to, cid, ErrorCode.FENCED_LEADER_EPOCH)
            return
        if req.current_leader_epoch > self.epoch:
            self._respond_fetch_error(reply_to, cid, ErrorCode.UNKNOWN_LEADER_EPOCH)
            return
        if not isinstance(self.state, Leader):
            self._respond_fetch_error(reply_to, cid, ErrorCode.NOT_LEADER_OR_FOLLOWER)
            return
        leader = self.state
        if req.fetch_offset < 0 or (req.fetch_offset < self.log.start_offset and self._snapshot is None):
            self._respond_fetch_error(reply_to, cid, ErrorCode.OFFSET_OUT_OF_RANGE)
            return
        is_voter = req.replica_id in self.config.voter_ids
        if is_voter:
            self._heard_from_voter(leader, req.replica_id)
        # KIP-630: below our log start (or inconsistent with the snapshot there): fetch the snapshot.
        if self._needs_snapshot(req.fetch_offset, req.last_fetched_epoch):
            self._respond_with_snapshot_id(reply_to, cid)
            return
        # 3. LastFetchedEpoch must be consistent with our log.
        diverging = self._diverging_epoch(req.fetch_offset, req.last_fetched_epoch)
        if diverging is not None:
            self._respond(reply_to, cid, self._fetch_answer(diverging_epoch=diverging))
            return
        self._record_fetch(now, leader, req, is_voter)
        # 4. A voter's fetch offset acknowledges everything before it (followers fetch only after fsync).
        if is_voter:
            self._maybe_advance_leader_hwm(now)
        if self.log.end_offset > req.fetch_offset or req.max_wait_ms <= 0:
            self._complete_fetch(reply_to, cid, req)
        else:
            self._parked.append(_ParkedFetch(reply_to, cid, req, now + req.max_wait_ms))

    def _heard_from_voter(self, leader: Leader, voter: int) -> None:
        """A Fetch or FetchSnapshot in our epoch: an endorsement, liveness for the zombie rule, and a
        confirmation of our leadership for the read barriers that arrived before it."""
        leader.unendorsed.discard(voter)
        leader.fetched_since_check.add(voter)
        self._fetch_seq += 1
        leader.fetch_seq[voter] = self._fetch_seq
        self._maybe_complete_barriers()

    def _needs_snapshot(self, fetch_offset: int, last_fetched_epoch: int) -> bool:
        """Kafka's validateOffsetAndEpoch: below the log start, at it with another epoch than the
        snapshot's, or with an epoch older than the snapshot's, the fetcher starts over from it."""
        start, epoch = self.log.start_offset, self.log.start_epoch
        if self._snapshot is None or start == 0:
            return False
        return (
            fetch_offset < start
            or (fetch_offset == start and last_fetched_epoch != epoch)
            or last_fetched_epoch < epoch
        )

    def _fetch_answer(self, **fields: Any) -> FetchResponse:
        """A successful FetchResponse of this leader, with records, a diverging epoch or a snapshot id."""
        return FetchResponse(
            int(ErrorCode.NONE), self.node_id, self.epoch, self.high_watermark, self.log.start_offset, **fields
        )

    def _respond_with_snapshot_id(self, reply_to: Hashable, cid: int) -> None:
        assert self._snapshot is not None
        answer = self._fetch_answer(snapshot_id=self._snapshot.snapshot_id, cluster_id=self.cluster_id)
        self._respond(reply_to, cid, answer)

    def _diverging_epoch(self, fetch_offset: int, last_fetched_epoch: int) -> EpochEndOffset | None:
        if fetch_offset == self.log.start_offset and last_fetched_epoch == self.log.start_epoch:
            return None
        end = self.log.end_offset_for_epoch(last_fetched_epoch)
        if end.epoch != last_fetched_epoch or fetch_offset > end.offset:
            return EpochEndOffset(end.epoch, end.offset)
        if fetch_offset < self.log.end_offset:
            # Replicas copy whole batches, so a consistent fetch offset is a batch boundary. One inside
            # a batch comes from a confused peer: send it back to the batch start instead of failing.
            inside = self.log.batch_at(fetch_offset)
            if inside.base_offset != fetch_offset:
                return EpochEndOffset(inside.epoch, inside.base_offset)
        return None

    def _record_fetch(self, now: int, leader: Leader, req: FetchRequest, is_voter: bool) -> None:
        table = leader.voters if is_voter else leader.observers
        progress = table.get(req.replica_id)
        if progress is None:
            progress = table[req.replica_id] = ReplicaProgress(req.replica_id)
        # Caught up: at the log end now, or at least as far as the log end was at its previous fetch.
        if req.fetch_offset >= self.log.end_offset:
            progress.last_caught_up_ms = now
        elif progress.end_at_last_fetch >= 0 and req.fetch_offset >= progress.end_at_last_fetch:
            progress.last_caught_up_ms = progress.last_fetch_ms
        progress.end_offset = req.fetch_offset
        progress.last_fetch_ms = now
        progress.end_at_last_fetch = self.log.end_offset

    def _complete_fetch(self, reply_to: Hashable, cid: int, req: FetchRequest) -> None:
        if self._needs_snapshot(req.fetch_offset, req.last_fetched_epoch):  # a parked fetch overtaken
            self._respond_with_snapshot_id(reply_to, cid)
            return
        records = tuple(self.log.read(req.fetch_offset, min(req.max_bytes, self.config.fetch_max_bytes)))
        self._respond(reply_to, cid, self._fetch_answer(records=records))

    def _complete_parked_fetches(self, now: int, expired_only: bool) -> None:
        if not self._parked:
            return
        keep = []
        for parked in self._parked:
            if expired_only and parked.deadline > now:
                keep.append(parked)
            else:
                self._complete_fetch(parked.reply_to, parked.correlation_id, parked.request)
        self._parked = keep

    # --- DescribeQuorum Request Handling ----------------------------------------------------------

    def describe_quorum(self, now: int) -> DescribeQuorumResponse:
        if not isinstance(self.state, Leader):
            return DescribeQuorumResponse(
                int(ErrorCode.NOT_LEADER_OR_FOLLOWER), self.leader_id, self.epoch, self.high_watermark
            )
        leader = self.state

        def replica(p: ReplicaProgress) -> ReplicaState:
            if p.replica_id == self.node_id:
                return ReplicaState(p.replica_id, self.log.end_offset, now, now)
            return ReplicaState(p.replica_id, p.end_offset, p.last_fetch_ms, p.last_caught_up_ms)

        return DescribeQuorumResponse(
            int(ErrorCode.NONE),
            self.node_id,
            self.epoch,
            self.high_watermark,
            tuple(replica(leader.voters[v]) for v in self.voters),
            tuple(replica(leader.observers[o]) for o in sorted(leader.observers)),
            cluster_id=self.cluster_id,
            leader_time_ms=now,
        )

    # =============================================================================================
    # responses
    # =============================================================================================

    def _on_response(self, now: int, source: int, cid: int, message: Response) -> None:
        inflight = self._inflight.get(source)
        if inflight is None or inflight.correlation_id != cid:
            return  # an answer to a request this role no longer waits for
        del self._inflight[source]
        self._failures.pop(source, None)
        match message:
            case VoteResponse():
                self._on_vote_response(now, source, message)
            case BeginQuorumEpochResponse():
                self._on_begin_quorum_epoch_response(now, source, message)
            case EndQuorumEpochResponse():
                self._on_end_quorum_epoch_response(now, source, message)
            case FetchResponse():
                self._on_fetch_response(now, source, message)
            case DescribeQuorumResponse():
                pass
            case FetchSnapshotResponse():
                self._on_fetch_snapshot_response(now, source, message)
            case _:
                raise TypeError(f"unknown response {message!r}")

    def _on_request_failed(self, now: int, destination: int, cid: int) -> None:
        inflight = self._inflight.get(destination)
        if inflight is None or inflight.correlation_id != cid:
            return
        del self._inflight[destination]
        self._back_off(now, destination)

    def _back_off(self, now: int, destination: int) -> None:
        failures = self._failures.get(destination, 0) + 1
        self._failures[destination] = failures
        delay = min(self.config.retry_backoff_max_ms, self.config.retry_backoff_ms * 2 ** (failures - 1))
        self._backoff_until[destination] = now + delay

    # --- Vote Response Handling -------------------------------------------------------------------

    def _on_vote_response(self, now: int, source: int, resp: VoteResponse) -> None:
        if self._maybe_transition_on_epoch(now, resp.leader_epoch, resp.leader_id):
            return
        # 1. Only a candidate cares. The correlation id already tied this answer to this candidacy
        # (in-flight requests are dropped on every role change), so an answer carrying an older epoch
        # is a refusal made before the voter looked at epochs (INVALID_CLUSTER_ID, not a voter).
        if not isinstance(self.state, Candidate):
            return
        candidate = self.state
        # 2. Count the vote (in memory only: after a restart it is simply asked for again).
        if resp.vote_granted and resp.error_code == ErrorCode.NONE and resp.leader_epoch == self.epoch:
            candidate.granted.add(source)
            self._maybe_win_election(now)
        else:
            # INVALID_CLUSTER_ID in a Vote is only a rejection (the inconsistent node may be alone).
            candidate.rejected.add(source)
            if len(candidate.rejected) > len(self.voters) - self.config.majority:
                # The election cannot be won any more (e.g. a refused 2-voter candidate): back off now.
                self._election_failed(now)

    def _maybe_win_election(self, now: int) -> None:
        assert isinstance(self.state, Candidate)
        if len(self.state.granted) >= self.config.majority:
            self._become_leader(now)

    def _election_failed(self, now: int) -> None:
        assert isinstance(self.state, Candidate)
        if self.state.backing_off_until is not None:
            return
        cap = self.config.election_backoff_max_ms
        window = min(cap, 50 * (1 << min(self.state.retries, 20)))
        self.state.backing_off_until = now + self.rng.randint(0, window)
        self._inflight.clear()

    # --- BeginQuorumEpoch / EndQuorumEpoch Response Handling --------------------------------------

    def _on_begin_quorum_epoch_response(self, now: int, source: int, resp: BeginQuorumEpochResponse) -> None:
        if self._maybe_transition_on_epoch(now, resp.leader_epoch, resp.leader_id):
            return
        if isinstance(self.state, Leader) and resp.leader_epoch == self.epoch:
            if resp.error_code == ErrorCode.NONE:
                self.state.unendorsed.discard(source)
            else:
                self._back_off(now, source)

    def _on_end_quorum_epoch_response(self, now: int, source: int, resp: EndQuorumEpochResponse) -> None:
        if isinstance(self.state, Resigned):
            self.state.unacknowledged.discard(source)
        if not self._shutting_down:
            self._maybe_transition_on_epoch(now, resp.leader_epoch, resp.leader_id)

    # --- FetchResponse Handling -------------------------------------------------------------------

    def _answer_still_matters(self, now: int, source: int, resp: FetchResponse | FetchSnapshotResponse) -> bool:
        """The common start of handling a Fetch or FetchSnapshot answer: INVALID_CLUSTER_ID is fatal,
        and news of another epoch or leader changes our role instead."""
        if resp.error_code == ErrorCode.INVALID_CLUSTER_ID:
            self._out.append(
                Fatal(f"node {source} rejected this node's clusterId {self.cluster_id} (INVALID_CLUSTER_ID)")
            )
            return False
        return not self._maybe_transition_on_epoch(now, resp.leader_epoch, resp.leader_id)

    def _on_fetch_response(self, now: int, source: int, resp: FetchResponse) -> None:
        if not self._answer_still_matters(now, source, resp):
            return
        state = self.state
        if not (isinstance(state, Follower) and source == state.leader_id and resp.leader_epoch == state.epoch):
            if resp.error_code != ErrorCode.NONE:
                self._back_off(now, source)
            return
        if resp.error_code != ErrorCode.NONE:
            self._back_off(now, source)
            return
        state.fetch_deadline = now + self.config.fetch_timeout_ms
        if resp.snapshot_id is not None:
            self._start_snapshot_fetch(now, source, resp)
            return
        if resp.diverging_epoch is not None:
            self._truncate_to_diverging(resp.diverging_epoch)
            return
        appended: list[RecordBatch] = []
        for batch in resp.records:
            if batch.base_offset != self.log.end_offset or batch.epoch > state.epoch:
                break  # not what we asked for; the next fetch sorts it out
            self.log.append(batch)
            appended.append(batch)
        if appended:
            self.metrics_state.fetched(now, sum(len(b.records) for b in appended))
            self._out.append(AppendBatches(tuple(appended)))
            self._request_flush()
        self._update_follower_hwm(now, resp.high_watermark)

    def _truncate_to_diverging(self, diverging: EpochEndOffset) -> None:
        """KIP-595 FetchResponse handling step 2 (and Kafka's truncateToEndOffset)."""
        if diverging.epoch == 0:
            offset = min(diverging.end_offset, self.log.end_offset)
        else:
            local = self.log.end_offset_for_epoch(diverging.epoch)
            offset = min(local.offset, diverging.end_offset) if local.epoch == diverging.epoch else local.offset
        if offset < self.log.end_offset:
            offset = self.log.batch_at(offset).base_offset  # whole batches only: cut before a split one
        if offset < self.high_watermark:
            self._out.append(
                Fatal(f"leader asked to truncate to offset {offset}, below the high watermark {self.high_watermark}")
            )
            return
        if offset < self.log.end_offset:
            self._truncate(offset)

    def _truncate(self, offset: int) -> None:
        if offset < self.log.start_offset:
            start = self.log.start_offset
            self._out.append(Fatal(f"asked to truncate to offset {offset}, below the log start {start}"))
            return
        self.log.truncate(offset)
        self._out.append(TruncateLog(offset))
        if self._flush_in_flight:
            self._flush_cap = min(self._flush_cap, offset)
        self._flushed_end = min(self._flushed_end, offset)
        applied = self._control_applied
        self._control_applied = min(applied, len(self.log.control_bases))

    def _update_follower_hwm(self, now: int, leader_hwm: int) -> None:
        new = min(leader_hwm, self.log.end_offset)
        if new > self.high_watermark:
            self._advance_hwm(now, new)

    # =============================================================================================
    # appends, flushes and the high watermark
    # =============================================================================================

    def _on_append(self, now: int, handle: Hashable, records: tuple[bytes, ...]) -> None:
        if not isinstance(self.state, Leader):
            self._out.append(AppendFailed(handle, int(ErrorCode.NOT_LEADER_OR_FOLLOWER), "not the leader"))
            return
        if not records:
            self._out.append(AppendFailed(handle, int(ErrorCode.INVALID_REQUEST), "no records"))
            return
        size = sum(4 + len(r) for r in records)
        if size + 64 > MAX_BATCH_BYTES or len(records) > self.config.append_max_records:
            self._out.append(
                AppendFailed(handle, int(ErrorCode.MESSAGE_TOO_LARGE), f"{len(records)} records, {size} bytes")
            )
            return
        self._pending.append(_PendingAppend(handle, tuple(records), size, now))
        if not self._flush_in_flight:
            self._write_pending(now)

    def _write_pending(self, now: int) -> None:
        """Group every waiting append into one batch, one write and one fsync."""
        assert isinstance(self.state, Leader)
        if not self._pending:
            return
        records: list[bytes] = []
        size = 0
        group: list[_PendingAppend] = []
        while self._pending:
            nxt = self._pending[0]
            if group and (
                size + nxt.size + 64 > MAX_BATCH_BYTES
                or len(records) + len(nxt.records) > self.config.append_max_records
            ):
                break
            self._pending.popleft()
            group.append(nxt)
            records.extend(nxt.records)
            size += nxt.size
        base = self.log.end_offset
        offset = base
        for item in group:
            last = offset + len(item.records) - 1
            self._written.append(_WrittenAppend(item.handle, offset, last, self.epoch, item.received_ms))
            offset = last + 1
        self.metrics_state.appended(now, len(records))
        self._write_batch(RecordBatch(base, self.epoch, tuple(records), timestamp_ms=now))

    def _write_batch(self, batch: RecordBatch) -> None:
        self.log.append(batch)
        self._out.append(AppendBatches((batch,)))
        self._request_flush()
        if isinstance(self.state, Leader):
            self._complete_parked_fetches(self._now, expired_only=False)

    def _request_flush(self) -> None:
        if not self._flush_in_flight and self.log.end_offset > self._flushed_end:
            self._flush_in_flight = True
            self._out.append(Flush(self.log.end_offset))

    def _on_flush_completed(self, now: int, end_offset: int) -> None:
        self._flush_in_flight = False
        self._flushed_end = max(self._flushed_end, min(end_offset, self._flush_cap, self.log.end_offset))
        self._flush_cap = NEVER
        if isinstance(self.state, Leader):
            self._maybe_advance_leader_hwm(now)
            if self._pending:
                self._write_pending(now)
            else:
                self._request_flush()
        else:
            self._request_flush()

    def _maybe_advance_leader_hwm(self, now: int) -> None:
        leader = self.state
        assert isinstance(leader, Leader)
        offsets = sorted(
            (self._flushed_end if v == self.node_id else leader.voters[v].end_offset for v in self.voters),
            reverse=True,
        )
        candidate = offsets[self.config.majority - 1]
        # Never commit in an epoch before an entry of that epoch is committed (the Figure-8 rule).
        own_epoch = candidate > leader.epoch_start_offset
        if "raft-hwm-before-leader-change-committed" in self.config.bugs:  # KAFKA-12619
            own_epoch = True
        if own_epoch and candidate > self.high_watermark:
            self._advance_hwm(now, candidate)

    def _advance_hwm(self, now: int, hwm: int) -> None:
        self.high_watermark = hwm
        self._out.append(HighWatermarkAdvanced(hwm))
        self._maybe_complete_barriers()
        self._apply_committed_control_records()
        self._resolve_written_appends(now)
        if isinstance(self.state, Leader):
            self._complete_parked_fetches(now, expired_only=False)

    def _resolve_written_appends(self, now: int) -> None:
        """An append is decided once the high watermark passes it: committed if the log still holds
        its batch (same base offset and epoch), otherwise certainly not (another entry was committed
        in its place). Truncation alone decides nothing: a later leader could still commit it."""
        while self._written and self._written[0].last_offset < self.high_watermark:
            item = self._written.popleft()
            if item.base_offset < self.log.start_offset:
                self._resolve_under_snapshot(item)
                continue
            batch = self.log.batch_at(item.base_offset)
            if batch.epoch == item.epoch:  # (offset, epoch) names one entry: it is ours
                self.metrics_state.committed(now, now - item.received_ms)
                self._out.append(AppendCompleted(item.handle, item.base_offset, item.last_offset))
            else:
                self._out.append(
                    AppendFailed(
                        item.handle,
                        int(ErrorCode.NOT_LEADER_OR_FOLLOWER),
                        f"offset {item.base_offset} was committed with epoch {batch.epoch}, not {item.epoch}",
                    )
                )

    def _resolve_under_snapshot(self, item: _WrittenAppend) -> None:
        """An append whose offsets a fetched snapshot now covers: the log that would tell is gone.
        Epochs never go down along the log, so an epoch above the snapshot's (the epoch of its last
        record) certainly lost. Otherwise the outcome is unknown and no answer is given: the
        caller's own timeout reports it as possibly applied."""
        epoch = self.log.start_epoch
        if item.epoch > epoch:
            self._out.append(
                AppendFailed(
                    item.handle,
                    int(ErrorCode.NOT_LEADER_OR_FOLLOWER),
                    f"offset {item.base_offset} is under a snapshot whose last epoch is {epoch} < {item.epoch}",
                )
            )

    def _fail_pending(self, error: ErrorCode, message: str) -> None:
        while self._pending:
            item = self._pending.popleft()
            self._out.append(AppendFailed(item.handle, int(error), message))

    def _log_has_cluster_id(self) -> bool:
        return any(
            isinstance(message, ClusterIdMessage)
            for base in self.log.control_bases
            for message in _control_messages(self.log.batch_at(base))
        )

    def _apply_committed_control_records(self) -> None:
        bases = self.log.control_bases
        while self._control_applied < len(bases) and bases[self._control_applied] < self.high_watermark:
            batch = self.log.batch_at(bases[self._control_applied])
            self._control_applied += 1
            for message in _control_messages(batch):
                if isinstance(message, ClusterIdMessage):
                    if self.cluster_id is None:
                        self.cluster_id = message.cluster_id
                        self._out.append(PersistClusterId(message.cluster_id))
                    elif self.cluster_id != message.cluster_id:
                        self._out.append(
                            Fatal(
                                f"the metadata log commits clusterId {message.cluster_id}, "
                                f"but this node's data dir belongs to cluster {self.cluster_id}"
                            )
                        )

    # =============================================================================================
    # snapshots (KIP-630)
    # =============================================================================================

    def _snapshot_end(self) -> int:
        return self._snapshot.snapshot_id.end_offset if self._snapshot is not None else 0

    def _on_create_snapshot(self, end_offset: int, data: bytes) -> None:
        if end_offset <= self._snapshot_end():
            return  # a newer snapshot arrived from the leader while this one was being made
        if end_offset > self.high_watermark:
            raise LogError(f"snapshot end {end_offset} is above the high watermark {self.high_watermark}")
        if not self.log.is_boundary(end_offset):
            raise LogError(f"snapshot end {end_offset} is not a batch boundary of the log")
        if not data:
            raise LogError("a snapshot needs at least one byte")
        epoch = self.log.epoch_at(end_offset - 1) if end_offset > self.log.start_offset else self.log.start_epoch
        snapshot_id = SnapshotId(end_offset, epoch)
        if snapshot_id not in self._writing:
            self._writing[snapshot_id] = _PendingSnapshot(bytes(data), fetched=False)
            self._out.append(WriteSnapshot(snapshot_id, bytes(data)))

    def _on_snapshot_written(self, now: int, snapshot_id: SnapshotId) -> None:
        pending = self._writing.pop(snapshot_id, None)
        if pending is None:
            return
        if self._installing == snapshot_id:
            self._installing = None
        if snapshot_id.end_offset <= self._snapshot_end():
            return  # superseded while it was written
        if pending.fetched:
            self.metrics_state.snapshots_fetched_total += 1
            self._install_snapshot(now, snapshot_id, pending)
        else:
            self.metrics_state.snapshots_written_total += 1
            self._adopt_local_snapshot(snapshot_id, pending.data)

    def _adopt_local_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        """Serve the new snapshot and start the log at its end. Safe once the snapshot is durable: it
        holds committed records only, and the log is never truncated below the high watermark."""
        self._snapshot = LoadedSnapshot(snapshot_id, data)
        end = snapshot_id.end_offset
        if self.log.start_offset < end and self.log.is_boundary(end):
            dropped = sum(1 for base in self.log.control_bases if base < end)
            self.log.drop_before(end)
            self._control_applied = max(0, self._control_applied - dropped)
            self._out.append(DeleteLogBefore(end))

    def _install_snapshot(self, now: int, snapshot_id: SnapshotId, pending: _PendingSnapshot) -> None:
        """A snapshot copied from the leader is durable: the log restarts at its end, the state
        machine loads it, and the next Fetch starts there. Whatever the log held is either below the
        snapshot or diverged from the leader (it was told to fetch the snapshot), so none of it can
        be committed beyond it."""
        if isinstance(self.state, Leader):
            return  # cannot happen to a leader (it has every committed record); never cut its log
        leader_cluster = pending.cluster_id
        if leader_cluster is not None and self.cluster_id not in (None, leader_cluster):
            self._out.append(
                Fatal(
                    f"the leader's snapshot belongs to cluster {leader_cluster}, "
                    f"but this node's data dir belongs to cluster {self.cluster_id}"
                )
            )
            return
        if leader_cluster is not None and self.cluster_id is None:
            self.cluster_id = leader_cluster
            self._out.append(PersistClusterId(leader_cluster))
        end = snapshot_id.end_offset
        self._snapshot = LoadedSnapshot(snapshot_id, pending.data)
        self.log.reset(end, snapshot_id.epoch)
        self._out.append(ResetLog(end))
        if self._flush_in_flight:
            self._flush_cap = min(self._flush_cap, end)
        self._flushed_end = end  # nothing above the snapshot is held; the snapshot itself is durable
        self._control_applied = 0
        self._out.append(LoadSnapshot(snapshot_id, pending.data))
        if end > self.high_watermark:
            self.high_watermark = end
            self._out.append(HighWatermarkAdvanced(end))
            self._resolve_written_appends(now)
        if isinstance(self.state, Follower):
            self.state.fetch_deadline = now + self.config.fetch_timeout_ms

    # --- FetchSnapshot Request Handling -----------------------------------------------------------

    def _on_fetch_snapshot_request(self, reply_to: Hashable, cid: int, req: FetchSnapshotRequest) -> None:
        def answer(error: ErrorCode, size: int = 0, position: int = 0, data: bytes = b"") -> None:
            response = FetchSnapshotResponse(
                int(error), self.leader_id, self.epoch, req.snapshot_id, size, position, data
            )
            self._respond(reply_to, cid, response)

        if isinstance(self.state, Leader) and self._cluster_id_mismatch(req.cluster_id):
            return answer(ErrorCode.INVALID_CLUSTER_ID)
        if req.current_leader_epoch < self.epoch:
            return answer(ErrorCode.FENCED_LEADER_EPOCH)
        if req.current_leader_epoch > self.epoch:
            return answer(ErrorCode.UNKNOWN_LEADER_EPOCH)
        if not isinstance(self.state, Leader):
            return answer(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if req.replica_id in self.config.voter_ids:
            self._heard_from_voter(self.state, req.replica_id)
        snapshot = self._snapshot
        if snapshot is None or snapshot.snapshot_id != req.snapshot_id:
            return answer(ErrorCode.SNAPSHOT_NOT_FOUND)
        size = len(snapshot.data)
        if not 0 <= req.position < size:
            return answer(ErrorCode.POSITION_OUT_OF_RANGE, size)
        if req.max_bytes <= 0:
            return answer(ErrorCode.INVALID_REQUEST, size)
        stop = req.position + min(req.max_bytes, self.config.fetch_max_bytes)
        return answer(ErrorCode.NONE, size, req.position, snapshot.data[req.position : stop])

    # --- FetchSnapshot Response Handling ----------------------------------------------------------

    def _start_snapshot_fetch(self, now: int, source: int, resp: FetchResponse) -> None:
        """The leader says our fetch offset is below its log start: copy its snapshot first."""
        snapshot_id = resp.snapshot_id
        assert snapshot_id is not None
        if snapshot_id.end_offset <= max(self._snapshot_end(), self.log.start_offset):
            self._back_off(now, source)  # not newer than what we hold: a confused or stale answer
            return
        fetch = self._snapshot_fetch
        if fetch is None or fetch.snapshot_id != snapshot_id:
            self._snapshot_fetch = _SnapshotFetch(snapshot_id, resp.cluster_id, [])

    def _on_fetch_snapshot_response(self, now: int, source: int, resp: FetchSnapshotResponse) -> None:
        if not self._answer_still_matters(now, source, resp):
            return
        state = self.state
        fetch = self._snapshot_fetch
        current = isinstance(state, Follower) and source == state.leader_id and resp.leader_epoch == state.epoch
        if not current or fetch is None or resp.error_code != ErrorCode.NONE:
            if resp.error_code in (ErrorCode.SNAPSHOT_NOT_FOUND, ErrorCode.POSITION_OUT_OF_RANGE):
                self._snapshot_fetch = None  # the leader moved on: the next Fetch names its snapshot
            if resp.error_code != ErrorCode.NONE:
                self._back_off(now, source)
            return
        assert isinstance(state, Follower)
        if fetch.accept(resp) is not None:
            self._snapshot_fetch = None  # start over from the Fetch
            self._back_off(now, source)
            return
        state.fetch_deadline = now + self.config.fetch_timeout_ms
        if fetch.done:
            data = b"".join(fetch.parts)
            self._snapshot_fetch = None
            self._installing = fetch.snapshot_id
            self._writing[fetch.snapshot_id] = _PendingSnapshot(data, fetched=True, cluster_id=fetch.cluster_id)
            self._out.append(WriteSnapshot(fetch.snapshot_id, data))

    # =============================================================================================
    # linearizable reads
    # =============================================================================================

    def _on_read_barrier(self, now: int, handle: Hashable) -> None:
        if not isinstance(self.state, Leader):
            self._out.append(ReadBarrierFailed(handle, int(ErrorCode.NOT_LEADER_OR_FOLLOWER), "not the leader"))
            return
        self._barriers.append(_Barrier(handle, self._fetch_seq))
        # Parked fetches arrived before the barrier and cannot confirm it: answer them now so that the
        # followers' next fetches (which can) come at once instead of after fetch_max_wait_ms.
        self._complete_parked_fetches(now, expired_only=False)
        self._maybe_complete_barriers()

    def _maybe_complete_barriers(self) -> None:
        leader = self.state
        if not self._barriers or not isinstance(leader, Leader):
            return
        if self.high_watermark <= leader.epoch_start_offset:
            return  # nothing of this epoch is committed yet: our view may be behind the last leader's
        confirmations = sorted((seq for voter, seq in leader.fetch_seq.items() if voter != self.node_id), reverse=True)
        needed = self.config.majority - 1
        if needed == 0:
            confirmed_seq = NEVER
        elif len(confirmations) >= needed:
            confirmed_seq = confirmations[needed - 1]  # a majority fetched after every barrier below this
        else:
            return
        keep = []
        for barrier in self._barriers:
            if barrier.fetch_seq < confirmed_seq:
                self._out.append(ReadBarrierCompleted(barrier.handle, self.high_watermark))
            else:
                keep.append(barrier)
        self._barriers = keep

    # =============================================================================================
    # graceful resignation
    # =============================================================================================

    def _on_resign(self, now: int) -> None:
        self._shutting_down = True
        if isinstance(self.state, Leader):
            self._become_resigned(now)
        elif isinstance(self.state, Candidate):
            self._inflight.clear()
            self.state.backing_off_until = NEVER  # give up this election; never start another

    # =============================================================================================
    # timers and what each role sends
    # =============================================================================================

    def _random_election_timeout(self) -> int:
        timeout = self.config.election_timeout_ms
        return timeout + self.rng.randint(0, timeout)

    def _check_deadlines(self, now: int) -> None:
        for dest, inflight in list(self._inflight.items()):
            if inflight.deadline <= now:
                del self._inflight[dest]
                self._back_off(now, dest)
        if isinstance(self.state, Leader):
            self._complete_parked_fetches(now, expired_only=True)
        match self.state:
            case Unattached(election_deadline=deadline) | Voted(election_deadline=deadline) if deadline <= now:
                if self.is_voter:
                    self._become_candidate(now)
                else:
                    self.state.election_deadline = now + self._random_election_timeout()
            case Follower(fetch_deadline=deadline) if deadline <= now:
                if self.is_voter:
                    self._become_candidate(now)
                else:
                    self._become_unattached(now, self.epoch)
            case Candidate() as c:
                if c.backing_off_until is not None and c.backing_off_until <= now:
                    self._become_candidate(now)
                elif c.backing_off_until is None and c.election_deadline <= now:
                    self._election_failed(now)
            case Leader() as leader if leader.check_quorum_deadline <= now:
                # The zombie-leader rule: without Fetches from a majority in a fetch timeout, re-elect.
                if (
                    len(leader.fetched_since_check) + 1 >= self.config.majority
                    or "raft-leader-never-resigns" in self.config.bugs  # KAFKA-15489
                ):
                    leader.fetched_since_check = set()
                    leader.check_quorum_deadline = now + self.config.fetch_timeout_ms
                else:
                    self._become_candidate(now)
            case Resigned(election_deadline=deadline) if deadline <= now and not self._shutting_down:
                self._become_candidate(now)

    def _next_deadline(self) -> int:
        deadlines = [inflight.deadline for inflight in self._inflight.values()]
        deadlines.extend(until for until in self._backoff_until.values())
        deadlines.extend(parked.deadline for parked in self._parked)
        match self.state:
            case Unattached(election_deadline=d) | Voted(election_deadline=d):
                deadlines.append(d)
            case Resigned(election_deadline=d) if not self._shutting_down:
                deadlines.append(d)
            case Follower(fetch_deadline=d):
                deadlines.append(d)
            case Candidate() as c:
                deadlines.append(c.backing_off_until if c.backing_off_until is not None else c.election_deadline)
            case Leader(check_quorum_deadline=d):
                deadlines.append(d)
        return min(deadlines, default=NEVER)

    def _arm_timer(self, now: int) -> None:
        # Backoff entries that are past are dead weight: drop them.
        for dest in [d for d, until in self._backoff_until.items() if until <= now]:
            del self._backoff_until[dest]
        deadline = self._next_deadline()
        if deadline != self._timer_armed or deadline <= now:
            self._timer_armed = deadline
            if deadline < NEVER:
                self._out.append(SetTimer(max(deadline, now)))

    def _can_send(self, now: int, dest: int) -> bool:
        return dest not in self._inflight and self._backoff_until.get(dest, 0) <= now

    def _send(self, now: int, dest: int, message: Request) -> None:
        cid = self._next_correlation
        self._next_correlation += 1
        self._inflight[dest] = _InFlight(cid, now + self.config.request_timeout_ms)
        self._out.append(SendRequest(dest, cid, message))

    def _fetch_request(self, max_wait_ms: int) -> FetchRequest:
        return FetchRequest(
            cluster_id=self.cluster_id,
            replica_id=self.node_id,
            current_leader_epoch=self.epoch,
            fetch_offset=self.log.end_offset,
            last_fetched_epoch=self.log.last_epoch,
            max_wait_ms=max_wait_ms,
            max_bytes=self.config.fetch_max_bytes,
        )

    def _drive(self, now: int) -> None:
        state = self.state
        match state:
            case Candidate() if state.backing_off_until is None:
                request = VoteRequest(
                    self.cluster_id, state.epoch, self.node_id, self.log.last_epoch, self.log.end_offset
                )
                for voter in self.voters:
                    if (
                        voter != self.node_id
                        and voter not in state.granted
                        and voter not in state.rejected
                        and self._can_send(now, voter)
                    ):
                        self._send(now, voter, request)
            case Leader():
                request = BeginQuorumEpochRequest(self.cluster_id, self.node_id, state.epoch)
                for voter in sorted(state.unendorsed):
                    if self._can_send(now, voter):
                        self._send(now, voter, request)
            case Follower() if self._installing is not None:
                pass  # a fetched snapshot is being written; fetching resumes from its end
            case Follower() if self._snapshot_fetch is not None:
                if self._can_send(now, state.leader_id):
                    fetch = self._snapshot_fetch
                    self._send(
                        now,
                        state.leader_id,
                        FetchSnapshotRequest(
                            self.cluster_id,
                            self.node_id,
                            self.config.fetch_max_bytes,
                            state.epoch,
                            fetch.snapshot_id,
                            fetch.position,
                        ),
                    )
            case Follower():
                # A voter acknowledges through its fetch offset, so it fetches again only once fsync'd.
                flushed = not self._flush_in_flight and self._flushed_end == self.log.end_offset
                if "raft-follower-fetch-before-flush" in self.config.bugs:  # KAFKA-10533
                    flushed = True
                if self._can_send(now, state.leader_id) and flushed:
                    self._send(now, state.leader_id, self._fetch_request(self.config.fetch_max_wait_ms))
            case Unattached():
                # Leader discovery: ask a random voter; its answer names the leader it knows.
                others = [v for v in self.voters if v != self.node_id]
                if others and not self._inflight and self._flushed_end == self.log.end_offset:
                    voter = self.rng.choice(others)
                    if self._can_send(now, voter):
                        self._send(now, voter, self._fetch_request(0))
            case Resigned():
                request = EndQuorumEpochRequest(
                    self.cluster_id, self.node_id, self.node_id, state.epoch, state.preferred_successors
                )
                for voter in sorted(state.unacknowledged):
                    if self._can_send(now, voter) and self._failures.get(voter, 0) < 3:
                        self._send(now, voter, request)
