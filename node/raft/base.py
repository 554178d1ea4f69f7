"""What every section of the node shares: its state, and the plumbing of requests and answers.

`RaftNode` (node.py) is assembled from one mixin per KIP-595 section; each mixin subclasses
`RaftNodeBase`, so the attributes below are the node's state that outlives a role (the log, the
flushes, the snapshots, the requests in flight). What only one role keeps lives in its role object
(`quorum_state`): a leader's parked Fetches, read barriers and unwritten appends, a follower's
snapshot copy. `RaftNode.__init__` sets the attributes. Outgoing requests go through `_send` (one
in flight per destination, with a timeout) and failed ones through `_back_off`.

This module imports none of the sections: they import it (and `waiting`, for the records they keep).
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from node.protocol.errors import ErrorCode
from node.protocol.messages import Request, Response, SnapshotId
from node.raft.actions import Action, Respond, SendRequest, Warn
from node.raft.config import RaftConfig
from node.raft.log import RaftLog
from node.raft.metrics import RaftMetrics
from node.raft.quorum_state import QuorumStateData, RoleState
from node.raft.storage import LoadedSnapshot, TrimmedLog
from node.raft.waiting import PendingSnapshot, WrittenAppend

NEVER = 1 << 62
INT32_MAX = (1 << 31) - 1  # epochs and replica ids are int32 on the wire
# The last epoch a node takes: INT32_MAX itself is the wire type's limit, refused in requests, so a
# node at LAST_EPOCH (or loaded at INT32_MAX) refuses to stand instead of overflowing the log format.
LAST_EPOCH = INT32_MAX - 1


@dataclass(slots=True)
class InFlight:
    correlation_id: int
    deadline: int


class RaftNodeBase:
    # --- identity and configuration
    config: RaftConfig
    node_id: int
    voters: tuple[int, ...]
    rng: random.Random
    _cluster_id_factory: Callable[[random.Random], str]
    cluster_id: str | None
    # --- role and persisted election state (election.py)
    state: RoleState
    quorum_state: QuorumStateData
    _election_started_ms: int | None
    _shutting_down: bool  # Resign was asked: a resigned leader never stands again
    # --- log, flushes and the high watermark (append.py, high_watermark.py); the appends still
    # waiting for a flush are the leader's (`Leader.pending`)
    log: RaftLog
    _loaded_log: TrimmedLog
    high_watermark: int
    _written: deque[WrittenAppend]  # appends in the log, waiting for the high watermark
    _flushed_end: int
    _flush_in_flight: bool
    _flush_cap: int  # a truncation during a flush: the flush cannot make more than this durable
    _control_applied: int  # index into log.control_bases of the next unapplied control batch
    # --- snapshots (snapshots.py); a snapshot being copied is the follower's (`Follower.snapshot_fetch`)
    _snapshot: LoadedSnapshot | None  # the latest durable snapshot; the log starts at its end
    _writing: dict[SnapshotId, PendingSnapshot]
    _installing: SnapshotId | None  # a fetched snapshot being written
    # The state machine's check of a fetched snapshot before it is written and replaces the log (KIP-630
    # leaves the format to the state machine): why it cannot be loaded, or None. None: no check.
    snapshot_check: Callable[[SnapshotId, bytes], str | None] | None
    # --- requests this node sends, and its timer (timers.py)
    _inflight: dict[int, InFlight]
    _backoff_until: dict[int, int]
    _failures: dict[int, int]
    _next_correlation: int
    _timer_armed: int
    _started: bool
    _epochs_exhausted: bool  # the one warning that the epochs are used up was logged
    # --- the event being handled
    _now: int
    _out: list[Action]
    metrics_state: RaftMetrics
    # --- views every section reads (properties of RaftNode in node.py)
    epoch: int
    leader_id: int
    is_voter: bool

    def _respond(self, reply_to: Hashable, cid: int, message: Response) -> None:
        self._out.append(Respond(reply_to, cid, message))

    def _cluster_id_mismatch(self, cluster_id: str | None) -> bool:
        return cluster_id is not None and self.cluster_id is not None and cluster_id != self.cluster_id

    def _refuse_quorum_request(self, sender_id: int, epoch: int) -> ErrorCode | None:
        """Kafka's answer to a voter-only quorum request (Vote, BeginQuorumEpoch, EndQuorumEpoch) that
        must change nothing: a negative sender id, this node's own id (it never asks itself) or an
        epoch past the last one is INVALID_REQUEST; a
        sender (or a receiver) outside the voter set is INCONSISTENT_VOTER_SET. None: go on."""
        if sender_id < 0 or sender_id == self.node_id or (epoch > self.epoch and epoch > LAST_EPOCH):
            return ErrorCode.INVALID_REQUEST
        if not self.is_voter or sender_id not in self.config.voter_ids:
            return ErrorCode.INCONSISTENT_VOTER_SET
        return None

    def _epoch_exhausted(self) -> bool:
        """True when this node may not bump its epoch (it is at LAST_EPOCH or beyond); the first time,
        one warning line says so. The caller keeps its role and re-arms its timer."""
        if self.epoch < LAST_EPOCH:
            return False
        if not self._epochs_exhausted:
            self._epochs_exhausted = True
            self._out.append(
                Warn(f"node {self.node_id}: epoch {self.epoch} is the last one (int32): refusing to start an election")
            )
        return True

    def _can_send(self, now: int, dest: int) -> bool:
        return dest not in self._inflight and self._backoff_until.get(dest, 0) <= now

    def awaits(self, source: int, correlation_id: int) -> bool:
        """This node waits for the answer `correlation_id` from `source`: it would act on it (any other
        answer is a stale or duplicated one, dropped unread)."""
        inflight = self._inflight.get(source)
        return inflight is not None and inflight.correlation_id == correlation_id

    def _send(self, now: int, dest: int, message: Request) -> None:
        cid = self._next_correlation
        self._next_correlation += 1
        self._inflight[dest] = InFlight(cid, now + self.config.request_timeout_ms)
        self._out.append(SendRequest(dest, cid, message))

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
