"""Safety invariants, checked incrementally after every event the simulator processes.

What is checked (node views are the core's read-only attributes; logs are the simulated disk's,
which the world keeps in step with the node's `AppendBatches`/`TruncateLog` actions and which must
agree with the core's `log_end_offset`/`last_epoch` after every event):

1. Election safety: at most one node is ever leader in a given epoch (over all nodes, all time,
   all incarnations).
2. Epochs never decrease on a node, across restarts too (the epoch is in the durable quorum state).
3. The high watermark never decreases within one incarnation of a node, and never exceeds that
   node's log end. A restarted node starts again from whatever HWM it can re-establish (it may be
   lower); rule 4 keeps that safe.
4. Committed entries are final. The committed log is the sequence of batches below the largest HWM
   any node has reported, taken from the log of the node that first reported it. Every node's log
   below its *own* HWM must equal the committed log there, and no node may truncate or overwrite
   below its own HWM. (A lagging node may still hold and drop divergent entries between its own HWM
   and the global one: it never claimed them committed.)
5. Durability of commits: when a batch becomes committed it is on a majority of voters' *durable*
   logs (what survives power loss), and it stays so after every later flush and crash; a durable
   snapshot covering the batch counts as holding it (KIP-630: the log before it may go).
   Snapshots and log resets: a snapshot never covers more than the committed log, and a log reset
   for a fetched snapshot never drops records above the node's own HWM.
6. Log matching: if two logs hold a batch with the same base offset and epoch, the batches are
   identical and so are the logs before them. Checked inductively: every (base offset, epoch) is
   only ever appended with one content and one predecessor (offset, epoch).

In cluster mode (`ImageAgreement`, after every event that applied metadata on a node process):

7. Image agreement: any two nodes' metadata images at the same applied offset hold the same state
   (equal `MetadataImage.fingerprint()`s, position included), whether replayed or loaded from a snapshot.
8. An image holds committed records only: its applied offset never passes the committed log's end,
   never goes back within one process incarnation, and is what the process announced.

Against the crashes to come (durable state, as a power loss now would leave each disk):

9. Commit safety (KIP-595, "Extra condition on commitment": a leader advances the high watermark
   only once "there is no other replica that could become leader unless it has replicated all of
   the data that we commit"). When a batch becomes committed, no voter that lacks it could win an
   election: counting its own vote and the vote of every voter whose log, as a power loss now would
   leave it, is no more up to date than the lacking voter's log (KIP-595's vote rule: last epoch,
   then end offset), it must fall short of a majority. This is Raft's Leader Completeness checked at
   the moment of commit, for every crash that may follow, before any entry is actually overwritten.
10. Election safety across crashes (KIP-595 Vote handling: a voter persists its vote before granting
    it; votedId is durable state). When a leader is elected, every voter whose vote elected it
    (itself included) durably remembers that vote: its quorum-state as a power loss now would leave
    it is in a later epoch, or in that epoch names the leader as its vote or as its leader (a file the
    node would refuse to start on counts as remembering). And a voter restarting in that epoch comes
    back remembering it (it did not vote, and cannot vote, for anyone else in it). Otherwise one crash
    lets the voter vote again in the epoch, and a second leader can be elected in it.

Of the protocol's repair of a diverged log:

11. A divergence is repaired (KIP-595 FetchResponse handling, step 2: truncate from DivergingEpoch's
    end offset, and every offset of a greater epoch). When a follower of leader L in epoch E acts on
    L's answer in E naming DivergingEpoch (e, X), its log afterwards holds no entry of an epoch above
    e, and if its last epoch is e it ends at X or before. (The world judges only the answer the Raft
    core waits for: a stale or redelivered copy is dropped unread.) A follower that keeps a deposed leader's
    tail is told the same divergence for ever and never catches up again (KAFKA-6361); no other rule
    breaks, because it never counts that tail as committed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from node.metadata.image import MetadataImage
from node.raft.quorum_state import Role
from node.raft.records import RecordBatch
from node.sim.disk import SimDisk, batch_at


class InvariantViolation(Exception):
    """A safety property failed; the message says which and where."""


class NodeView(Protocol):
    role: Role
    epoch: int
    high_watermark: int

    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    @property
    def last_epoch(self) -> int: ...


@dataclass
class _NodeMark:
    epoch: int = 0
    hwm: int = 0  # of the current incarnation
    restarted: bool = False  # no event handled yet since the last (re)start


@dataclass
class InvariantChecker:
    voter_ids: tuple[int, ...]
    leaders: dict[int, int] = field(default_factory=dict)  # epoch -> leader id
    committed: list[RecordBatch] = field(default_factory=list)
    _marks: dict[int, _NodeMark] = field(default_factory=dict)
    _seen: dict[tuple[int, int], tuple[RecordBatch, int]] = field(default_factory=dict)
    _pending_snapshots: list[tuple[int, int]] = field(default_factory=list)
    _votes: dict[int, tuple[int, int]] = field(default_factory=dict)  # voter -> (epoch, leader) its vote elected
    _elected: set[int] = field(default_factory=set)  # epochs whose election rule 10 checked

    @property
    def majority(self) -> int:
        return len(self.voter_ids) // 2 + 1

    @property
    def committed_end(self) -> int:
        return self.committed[-1].next_offset if self.committed else 0

    def committed_batch(self, offset: int) -> RecordBatch | None:
        return batch_at(self.committed, offset)

    # --- hooks the world calls ---
    def on_restart(self, node_id: int) -> None:
        mark = self._mark(node_id)
        mark.hwm = 0
        mark.restarted = True

    def on_append(
        self, node_id: int, prev: RecordBatch | None, batch: RecordBatch, start_epoch: int | None = None
    ) -> None:
        """Before `batch` is appended after `prev` on `node_id`'s log. `start_epoch`: the epoch of the
        record before the log's start, when the log starts after a snapshot (and `prev` is None)."""
        mark = self._mark(node_id)
        if batch.base_offset < mark.hwm:
            raise InvariantViolation(
                f"node {node_id} appends at offset {batch.base_offset}, below its own HWM {mark.hwm}"
            )
        prev_epoch = prev.epoch if prev else -1 if start_epoch is None else start_epoch
        key = (batch.base_offset, batch.epoch)
        known = self._seen.get(key)
        if known is None:
            self._seen[key] = (batch, prev_epoch)
        elif known[0] != batch or known[1] != prev_epoch:
            raise InvariantViolation(
                f"log matching: node {node_id} holds a batch at offset {batch.base_offset} epoch "
                f"{batch.epoch} that differs from another copy (content or predecessor epoch "
                f"{prev_epoch} vs {known[1]})"
            )

    def on_truncate(self, node_id: int, offset: int) -> None:
        mark = self._mark(node_id)
        if offset < mark.hwm:
            raise InvariantViolation(f"node {node_id} truncates its log to {offset}, below its own HWM {mark.hwm}")

    def on_reset(self, node_id: int, offset: int) -> None:
        """The node replaces its whole log by a fetched snapshot ending at `offset`: it drops records,
        but only ones the snapshot covers, so the snapshot must reach its own HWM."""
        mark = self._mark(node_id)
        if offset < mark.hwm:
            raise InvariantViolation(
                f"node {node_id} resets its log to start at {offset}, below its own HWM {mark.hwm}"
            )
        self._pending_snapshots.append((node_id, offset))

    def on_snapshot(self, node_id: int, end_offset: int) -> None:
        """The node writes a snapshot of every record below `end_offset` (checked after the event)."""
        self._pending_snapshots.append((node_id, end_offset))

    def on_durable_loss(self, disks: Mapping[int, SimDisk], from_offset: int) -> None:
        """Some voter's durable log lost data at or after `from_offset`: recheck commit durability."""
        for batch in self.committed:
            if batch.next_offset > from_offset:
                self._check_durable_majority(disks, batch, "later")

    def _mark(self, node_id: int) -> _NodeMark:
        mark = self._marks.get(node_id)
        if mark is None:
            mark = self._marks[node_id] = _NodeMark()
        return mark

    def after_event(
        self, node_id: int, node: NodeView, disk: SimDisk, disks: Mapping[int, SimDisk], log_changed: bool = True
    ) -> None:
        """After `node_id` handled an event. `log_changed`: its actions appended or truncated."""
        mark = self._mark(node_id)
        epoch = node.epoch
        if epoch < mark.epoch:
            raise InvariantViolation(f"node {node_id}'s epoch went back from {mark.epoch} to {epoch}")
        mark.epoch = epoch
        if mark.restarted:
            mark.restarted = False
            self._check_vote_remembered(node_id, node)
        if node.role is Role.LEADER:
            holder = self.leaders.setdefault(epoch, node_id)
            if holder != node_id:
                raise InvariantViolation(f"two leaders in epoch {epoch}: nodes {holder} and {node_id}")
            if epoch not in self._elected:
                self._elected.add(epoch)
                self._check_votes_durable(node_id, epoch, getattr(node, "election_voters", ()), disks)
        leo = disk.end_offset
        if log_changed and (node.log_end_offset != leo or node.last_epoch != disk.last_epoch):
            raise InvariantViolation(
                f"node {node_id}'s log (end {node.log_end_offset}, last epoch {node.last_epoch}) disagrees "
                f"with the log its actions wrote (end {leo}, last epoch {disk.last_epoch})"
            )
        hwm = node.high_watermark
        if hwm < mark.hwm:
            raise InvariantViolation(f"node {node_id}'s high watermark went back from {mark.hwm} to {hwm}")
        if hwm > leo:
            raise InvariantViolation(f"node {node_id}'s high watermark {hwm} is beyond its log end {leo}")
        self._learn_hwm(node_id, node, disk, disks)
        if self._pending_snapshots:
            pending, self._pending_snapshots = self._pending_snapshots, []
            for who, end in pending:
                if end > self.committed_end:
                    raise InvariantViolation(
                        f"node {who} holds a snapshot up to offset {end}, past the committed log's end "
                        f"{self.committed_end}"
                    )

    def after_diverging(self, node_id: int, node: NodeView, diverging_epoch: int, end_offset: int) -> None:
        """Rule 11, after the follower handled its leader's DivergingEpoch (`diverging_epoch`, `end_offset`).
        Epoch 0 is the leader's log start (no epoch of the follower's is known to it): only the end offset
        binds then."""
        last, end = node.last_epoch, node.log_end_offset
        if diverging_epoch > 0 and last > diverging_epoch:
            kept = f"entries of epoch {last}, above the diverging epoch {diverging_epoch}"
        elif (last == diverging_epoch or diverging_epoch == 0) and end > end_offset:
            kept = f"entries up to offset {end}, past the leader's end offset {end_offset} of epoch {diverging_epoch}"
        else:
            return
        raise InvariantViolation(
            f"divergence not repaired: node {node_id} handled its leader's DivergingEpoch (epoch "
            f"{diverging_epoch}, end offset {end_offset}) and still holds {kept}"
        )

    def on_fail_stop(self, node_id: int, node: NodeView, disk: SimDisk, disks: Mapping[int, SimDisk]) -> None:
        """The node stopped on a disk error part way through an event: `after_event` never ran, but
        what its core learned in that event (a higher HWM, from the leader) is still the cluster's
        commit, and a snapshot it wrote then must be judged against it.

        The core ran ahead of its disk by the action that failed: its HWM speaks of the core's log, so
        only the disk's batches that the core's log still holds are judged by it. A failed `ResetLog`
        (a fetched snapshot installed) leaves the old log on the disk below a core log that starts at
        the snapshot's end, with the HWM there: the old log was never claimed committed (it is below
        the snapshot or diverged from the leader; docs/trust/soak-207.md)."""
        self._learn_hwm(node_id, node, disk, disks, floor=node.log_start_offset)

    # --- internals ---
    def _learn_hwm(
        self, node_id: int, node: NodeView, disk: SimDisk, disks: Mapping[int, SimDisk], floor: int = 0
    ) -> None:
        """Judge the disk's batches newly below the node's HWM (none below `floor`) against the committed log."""
        mark = self._mark(node_id)
        hwm = min(node.high_watermark, disk.end_offset)
        if hwm > mark.hwm:
            self._check_committed(node_id, disk, max(mark.hwm, disk.start_offset, floor), hwm, disks)
            mark.hwm = hwm

    def _check_committed(self, node_id: int, disk: SimDisk, old: int, new: int, disks: Mapping[int, SimDisk]) -> None:
        committed = len(self.committed)
        offset = old
        while offset < new:
            batch = disk.batch_at(offset)
            if batch is None:  # cannot happen while hwm <= log end; kept for a clear message
                raise InvariantViolation(f"node {node_id} has no batch at offset {offset} below its HWM {new}")
            end = self.committed_end
            if batch.base_offset < end:
                ref = self.committed_batch(batch.base_offset)
                if ref != batch:
                    raise InvariantViolation(
                        f"committed entry changed: node {node_id} has {_desc(batch)} below its HWM {new} "
                        f"where {_desc(ref)} was committed"
                    )
            elif batch.base_offset == end:
                self.committed.append(batch)
                self._check_durable_majority(disks, batch, "when committed")
            else:
                raise InvariantViolation(
                    f"node {node_id} commits offset {batch.base_offset} past a gap in the committed log (ends at {end})"
                )
            offset = batch.next_offset
        if len(self.committed) > committed:
            self._check_no_electable_voter_lacks(self.committed[-1], disks)

    def _check_no_electable_voter_lacks(self, batch: RecordBatch, disks: Mapping[int, SimDisk]) -> None:
        """Rule 9. Checking the newest committed batch is enough: by log matching, a voter that holds
        it holds every batch before it."""
        lacking = [v for v in self.voter_ids if not _holds(disks[v], batch)]
        if not lacking:
            return
        durable = {w: disks[w].durable_tail() for w in self.voter_ids}
        for v in lacking:
            disk = disks[v]
            offer = (disk.last_epoch, disk.end_offset)
            electors = [v, *(w for w in self.voter_ids if w != v and durable[w] <= offer)]
            if len(electors) >= self.majority:
                raise InvariantViolation(
                    f"commit safety: {_desc(batch)} is committed, but node {v}, whose log lacks it (last epoch "
                    f"{offer[0]}, end {offer[1]}), could still be elected by voters {sorted(electors)} (their logs, "
                    f"as a power loss would leave them: {', '.join(f'{w}: {durable[w]}' for w in electors if w != v)})"
                )

    def _check_votes_durable(
        self, leader: int, epoch: int, voters: tuple[int, ...], disks: Mapping[int, SimDisk]
    ) -> None:
        """Rule 10, at the election: every vote that elected the leader is durable on its voter."""
        for voter in voters:
            if voter not in disks:
                continue
            self._votes[voter] = (epoch, leader)
            state = disks[voter].durable_quorum_state()
            if state is None or _remembers(state.leader_epoch, state.voted_id, state.leader_id, epoch, leader):
                continue
            raise InvariantViolation(
                f"election safety: node {leader} was elected in epoch {epoch} with the vote of node {voter}, whose "
                f"quorum-state as a power loss would leave it (epoch {state.leader_epoch}, votedId {state.voted_id}, "
                f"leaderId {state.leader_id}) does not remember that vote: restarted, it could vote again in "
                f"epoch {epoch}"
            )

    def _check_vote_remembered(self, node_id: int, node: NodeView) -> None:
        """Rule 10, at a restart: a voter whose vote elected a leader comes back remembering it."""
        vote = self._votes.get(node_id)
        if vote is None:
            return
        epoch, leader = vote
        voted = getattr(node, "voted_id", leader)
        known = getattr(node, "leader_id", leader)
        if not _remembers(node.epoch, voted, known, epoch, leader):
            raise InvariantViolation(
                f"election safety: node {node_id} restarted in epoch {node.epoch} with votedId {voted} and leader "
                f"{known}, forgetting its vote for node {leader}, the leader it elected in epoch {epoch}"
            )

    def _check_durable_majority(self, disks: Mapping[int, SimDisk], batch: RecordBatch, when: str) -> None:
        holders = [v for v in self.voter_ids if _durably_holds(disks[v], batch)]
        if len(holders) < self.majority:
            raise InvariantViolation(
                f"committed {_desc(batch)} is durable on only {len(holders)} voter(s) {holders} {when}, "
                f"fewer than a majority of {self.majority}"
            )


