"""Broker registration, heartbeats, fencing on session expiry, unfencing, controlled shutdown."""

from __future__ import annotations

import dataclasses
import uuid

from node.controller import ControllerConfig
from node.metadata.records import FenceBrokerRecord
from node.protocol.admin import CreatableTopic, CreateTopicsRequest
from node.protocol.broker_api import BrokerHeartbeatRequest, BrokerRegistrationFeature
from node.protocol.errors import ErrorCode
from tests.controller.harness import BROKER, Harness

TIMEOUT = ControllerConfig().broker_session_timeout_ms


def _topic(h: Harness, name: str, partitions: int, factor: int) -> str:
    response = h.call(CreateTopicsRequest((CreatableTopic(name, partitions, factor),)))
    assert response.topics[0].error_code == ErrorCode.NONE, response
    return str(response.topics[0].topic_id)


def test_the_broker_epoch_is_the_offset_of_the_registration_record() -> None:
    h = Harness()
    expected = h.port.next_append_offset()
    response = h.register(1)
    assert response.error_code == ErrorCode.NONE
    assert response.broker_epoch == expected
    reg = h.port.image.broker(1)
    assert reg is not None and reg.broker_epoch == expected and reg.fenced


def test_a_second_incarnation_of_a_live_broker_is_refused_until_its_session_lapses() -> None:
    h = Harness()
    first = h.register(1)
    first_incarnation = h.incarnations[1]
    refused = h.register(1, incarnation=uuid.uuid4())
    assert refused.error_code == ErrorCode.DUPLICATE_BROKER_REGISTRATION
    assert refused.broker_epoch == -1
    assert h.port.image.broker(1).broker_epoch == first.broker_epoch
    # The same incarnation may retry (a lost answer) and gets a new epoch.
    retry = h.register(1, incarnation=first_incarnation)
    assert retry.error_code == ErrorCode.NONE and retry.broker_epoch > first.broker_epoch
    h.tick(h.now + TIMEOUT)
    again = h.register(1, incarnation=uuid.uuid4())
    assert again.error_code == ErrorCode.NONE


def test_a_broker_that_cannot_run_the_finalized_metadata_version_is_refused() -> None:
    h = Harness()
    assert h.port.image.feature_level("metadata.version") == 1
    assert h.register(1, features=()).error_code == ErrorCode.UNSUPPORTED_VERSION
    too_new = (BrokerRegistrationFeature("metadata.version", 2, 3),)
    assert h.register(2, features=too_new).error_code == ErrorCode.UNSUPPORTED_VERSION
    assert h.register(3, cluster_id="other").error_code == ErrorCode.INCONSISTENT_CLUSTER_ID
    assert not h.port.image.brokers


def test_heartbeats_from_unknown_or_stale_brokers_are_refused() -> None:
    h = Harness()
    assert h.heartbeat(7, 0).error_code == ErrorCode.BROKER_ID_NOT_REGISTERED
    epoch = h.register(1).broker_epoch
    assert h.heartbeat(1, epoch - 1).error_code == ErrorCode.STALE_BROKER_EPOCH
    assert h.port.image.broker(1).fenced


def test_a_fenced_broker_is_unfenced_once_caught_up_with_its_registration() -> None:
    h = Harness()
    epoch = h.register(1).broker_epoch
    behind = h.heartbeat(1, epoch, offset=epoch - 1)
    assert behind.is_fenced and not behind.is_caught_up
    assert h.port.image.broker(1).fenced
    caught_up = h.heartbeat(1, epoch, offset=epoch)
    assert caught_up.error_code == ErrorCode.NONE and caught_up.is_caught_up and not caught_up.is_fenced
    assert not h.port.image.broker(1).fenced


def test_session_expiry_fences_the_broker_and_takes_it_out_of_every_isr_and_leadership() -> None:
    h = Harness()
    epochs = {b: h.online_broker(b) for b in (1, 2, 3)}
    topic_id = _topic(h, "t", 6, 3)
    led_by_1 = [p for p, s in h.port.image.partitions(topic_id).items() if s.leader == 1]
    assert led_by_1
    # Brokers 2 and 3 keep heartbeating; broker 1 goes silent.
    h.now = TIMEOUT // 2
    for b in (2, 3):
        h.heartbeat(b, epochs[b])
    h.tick(TIMEOUT)
    assert [r for r in h.port.records() if isinstance(r, FenceBrokerRecord)] == [FenceBrokerRecord(1, epochs[1])]
    assert len(h.port.appends) == 1  # the fence and the partition changes are one batch
    h.port.commit()
    assert h.port.image.broker(1).fenced
    for pid, state in h.port.image.partitions(topic_id).items():
        assert 1 not in state.isr, (pid, state)
        assert state.leader in (2, 3)
        if pid in led_by_1:
            assert state.leader_epoch == 1
    assert not h.port.image.broker(2).fenced and not h.port.image.broker(3).fenced
    assert h.port.wakes  # the controller asked to be woken for the sessions


