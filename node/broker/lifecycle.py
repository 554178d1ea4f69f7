"""A broker's registration, heartbeats and states (KIP-500 / KIP-631).

    OFFLINE  --registered-->  FENCED  --heartbeat: not fenced-->  ONLINE
    FENCED / ONLINE  --begin_shutdown-->  STOPPING  --heartbeat: should_shut_down-->  port.shut_down

The broker registers with the active controller (`port.leader_id`) and gets its broker epoch (the
offset of its registration record). It then heartbeats every `broker.heartbeat.interval.ms` with the
metadata offset its image has applied; the answer says whether it is fenced (a fenced broker serves
no clients) and, once it asked to stop, whether the controller has moved its leaderships away.

Failures: no answer (also: none within a heartbeat interval) or NOT_CONTROLLER -> try again after
`retry.backoff.ms` or as soon as a new controller is known; STALE_BROKER_EPOCH /
BROKER_ID_NOT_REGISTERED on a heartbeat -> the registration is gone (e.g. a new controller's log lost
it, or it was replaced): register again with the same incarnation id; DUPLICATE_BROKER_REGISTRATION ->
a live session holds this broker id (another process, or this broker's own previous incarnation,
killed less than a session ago): try again after the backoff, as Kafka's BrokerLifecycleManager does,
until that session lapses. (Exiting instead livelocks combined nodes: after they all restart, each
exit takes a controller along, the next active controller grants every registration a fresh
session, and every broker is refused again.)
INVALID_CLUSTER_ID and UNSUPPORTED_VERSION (a feature level this software lacks) are refusals that
cannot change without a restart, so they shut the broker down, with the reason.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from enum import IntEnum

from node.broker.clock import Clock
from node.broker.config import BrokerConfig
from node.process.ports import ProcessPort
from node.protocol.broker_api import (
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    Listener,
)
from node.protocol.errors import ErrorCode


class BrokerState(IntEnum):
    """KIP-500's broker states; the numbers are what `metrics()` reports."""

    OFFLINE = 0  # not registered yet (or registration lost)
    FENCED = 1  # registered, not allowed to serve clients
    ONLINE = 2  # registered and unfenced: serves clients
    STOPPING = 3  # controlled shutdown in progress


# Registration refusals that no retry can fix: the broker shuts down with the reason.
_FATAL_REGISTRATION_ERRORS = {
    ErrorCode.INVALID_CLUSTER_ID: "the controller belongs to another cluster",
    ErrorCode.UNSUPPORTED_VERSION: "this broker lacks a feature level the cluster has enabled",
}
_REGISTRATION_LOST = {ErrorCode.STALE_BROKER_EPOCH, ErrorCode.BROKER_ID_NOT_REGISTERED}


