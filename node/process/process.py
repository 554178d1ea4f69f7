"""One KRaft node process: the Raft core plus a controller and/or a broker (`process.roles`).

The process is the only thing a runtime drives: `handle(now_ms, event) -> actions`, like the Raft
core beneath it. It owns the committed metadata image (every node replays the committed log into
one), routes each inbound request to the Raft core, the controller or the broker, turns the
components' `send`/`append`/`read_barrier` calls into Raft events and outbound requests with its own
correlation ids, calls their callbacks with the outcomes, and merges everyone's timers into the one
`SetTimer` the runtime keeps.

The controller becomes active only when this node leads the quorum AND the image has applied the
first entry of the leader's epoch: committing that entry commits every earlier one, so the active
controller starts from a complete image (Kafka's controller waits the same way).
"""

from __future__ import annotations

import contextlib
import heapq
import random
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import node.raft.actions as A
from node.metadata.image import MetadataImage, MetadataImageError
from node.metadata.records import SecurityProtocol
from node.metadata.snapshot import SnapshotError, load_snapshot
from node.process.actions import MetadataApplied, ShutDown
from node.process.append_batch import HeldAppend, group_held
from node.process.events import BeginShutdown, InboundRequest, InboundRequests, ResponsesReceived
from node.process.ports import NOT_SENT, AppendOutcome, BarrierOutcome, RequestContext
from node.protocol import messages
from node.protocol.broker_api import (
    AlterPartitionRequest,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    EnvelopeRequest,
    FetchSnapshotRequest,
    SnapshotId,
)
from node.protocol.codec import SUPPORTED_VERSIONS
from node.protocol.errors import ErrorCode
from node.protocol.refusal import error_response
from node.protocol.registry import BROKER_API_KEYS, CONTROLLER_API_KEYS, FORWARDABLE_REQUESTS, READ_REQUESTS
from node.protocol.session import ApiVersion, ApiVersionsRequest, ApiVersionsResponse
from node.raft.events import (
    Append,
    CreateSnapshot,
    ReadBarrier,
    RequestFailed,
    RequestReceived,
    Resign,
    ResponseReceived,
    Start,
    Tick,
)
from node.raft.node import RaftNode
from node.raft.quorum_state import Role

CONTROLLER_LISTENER = "CONTROLLER"
NEVER = 1 << 62
# How long a stopping controller waits for its EndQuorumEpoch to be answered (the real runtime's
# SHUTDOWN_GRACE_S, node/runtime/server.py): the successors must hear of the hand-over.
RESIGN_GRACE_MS = 500

_QUORUM_REQUESTS = frozenset(messages.REQUESTS) | {FetchSnapshotRequest}
_CONTROLLER_REQUESTS = frozenset(
    {BrokerRegistrationRequest, BrokerHeartbeatRequest, AlterPartitionRequest, EnvelopeRequest}
)
# Admin writes and reads: the controller or the broker answers them (`_admin_target`).
_ADMIN_REQUESTS = FORWARDABLE_REQUESTS | READ_REQUESTS


class Component(Protocol):
    """What the controller and the broker both answer to."""

    def handle_request(
        self, now_ms: int, ctx: RequestContext, reply_to: Hashable, correlation_id: int, message: Any
    ) -> None: ...
    def on_committed(self, now_ms: int) -> None: ...
    def on_leader_change(self, now_ms: int) -> None: ...
    def on_tick(self, now_ms: int) -> None: ...


class ControllerComponent(Component, Protocol):
    @property
    def active(self) -> bool: ...
    def activate(self, now_ms: int) -> None: ...
    def deactivate(self, now_ms: int) -> None: ...


class BrokerComponent(Component, Protocol):
    def start(self, now_ms: int) -> None: ...
    def begin_shutdown(self, now_ms: int) -> None: ...


