"""Activation, the working state, in-flight appends across leadership changes, Envelope, limits."""

from __future__ import annotations

import re
import uuid

import pytest

from node.controller import ControllerConfig, make_authorizer
from node.process.ports import RequestContext
from node.protocol import forwarding
from node.protocol.admin import (
    AlterableConfig,
    ConfigOperation,
    ConfigResourceType,
    CreatableTopic,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResource,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResource,
    MetadataRequest,
)
from node.protocol.broker_api import (
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    EnvelopeRequest,
    EnvelopeResponse,
    Listener,
)
from node.protocol.codec import BinaryCodec
from node.protocol.errors import ErrorCode
from node.raft.config import ConfigError
from node.security.authorizer import Authorizer
from tests.controller.harness import BROKER, CLUSTER_ID, Harness

CODEC = BinaryCodec()


def _create(name: str, partitions: int = 1) -> CreateTopicsRequest:
    return CreateTopicsRequest((CreatableTopic(name, partitions, 1),))


def test_an_inactive_controller_refuses_writes_with_not_controller_but_serves_plain_reads() -> None:
    h = Harness()
    h.online_broker(1)
    h.ctl.deactivate(h.now)
    assert not h.ctl.active
    assert h.call(_create("t")).topics[0].error_code == ErrorCode.NOT_CONTROLLER
    registration = BrokerRegistrationRequest(2, CLUSTER_ID, uuid.uuid4(), (Listener("PLAINTEXT", "h", 1, 0),))
    assert h.call(registration, BROKER).error_code == ErrorCode.NOT_CONTROLLER
    describe = h.call(DescribeConfigsRequest((DescribeConfigsResource(ConfigResourceType.BROKER, ""),)))
    assert describe.results[0].error_code == ErrorCode.NOT_CONTROLLER
    assert h.call(MetadataRequest()).metadata_offset == h.port.image.last_offset
    assert not h.port.appends


def test_in_flight_appends_finish_after_deactivation_by_their_outcome() -> None:
    h = Harness()
    h.online_broker(1)
    committed = h.send(_create("a"))
    lost = h.send(_create("b"))
    refused_early = h.send(_create("a"))  # decided on the working state: waits for "a" to commit
    h.ctl.deactivate(h.now)
    assert h.answer(refused_early).topics[0].error_code == ErrorCode.NOT_CONTROLLER
    h.port.commit(1)
    h.port.fail()
    assert h.answer(committed).topics[0].error_code == ErrorCode.NONE
    assert h.answer(lost).topics[0].error_code == ErrorCode.NOT_CONTROLLER
    assert sorted(h.port.image.topic_ids) == ["a"]
    # Re-activation starts from the committed image: "b" can be created now, "a" cannot.
    h.ctl.activate(h.now)
    response = h.call(CreateTopicsRequest((CreatableTopic("a", 1, 1), CreatableTopic("b", 1, 1))))
    assert [t.error_code for t in response.topics] == [ErrorCode.TOPIC_ALREADY_EXISTS, ErrorCode.NONE]


def test_a_lost_append_while_still_active_is_forgotten_once_nothing_is_in_flight() -> None:
    h = Harness()
    h.online_broker(1)
    cid = h.send(_create("t"))
    h.port.fail()
    assert h.answer(cid).topics[0].error_code == ErrorCode.NOT_CONTROLLER
    assert h.call(_create("t")).topics[0].error_code == ErrorCode.NONE
    epoch_offset = h.port.next_append_offset()
    assert h.register(5).broker_epoch == epoch_offset  # offsets predicted right after the loss


def test_an_oversized_batch_is_refused_whole_and_changes_nothing() -> None:
    h = Harness(ControllerConfig(max_batch_records=4))
    h.online_broker(1)
    response = h.call(CreateTopicsRequest((CreatableTopic("small", 1, 1), CreatableTopic("big", 5, 1))))
    assert [t.error_code for t in response.topics] == [ErrorCode.MESSAGE_TOO_LARGE] * 2
    assert not h.port.appends and not h.port.image.topic_ids
    huge = IncrementalAlterConfigsRequest(
        (
            IncrementalAlterConfigsResource(
                ConfigResourceType.BROKER,
                "",
                (AlterableConfig("log.cleanup.policy", ConfigOperation.SET, "delete," * 20),),
            ),
        )
    )
    h2 = Harness(ControllerConfig(max_batch_bytes=64))
    assert h2.call(huge).responses[0].error_code == ErrorCode.MESSAGE_TOO_LARGE
    assert not h2.port.image.configs(ConfigResourceType.BROKER, "")
    assert h.call(_create("small")).topics[0].error_code == ErrorCode.NONE


def test_broker_apis_need_cluster_action() -> None:
    h = Harness(authorizer=Authorizer(super_users=("User:broker", "User:admin")))
    mallory = RequestContext(principal="User:mallory")
    registration = BrokerRegistrationRequest(1, CLUSTER_ID, uuid.uuid4(), (Listener("PLAINTEXT", "h", 1, 0),))
    assert h.call(registration, mallory).error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert h.call(BrokerHeartbeatRequest(1, 0, 0), mallory).error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert not h.port.image.brokers and not h.port.appends


def _envelope(inner: object, principal: str = "User:admin", data: bytes | None = None) -> EnvelopeRequest:
    frame = CODEC.encode_request(77, inner) if data is None else data
    return forwarding.wrap(frame, principal, "10.1.2.3", "PLAINTEXT", "PLAINTEXT")


def _inner(response: object) -> object:
    frame = CODEC.decode(response.response_data)
    assert frame.correlation_id == 77
    return frame.message


