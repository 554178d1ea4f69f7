"""A KIP-595 quorum member as a pure state machine: the entry point and the read-only views.

`RaftNode.handle(now_ms, event)` is the only way in; it returns the actions the runtime must carry
out, in order. Everything else public on the class is a read-only view for runtimes, metrics, dumps
and the simulator's invariant checks.

Reading guide: `RaftNode` is put together from one mixin per section of the KIP, each in the module
named after it; this module dispatches every event, request and answer to the section that handles it.

- `election.py`: Vote request and response handling, and every role transition (`_become_*`; each
  persists the quorum state before anything else is sent);
- `pre_vote.py`: KIP-996, the prospective role: pre-votes before a candidacy bumps the epoch;
- `timers.py`: election, fetch and check-quorum timeouts (`_check_deadlines` fires them);
- `fetch.py`: Fetch request and response handling (replication), divergence and truncation;
- `high_watermark.py`: how the leader and the followers advance it, and what a committed offset decides;
- `append.py`: the leader's write path (appends grouped into batches, flushes);
- `begin_quorum_epoch.py` / `end_quorum_epoch.py`: a new leader's announcement, and graceful resignation;
- `describe_quorum.py`: the DescribeQuorum answer;
- `read_barrier.py`: linearizable reads (a majority confirms the leader after the read arrived);
- `snapshots.py`: KIP-630, making, serving (FetchSnapshot) and installing snapshots;
- `base.py`: the state every section shares, and the plumbing of outgoing requests; it imports none
  of the sections (the records they keep while waiting are in `waiting.py`, the roles in
  `quorum_state.py`, each role object owning what only that role waits on).

Snapshots (KIP-630) are opaque bytes from the state machine above. The log starts at the latest
durable snapshot's end (`log_start_offset`); a replica fetching below it is sent the snapshot id, copies
the snapshot with FetchSnapshot, and restarts its log at the snapshot's end.
"""

from __future__ import annotations

import base64
import random
from collections import deque
from collections.abc import Callable, Hashable

from node.protocol.messages import (
    NO_LEADER,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Request,
    Response,
    SnapshotId,
    VoteRequest,
    VoteResponse,
)
from node.raft.actions import Action, DeleteLogBefore, LoadSnapshot, ResetLog
from node.raft.append import AppendMixin
from node.raft.base import NEVER, RaftNodeBase
from node.raft.begin_quorum_epoch import BeginQuorumEpochMixin
from node.raft.config import RaftConfig
from node.raft.describe_quorum import DescribeQuorumMixin
from node.raft.election import ElectionMixin
from node.raft.end_quorum_epoch import EndQuorumEpochMixin
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
from node.raft.fetch import ReplicationMixin
from node.raft.high_watermark import HighWatermarkMixin
from node.raft.log import RaftLog
from node.raft.metrics import RaftMetrics
from node.raft.pre_vote import PreVoteMixin
from node.raft.quorum_state import (
    NO_ID,
    Candidate,
    Follower,
    Leader,
    Prospective,
    QuorumStateData,
    Resigned,
    Role,
    RoleState,
    Unattached,
    Voted,
)
from node.raft.read_barrier import ReadBarrierMixin
from node.raft.records import RecordBatch
from node.raft.snapshots import SnapshotsMixin
from node.raft.storage import LoadedSnapshot, LoadedState, trim_to_snapshot
from node.raft.timers import TimersMixin


def random_cluster_id(rng: random.Random) -> str:
    """A Kafka-style clusterId: 16 random bytes, URL-safe base64 without padding (22 chars)."""
    return base64.urlsafe_b64encode(rng.getrandbits(128).to_bytes(16, "big")).decode().rstrip("=")


