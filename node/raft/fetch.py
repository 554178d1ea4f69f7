"""Replication (KIP-595 "Fetch Request/Response Handling"): the pull-based log copy.

Followers and observers send Fetch to the leader with their log end and its epoch; the leader
answers with records, or with the epoch where their logs diverge (the follower truncates to it and
fetches again), or with its snapshot id when the fetcher is below its log start (`snapshots.py`).
A Fetch from a voter acknowledges everything below its offset: the leader's high watermark follows
(`high_watermark.py`). With nothing new, the leader parks the Fetch up to `fetch_max_wait_ms`.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from node.protocol.errors import ErrorCode
from node.protocol.messages import EpochEndOffset, FetchRequest, FetchResponse, FetchSnapshotResponse
from node.raft.actions import AppendBatches, Fatal, TruncateLog
from node.raft.base import RaftNodeBase
from node.raft.quorum_state import Follower, Leader, Prospective, ReplicaProgress
from node.raft.records import RecordBatch
from node.raft.waiting import ParkedFetch


class ReplicationMixin(RaftNodeBase):
    # --- Fetch Request Handling (the leader) ------------------------------------------------------

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
        if req.replica_id == self.node_id:
            # Only a forged Fetch names the leader itself: it would stand in for the leader's own
            # progress (and move the high watermark past what is flushed).
            self._respond_fetch_error(reply_to, cid, ErrorCode.INVALID_REQUEST)
            return
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
        if "raft-leader-ignores-last-fetched-epoch" in self.config.bugs:  # trusts the fetch offset (KAFKA-1211)
            diverging = None
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
            leader.parked.append(ParkedFetch(reply_to, cid, req, now + req.max_wait_ms))

    def _respond_fetch_error(self, reply_to: Hashable, cid: int, error: ErrorCode) -> None:
        self._respond(reply_to, cid, FetchResponse(int(error), self.leader_id, self.epoch, self.high_watermark))

    def _heard_from_voter(self, leader: Leader, voter: int) -> None:
        """A Fetch or FetchSnapshot in our epoch: an endorsement and liveness for the zombie rule."""
        leader.unendorsed.discard(voter)
        leader.fetched_since_check.add(voter)
        if "raft-read-barrier-counts-late-fetches" in self.config.bugs:
            self._barriers_hear_fetch(leader, voter)

    def _fetch_answer(self, **fields: Any) -> FetchResponse:
        """A successful FetchResponse of this leader, with records, a diverging epoch or a snapshot id."""
        return FetchResponse(
            int(ErrorCode.NONE), self.node_id, self.epoch, self.high_watermark, self.log.start_offset, **fields
        )

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
        if records and isinstance(self.state, Leader):
            last = records[-1]
            self.state.shipped_end = max(self.state.shipped_end, last.base_offset + len(last.records))
        self._respond(reply_to, cid, self._fetch_answer(records=records))

    def _complete_parked_fetches(self, now: int, expired_only: bool) -> None:
        """Answer the leader's parked Fetches: every one (the log grew or the high watermark moved), or
        those whose wait is over. A node that is not the leader has none."""
        leader = self.state
        if not isinstance(leader, Leader) or not leader.parked:
            return
        keep = []
        for parked in leader.parked:
            if expired_only and parked.deadline > now:
                keep.append(parked)
            else:
                self._complete_fetch(parked.reply_to, parked.correlation_id, parked.request)
        leader.parked = keep

    # --- Fetch Response Handling (followers and observers) ----------------------------------------

    def _answer_still_matters(self, now: int, source: int, resp: FetchResponse | FetchSnapshotResponse) -> bool:
        """The common start of handling a Fetch or FetchSnapshot answer: INVALID_CLUSTER_ID is fatal,
        and news of another epoch or leader changes our role instead."""
        if resp.error_code == ErrorCode.INVALID_CLUSTER_ID:
            self._out.append(
                Fatal(f"node {source} rejected this node's clusterId {self.cluster_id} (INVALID_CLUSTER_ID)")
            )
            return False
        return not self._maybe_transition_on_epoch(now, resp.leader_epoch, resp.leader_id, source)

    def _on_fetch_response(self, now: int, source: int, resp: FetchResponse) -> None:
        if not self._answer_still_matters(now, source, resp):
            return
        state = self.state
        if (
            isinstance(state, Prospective)
            and source == state.leader_id
            and resp.leader_epoch == state.epoch
            and resp.error_code == ErrorCode.NONE
        ):
            # KIP-996: the leader answered after all: follow it again instead of standing.
            self._become_follower(now, state.epoch, source)
            state = self.state
        elif (
            isinstance(state, Prospective)
            and source == state.leader_id
            and resp.leader_epoch == state.epoch
            and resp.leader_id != source
        ):
            self._leader_stepped_down(state)  # its answer names another leader, or none
        if not (isinstance(state, Follower) and source == state.leader_id and resp.leader_epoch == state.epoch):
            if resp.error_code != ErrorCode.NONE:
                self._back_off(now, source)
            return
        if resp.error_code != ErrorCode.NONE:
            self._back_off(now, source)
            return
        state.fetch_deadline = now + self.config.fetch_timeout_ms
        state.heard_from_leader = True
        if resp.snapshot_id is not None:
            self._start_snapshot_fetch(now, state, resp.snapshot_id, resp)
            return
        if resp.diverging_epoch is not None:
            self._truncate_to_diverging(resp.diverging_epoch)
            return
        appended: list[RecordBatch] = []
        for batch in resp.records:
            # Not what we asked for: not at our log end, from an epoch the leader cannot have written
            # yet, or from one before our last (a leader that validated our fetch holds nothing older
            # after it). Such an answer is not applied; the next fetch sorts it out.
            if (
                batch.base_offset != self.log.end_offset
                or batch.epoch > state.epoch
                or batch.epoch < self.log.last_epoch
            ):
                break
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
            if "raft-follower-truncates-to-leader-epoch-end" in self.config.bugs:  # KAFKA-6361 (KIP-279)
                offset = min(diverging.end_offset, self.log.end_offset)
        if self.log.start_offset <= offset < self.log.end_offset:
            offset = self.log.batch_at(offset).base_offset  # whole batches only: cut before a split one
        if offset < self.high_watermark:  # below the log start too: a snapshot holds committed records only
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

    # --- What a follower or an unattached node sends ----------------------------------------------

    def _send_fetch(self, now: int, leader_id: int) -> None:
        """A follower's (or a prospective's, KIP-996) Fetch to its leader."""
        # A voter acknowledges through its fetch offset, so it fetches again only once fsync'd.
        flushed = not self._flush_in_flight and self._flushed_end == self.log.end_offset
        if "raft-follower-fetch-before-flush" in self.config.bugs:  # KAFKA-10533
            flushed = True
        if self._can_send(now, leader_id) and flushed:
            self._send(now, leader_id, self._fetch_request(self.config.fetch_max_wait_ms))

    def _discover_leader(self, now: int) -> None:
        """Unattached: ask a random voter; its answer names the leader it knows."""
        others = [v for v in self.voters if v != self.node_id]
        if others and not self._inflight and self._flushed_end == self.log.end_offset:
            voter = self.rng.choice(others)
            if self._can_send(now, voter):
                self._send(now, voter, self._fetch_request(0))
