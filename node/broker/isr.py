"""ISR tracking (KIP-497): followers heartbeat their leaders; leaders shrink and expand ISRs.

Follower side: every replica heartbeat interval, one `ReplicaHeartbeatRequest` to each broker that
leads a partition this broker follows (per its metadata image), naming those partitions; answered or
not, the next one goes out on time.

Leader side, per partition this broker leads (per the image):
- a follower is caught up while its last heartbeat at the current leader epoch is at most
  `replica.lag.time.max.ms` old; an ISR member not heard at all counts from when this broker became
  leader (Kafka resets the followers' clocks on becoming leader);
- an ISR member that lags is removed; a replica outside the ISR that is caught up is added back, if the
  image shows it registered at the broker epoch it heartbeats with, unfenced and not shutting down
  (KAFKA-13916 / KAFKA-14617: never add a fenced or stale incarnation);
- changes go to the active controller as AlterPartition, every changed partition in one request, one
  request in flight at a time, so at most one change per partition is in flight; the partition epoch
  of the image (KIP-497's zkVersion) guards against stale proposals;
- while a change is in flight, and after it is accepted until the image shows it, the leader assumes
  the largest ISR: the image's plus the proposed or accepted one (`maximal_isr`), as KIP-497 says;
- INVALID_UPDATE_VERSION / FENCED_LEADER_EPOCH for a partition: the image is behind; no new proposal
  until the image's leader or partition epoch moves (or `replica.lag.time.max.ms` passes). Other
  partition errors, request-level errors (STALE_BROKER_EPOCH, NOT_CONTROLLER, ...) and no answer
  (also: none within `request.timeout.ms`): try again after `retry.backoff.ms` (an applied change then
  fails the partition epoch check, harmlessly).
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from dataclasses import dataclass

from node.broker.clock import Clock
from node.broker.config import BrokerConfig
from node.broker.lifecycle import Lifecycle
from node.metadata.image import PartitionState
from node.process.ports import ProcessPort
from node.protocol.broker_api import (
    AlterPartitionPartitionData,
    AlterPartitionRequest,
    AlterPartitionResponse,
    AlterPartitionTopicData,
)
from node.protocol.errors import ErrorCode
from node.protocol.replication import ReplicaHeartbeatPartition, ReplicaHeartbeatRequest, ReplicaHeartbeatResponse

PartitionKey = tuple[str, int]  # (topic id as the image spells it, partition index)

_WAIT_FOR_METADATA = {ErrorCode.INVALID_UPDATE_VERSION, ErrorCode.FENCED_LEADER_EPOCH}


@dataclass(frozen=True, slots=True)
class _Heard:
    leader_epoch: int
    broker_epoch: int
    at_ms: int


@dataclass(frozen=True, slots=True)
class _Leadership:
    leader_epoch: int
    since_ms: int


@dataclass(frozen=True, slots=True)
class _Hold:
    """No new proposal for a partition while the image still shows `based_on` and before `until_ms`."""

    based_on: tuple[int, int]  # (leader_epoch, partition_epoch) the last proposal was built on
    until_ms: int
    isr: tuple[int, ...]  # an accepted ISR the image does not show yet (part of the maximal ISR)


@dataclass(frozen=True, slots=True)
class _Proposal:
    based_on: tuple[int, int]
    isr: tuple[int, ...]
    shrinks: bool
    expands: bool


def _ignore(_reply: object | None) -> None:
    """A replica heartbeat's answer changes nothing: the next one goes out on time either way."""


def _position(ps: PartitionState) -> tuple[int, int]:
    return (ps.leader_epoch, ps.partition_epoch)