# Given the node's port, build the component. The runtime decides the configuration.
ControllerFactory = Callable[["NodeProcess"], ControllerComponent]
BrokerFactory = Callable[["NodeProcess"], BrokerComponent]
# May `ctx` use the quorum and inter-node APIs (ClusterAction on the cluster)? None: everyone may.
ClusterActionCheck = Callable[[MetadataImage, RequestContext], bool]
# Makes a snapshot of the image (bytes) for the Raft core; None: this process never snapshots.
SnapshotMaker = Callable[[MetadataImage], bytes]


@dataclass(slots=True)
class _Outbound:
    destination: int
    raft_correlation_id: int | None  # the Raft core's own id, or None for a component's callback
    on_reply: Callable[[object | None], None] | None = None


@dataclass(frozen=True, slots=True)
class _LoopReply:
    """`reply_to` of a request this process sent to itself (combined mode: broker -> own controller)."""

    correlation_id: int


@dataclass(slots=True)
class ProcessStats:
    requests: int = 0
    refused_unauthorized: int = 0
    refused_no_role: int = 0
    dropped_unknown: int = 0
    forwarded_describe_quorum: int = 0  # DescribeQuorum asked of the leader for a client
    replay_errors: int = 0
    last_replay_error: str = ""
    activations: int = 0
    snapshots_requested: int = 0


