"""Controllers with one KIP rule broken, planted test-locally (pytest's monkeypatch) in the simulator.

Each function breaks one rule the way a real defect would and returns nothing; the test undoes it.
They prove the played-broker workloads' checkers have teeth: a run with the bug must be invalid with
the anomaly named for the guarantee it breaks.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import node.controller.controller as controller_module
from node.controller import partitions, registration
from node.protocol.broker_api import BrokerHeartbeatRequest, BrokerRegistrationRequest


def accept_stale_partition_epoch(monkeypatch: Any) -> None:
    """AlterPartition compares the leader epoch but not the partition epoch (KIP-497's zkVersion)."""
    validate = partitions._validate

    def lenient(view, request, topic_id, data, *rest):
        p = view.partition(topic_id, data.partition_index)
        if p is not None:
            data = dataclasses.replace(data, partition_epoch=p.partition_epoch)
        return validate(view, request, topic_id, data, *rest)

    monkeypatch.setattr(partitions, "_validate", lenient)


def admit_fenced_replicas(monkeypatch: Any) -> None:
    """KAFKA-13916 / KAFKA-14617: AlterPartition lets any registered broker join an ISR, fenced or not."""
    validate = partitions._validate

    def lenient(view, request, topic_id, data, *rest):
        live = partitions.is_live
        partitions.is_live = lambda v, b: v.broker(b) is not None
        try:
            return validate(view, request, topic_id, data, *rest)
        finally:
            partitions.is_live = live

    monkeypatch.setattr(partitions, "_validate", lenient)


def never_fence_expired_sessions(monkeypatch: Any) -> None:
    """The session timer fires but fences nobody: a silent broker stays unfenced."""
    monkeypatch.setattr(registration, "fence_expired", lambda ctl, now_ms: None)


def unfence_before_catch_up(monkeypatch: Any) -> None:
    """A heartbeat unfences its broker whatever metadata offset it reports."""
    handle = registration.handle_heartbeat

    def eager(ctl, now_ms, ctx, request, reply):
        caught_up = max(request.current_metadata_offset, request.broker_epoch)
        return handle(ctl, now_ms, ctx, dataclasses.replace(request, current_metadata_offset=caught_up), reply)

    monkeypatch.setitem(controller_module._WRITES, BrokerHeartbeatRequest, eager)


def accept_duplicate_incarnations(monkeypatch: Any) -> None:
    """A second incarnation of a live broker id is registered instead of refused."""
    handle = registration.handle_registration

    def careless(ctl, now_ms, ctx, request, reply):
        live = ctl.sessions.live
        ctl.sessions.live = lambda broker_id, now: False
        try:
            return handle(ctl, now_ms, ctx, request, reply)
        finally:
            ctl.sessions.live = live

    monkeypatch.setitem(controller_module._WRITES, BrokerRegistrationRequest, careless)


def reuse_broker_epochs(monkeypatch: Any) -> None:
    """A re-registration of the same incarnation is answered with the epoch it had before."""
    handle = registration.handle_registration

    def reusing(ctl, now_ms, ctx, request, reply):
        existing = ctl.working.broker(request.broker_id)
        if existing is None or existing.incarnation_id != str(request.incarnation_id):
            return handle(ctl, now_ms, ctx, request, reply)
        old = existing.broker_epoch

        def answer(response):
            reply(dataclasses.replace(response, broker_epoch=old) if response.error_code == 0 else response)

        return handle(ctl, now_ms, ctx, request, answer)

    monkeypatch.setitem(controller_module._WRITES, BrokerRegistrationRequest, reusing)
