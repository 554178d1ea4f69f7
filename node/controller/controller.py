"""The quorum controller: a sans-IO state machine on the active quorum leader (KIP-631).

It answers the broker APIs (registration, heartbeats, AlterPartition), the admin writes (direct or
inside a KIP-590 Envelope) and the reads, and acts only through a `ProcessPort`.

Working state. The controller decides each request against a private `MetadataImage` that holds the
committed image plus every record it has appended but not yet seen committed, replayed at the
offsets they will get (`port.next_append_offset()`), so consecutive requests see the effect of
earlier ones while those are still in flight. It is copied from `port.image` on activation and
again whenever nothing is in flight and it has drifted (an append that failed, control records).

Answers. A write is answered from its append's callback: committed -> success; not committed ->
NOT_CONTROLLER (definite: the Raft core guarantees it never commits). A request that writes nothing
(refused, no-op, validate-only, or a batch refused before its append) was still decided on the
working state, so its answer waits until every append that state held has committed; if one of them
never commits, or leadership is lost first, it gets NOT_CONTROLLER, which is true since it changed
nothing. It waits for those appends' outcomes, not for the offsets they were promised: the Raft core
may commit an entry of its own (a read barrier's marker) at a promised offset while the append still
waits for a flush (issue 24: refusals against a partition epoch that never committed).
"""

from __future__ import annotations

import contextlib
import uuid
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from node.controller import acls, configs, partitions, registration, topics
from node.controller.config import METADATA_VERSION, ControllerConfig
from node.controller.config_catalog import DEFAULTS
from node.controller.context import ControllerContext, Reply
from node.controller.errors import whole_request_error
from node.controller.sessions import Sessions
from node.metadata import describe
from node.metadata.image import MetadataDelta, MetadataImage, MetadataImageError
from node.metadata.records import FeatureLevelRecord, MetadataRecord, encode_record
from node.process.ports import AppendOutcome, BarrierOutcome, ProcessPort, RequestContext
from node.protocol import forwarding
from node.protocol.acls import (
    CLUSTER_RESOURCE_NAME,
    AclOperation,
    CreateAclsRequest,
    DeleteAclsRequest,
    DescribeAclsRequest,
    DescribeAclsResponse,
    ResourceType,
)
from node.protocol.admin import (
    AlterConfigsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeConfigsRequest,
    ElectLeadersRequest,
    IncrementalAlterConfigsRequest,
    MetadataRequest,
)
from node.protocol.broker_api import (
    AlterPartitionRequest,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    EnvelopeRequest,
    EnvelopeResponse,
)
from node.protocol.codec import BinaryCodec, Codec
from node.protocol.errors import ErrorCode
from node.security.authorizer import Authorizer

# A handler for one request type: (controller, now_ms, ctx, message, reply).
Handler = Callable[[ControllerContext, int, RequestContext, Any, Reply], None]

_WRITES: dict[type, Handler] = {
    BrokerRegistrationRequest: registration.handle_registration,
    BrokerHeartbeatRequest: registration.handle_heartbeat,
    AlterPartitionRequest: partitions.handle_alter_partition,
    CreateTopicsRequest: topics.handle_create_topics,
    DeleteTopicsRequest: topics.handle_delete_topics,
    IncrementalAlterConfigsRequest: configs.handle_incremental_alter_configs,
    AlterConfigsRequest: configs.handle_alter_configs,
    CreateAclsRequest: acls.handle_create_acls,
    DeleteAclsRequest: acls.handle_delete_acls,
    ElectLeadersRequest: partitions.handle_elect_leaders,
}
# Inter-node APIs: the sender must have ClusterAction on the cluster.
_CLUSTER_ACTION = frozenset({BrokerRegistrationRequest, BrokerHeartbeatRequest, AlterPartitionRequest})
# Envelopes kept while this node leads the quorum but its controller is not active yet (at most this
# many; more are refused with NOT_CONTROLLER as before).
HELD_BEFORE_ACTIVE_MAX = 1_000