def test_envelope_authorizes_the_forwarder_then_the_client() -> None:
    h = Harness(authorizer=Authorizer(super_users=("User:broker", "User:admin")))
    h.online_broker(1)
    forged = h.call(_envelope(_create("t")), RequestContext(principal="User:mallory"))
    assert forged.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED and forged.response_data is None
    assert not h.port.image.topic_ids
    as_alice = h.call(_envelope(_create("t"), principal="User:alice"), BROKER)
    assert as_alice.error_code == ErrorCode.NONE
    assert _inner(as_alice).topics[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    as_admin = h.call(_envelope(_create("t")), BROKER)
    inner = _inner(as_admin)
    assert isinstance(inner, CreateTopicsResponse) and inner.topics[0].error_code == ErrorCode.NONE
    assert list(h.port.image.topic_ids) == ["t"]


def test_bad_envelopes_get_error_codes() -> None:
    h = Harness()
    h.online_broker(1)
    assert h.call(_envelope(None, data=b"\x00\x01garbage"), BROKER).error_code == ErrorCode.INVALID_REQUEST
    not_forwardable = _envelope(DescribeConfigsRequest(()))
    assert h.call(not_forwardable, BROKER).error_code == ErrorCode.INVALID_REQUEST
    assert h.call(_envelope(_create("t"), principal="nobody"), BROKER).error_code == (
        ErrorCode.PRINCIPAL_DESERIALIZATION_FAILURE
    )
    h.port.leader_id = 2  # another node leads: this one is not about to become active
    h.ctl.deactivate(h.now)
    assert h.call(_envelope(_create("t")), BROKER).error_code == ErrorCode.NOT_CONTROLLER
    assert not h.port.image.topic_ids


def test_an_envelope_reaching_the_new_leader_before_its_controller_is_active_waits_for_activation() -> None:
    # Refused, it would cost the forwarding broker a retry.backoff.ms wait on every failover.
    h = Harness()
    h.online_broker(1)
    h.ctl.deactivate(h.now)  # this node leads the quorum; the first entry of its epoch is not committed
    cid = h.send(_envelope(_create("t")), BROKER)
    assert h.answer(cid) is None and not h.port.appends
    h.ctl.activate(h.now)
    h.port.commit()
    assert _inner(h.answer(cid)).topics[0].error_code == ErrorCode.NONE
    assert list(h.port.image.topic_ids) == ["t"]


def test_an_envelope_kept_for_an_activation_is_refused_when_the_node_stops_leading() -> None:
    h = Harness()
    h.online_broker(1)
    h.ctl.deactivate(h.now)
    cid = h.send(_envelope(_create("t")), BROKER)
    h.port.leader_id = 3
    h.ctl.on_leader_change(h.now)
    assert h.answer(cid) == EnvelopeResponse(ErrorCode.NOT_CONTROLLER)
    h.ctl.activate(h.now)  # had it been kept, it would run now
    h.port.commit()
    assert not h.port.image.topic_ids and [r for r in h.port.responses if r[1] == cid] == [
        ("conn", cid, EnvelopeResponse(ErrorCode.NOT_CONTROLLER))
    ]


def test_the_inner_request_runs_as_the_client_with_the_forwarder_recorded() -> None:
    seen: list[RequestContext] = []
    h = Harness()
    original = h.ctl.dispatch

    def spy(now_ms, ctx, message, reply):  # type: ignore[no-untyped-def]
        seen.append(ctx)
        original(now_ms, ctx, message, reply)

    h.ctl.dispatch = spy  # type: ignore[method-assign]
    h.call(_envelope(_create("t")), BROKER)
    assert seen == [RequestContext("User:admin", "10.1.2.3", "PLAINTEXT", "PLAINTEXT", forwarded_by="User:broker")]


def test_junk_never_raises() -> None:
    h = Harness()
    h.ctl.handle_request(h.now, BROKER, "conn", 1, object())
    h.ctl.handle_request(h.now, BROKER, "conn", 2, "not a message")
    assert h.port.responses == []


def test_a_forwarded_write_lost_with_leadership_is_not_controller_on_the_envelope() -> None:
    h = Harness()
    h.online_broker(1)
    cid = h.send(_envelope(_create("t")), BROKER)
    h.ctl.deactivate(h.now)
    h.port.fail()
    assert h.answer(cid) == EnvelopeResponse(ErrorCode.NOT_CONTROLLER)


def test_controller_config_reads_kafka_property_names() -> None:
    config = ControllerConfig.from_properties(
        {
            "broker.session.timeout.ms": "3000",
            "broker.heartbeat.interval.ms": "500",
            "super.users": "User:admin; User:broker",
            "allow.everyone.if.no.acl.found": "true",
            "unrelated.key": "x",
        }
    )
    assert config.broker_session_timeout_ms == 3000 and config.broker_heartbeat_interval_ms == 500
    assert config.super_users == ("User:admin", "User:broker") and config.allow_everyone_if_no_acl_found
    assert make_authorizer(config) is None
    authorizer = make_authorizer(
        ControllerConfig.from_properties({"authorizer.enabled": "true", "super.users": "User:a"})
    )
    assert authorizer is not None and authorizer.super_users == {"User:a"}
    for bad in ({"num.partitions": "many"}, {"num.partitions": "0"}, {"authorizer.enabled": "yes"}):
        with pytest.raises(ConfigError, match=re.escape(next(iter(bad)))):
            ControllerConfig.from_properties(bad)
    with pytest.raises(ConfigError, match=re.escape("broker.heartbeat.interval.ms")):
        ControllerConfig.from_properties({"broker.heartbeat.interval.ms": "10000"})