def test_a_refused_fence_is_retried_later_never_at_once() -> None:
    """A lapsed broker whose fence batch is refused (too large here) stays unfenced; the session timer
    must then wake a little later, not at a time already past: that fired again and again without
    time moving on, a run that never ended."""
    h = Harness()
    epochs = {b: h.online_broker(b) for b in (1, 2)}
    _topic(h, "t", 4, 2)
    h.ctl.config = dataclasses.replace(h.ctl.config, max_batch_records=1)  # the fence batch is 1 + changes
    h.now = TIMEOUT // 2
    h.heartbeat(2, epochs[2])
    h.port.wakes.clear()
    h.tick(TIMEOUT)
    assert not h.port.appends or not any(isinstance(r, FenceBrokerRecord) for r in h.port.records())
    assert not h.port.image.broker(1).fenced and h.ctl.stats["refused_too_large"] >= 1
    assert h.port.wakes and min(h.port.wakes) > TIMEOUT  # retried later, never at or before now
    retry = min(h.port.wakes)
    h.ctl.config = dataclasses.replace(h.ctl.config, max_batch_records=10_000)
    h.tick(retry)
    assert [r for r in h.port.records() if isinstance(r, FenceBrokerRecord)] == [FenceBrokerRecord(1, epochs[1])]


def test_the_last_isr_member_stays_in_the_isr_without_leadership_and_gets_it_back_on_unfence() -> None:
    h = Harness()
    epoch = h.online_broker(1)
    topic_id = _topic(h, "solo", 1, 1)
    h.tick(TIMEOUT)
    h.port.commit()
    state = h.port.image.partition(topic_id, 0)
    assert state.leader == -1 and state.isr == (1,)
    assert h.heartbeat(1, epoch).is_fenced is False
    state = h.port.image.partition(topic_id, 0)
    assert state.leader == 1 and state.leader_epoch == 2


def test_activation_gives_every_broker_a_fresh_session() -> None:
    h = Harness()
    h.online_broker(1)
    h.ctl.deactivate(h.now)
    h.now = TIMEOUT * 5
    h.ctl.activate(h.now)
    h.tick(h.now + 1)
    assert not h.port.appends  # no fencing: the session restarted at activation
    h.tick(h.now + TIMEOUT)
    assert any(isinstance(r, FenceBrokerRecord) for r in h.port.records())


def test_a_new_incarnation_replaces_a_lapsed_one_and_its_old_leaderships_go() -> None:
    h = Harness()
    for b in (1, 2):
        h.online_broker(b)
    topic_id = _topic(h, "t", 2, 2)
    h.now = TIMEOUT + 1
    h.heartbeat(2, h.port.image.broker(2).broker_epoch)
    # Broker 1 restarted (new incarnation) before the controller noticed its session lapse.
    response = h.register(1, incarnation=uuid.uuid4())
    assert response.error_code == ErrorCode.NONE
    registration = h.port.image.broker(1)
    assert registration.fenced and registration.broker_epoch == response.broker_epoch
    for state in h.port.image.partitions(topic_id).values():
        assert 1 not in state.isr and state.leader == 2


def test_controlled_shutdown_moves_every_leadership_before_saying_shut_down() -> None:
    h = Harness()
    epochs = {b: h.online_broker(b) for b in (1, 2)}
    topic_id = _topic(h, "t", 4, 2)
    assert any(s.leader == 1 for s in h.port.image.partitions(topic_id).values())
    cid = h.send(BrokerHeartbeatRequest(1, epochs[1], h.port.image.last_offset, want_shut_down=True), BROKER)
    assert h.answer(cid) is None  # not before the moves are committed
    h.port.commit()
    response = h.answer(cid)
    assert response.error_code == ErrorCode.NONE and response.should_shut_down
    assert h.port.image.broker(1).in_controlled_shutdown
    for state in h.port.image.partitions(topic_id).values():
        assert state.leader == 2 and 1 not in state.isr
    # Its next heartbeat still says shut down, and writes nothing more.
    again = h.heartbeat(1, epochs[1], want_shut_down=True)
    assert again.should_shut_down and not h.port.appends


def test_a_fenced_broker_asking_to_shut_down_may_stop_at_once() -> None:
    h = Harness()
    epoch = h.register(1).broker_epoch
    response = h.heartbeat(1, epoch, want_shut_down=True)
    assert response.should_shut_down and response.is_fenced