class QuorumController:
    """See the module docstring; the process calls the methods below."""

    def __init__(
        self,
        port: ProcessPort,
        config: ControllerConfig | None = None,
        authorizer: Authorizer | None = None,
        codec: Codec | None = None,
    ) -> None:
        self.port = port
        self.config = config or ControllerConfig()
        self.authorizer = authorizer
        self.codec: Codec = codec or BinaryCodec()
        self.sessions = Sessions(self.config.broker_session_timeout_ms, self.config.bugs)
        self._active = False
        self._generation = 0
        self._working: MetadataImage | None = None
        self._in_flight = 0
        self._drifted = False
        # Appends of this generation are numbered 1, 2, ...; the working state holds up to `_holds`.
        self._appends = 0
        self._holds = 0
        self._committed_through = 0  # every append up to this number has committed
        self._committed_later: set[int] = set()  # committed, but an earlier one is still undecided
        self._lost_from: int | None = None  # the first append of this generation that did not commit
        self._waiting_answers: deque[tuple[int, Reply, object, object]] = deque()  # (append, reply, answer, request)
        self._waiting_reads: list[tuple[int, Callable[[], None]]] = []  # (read_offset, answer)
        # Envelopes that reached the new quorum leader before its controller became active (the first
        # entry of its epoch not yet committed): handled on activation, refused if it stops leading
        # first. A refusal cost the forwarding broker a retry.backoff.ms wait on every failover.
        self._before_active: list[tuple[RequestContext, EnvelopeRequest, Reply]] = []
        self.stats: dict[str, int] = {"appends": 0, "records": 0, "refused_too_large": 0, "replay_refusals": 0}

    # =============================================================================================
    # the process's interface
    # =============================================================================================

    @property
    def active(self) -> bool:
        return self._active

    def activate(self, now_ms: int) -> None:
        self._active = True
        self._generation += 1
        self._working = self.port.image.copy()
        self._in_flight = 0
        self._drifted = False
        self._forget_appends()
        # The session of every broker is measured from the last heartbeat THIS controller received.
        self.sessions.reset(now_ms, self._working.brokers)
        self._arm_session_timer(now_ms)
        self._bootstrap()
        held, self._before_active = self._before_active, []
        for ctx, envelope, reply in held:
            self._handle_envelope(now_ms, ctx, envelope, reply)

    def deactivate(self, now_ms: int) -> None:
        self._active = False
        self._generation += 1
        self._working = None
        self._in_flight = 0
        self.sessions.clear()
        self._forget_appends()
        self._refuse_held()

    def _refuse_held(self) -> None:
        """Envelopes kept for an activation that will not come: certainly unapplied, NOT_CONTROLLER."""
        held, self._before_active = self._before_active, []
        for _, _, reply in held:
            reply(EnvelopeResponse(ErrorCode.NOT_CONTROLLER))

    def on_committed(self, now_ms: int) -> None:
        image = self.port.image
        if self._waiting_reads:
            ready = [w for w in self._waiting_reads if w[0] <= image.next_offset]
            self._waiting_reads = [w for w in self._waiting_reads if w[0] > image.next_offset]
            for _offset, answer_read in ready:
                answer_read()

    def on_leader_change(self, now_ms: int) -> None:
        """Activation follows leadership through `activate`/`deactivate`; envelopes kept for an
        activation are refused once this node no longer leads."""
        if self.port.leader_id != self.port.node_id:
            self._refuse_held()

    def on_tick(self, now_ms: int) -> None:
        if self._active:
            self._refresh_working()
            self.sessions.timer_fired()
            registration.fence_expired(self, now_ms)
            self._arm_session_timer(now_ms)

    def handle_request(
        self, now_ms: int, ctx: RequestContext, reply_to: Hashable, correlation_id: int, message: object
    ) -> None:
        def reply(response: object) -> None:
            self.port.respond(reply_to, correlation_id, response)

        if isinstance(message, EnvelopeRequest):
            self._handle_envelope(now_ms, ctx, message, reply)
        else:
            self.dispatch(now_ms, ctx, message, reply)

    # =============================================================================================
    # dispatch
    # =============================================================================================

    def dispatch(self, now_ms: int, ctx: RequestContext, message: object, reply: Reply) -> None:
        kind = type(message)
        handler = _WRITES.get(kind)
        if handler is not None:
            if kind in _CLUSTER_ACTION and not self.may_cluster_action(ctx):
                reply(whole_request_error(message, ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
                return
            if not self._active:
                reply(whole_request_error(message, ErrorCode.NOT_CONTROLLER))
                return
            self._refresh_working()
            handler(self, now_ms, ctx, message, reply)
        elif isinstance(message, DescribeConfigsRequest):
            self._describe_configs(ctx, message, reply)
        elif isinstance(message, DescribeAclsRequest):
            if not self.allowed(ctx, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME):
                reply(
                    DescribeAclsResponse(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None, (), self.port.image.last_offset)
                )
            else:
                reply(describe.describe_acls(self.port.image, message))
        elif isinstance(message, DescribeClusterRequest):
            if not self.allowed(ctx, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME):
                reply(DescribeClusterResponse(ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
            else:
                reply(describe.describe_cluster(self.port.image, message, self.port.leader_id))
        elif isinstance(message, MetadataRequest):
            reply(describe.metadata(self.port.image, message, self.port.leader_id, self._reader(ctx)))
        else:
            with contextlib.suppress(KeyError, TypeError):  # not a request at all: nothing to answer with
                reply(whole_request_error(message, ErrorCode.INVALID_REQUEST))

    def _handle_envelope(self, now_ms: int, ctx: RequestContext, envelope: EnvelopeRequest, reply: Reply) -> None:
        """KIP-590: authorize the forwarding broker, then handle the client's request as the client."""
        if not self.may_cluster_action(ctx) and "ctl-envelope-unauthorized" not in self.config.bugs:
            reply(EnvelopeResponse(ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
            return
        if not self._active:
            leading = self.port.leader_id == self.port.node_id
            if leading and len(self._before_active) < HELD_BEFORE_ACTIVE_MAX:
                self._before_active.append((ctx, envelope, reply))  # activation is a commit away
            else:
                reply(EnvelopeResponse(ErrorCode.NOT_CONTROLLER))
            return
        try:
            frame = forwarding.unwrap(self.codec, envelope)
        except forwarding.InvalidEnvelope as e:
            reply(EnvelopeResponse(e.error_code))
            return
        principal = envelope.request_principal
        kind, _, name = principal.partition(":")
        if not kind or not name:
            reply(EnvelopeResponse(ErrorCode.PRINCIPAL_DESERIALIZATION_FAILURE))
            return
        inner_ctx = RequestContext(
            principal=principal,
            client_host=envelope.client_host_address,
            listener_name=envelope.listener_name,
            security_protocol=envelope.security_protocol,
            forwarded_by=ctx.principal,
        )

        not_applied = whole_request_error(frame.message, ErrorCode.NOT_CONTROLLER)

        def reply_inner(response: object) -> None:
            if response == not_applied:
                # Certainly not applied (leadership lost first): say so on the Envelope, so the
                # forwarding broker resends to the new controller (KIP-590).
                reply(EnvelopeResponse(ErrorCode.NOT_CONTROLLER))
                return
            try:
                reply(forwarding.answer(self.codec, frame, response))
            except (TypeError, ValueError):
                reply(EnvelopeResponse(ErrorCode.UNKNOWN_SERVER_ERROR))

        self.dispatch(now_ms, inner_ctx, frame.message, reply_inner)

    # =============================================================================================
    # reads
    # =============================================================================================

    def _describe_configs(self, ctx: RequestContext, request: DescribeConfigsRequest, reply: Reply) -> None:
        """Linearizable: a read barrier, then the committed image once it has applied the barrier's offset."""
        if not self._active:
            reply(whole_request_error(request, ErrorCode.NOT_CONTROLLER))
            return
        authorized = self._reader(ctx)

        def answer() -> None:
            reply(describe.describe_configs(self.port.image, request, DEFAULTS, authorized))

        def on_barrier(outcome: BarrierOutcome) -> None:
            if not outcome.ok:
                reply(whole_request_error(request, ErrorCode.NOT_CONTROLLER))
            elif self.port.image.next_offset >= outcome.read_offset:
                answer()
            else:
                self._waiting_reads.append((outcome.read_offset, answer))

        if "ctl-read-without-barrier" in self.config.bugs:  # it believes it is active: no barrier
            answer()
            return
        self.port.read_barrier(on_barrier)

    def _reader(self, ctx: RequestContext) -> describe.Authorized | None:
        if self.authorizer is None:
            return None
        authorizer, image = self.authorizer, self.port.image
        return lambda op, rtype, name: authorizer.authorize_ctx(image, ctx, op, rtype, name)

    # =============================================================================================
    # what the request handlers use
    # =============================================================================================

    @property
    def working(self) -> MetadataImage:
        """The committed image plus this controller's in-flight records (active only)."""
        assert self._working is not None, "the controller is not active"
        return self._working

    def allowed(self, ctx: RequestContext, operation: int, resource_type: int, resource_name: str) -> bool:
        if self.authorizer is None:
            return True
        return self.authorizer.authorize_ctx(self.port.image, ctx, operation, resource_type, resource_name)

    def may_cluster_action(self, ctx: RequestContext) -> bool:
        return self.allowed(ctx, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME)

    def next_offset(self) -> int:
        """The offset the next record written will get: broker epochs are built from it."""
        return self.port.next_append_offset()

    def new_uuid(self, *parts: object) -> str:
        """A fresh id, derived from the log position so every run of the same history gets the same ids."""
        seed = f"{self.working.cluster_id}/{self.port.leader_epoch}/{self.next_offset()}/" + "/".join(map(str, parts))
        return str(uuid.uuid5(uuid.NAMESPACE_OID, seed))

    def write(
        self,
        request: object,
        records: Sequence[MetadataRecord],
        reply: Reply | None,
        on_success: Callable[[AppendOutcome], object],
    ) -> bool:
        """Append `records` as one batch and answer `reply` once it is decided; False if it was refused
        (then `reply` already has its error and nothing changed). An empty list answers after the
        working state is committed."""
        if not records:
            if reply is not None:
                self.answer_when_settled(request, reply, on_success(AppendOutcome(True)))
            return True
        error, encoded = self._encode_batch(records)
        if error != ErrorCode.NONE:
            if reply is not None:
                self.answer_when_settled(request, reply, whole_request_error(request, error))
            return False
        working = self.working
        base = self.next_offset()
        epoch = self.port.leader_epoch
        delta = MetadataDelta(working)
        try:
            for i, record in enumerate(records):
                delta.replay(record, base + i, epoch)
        except MetadataImageError:
            self.stats["replay_refusals"] += 1
            if reply is not None:
                self.answer_when_settled(request, reply, whole_request_error(request, ErrorCode.INVALID_REQUEST))
            return False
        delta.commit()
        generation = self._generation
        self._appends += 1
        number = self._holds = self._appends

        def on_done(outcome: AppendOutcome) -> None:
            if generation == self._generation:
                self._in_flight -= 1
                if not outcome.committed or outcome.base_offset != base:
                    self._drifted = True  # lost, or written elsewhere than the working state put it
                self._settle(number, outcome.committed)
            if reply is None:
                return
            if outcome.committed:
                reply(on_success(outcome))
            else:
                reply(whole_request_error(request, outcome.error or ErrorCode.NOT_CONTROLLER))

        self._in_flight += 1
        self.stats["appends"] += 1
        self.stats["records"] += len(records)
        if self.port.append(encoded, on_done) != base:
            self._drifted = True  # predicted offsets were wrong: rebuild once nothing is in flight
        return True

    def answer_when_settled(self, request: object, reply: Reply, answer: object) -> None:
        """Answer once every append the working state holds now has committed (NOT_CONTROLLER if one never does)."""
        if self._decided(self._holds) is None:
            self._waiting_answers.append((self._holds, reply, answer, request))
        else:
            self._send_settled(self._holds, reply, answer, request)

    def _decided(self, holds: int) -> bool | None:
        """Appends 1..`holds` of this generation: all committed (True), one lost (False), or not yet known."""
        if holds <= self._committed_through:
            return True
        if self._lost_from is not None and holds >= self._lost_from:
            return False
        return None

    def _send_settled(self, holds: int, reply: Reply, answer: object, request: object) -> None:
        # A lost append means the state the answer was decided on never existed: nothing was done.
        reply(answer if self._decided(holds) else whole_request_error(request, ErrorCode.NOT_CONTROLLER))

    def _settle(self, number: int, committed: bool) -> None:
        """Append `number` of this generation was decided: answer what waited for it and those before it."""
        if not committed:
            self._lost_from = number if self._lost_from is None else min(self._lost_from, number)
        elif number == self._committed_through + 1:
            self._committed_through = number
            while self._committed_through + 1 in self._committed_later:
                self._committed_through += 1
                self._committed_later.discard(self._committed_through)
        else:
            self._committed_later.add(number)
        waiting = self._waiting_answers
        while waiting and self._decided(waiting[0][0]) is not None:
            self._send_settled(*waiting.popleft())

    def _forget_appends(self) -> None:
        """A new generation, or a working state rebuilt from the image: no append is held any more.
        Whatever still waits was decided on a state this controller can no longer vouch for."""
        waiting, self._waiting_answers = self._waiting_answers, deque()
        self._appends = self._holds = self._committed_through = 0
        self._committed_later = set()
        self._lost_from = None
        for _holds, reply, _answer, request in waiting:
            reply(whole_request_error(request, ErrorCode.NOT_CONTROLLER))

    def _encode_batch(self, records: Sequence[MetadataRecord]) -> tuple[ErrorCode, tuple[bytes, ...]]:
        """The records encoded, or the error the Raft core would refuse them with, found before the
        working state takes them in (the encodings go on to the append: each record is encoded once)."""
        if len(records) > self.config.max_batch_records:
            self.stats["refused_too_large"] += 1
            return ErrorCode.MESSAGE_TOO_LARGE, ()
        try:
            encoded = tuple(encode_record(r) for r in records)
        except ValueError:
            return ErrorCode.INVALID_REQUEST, ()
        if sum(4 + len(e) for e in encoded) > self.config.max_batch_bytes:
            self.stats["refused_too_large"] += 1
            return ErrorCode.MESSAGE_TOO_LARGE, ()
        return ErrorCode.NONE, encoded

    def _refresh_working(self) -> None:
        """Nothing in flight: the working state must equal the committed image; re-copy it if it drifted."""
        if self._in_flight or self._working is None:
            return
        if self._drifted or self._working.last_offset != self.port.image.last_offset:
            self._working = self.port.image.copy()
            self._drifted = False
            self._forget_appends()

    def _bootstrap(self) -> None:
        """A new cluster has no finalized metadata.version: the first active controller writes it."""
        if self.working.feature_level(METADATA_VERSION) == 0 and self.config.metadata_version > 0:
            self.write(None, [FeatureLevelRecord(METADATA_VERSION, self.config.metadata_version)], None, lambda o: None)

    def arm_session_timer(self, deadline_ms: int) -> None:
        """Make sure `on_tick` runs by `deadline_ms` (a session may lapse then)."""
        if self.sessions.arm(deadline_ms):
            self.port.wake_at(deadline_ms)

    def _arm_session_timer(self, now_ms: int) -> None:
        """Wake at the next session deadline. A lapsed broker still unfenced after `fence_expired` (its
        fence batch refused) is retried a little later, never at once: a timer re-armed for a time
        already past would fire again and again without time moving on (a livelock)."""
        deadline = self.sessions.next_deadline(self.working)
        if deadline is not None:
            self.arm_session_timer(deadline if deadline > now_ms else now_ms + self.sessions.retry_ms)


__all__ = ["QuorumController", "Reply"]