class NodeProcess:
    """Implements `node.process.ports.ProcessPort` for its controller and broker."""

    def __init__(
        self,
        raft: RaftNode,
        *,
        controller: ControllerFactory | None = None,
        broker: BrokerFactory | None = None,
        cluster_action: ClusterActionCheck | None = None,
        own_principal: str = "User:ANONYMOUS",
        snapshot_every_records: int = 0,
        snapshot_maker: SnapshotMaker | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.raft = raft
        self.rng = rng or random.Random(raft.node_id)
        self._image = MetadataImage()
        self._cluster_action = cluster_action
        self._own_principal = own_principal
        self._snapshot_every = snapshot_every_records
        self._snapshot_maker = snapshot_maker
        self._last_snapshot_end = 0
        self.stats = ProcessStats()
        self._now = 0
        self._out: list[Any] = []
        self._raft_actions: deque[Any] = deque()
        self._deferred: deque[Callable[[], None]] = deque()
        self._next_cid = 1
        self._outbound: dict[int, _Outbound] = {}
        self._append_callbacks: dict[Hashable, Callable[[AppendOutcome], None]] = {}
        self._holding = False  # within an InboundRequests: appends wait to be fed as one
        self._held: list[HeldAppend] = []
        self._held_records = 0
        self._barrier_callbacks: dict[Hashable, Callable[[BarrierOutcome], None]] = {}
        self._next_handle = 1
        self._raft_deadline = NEVER
        self._wakeups: list[int] = []
        self._armed = NEVER
        self._leader = (raft.epoch, raft.leader_id)
        self._shut_down = False
        self._resign_deadline: int | None = None  # stopping: exit once the EndQuorumEpoch is answered, or then
        self._checked_snapshot: tuple[bytes, MetadataImage] | None = None  # a fetched one, loaded once
        raft.snapshot_check = self._check_fetched_snapshot
        # Components last: their constructors may look at the port.
        self.controller: ControllerComponent | None = controller(self) if controller else None
        self.broker: BrokerComponent | None = broker(self) if broker else None

    # =============================================================================================
    # ProcessPort
    # =============================================================================================

    @property
    def node_id(self) -> int:
        return self.raft.node_id

    @property
    def image(self) -> MetadataImage:
        return self._image

    @property
    def leader_id(self) -> int:
        return self.raft.leader_id

    @property
    def leader_epoch(self) -> int:
        return self.raft.epoch

    @property
    def controller_ids(self) -> tuple[int, ...]:
        return self.raft.voters

    def respond(self, reply_to: Hashable, correlation_id: int, message: object) -> None:
        if isinstance(reply_to, _LoopReply):
            pending = self._outbound.pop(reply_to.correlation_id, None)
            if pending is not None and pending.on_reply is not None:
                callback = pending.on_reply
                self._deferred.append(lambda: callback(message))
            return
        self._out.append(A.Respond(reply_to, correlation_id, message))  # type: ignore[arg-type]

    def send(self, destination: int, message: object, on_reply: Callable[[object | None], None]) -> None:
        cid = self._new_cid()
        self._outbound[cid] = _Outbound(destination, None, on_reply)
        if destination == self.node_id:
            ctx = RequestContext(principal=self._own_principal, listener_name=CONTROLLER_LISTENER)
            loop = _LoopReply(cid)
            self._deferred.append(lambda: self._route(ctx, loop, cid, message))
        else:
            self._out.append(A.SendRequest(destination, cid, message))  # type: ignore[arg-type]

    def next_append_offset(self) -> int:
        return self.raft.append_end_offset + self._held_records

    def append(self, records: Sequence[bytes], on_done: Callable[[AppendOutcome], None]) -> int:
        base = self.next_append_offset()
        encoded = tuple(records)
        if self._holding:
            self._held.append(HeldAppend(encoded, on_done))
            self._held_records += len(encoded)
            return base
        handle = self._new_handle()
        self._append_callbacks[handle] = on_done
        self._feed_raft(Append(handle, encoded))
        return base

    def _release_held(self) -> None:
        """Feed the held appends to the Raft core, joined into as few `Append`s as its limits allow."""
        held, self._held, self._held_records = self._held, [], 0
        for group in group_held(held, self.raft.config.append_max_records):
            handle = self._new_handle()
            self._append_callbacks[handle] = group.done
            self._raft_actions.extend(self.raft.handle(self._now, Append(handle, group.records)))

    def read_barrier(self, on_done: Callable[[BarrierOutcome], None]) -> None:
        handle = self._new_handle()
        self._barrier_callbacks[handle] = on_done
        self._feed_raft(ReadBarrier(handle))

    def wake_at(self, deadline_ms: int) -> None:
        heapq.heappush(self._wakeups, deadline_ms)

    def shut_down(self, reason: str, requested: bool = False) -> None:
        if not self._shut_down:
            self._shut_down = True
            self._out.append(ShutDown(reason, requested))

    # =============================================================================================
    # the runtime's side
    # =============================================================================================

    def handle(self, now_ms: int, event: Any) -> list[Any]:
        self._now = now_ms
        self._out = []
        match event:
            case InboundRequest(reply_to, correlation_id, message, context):
                self._route(context, reply_to, correlation_id, message)
            case InboundRequests(requests):
                self._holding = True
                try:
                    for request in requests:
                        self._route(request.context, request.reply_to, request.correlation_id, request.message)
                finally:
                    self._holding = False
                    self._release_held()
            case ResponseReceived(source, correlation_id, message):
                self._on_reply(correlation_id, source, message)
            case ResponsesReceived(responses):
                for response in responses:
                    self._on_reply(response.correlation_id, response.source, response.message)
            case RequestFailed(destination, correlation_id, sent):
                self._on_reply(correlation_id, destination, None if sent else NOT_SENT)
            case Start():
                self._feed_raft(event)
                self._drain()
                if self.broker is not None:
                    self.broker.start(now_ms)
            case Tick():
                self._feed_raft(event)
                self._drain()
                self._run_wakeups(now_ms)
            case BeginShutdown():
                if self.broker is not None:
                    self.broker.begin_shutdown(now_ms)
                else:
                    self._feed_raft(Resign())
                    self._drain()
                    self._resign_deadline = now_ms + RESIGN_GRACE_MS
                    heapq.heappush(self._wakeups, self._resign_deadline)
            case _:
                self._feed_raft(event)
        self._drain()
        if self._resign_deadline is not None and (now_ms >= self._resign_deadline or not self.raft.resignation_pending):
            self.shut_down("resigned", requested=True)
        self._arm_timer()
        out, self._out = self._out, []
        return out

    def address_book_entry(self, node_id: int) -> tuple[str, int, str] | None:
        """Where registered broker `node_id` listens (host, port, security protocol name), from the
        image: its first endpoint, which is the one brokers talk to each other on."""
        reg = self._image.brokers.get(node_id)
        if reg is None or not reg.endpoints:
            return None
        endpoint = reg.endpoints[0]
        return endpoint.host, endpoint.port, SecurityProtocol(endpoint.security_protocol).name

    def committed_batches(self) -> list[Any]:
        """The committed log this node holds (after its snapshot, if any), for dumps."""
        return self.raft.read_committed(self.raft.log_start_offset)

    @property
    def shutting_down(self) -> bool:
        return self._shut_down

    # =============================================================================================
    # routing
    # =============================================================================================

    def _route(self, ctx: RequestContext, reply_to: Hashable, correlation_id: int, message: object) -> None:
        self.stats.requests += 1
        kind = type(message)
        if kind in _QUORUM_REQUESTS:
            if not self._may_cluster_action(ctx) and kind is not messages.DescribeQuorumRequest:
                self._refuse(reply_to, correlation_id, message, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
                return
            if kind is messages.DescribeQuorumRequest and self._forward_describe_quorum(reply_to, correlation_id):
                return
            self._feed_raft(RequestReceived(reply_to, correlation_id, message))  # type: ignore[arg-type]
        elif kind in _CONTROLLER_REQUESTS:
            if self.controller is None:
                self.stats.refused_no_role += 1
                self._refuse(reply_to, correlation_id, message, ErrorCode.NOT_CONTROLLER)
                return
            self.controller.handle_request(self._now, ctx, reply_to, correlation_id, message)
        elif kind in _ADMIN_REQUESTS:
            target = self._admin_target(ctx)
            target.handle_request(self._now, ctx, reply_to, correlation_id, message)
        elif kind is ApiVersionsRequest:
            self.respond(reply_to, correlation_id, self._api_versions(ctx))
        elif self.broker is not None:
            # Broker-to-broker extensions (replica heartbeats) and anything the broker knows.
            self.broker.handle_request(self._now, ctx, reply_to, correlation_id, message)
        else:
            self.stats.dropped_unknown += 1
            # Without a response shape to refuse with, the client's request times out.
            with contextlib.suppress(KeyError, TypeError):
                self._refuse(reply_to, correlation_id, message, ErrorCode.INVALID_REQUEST)

    def _admin_target(self, ctx: RequestContext) -> Component:
        if self.controller is not None and (self.broker is None or ctx.listener_name == CONTROLLER_LISTENER):
            return self.controller
        assert self.broker is not None, "a process has at least one role"
        return self.broker

    def _may_cluster_action(self, ctx: RequestContext) -> bool:
        if self._cluster_action is None or ctx.principal == self._own_principal:
            return True
        allowed = self._cluster_action(self._image, ctx)
        if not allowed:
            self.stats.refused_unauthorized += 1
        return allowed

    def _forward_describe_quorum(self, reply_to: Hashable, correlation_id: int) -> bool:
        """DescribeQuorum is the leader's to answer; a node that knows another leader asks it on the
        client's behalf (as Kafka's brokers forward it to the active controller), so any one address,
        a broker's or a follower's, is enough for `kchaos quorum describe`. Each hop goes to the
        leader of the forwarder's current epoch, so forwards cannot go round in a circle. Whatever
        the leader does not answer (it moved, it is down) comes back NOT_LEADER_OR_FOLLOWER with what
        this node knows: the client retries. Only a follower forwards: a voter whose fetch timed out
        (prospective) or that resigned has lost its leader, and holding the client's request while a
        forward to it times out would keep a node cut off from the quorum silent for
        quorum.request.timeout.ms, where KIP-595 has it refuse at once. False when this node answers
        itself."""
        leader = self.raft.leader_id
        if self.raft.role is not Role.FOLLOWER or leader < 0 or leader == self.node_id:
            return False

        def answered(reply: object | None) -> None:
            if isinstance(reply, messages.DescribeQuorumResponse):
                self.respond(reply_to, correlation_id, reply)
            else:
                self._feed_raft(RequestReceived(reply_to, correlation_id, messages.DescribeQuorumRequest()))

        self.stats.forwarded_describe_quorum += 1
        self.send(leader, messages.DescribeQuorumRequest(), answered)
        return True

    def _refuse(self, reply_to: Hashable, correlation_id: int, message: object, code: ErrorCode) -> None:
        self.respond(reply_to, correlation_id, error_response(message, code))

    def _api_versions(self, ctx: RequestContext) -> ApiVersionsResponse:
        """The APIs of the listener asked: a client tells controllers from brokers by them."""
        controller_listener = self.broker is None or ctx.listener_name == CONTROLLER_LISTENER
        on_controller = self.controller is not None and controller_listener
        keys = sorted(CONTROLLER_API_KEYS if on_controller else BROKER_API_KEYS)
        return ApiVersionsResponse(
            ErrorCode.NONE, tuple(ApiVersion(k, min(SUPPORTED_VERSIONS[k]), max(SUPPORTED_VERSIONS[k])) for k in keys)
        )

    # =============================================================================================
    # replies, callbacks and the Raft core's actions
    # =============================================================================================

    def _new_cid(self) -> int:
        cid = self._next_cid
        self._next_cid += 1
        return cid

    def _new_handle(self) -> tuple[str, int]:
        """Tagged, so they never collide with handles a runtime gives the Raft core directly."""
        self._next_handle += 1
        return ("process", self._next_handle)

    def _on_reply(self, correlation_id: int, peer: int, message: object | None) -> None:
        pending = self._outbound.pop(correlation_id, None)
        if pending is None:
            return  # a reply to a request forgotten after a restart of this process's state
        if pending.raft_correlation_id is not None:
            if message is None or message is NOT_SENT:
                self._feed_raft(RequestFailed(peer, pending.raft_correlation_id, message is None))
            else:
                self._feed_raft(ResponseReceived(peer, pending.raft_correlation_id, message))  # type: ignore[arg-type]
        elif pending.on_reply is not None:
            pending.on_reply(message)

    def raft_correlation_id(self, correlation_id: int) -> int | None:
        """The Raft core's id of the request this process sent as `correlation_id`, while the answer is
        still awaited; None for a component's request or an answer already had (a stale copy)."""
        pending = self._outbound.get(correlation_id)
        return None if pending is None else pending.raft_correlation_id

    def _feed_raft(self, event: Any) -> None:
        if self._held:  # the Raft core sees the held appends before anything that follows them
            self._release_held()
        self._raft_actions.extend(self.raft.handle(self._now, event))

    def _drain(self) -> None:
        """Carry out the Raft core's actions and the deferred callbacks until nothing is left."""
        while self._raft_actions or self._deferred:
            if self._raft_actions:
                self._on_raft_action(self._raft_actions.popleft())
            else:
                self._deferred.popleft()()

    def _on_raft_action(self, action: Any) -> None:
        match action:
            case A.SendRequest(destination, correlation_id, message):
                cid = self._new_cid()
                self._outbound[cid] = _Outbound(destination, correlation_id)
                self._out.append(A.SendRequest(destination, cid, message))
            case A.SetTimer(deadline_ms):
                self._raft_deadline = deadline_ms
            case A.AppendCompleted(handle, base_offset, last_offset) if handle in self._append_callbacks:
                self._append_callbacks.pop(handle)(AppendOutcome(True, base_offset, last_offset))
            case A.AppendFailed(handle, error, _message) if handle in self._append_callbacks:
                outcome = AppendOutcome(False, error=error or int(ErrorCode.NOT_CONTROLLER))
                self._append_callbacks.pop(handle)(outcome)
            case A.ReadBarrierCompleted(handle, read_offset) if handle in self._barrier_callbacks:
                self._barrier_callbacks.pop(handle)(BarrierOutcome(True, read_offset))
            case A.ReadBarrierFailed(handle, error, _message) if handle in self._barrier_callbacks:
                self._barrier_callbacks.pop(handle)(BarrierOutcome(False, error=error))
            case A.HighWatermarkAdvanced():
                self._out.append(action)
                self._apply_committed()
            case A.LeaderChanged():
                self._out.append(action)
                self._on_leader_changed()
            case A.LoadSnapshot():
                self._out.append(action)
                self._load_snapshot(action)
            case _:
                self._out.append(action)

    # =============================================================================================
    # the committed image, leadership and the controller's activation
    # =============================================================================================

    def _apply_committed(self) -> None:
        start = self._image.last_offset + 1
        batches = self.raft.read_committed(start)
        if not batches:
            return
        for batch in batches:
            if batch.last_offset < start:
                continue
            try:
                self._image.apply_batch(batch)
            except MetadataImageError as exc:
                # Every node skips the same committed batch, so images stay equal; the controller
                # validated it, so this is a bug worth a metric and a log line, not a crash.
                self.stats.replay_errors += 1
                self.stats.last_replay_error = str(exc)
                self._image.set_position(batch.last_offset, batch.epoch)
        self._out.append(MetadataApplied(self._image.last_offset + 1))
        if self.controller is not None:
            self.controller.on_committed(self._now)
        if self.broker is not None:
            self.broker.on_committed(self._now)
        self._check_activation()
        self._maybe_snapshot()

    def _on_leader_changed(self) -> None:
        leader = (self.raft.epoch, self.raft.leader_id)
        if leader == self._leader:
            return
        self._leader = leader
        self._check_activation()
        for component in (self.controller, self.broker):
            if component is not None:
                component.on_leader_change(self._now)

    def _check_activation(self) -> None:
        controller = self.controller
        if controller is None:
            return
        should = self.raft.role is Role.LEADER and self._image.last_offset >= self.raft.epoch_start_offset
        if should and not controller.active:
            self.stats.activations += 1
            controller.activate(self._now)
        elif not should and controller.active:
            controller.deactivate(self._now)

    def _maybe_snapshot(self) -> None:
        if self._snapshot_every <= 0 or self._snapshot_maker is None:
            return
        end = self._image.last_offset + 1
        if end - self._last_snapshot_end < self._snapshot_every:
            return
        self._last_snapshot_end = end
        self.stats.snapshots_requested += 1
        self._feed_raft(CreateSnapshot(end, self._snapshot_maker(self._image)))

    def _check_fetched_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> str | None:
        """A snapshot copied from the leader must load, and hold the state up to the id it was fetched
        as, before the core writes it and drops its log for it: the reason if not. The image it loads
        to is kept for the install that follows."""
        try:
            image = load_snapshot(data)
        except SnapshotError as exc:
            return str(exc)
        held = SnapshotId(image.last_offset + 1, image.last_epoch)
        if held != snapshot_id:
            return f"it holds the state at {held.end_offset}-{held.epoch}"
        self._checked_snapshot = (data, image)
        return None

    def _load_snapshot(self, action: A.LoadSnapshot) -> None:
        checked, self._checked_snapshot = self._checked_snapshot, None
        image = checked[1] if checked is not None and checked[0] is action.data else load_snapshot(action.data)
        self._image = image
        self._last_snapshot_end = image.last_offset + 1
        self._out.append(MetadataApplied(image.last_offset + 1))
        for component in (self.controller, self.broker):
            if component is not None:
                component.on_committed(self._now)

    # =============================================================================================
    # timers
    # =============================================================================================

    def _run_wakeups(self, now: int) -> None:
        due = False
        while self._wakeups and self._wakeups[0] <= now:
            heapq.heappop(self._wakeups)
            due = True
        if due:
            for component in (self.controller, self.broker):
                if component is not None:
                    component.on_tick(now)
            self._drain()

    def _arm_timer(self) -> None:
        deadline = min(self._raft_deadline, self._wakeups[0] if self._wakeups else NEVER)
        # A deadline that is due now is armed again even if it equals the last one: that timer has
        # fired already (e.g. a candidate whose random backoff was 0 ms re-announces `now`).
        if deadline != self._armed or deadline <= self._now:
            self._armed = deadline
            if deadline < NEVER:
                self._out.append(A.SetTimer(deadline))


__all__ = [
    "CONTROLLER_LISTENER",
    "BrokerComponent",
    "BrokerFactory",
    "ClusterActionCheck",
    "Component",
    "ControllerComponent",
    "ControllerFactory",
    "NodeProcess",
    "ProcessStats",
]
