"""Answers that write nothing (refusals, no-ops) wait for the appends their decision read (issue 24).

A refusal decided on the working state claims a state that holds this controller's in-flight
appends. It may be sent only once those appends have committed, and must become NOT_CONTROLLER
(nothing was done) when one of them never commits. Waiting for the *offset* an append was promised
is not enough: the Raft core may write an entry of its own (a read barrier's ReadMarker) at that
offset first, and commit it while the append still waits for a stalled fsync. Soak seeds 41, 171
and 193 of isr-changes were answered INVALID_UPDATE_VERSION against a partition epoch that never
existed that way.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from node.controller import ControllerConfig
from node.protocol.admin import CreatableTopic, CreateTopicsRequest, DeleteTopicsRequest
from node.protocol.broker_api import (
    AlterPartitionPartitionData,
    AlterPartitionRequest,
    AlterPartitionTopicData,
    BrokerHeartbeatRequest,
    BrokerRegistrationFeature,
    BrokerRegistrationRequest,
    Listener,
)
from node.protocol.errors import ErrorCode
from tests.controller.harness import BROKER, CLUSTER_ID, Harness


def _alter(broker: int, epoch: int, topic_id: str, le: int, isr: tuple[int, ...], pe: int) -> AlterPartitionRequest:
    data = (AlterPartitionPartitionData(0, le, isr, pe),)
    return AlterPartitionRequest(broker, epoch, (AlterPartitionTopicData(uuid.UUID(topic_id), data),))


def _partition_cluster() -> tuple[Harness, int, int, str, int, int, tuple[int, ...]]:
    h = Harness()
    epochs = {b: h.online_broker(b) for b in (1, 2, 3)}
    tid = str(h.call(CreateTopicsRequest((CreatableTopic("t", 1, 3),)), BROKER).topics[0].topic_id)
    p = h.port.image.partition(tid, 0)
    return h, p.leader, epochs[p.leader], tid, p.leader_epoch, p.partition_epoch, p.isr


def _stale_alter_behind_an_uncommitted_one() -> tuple[Harness, int, int, str, int]:
    """An ISR shrink is appended (not committed); the same shrink again is refused against it."""
    h, leader, epoch, tid, le, pe, _isr = _partition_cluster()
    changed = h.send(_alter(leader, epoch, tid, le, (leader,), pe), BROKER)
    refused = h.send(_alter(leader, epoch, tid, le, (leader,), pe), BROKER)
    assert h.answer(changed) is None and h.answer(refused) is None
    return h, changed, refused, tid, pe


def test_a_refusal_is_not_answered_when_another_entry_commits_at_the_offset_its_state_was_promised() -> None:
    h, _changed, refused, _tid, _pe = _stale_alter_behind_an_uncommitted_one()
    h.port.overtake()  # a ReadMarker commits at the offset the shrink was promised
    assert h.answer(refused) is None  # the shrink it was refused against has not committed


def test_a_refusal_against_an_append_that_never_commits_becomes_not_controller() -> None:
    h, changed, refused, tid, pe = _stale_alter_behind_an_uncommitted_one()
    h.port.overtake()
    h.port.fail()  # the shrink is lost (the leader was cut off)
    assert h.answer(changed).error_code == ErrorCode.NOT_CONTROLLER
    assert h.answer(refused).error_code == ErrorCode.NOT_CONTROLLER
    assert h.port.image.partition(tid, 0).partition_epoch == pe  # so a retry at `pe` may succeed


def test_a_refusal_is_answered_once_the_append_it_read_commits() -> None:
    h, changed, refused, _tid, _pe = _stale_alter_behind_an_uncommitted_one()
    h.port.overtake()
    h.port.commit()
    assert h.answer(changed).topics[0].partitions[0].error_code == ErrorCode.NONE
    assert h.answer(refused).topics[0].partitions[0].error_code == ErrorCode.INVALID_UPDATE_VERSION


def test_an_answer_after_the_working_state_was_rebuilt_does_not_wait_for_appends_already_decided() -> None:
    h, _changed, _refused, _tid, _pe = _stale_alter_behind_an_uncommitted_one()
    h.port.fail()
    again = h.send(CreateTopicsRequest((CreatableTopic("t", 1, 3),)), BROKER)  # rebuilt from the image
    assert h.answer(again).topics[0].error_code == ErrorCode.TOPIC_ALREADY_EXISTS


def _heartbeat_stale(h: Harness) -> tuple[object, object]:
    epoch = h.port.image.broker(1).broker_epoch
    h.tick(h.now + h.ctl.config.broker_session_timeout_ms + 1)  # its session lapses: fenced, not committed
    h.send(_registration(1), BROKER)  # a new incarnation: a new broker epoch, not committed
    return BrokerHeartbeatRequest(1, epoch, h.port.image.last_offset), ErrorCode.STALE_BROKER_EPOCH


def _registration(broker_id: int) -> BrokerRegistrationRequest:
    return BrokerRegistrationRequest(
        broker_id,
        CLUSTER_ID,
        uuid.uuid4(),
        (Listener("PLAINTEXT", f"127.0.0.{broker_id}", 9092, 0),),
        (BrokerRegistrationFeature("metadata.version", 1, 1),),
    )


def _create_exists(h: Harness) -> tuple[object, object]:
    h.send(CreateTopicsRequest((CreatableTopic("u", 1, 1),)))
    return CreateTopicsRequest((CreatableTopic("u", 1, 1),)), ErrorCode.TOPIC_ALREADY_EXISTS


def _delete_unknown(h: Harness) -> tuple[object, object]:
    h.call(CreateTopicsRequest((CreatableTopic("u", 1, 1),)))
    h.send(DeleteTopicsRequest(("u",)))
    return DeleteTopicsRequest(("u",)), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def _code(response: Any) -> int:
    items = getattr(response, "topics", None) or getattr(response, "responses", None)
    return (items[0] if items else response).error_code


@pytest.mark.parametrize("setup", [_heartbeat_stale, _create_exists, _delete_unknown])
def test_every_refusal_waits_for_the_appends_it_read(setup) -> None:  # type: ignore[no-untyped-def]
    h = Harness()
    h.online_broker(1)
    request, code = setup(h)
    refused = h.send(request, BROKER)
    h.port.overtake(len(h.port.records()))  # past every offset the pending appends were promised
    assert h.answer(refused) is None
    h.port.commit()
    assert _code(h.answer(refused)) == code


def test_a_batch_refused_before_its_append_waits_too() -> None:
    """MESSAGE_TOO_LARGE is decided on records built from the working state (here: who is live)."""
    h = Harness(ControllerConfig(max_batch_records=4))
    h.online_broker(1)
    h.send(CreateTopicsRequest((CreatableTopic("a", 1, 1),)))  # in flight
    refused = h.send(CreateTopicsRequest((CreatableTopic("big", 5, 1),)))
    h.port.overtake(len(h.port.records()))
    assert h.answer(refused) is None
    h.port.fail()
    assert _code(h.answer(refused)) == ErrorCode.NOT_CONTROLLER
