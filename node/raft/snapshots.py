"""Snapshots (KIP-630): making them, serving them with FetchSnapshot, and installing them.

The state machine above hands the core opaque snapshot bytes (`CreateSnapshot`); once durable the
log starts at the snapshot's end. A fetcher below that start is sent the snapshot id in its
FetchResponse, copies the snapshot chunk by chunk with FetchSnapshot, and restarts its log there.
"""

from __future__ import annotations

from collections.abc import Hashable

from node.protocol.errors import ErrorCode
from node.protocol.messages import FetchResponse, FetchSnapshotRequest, FetchSnapshotResponse, SnapshotId
from node.raft.actions import (
    DeleteLogBefore,
    Fatal,
    HighWatermarkAdvanced,
    LoadSnapshot,
    PersistClusterId,
    ResetLog,
    Warn,
    WriteSnapshot,
)
from node.raft.base import RaftNodeBase
from node.raft.log import LogError
from node.raft.quorum_state import Follower, IllegalStateError, Leader
from node.raft.storage import LoadedSnapshot
from node.raft.waiting import PendingSnapshot, SnapshotFetch


class SnapshotsMixin(RaftNodeBase):
    # --- Snapshots made here, and installed from the leader ---------------------------------------

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
            self._writing[snapshot_id] = PendingSnapshot(bytes(data), fetched=False)
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

    def _install_snapshot(self, now: int, snapshot_id: SnapshotId, pending: PendingSnapshot) -> None:
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

    # --- Fetch below the log start: answer with the snapshot id -----------------------------------

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

    def _respond_with_snapshot_id(self, reply_to: Hashable, cid: int) -> None:
        if self._snapshot is None:  # _needs_snapshot is False without one
            raise IllegalStateError("a Fetch was sent to a snapshot this node does not have")
        answer = self._fetch_answer(snapshot_id=self._snapshot.snapshot_id, cluster_id=self.cluster_id)
        self._respond(reply_to, cid, answer)

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

    def _start_snapshot_fetch(self, now: int, follower: Follower, snapshot_id: SnapshotId, resp: FetchResponse) -> None:
        """The leader says our fetch offset is below its log start: copy its snapshot first."""
        if snapshot_id.end_offset <= max(self._snapshot_end(), self.log.start_offset):
            self._back_off(now, follower.leader_id)  # not newer than what we hold: a confused or stale answer
            return
        if snapshot_id.end_offset < self.high_watermark:
            # Installing it would cut committed records away. A leader holds every record we know to be
            # committed, and its snapshot covers them, so only a confused peer sends one ending below.
            self._out.append(
                Warn(
                    f"node {follower.leader_id} offered snapshot {snapshot_id.end_offset}-{snapshot_id.epoch}, "
                    f"below this node's high watermark {self.high_watermark}: refused"
                )
            )
            self._back_off(now, follower.leader_id)
            return
        fetch = follower.snapshot_fetch
        if fetch is None or fetch.snapshot_id != snapshot_id:
            follower.snapshot_fetch = SnapshotFetch(snapshot_id, resp.cluster_id, [])

    def _on_fetch_snapshot_response(self, now: int, source: int, resp: FetchSnapshotResponse) -> None:
        if not self._answer_still_matters(now, source, resp):
            return
        state = self.state
        follower = state if isinstance(state, Follower) else None
        fetch = follower.snapshot_fetch if follower is not None else None
        current = follower is not None and source == follower.leader_id and resp.leader_epoch == follower.epoch
        if follower is None or not current or fetch is None or resp.error_code != ErrorCode.NONE:
            if follower is not None and resp.error_code in (
                ErrorCode.SNAPSHOT_NOT_FOUND,
                ErrorCode.POSITION_OUT_OF_RANGE,
            ):
                follower.snapshot_fetch = None  # the leader moved on: the next Fetch names its snapshot
            if resp.error_code != ErrorCode.NONE:
                self._back_off(now, source)
            return
        if fetch.accept(resp) is not None:
            follower.snapshot_fetch = None  # start over from the Fetch
            self._back_off(now, source)
            return
        follower.fetch_deadline = now + self.config.fetch_timeout_ms
        follower.heard_from_leader = True
        if fetch.done:
            data = b"".join(fetch.parts)
            follower.snapshot_fetch = None
            problem = self.snapshot_check(fetch.snapshot_id, data) if self.snapshot_check is not None else None
            if problem is not None:
                # Written and installed, it would replace the log with what no one can load: refused,
                # and the next Fetch starts the copy again (a sound leader sends a sound one).
                sid = fetch.snapshot_id
                self._out.append(Warn(f"snapshot {sid.end_offset}-{sid.epoch} from node {source} refused: {problem}"))
                self._back_off(now, source)
                return
            self._installing = fetch.snapshot_id
            self._writing[fetch.snapshot_id] = PendingSnapshot(data, fetched=True, cluster_id=fetch.cluster_id)
            self._out.append(WriteSnapshot(fetch.snapshot_id, data))

    def _send_fetch_snapshot(self, now: int, follower: Follower, fetch: SnapshotFetch) -> None:
        if self._can_send(now, follower.leader_id):
            self._send(
                now,
                follower.leader_id,
                FetchSnapshotRequest(
                    self.cluster_id,
                    self.node_id,
                    self.config.fetch_max_bytes,
                    follower.epoch,
                    fetch.snapshot_id,
                    fetch.position,
                ),
            )