class IsrManager:
    def __init__(self, port: ProcessPort, config: BrokerConfig, clock: Clock, lifecycle: Lifecycle) -> None:
        self._port = port
        self._config = config
        self._clock = clock
        self._lifecycle = lifecycle
        self._me = config.node_id
        self._image_offset = -2  # the image offset the caches below were built at
        self._led: dict[PartitionKey, _Leadership] = {}
        self._following: dict[int, tuple[ReplicaHeartbeatPartition, ...]] = {}  # leader id -> partitions
        self._heard: dict[PartitionKey, dict[int, _Heard]] = {}
        self._holds: dict[PartitionKey, _Hold] = {}
        self._in_flight: dict[PartitionKey, _Proposal] = {}
        self._request_outstanding = False
        self._alter_seq = 0  # tells a late answer to an abandoned AlterPartition from the current one
        self._alter_sent_at = 0
        self._next_heartbeat_ms = 0
        self.counters = {
            "shrinks": 0,
            "expands": 0,
            "alter_partition_requests": 0,
            "alter_partition_request_errors": 0,
            "alter_partition_partition_errors": 0,
            "replica_heartbeats_sent": 0,
            "replica_heartbeats_received": 0,
        }

    # --- entry points ------------------------------------------------------------------------------

    def on_committed(self, now_ms: int) -> None:
        self.poll(now_ms)

    def poll(self, now_ms: int) -> None:
        """Send the heartbeats that are due and the ISR changes that are needed; arm the next wake-up."""
        if not self._lifecycle.registered:
            return
        self._refresh(now_ms)
        self._send_heartbeats(now_ms)
        if self._request_outstanding:
            give_up_at = self._alter_sent_at + self._config.request_timeout_ms
            if now_ms < give_up_at:
                self._port.wake_at(give_up_at)
            else:
                self._on_alter_reply(self._alter_seq, None)  # unanswered: as if it failed
                return
        self._maybe_alter(now_ms)

    def on_replica_heartbeat(self, now_ms: int, request: ReplicaHeartbeatRequest) -> ReplicaHeartbeatResponse:
        self.counters["replica_heartbeats_received"] += 1
        self._refresh(now_ms)
        image = self._port.image
        replica = request.replica_id
        reg = image.broker(replica)
        if reg is not None and request.broker_epoch < reg.broker_epoch:
            # An old incarnation (a zombie of a restarted broker): it proves nothing about the live one.
            return ReplicaHeartbeatResponse(ErrorCode.STALE_BROKER_EPOCH)
        for p in request.partitions:
            key = (str(p.topic_id), p.partition_index)
            led = self._led.get(key)
            if led is None or led.leader_epoch != p.leader_epoch or replica == self._me:
                continue  # not ours at that epoch (ours or theirs is stale): not a fetch we count
            ps = image.partition(*key)
            if ps is None or replica not in ps.replicas:
                continue
            self._heard.setdefault(key, {})[replica] = _Heard(p.leader_epoch, request.broker_epoch, now_ms)
        if self._lifecycle.registered:
            self._maybe_alter(now_ms)
        return ReplicaHeartbeatResponse(ErrorCode.NONE)

    # --- what the image says -----------------------------------------------------------------------

    def _refresh(self, now_ms: int) -> None:
        """Rebuild the led and followed partitions when the image has moved since the last look."""
        image = self._port.image
        if image.last_offset == self._image_offset:
            return
        self._image_offset = image.last_offset
        me = self._me
        led: dict[PartitionKey, _Leadership] = {}
        following: dict[int, list[ReplicaHeartbeatPartition]] = defaultdict(list)
        for topic_id in image.topics:
            for index, ps in image.partitions(topic_id).items():
                key = (topic_id, index)
                if ps.leader == me:
                    old = self._led.get(key)
                    if old is None or old.leader_epoch != ps.leader_epoch:
                        old = _Leadership(ps.leader_epoch, now_ms)  # leader from now: followers' clocks start
                    led[key] = old
                elif ps.leader >= 0 and me in ps.replicas:
                    following[ps.leader].append(ReplicaHeartbeatPartition(uuid.UUID(topic_id), index, ps.leader_epoch))
        self._led = led
        self._following = {leader: tuple(parts) for leader, parts in following.items()}
        for key in [k for k in self._heard if k not in led]:
            del self._heard[key]
        for key in [k for k in self._holds if k not in led]:
            del self._holds[key]

    def maximal_isr(self, topic_id: str, partition: int) -> tuple[int, ...]:
        """KIP-497: the ISR the leader assumes: the image's, plus a proposed or accepted change not yet in it."""
        ps = self._port.image.partition(topic_id, partition)
        if ps is None:
            return ()
        key = (topic_id, partition)
        isr = list(ps.isr)
        extra: tuple[int, ...] = ()
        proposal = self._in_flight.get(key)
        hold = self._holds.get(key)
        if proposal is not None and proposal.based_on == _position(ps):
            extra = proposal.isr
        elif hold is not None and hold.based_on == _position(ps):
            extra = hold.isr
        isr.extend(r for r in extra if r not in isr)
        return tuple(isr)

    # --- follower side -----------------------------------------------------------------------------

    def _send_heartbeats(self, now_ms: int) -> None:
        if now_ms < self._next_heartbeat_ms:
            self._port.wake_at(self._next_heartbeat_ms)
            return
        interval = self._config.replica_heartbeat_interval_ms
        self._next_heartbeat_ms = now_ms + interval
        self._port.wake_at(self._next_heartbeat_ms)
        offset = self._port.image.last_offset
        # Fire and forget, one per leader per interval (like a fetch session, it keeps going whatever
        # the last answer was): a lost one is replaced by the next, so a leader never waits on it.
        for leader, partitions in self._following.items():
            request = ReplicaHeartbeatRequest(self._me, self._lifecycle.broker_epoch, offset, partitions)
            self.counters["replica_heartbeats_sent"] += 1
            self._port.send(leader, request, _ignore)

    # --- leader side -------------------------------------------------------------------------------

    def _maybe_alter(self, now_ms: int) -> None:
        image = self._port.image
        next_check: int | None = None
        changes: list[tuple[PartitionKey, PartitionState, _Proposal]] = []
        for key, led in self._led.items():
            ps = image.partition(*key)
            if ps is None or ps.leader != self._me or key in self._in_flight:
                continue
            hold = self._holds.get(key)
            if hold is not None:
                if hold.based_on == _position(ps) and now_ms < hold.until_ms:
                    next_check = hold.until_ms if next_check is None else min(next_check, hold.until_ms)
                    continue
                del self._holds[key]
            proposal, expiry = self._desired(now_ms, key, ps, led)
            if expiry is not None:
                next_check = expiry if next_check is None else min(next_check, expiry)
            if proposal is not None:
                changes.append((key, ps, proposal))
        if next_check is not None:
            self._port.wake_at(next_check)
        if changes:
            self._send_alter(now_ms, changes)

    def _desired(
        self, now_ms: int, key: PartitionKey, ps: PartitionState, led: _Leadership
    ) -> tuple[_Proposal | None, int | None]:
        """The ISR this partition should have now (None: as it is), and when a member next expires."""
        lag = self._config.replica_lag_time_max_ms
        heard = self._heard.get(key, {})
        isr: list[int] = []
        expiry: int | None = None
        for r in ps.isr:
            h = heard.get(r)
            last = max(led.since_ms, h.at_ms if h is not None and h.leader_epoch == ps.leader_epoch else led.since_ms)
            if r == self._me or now_ms - last <= lag:
                isr.append(r)
                if r != self._me:
                    expires = last + lag + 1
                    expiry = expires if expiry is None else min(expiry, expires)
        shrinks = len(isr) < len(ps.isr)
        added = [
            r for r in ps.replicas if r not in ps.isr and r != self._me and self._eligible(now_ms, heard.get(r), r, ps)
        ]
        isr.extend(added)
        if not shrinks and not added:
            return None, expiry
        return _Proposal(_position(ps), tuple(isr), shrinks, bool(added)), expiry

    def _eligible(self, now_ms: int, heard: _Heard | None, replica: int, ps: PartitionState) -> bool:
        if heard is None or heard.leader_epoch != ps.leader_epoch:
            return False
        if now_ms - heard.at_ms > self._config.replica_lag_time_max_ms:
            return False
        reg = self._port.image.broker(replica)
        return (
            reg is not None
            and not reg.fenced
            and not reg.in_controlled_shutdown
            and reg.broker_epoch == heard.broker_epoch
        )

    def _send_alter(self, now_ms: int, changes: list[tuple[PartitionKey, PartitionState, _Proposal]]) -> None:
        leader = self._port.leader_id
        if self._request_outstanding or leader < 0:
            return  # the answer / on_leader_change polls again
        by_topic: dict[str, list[AlterPartitionPartitionData]] = defaultdict(list)
        for (topic_id, index), ps, proposal in changes:
            heard = self._heard.get((topic_id, index), {})
            epochs = tuple(  # KIP-903: the incarnation that caught up, so the controller can tell
                self._lifecycle.broker_epoch if r == self._me else heard[r].broker_epoch if r in heard else -1
                for r in proposal.isr
            )
            by_topic[topic_id].append(
                AlterPartitionPartitionData(index, ps.leader_epoch, proposal.isr, ps.partition_epoch, epochs)
            )
            self._in_flight[(topic_id, index)] = proposal
        request = AlterPartitionRequest(
            self._me,
            self._lifecycle.broker_epoch,
            tuple(AlterPartitionTopicData(uuid.UUID(t), tuple(parts)) for t, parts in by_topic.items()),
        )
        self._request_outstanding = True
        self._alter_seq += 1
        seq = self._alter_seq
        self._alter_sent_at = now_ms
        self.counters["alter_partition_requests"] += 1
        self._port.wake_at(now_ms + self._config.request_timeout_ms)
        self._port.send(leader, request, lambda reply: self._on_alter_reply(seq, reply))

    def _on_alter_reply(self, seq: int, reply: object | None) -> None:
        if seq != self._alter_seq or not self._request_outstanding:
            return  # the answer to a request given up on: its partitions were already retried
        now = self._clock.now_ms
        in_flight, self._in_flight = self._in_flight, {}
        self._request_outstanding = False
        retry_at = now + self._config.retry_backoff_ms
        metadata_wait = now + self._config.replica_lag_time_max_ms
        if not isinstance(reply, AlterPartitionResponse) or reply.error_code != ErrorCode.NONE:
            self.counters["alter_partition_request_errors"] += 1
            for key, proposal in in_flight.items():
                self._holds[key] = _Hold(proposal.based_on, retry_at, ())
        else:
            for topic in reply.topics:
                for result in topic.partitions:
                    key = (str(topic.topic_id), result.partition_index)
                    proposal = in_flight.pop(key, None)
                    if proposal is None:
                        continue
                    if result.error_code == ErrorCode.NONE:
                        self.counters["shrinks"] += proposal.shrinks
                        self.counters["expands"] += proposal.expands
                        self._holds[key] = _Hold(proposal.based_on, metadata_wait, tuple(result.isr))
                    else:
                        self.counters["alter_partition_partition_errors"] += 1
                        wait = metadata_wait if result.error_code in _WAIT_FOR_METADATA else retry_at
                        self._holds[key] = _Hold(proposal.based_on, wait, ())
            for key, proposal in in_flight.items():  # not answered for: try again later
                self._holds[key] = _Hold(proposal.based_on, retry_at, ())
        self.poll(now)

    # --- observing ---------------------------------------------------------------------------------

    def metrics(self) -> dict[str, float | int]:
        out: dict[str, float | int] = {
            "isr.led_partitions": len(self._led),
            "isr.followed_partitions": sum(len(p) for p in self._following.values()),
            "isr.pending_partitions": len(self._in_flight),
        }
        for name, value in self.counters.items():
            out[f"isr.{name}_total"] = value
        return out


__all__ = ["IsrManager", "PartitionKey"]
