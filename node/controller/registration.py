"""Broker registration, heartbeats, session expiry and controlled shutdown (KIP-631).

- A registration is a `RegisterBrokerRecord` whose `broker_epoch` is its own offset; the broker
  starts fenced. A second incarnation claiming a broker id whose session is live is refused
  (DUPLICATE_BROKER_REGISTRATION); a broker that cannot run a finalized feature level is refused
  (UNSUPPORTED_VERSION). A restarted broker's old incarnation leaves every ISR in the same batch.
- Sessions are measured from the last heartbeat (or registration) the ACTIVE controller received;
  on activation every broker starts a fresh session. A lapsed unfenced broker is fenced
  (`FenceBrokerRecord`) together with the partition changes that take it out of ISRs and leaderships.
- A fenced broker whose metadata offset has reached its registration record is caught up and is
  unfenced (`UnfenceBrokerRecord`), taking back the leaderless partitions it is the ISR of.
- Controlled shutdown: `want_shut_down` marks the broker (`BrokerRegistrationChangeRecord`, so it
  survives a failover) and moves its leaderships away in the same batch; the answer says
  `should_shut_down` once that batch is committed and the broker leads nothing.
"""

from __future__ import annotations

from node.controller.context import ControllerContext, Reply
from node.controller.partitions import elect_with, remove_broker
from node.metadata.image import BrokerRegistration, MetadataImage
from node.metadata.records import (
    BrokerEndpoint,
    BrokerRegistrationChangeRecord,
    FenceBrokerRecord,
    MetadataRecord,
    RegisterBrokerRecord,
    UnfenceBrokerRecord,
)
from node.process.ports import RequestContext
from node.protocol.broker_api import (
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
)
from node.protocol.errors import ErrorCode


def _fence(ctl: ControllerContext, reg: BrokerRegistration) -> list[MetadataRecord]:
    return [FenceBrokerRecord(reg.broker_id, reg.broker_epoch), *remove_broker(ctl.working, reg.broker_id)]


def fence_expired(ctl: ControllerContext, now_ms: int) -> None:
    """Fence every unfenced broker whose session lapsed: one batch per broker."""
    view = ctl.working
    for broker_id in ctl.sessions.expired(view, now_ms):
        reg = view.broker(broker_id)
        if reg is not None:
            ctl.write(None, _fence(ctl, reg), None, lambda _outcome: None)


def _feature_error(view: MetadataImage, request: BrokerRegistrationRequest) -> str | None:
    offered = {f.name: (f.min_supported_version, f.max_supported_version) for f in request.features}
    for name, level in sorted(view.features.items()):
        low, high = offered.get(name, (1, 0))
        if not low <= level <= high:
            return f"{name} level {level} is finalized; the broker supports {low}..{high}"
    return None


def handle_registration(
    ctl: ControllerContext, now_ms: int, ctx: RequestContext, request: BrokerRegistrationRequest, reply: Reply
) -> None:
    view = ctl.working
    broker_id = request.broker_id
    incarnation = str(request.incarnation_id)
    existing = view.broker(broker_id)
    names = [listener.name for listener in request.listeners]
    error = ErrorCode.NONE
    if broker_id < 0 or len(set(names)) != len(names):
        error = ErrorCode.INVALID_REQUEST
    elif view.cluster_id is not None and request.cluster_id != view.cluster_id:
        error = ErrorCode.INCONSISTENT_CLUSTER_ID
    elif _feature_error(view, request) is not None:
        error = ErrorCode.UNSUPPORTED_VERSION
    elif existing is not None and existing.incarnation_id != incarnation and ctl.sessions.live(broker_id, now_ms):
        error = ErrorCode.DUPLICATE_BROKER_REGISTRATION
    if error != ErrorCode.NONE:
        ctl.answer_when_settled(request, reply, BrokerRegistrationResponse(error))
        return
    # The previous incarnation (if any) leaves every ISR and leadership: the new one starts fenced.
    records: list[MetadataRecord] = remove_broker(view, broker_id) if existing is not None else []
    epoch = ctl.next_offset() + len(records)
    records.append(
        RegisterBrokerRecord(
            broker_id,
            incarnation,
            epoch,
            tuple(BrokerEndpoint(x.name, x.host, x.port, x.security_protocol) for x in request.listeners),
            {f.name: (f.min_supported_version, f.max_supported_version) for f in request.features},
            request.rack,
            fenced=True,
        )
    )
    if ctl.write(request, records, reply, lambda _outcome: BrokerRegistrationResponse(ErrorCode.NONE, epoch)):
        ctl.sessions.touch(broker_id, now_ms)
        ctl.arm_session_timer(now_ms + ctl.sessions.timeout_ms)


def handle_heartbeat(
    ctl: ControllerContext, now_ms: int, ctx: RequestContext, request: BrokerHeartbeatRequest, reply: Reply
) -> None:
    view = ctl.working
    reg = view.broker(request.broker_id)
    if reg is None:
        ctl.answer_when_settled(request, reply, BrokerHeartbeatResponse(ErrorCode.BROKER_ID_NOT_REGISTERED))
        return
    stale = reg.broker_epoch != request.broker_epoch
    if "ctl-stale-heartbeat-accepted" in ctl.config.bugs and request.broker_epoch < reg.broker_epoch:
        stale = False
    if stale:
        ctl.answer_when_settled(request, reply, BrokerHeartbeatResponse(ErrorCode.STALE_BROKER_EPOCH))
        return
    ctl.sessions.touch(reg.broker_id, now_ms)
    ctl.arm_session_timer(now_ms + ctl.sessions.timeout_ms)
    caught_up = request.current_metadata_offset >= reg.broker_epoch
    if "ctl-unfence-before-catch-up" in ctl.config.bugs:  # KAFKA-13959
        caught_up = request.current_metadata_offset >= 0
    records: list[MetadataRecord] = []
    fenced, shut_down = reg.fenced, False
    if request.want_shut_down:
        if reg.fenced:
            shut_down = True  # a fenced broker leads nothing: it may stop at once
        else:
            if not reg.in_controlled_shutdown:
                records.append(
                    BrokerRegistrationChangeRecord(reg.broker_id, reg.broker_epoch, in_controlled_shutdown=True)
                )
            # remove_broker hands every leadership to another live replica or to nobody, and a broker
            # in controlled shutdown is never chosen again: once this batch commits it leads nothing.
            if "ctl-shutdown-before-leaders-moved" not in ctl.config.bugs:
                records.extend(remove_broker(view, reg.broker_id))
            shut_down = True
    elif request.want_fence:
        if not reg.fenced:
            records = _fence(ctl, reg)
            fenced = True
    elif reg.fenced and caught_up and not reg.in_controlled_shutdown:
        records = [UnfenceBrokerRecord(reg.broker_id, reg.broker_epoch), *elect_with(view, reg.broker_id)]
        fenced = False
    response = BrokerHeartbeatResponse(ErrorCode.NONE, caught_up, fenced, shut_down)
    ctl.write(request, records, reply, lambda _outcome: response)


__all__ = ["fence_expired", "handle_heartbeat", "handle_registration"]