@dataclass
class ImageAgreement:
    """Rules 7 and 8: the committed metadata image is a function of the applied offset."""

    # next offset -> (fingerprint, first node): `MetadataImage.fingerprint()`, not the canonical `digest()`,
    # which cost more than the rest of the check and of most events' handling
    fingerprints: dict[int, tuple[int, int]] = field(default_factory=dict)
    checks: int = 0
    _applied: dict[int, int] = field(default_factory=dict)  # node -> next offset of its image (this incarnation)
    _pending: dict[int, int] = field(default_factory=dict)  # node -> next offset announced in this event

    def on_applied(self, node_id: int, next_offset: int) -> None:
        """The node's process announced `MetadataApplied(next_offset)` while handling an event."""
        self._pending[node_id] = next_offset

    def on_stop(self, node_id: int) -> None:
        self._applied.pop(node_id, None)
        self._pending.pop(node_id, None)

    def after_event(self, node_id: int, image: MetadataImage, committed_end: int) -> None:
        """After the event (and the Raft checks, so `committed_end` is current)."""
        announced = self._pending.pop(node_id, None)
        if announced is None:
            return
        self.checks += 1
        applied = image.last_offset + 1
        if applied != announced:
            raise InvariantViolation(
                f"node {node_id} announced its image at offset {announced} but the image is at {applied}"
            )
        if applied > committed_end:
            raise InvariantViolation(
                f"node {node_id}'s image applied up to offset {applied}, past the committed log's end {committed_end}"
            )
        before = self._applied.get(node_id, 0)
        if applied < before:
            raise InvariantViolation(f"node {node_id}'s image went back from offset {before} to {applied}")
        self._applied[node_id] = applied
        fingerprint = image.fingerprint()
        first = self.fingerprints.setdefault(applied, (fingerprint, node_id))
        if first[0] != fingerprint:
            raise InvariantViolation(
                f"image agreement: node {node_id}'s image at offset {applied} (digest {image.digest()[:12]}) "
                f"differs from node {first[1]}'s at the same offset"
            )


def _durably_holds(disk: SimDisk, batch: RecordBatch) -> bool:
    """The batch survives a power loss on `disk`: in its durable log, or below its durable snapshot's
    end (the log before a snapshot may be deleted)."""
    if disk.durable_batch_at(batch.base_offset) == batch:
        return True
    snapshot = disk.durable_snapshot
    return snapshot is not None and snapshot.snapshot_id.end_offset >= batch.next_offset


def _holds(disk: SimDisk, batch: RecordBatch) -> bool:
    """The node's log (as its process sees it) holds the batch, or starts after it (a snapshot
    covers it: snapshots hold committed records only)."""
    return disk.start_offset > batch.base_offset or disk.batch_at(batch.base_offset) == batch


def _remembers(state_epoch: int, voted: int, leader_id: int, epoch: int, leader: int) -> bool:
    """A voter in `state_epoch` with this vote and leader will not vote for anyone but `leader` in `epoch`."""
    return state_epoch > epoch or (state_epoch == epoch and leader in (voted, leader_id))


def _desc(batch: RecordBatch | None) -> str:
    if batch is None:
        return "nothing"
    return f"batch [{batch.base_offset}..{batch.next_offset}) epoch {batch.epoch}"