class Lifecycle:
    """Registration and heartbeats; the rest of the broker reads `state` and `broker_epoch`."""

    def __init__(
        self,
        port: ProcessPort,
        config: BrokerConfig,
        clock: Clock,
        incarnation_id: uuid.UUID,
        listeners: tuple[Listener, ...],
        cluster_id: str | None,
        on_registered: Callable[[], None] | None = None,
    ) -> None:
        self._port = port
        self._on_registered = on_registered  # the ISR manager starts its replica heartbeats
        self._config = config
        self._clock = clock
        self._incarnation_id = incarnation_id
        self._listeners = listeners
        self._cluster_id = cluster_id
        self.state = BrokerState.OFFLINE
        self.broker_epoch = -1
        self.shut_down_reason: str | None = None
        self._started = False
        self._ever_registered = False
        self._stopping = False
        self._registering = False  # a BrokerRegistration is in flight
        self._heartbeating = False  # a BrokerHeartbeat is in flight
        self._retry_at = 0  # no registration / heartbeat before this (backoff after a failure)
        self._next_heartbeat_ms = 0
        self._request_seq = 0  # tells a late answer to an abandoned request from the current one
        self._sent_at = 0  # when the request in flight went out
        self.counters = {
            "registrations_sent": 0,
            "registration_failures": 0,
            "heartbeats_sent": 0,
            "heartbeat_failures": 0,
        }

    @property
    def registered(self) -> bool:
        return self.broker_epoch >= 0 and self.shut_down_reason is None

    @property
    def stopped(self) -> bool:
        return self.shut_down_reason is not None

    # --- entry points ------------------------------------------------------------------------------

    def start(self, now_ms: int) -> None:
        if self._started or self.stopped:
            return
        self._started = True
        self.poll(now_ms)

    def begin_shutdown(self, now_ms: int) -> None:
        """Controlled shutdown: ask through the next heartbeat (sent now) and wait for should_shut_down."""
        if self.stopped or self._stopping:
            return
        self._stopping = True
        self.state = BrokerState.STOPPING
        if not self._ever_registered and not self._registering:
            # Never registered: the controller knows nothing to move away.
            self._shut_down("controlled shutdown complete (never registered)", requested=True)
            return
        self._next_heartbeat_ms = now_ms
        self.poll(now_ms)

    def on_leader_change(self, now_ms: int) -> None:
        """A new controller: a request waiting out a backoff goes to it at once."""
        self._retry_at = 0
        self.poll(now_ms)

    def poll(self, now_ms: int) -> None:
        """Send whatever is due now; ask for a wake-up when the next thing falls due."""
        if not self._started or self.stopped:
            return
        if self._registering or self._heartbeating:
            # Unanswered for a whole heartbeat interval: the next one supersedes it (a late answer is
            # ignored), so a request lost without a failure notice never stalls the broker. Sending
            # arms that wake-up: without it a registration lost on an idle cluster (nothing committed,
            # no leader change to poll again) was never sent again (sim_cluster seed 1000, 2 % drops).
            give_up_at = self._sent_at + self._config.heartbeat_interval_ms
            if now_ms < give_up_at:
                self._port.wake_at(give_up_at)
                return
            self._abandon(now_ms)
        if now_ms < self._retry_at:
            self._port.wake_at(self._retry_at)
            return
        if self.broker_epoch < 0:
            self._register()
        elif now_ms >= self._next_heartbeat_ms:
            self._heartbeat(now_ms)
        else:
            self._port.wake_at(self._next_heartbeat_ms)

    # --- registration ------------------------------------------------------------------------------

    def _register(self) -> None:
        cluster_id = self._cluster_id or self._port.image.cluster_id
        leader = self._port.leader_id
        if cluster_id is None or leader < 0:
            return  # on_committed / on_leader_change call poll again
        request = BrokerRegistrationRequest(
            broker_id=self._config.node_id,
            cluster_id=cluster_id,
            incarnation_id=self._incarnation_id,
            listeners=self._listeners,
            features=self._config.features,
            rack=self._config.rack,
        )
        self._registering = True
        self._request_seq += 1
        seq = self._request_seq
        self._sent_at = self._clock.now_ms
        self.counters["registrations_sent"] += 1
        self._port.send(leader, request, lambda reply: self._on_registration(seq, reply))
        self._port.wake_at(self._sent_at + self._config.heartbeat_interval_ms)  # give up then (see poll)

    def _on_registration(self, seq: int, reply: object | None) -> None:
        if seq != self._request_seq:
            return
        self._registering = False
        if self.stopped:
            return
        now = self._clock.now_ms
        if isinstance(reply, BrokerRegistrationResponse) and reply.error_code == ErrorCode.NONE:
            self.broker_epoch = reply.broker_epoch
            self._ever_registered = True
            if self.state is BrokerState.OFFLINE:
                self.state = BrokerState.FENCED
            self._next_heartbeat_ms = now  # the first heartbeat goes out at once
            self.poll(now)
            if self._on_registered is not None:
                self._on_registered()
            return
        self.counters["registration_failures"] += 1
        if isinstance(reply, BrokerRegistrationResponse) and reply.error_code in _FATAL_REGISTRATION_ERRORS:
            code = ErrorCode(reply.error_code)
            self._shut_down(f"registration refused with {code.name}: {_FATAL_REGISTRATION_ERRORS[code]}")
            return
        self._back_off(now)

    # --- heartbeats --------------------------------------------------------------------------------

    def _heartbeat(self, now_ms: int) -> None:
        leader = self._port.leader_id
        if leader < 0:
            return  # on_leader_change polls again
        request = BrokerHeartbeatRequest(
            broker_id=self._config.node_id,
            broker_epoch=self.broker_epoch,
            current_metadata_offset=self._port.image.last_offset,
            want_fence=False,
            want_shut_down=self._stopping,
        )
        self._heartbeating = True
        self._request_seq += 1
        seq = self._request_seq
        self._sent_at = now_ms
        self.counters["heartbeats_sent"] += 1
        # Fixed rate: the next one is due an interval after this one was sent, however long the answer takes.
        self._next_heartbeat_ms = now_ms + self._config.heartbeat_interval_ms
        self._port.send(leader, request, lambda reply: self._on_heartbeat(seq, reply))
        self._port.wake_at(self._next_heartbeat_ms)  # give up then (see poll), if no answer came

    def _on_heartbeat(self, seq: int, reply: object | None) -> None:
        if seq != self._request_seq:
            return
        self._heartbeating = False
        if self.stopped:
            return
        now = self._clock.now_ms
        if not isinstance(reply, BrokerHeartbeatResponse) or reply.error_code != ErrorCode.NONE:
            self.counters["heartbeat_failures"] += 1
            code = reply.error_code if isinstance(reply, BrokerHeartbeatResponse) else None
            if code in _REGISTRATION_LOST:
                self.broker_epoch = -1
                if self.state is BrokerState.ONLINE:
                    self.state = BrokerState.FENCED
                self._retry_at = 0
                self.poll(now)
            else:
                self._next_heartbeat_ms = now  # again as soon as the backoff (or a new controller) allows
                self._back_off(now)
            return
        if reply.should_shut_down:
            self._shut_down("controlled shutdown complete", requested=True)
            return
        if self.state is not BrokerState.STOPPING:
            self.state = BrokerState.FENCED if reply.is_fenced else BrokerState.ONLINE
        self.poll(now)

    # --- helpers -----------------------------------------------------------------------------------

    def _abandon(self, now_ms: int) -> None:
        self._request_seq += 1
        self.counters["registration_failures" if self._registering else "heartbeat_failures"] += 1
        self._registering = self._heartbeating = False

    def _back_off(self, now_ms: int) -> None:
        self._retry_at = now_ms + self._config.retry_backoff_ms
        self._port.wake_at(self._retry_at)

    def _shut_down(self, reason: str, requested: bool = False) -> None:
        self.shut_down_reason = reason
        self.state = BrokerState.STOPPING
        self._port.shut_down(reason, requested=requested)


__all__ = ["BrokerState", "Lifecycle"]