class RaftNode(
    ElectionMixin,
    TimersMixin,
    ReplicationMixin,
    PreVoteMixin,
    HighWatermarkMixin,
    AppendMixin,
    BeginQuorumEpochMixin,
    EndQuorumEpochMixin,
    DescribeQuorumMixin,
    ReadBarrierMixin,
    SnapshotsMixin,
    RaftNodeBase,
):
    def __init__(
        self,
        config: RaftConfig,
        loaded: LoadedState,
        rng: random.Random,
        cluster_id_factory: Callable[[random.Random], str] | None = None,
    ) -> None:
        # Every attribute is declared, with its type, in RaftNodeBase (base.py).
        self.config = config
        self.node_id = config.node_id
        self.voters = tuple(sorted(config.voter_ids))
        self.rng = rng
        self._cluster_id_factory = cluster_id_factory or random_cluster_id
        self.cluster_id = loaded.cluster_id
        # The latest durable snapshot; the log starts at its end (records below it were dropped).
        self._snapshot = loaded.snapshot
        sid = loaded.snapshot.snapshot_id if loaded.snapshot is not None else None
        self._loaded_log = trim_to_snapshot(sid, loaded.batches)
        if sid is None:
            self.log = RaftLog(self._loaded_log.batches)
        else:
            self.log = RaftLog(self._loaded_log.batches, sid.end_offset, sid.epoch)
        self.high_watermark = self.log.start_offset  # a snapshot holds committed records only
        self._writing = {}
        self._installing = None  # a fetched snapshot being written
        self.snapshot_check = None  # the state machine sets it (NodeProcess)
        self.metrics_state = RaftMetrics()
        self._out = []
        self._now = 0
        self._next_correlation = 1
        self._inflight = {}
        self._backoff_until = {}
        self._failures = {}
        self._written = deque()
        self._flushed_end = self.log.end_offset  # what storage loaded is durable
        self._flush_in_flight = False
        self._flush_cap = NEVER
        self._control_applied = 0  # index into log.control_bases of the next unapplied control batch
        self._timer_armed = NEVER
        self._started = False
        self._epochs_exhausted = False
        self._shutting_down = False
        self._election_started_ms = None

        qs = loaded.quorum_state or QuorumStateData(current_voters=self.voters)
        self.quorum_state = qs
        self.state = self._restore_role(qs)

    # =============================================================================================
    # the one entry, and the read-only views
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
            case Follower(leader_id=leader) | Resigned(leader_id=leader) | Prospective(leader_id=leader):
                return leader
        return NO_LEADER

    @property
    def voted_id(self) -> int:
        return self.quorum_state.voted_id

    @property
    def is_voter(self) -> bool:
        return self.node_id in self.config.voter_ids

    @property
    def resignation_pending(self) -> bool:
        """A resigned leader still has an EndQuorumEpoch out that no voter answered or refused yet: a
        process stopping gracefully waits for it (KIP-595: the successors must hear of the hand-over,
        and a request still in flight dies with the process's connections)."""
        state = self.state
        return isinstance(state, Resigned) and any(v in self._inflight for v in state.unacknowledged)

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
        pending = self.state.pending if isinstance(self.state, Leader) else ()
        return self.log.end_offset + sum(len(p.records) for p in pending)

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

    # =============================================================================================
    # dispatch: each request, answer and role goes to the section that handles it
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

    def _on_response(self, now: int, source: int, cid: int, message: Response) -> None:
        if not self.awaits(source, cid):
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
                # An answer of another API than the request's (a confused or hostile peer): as lost.
                self._back_off(now, source)

    def _drive(self, now: int) -> None:
        """Send whatever the current role owes its peers (each role's sending lives in its section)."""
        state = self.state
        match state:
            case Candidate() if state.backing_off_until is None:
                self._send_vote_requests(now, state)
            case Leader():
                self._send_begin_quorum_epoch(now, state)
            case Follower() if self._installing is not None:
                pass  # a fetched snapshot is being written; fetching resumes from its end
            case Follower(snapshot_fetch=fetch) if fetch is not None:
                self._send_fetch_snapshot(now, state, fetch)
            case Follower():
                self._send_fetch(now, state.leader_id)
            case Unattached():
                self._discover_leader(now)
            case Resigned():
                self._send_end_quorum_epoch(now, state)
            case Prospective() if not self._shutting_down:
                self._send_pre_votes(now, state)
