"""KIP-590 forwarding: Envelopes, retries on NOT_CONTROLLER, at most once, definite vs ambiguous errors."""

from __future__ import annotations

import uuid

from node.process.ports import NOT_SENT, RequestContext
from node.protocol.acls import (
    AclCreation,
    AclOperation,
    AclPermissionType,
    CreateAclsRequest,
    PatternType,
    ResourceType,
)
from node.protocol.admin import (
    AlterableConfig,
    AlterConfigsResourceResponse,
    ConfigOperation,
    ConfigResourceType,
    CreatableTopic,
    CreatableTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResource,
    IncrementalAlterConfigsResponse,
)
from node.protocol.broker_api import EnvelopeRequest, EnvelopeResponse
from node.protocol.codec import BinaryCodec, EncodedResponse, FrameKind
from node.protocol.errors import ErrorCode
from node.protocol.forwarding import answer, unwrap
from tests.broker.fakes import bring_online, make_broker

CODEC = BinaryCodec()
CTX = RequestContext("User:alice", "127.0.0.9", "SASL_PLAINTEXT", "SASL_PLAINTEXT")
ALTER = IncrementalAlterConfigsRequest(
    (
        IncrementalAlterConfigsResource(
            ConfigResourceType.TOPIC, "orders", (AlterableConfig("retention.ms", ConfigOperation.SET, "1000"),)
        ),
    )
)
ALTER_OK = IncrementalAlterConfigsResponse(
    (AlterConfigsResourceResponse(ErrorCode.NONE, None, ConfigResourceType.TOPIC, "orders"),)
)


def online(timeout_ms: int = 1000, backoff_ms: int = 50):
    broker, port = make_broker(leader_id=100, request_timeout_ms=timeout_ms, retry_backoff_ms=backoff_ms)
    bring_online(broker, port, now_ms=0)
    port.sent.clear()
    return broker, port


def controller_answer(envelope: EnvelopeRequest, response: object) -> EnvelopeResponse:
    """What a controller sends back for a served Envelope (the protocol helper both sides use)."""
    return answer(CODEC, unwrap(CODEC, envelope), response)


def codes(response) -> list[int]:
    return [r.error_code for r in response.responses]


def test_envelope_carries_the_client_request_and_identity_and_the_inner_answer_goes_back():
    broker, port = online()
    broker.handle_request(10, CTX, "client-a", 7, ALTER)
    (sent,) = port.sent_of(EnvelopeRequest)
    assert sent.destination == 100
    env = sent.message
    assert (env.request_principal, env.client_host_address, env.listener_name, env.security_protocol) == (
        "User:alice",
        "127.0.0.9",
        "SASL_PLAINTEXT",
        "SASL_PLAINTEXT",
    )
    inner = CODEC.decode(env.request_data)
    assert inner.kind is FrameKind.REQUEST and inner.correlation_id == 7 and inner.message == ALTER
    assert port.responses == []
    sent.reply(controller_answer(env, ALTER_OK))
    assert port.responses == [("client-a", 7, ALTER_OK)]
    m = broker.metrics()
    assert m["forwarding.requests_total"] == 1 and m["forwarding.responses_total"] == 1
    assert m["forwarding.pending"] == 0


def test_not_controller_waits_for_a_new_controller_and_resends_until_answered():
    broker, port = online(timeout_ms=10_000)
    broker.handle_request(10, CTX, "c", 1, ALTER)
    first = port.last(EnvelopeRequest)
    first.reply(EnvelopeResponse(ErrorCode.NOT_CONTROLLER))
    assert port.responses == []
    port.leader_id = -1  # the quorum is electing
    broker.on_leader_change(20)
    assert len(port.sent_of(EnvelopeRequest)) == 1
    port.leader_id = 101
    broker.on_leader_change(30)
    second = port.last(EnvelopeRequest)
    assert second is not first and second.destination == 101 and second.message == first.message
    second.reply(controller_answer(second.message, ALTER_OK))
    assert port.responses == [("c", 1, ALTER_OK)]
    m = broker.metrics()
    assert m["forwarding.retries_total"] == 1
    assert m["forwarding.queue_time_ms_max"] >= 20  # waited from 10 to 30 for the new controller


def test_not_controller_from_the_same_controller_is_retried_after_backoff():
    broker, port = online(timeout_ms=10_000, backoff_ms=50)
    broker.on_tick(100)
    broker.handle_request(100, CTX, "c", 1, ALTER)
    port.last(EnvelopeRequest).reply(EnvelopeResponse(ErrorCode.NOT_CONTROLLER))  # elected, not yet active
    broker.on_tick(120)
    assert len(port.sent_of(EnvelopeRequest)) == 1
    broker.on_tick(150)
    assert len(port.sent_of(EnvelopeRequest)) == 2
    assert port.last(EnvelopeRequest).destination == 100


def test_no_answer_is_ambiguous_never_resent_and_answered_request_timed_out():
    broker, port = online(timeout_ms=10_000)
    broker.handle_request(10, CTX, "c", 3, ALTER)
    port.last(EnvelopeRequest).reply(None)  # sent, no answer: it may have been applied
    assert len(port.responses) == 1
    _, cid, response = port.responses[0]
    assert cid == 3 and codes(response) == [ErrorCode.REQUEST_TIMED_OUT]
    port.leader_id = 101
    broker.on_leader_change(20)
    broker.on_tick(5000)
    broker.on_tick(20_000)
    assert len(port.sent_of(EnvelopeRequest)) == 1  # at most once
    assert len(port.responses) == 1
    assert broker.metrics()["forwarding.timeouts_ambiguous_total"] == 1


def test_an_attempt_that_never_left_is_retried_not_answered_ambiguous():
    """No connection to the controller (just killed): the Envelope certainly was not applied, so it
    goes to the next controller like a NOT_CONTROLLER refusal, and the client gets the real answer,
    not REQUEST_TIMED_OUT."""
    broker, port = online(timeout_ms=10_000)
    broker.handle_request(10, CTX, "c", 4, ALTER)
    first = port.last(EnvelopeRequest)
    first.reply(NOT_SENT)
    assert port.responses == []
    port.leader_id = 101
    broker.on_leader_change(20)
    second = port.last(EnvelopeRequest)
    assert second is not first and second.destination == 101
    second.reply(controller_answer(second.message, ALTER_OK))
    assert port.responses == [("c", 4, ALTER_OK)]
    m = broker.metrics()
    assert m["forwarding.not_sent_total"] == 1 and m["forwarding.retries_total"] == 1
    assert m["forwarding.timeouts_ambiguous_total"] == 0


def test_deadline_while_in_flight_is_ambiguous_and_a_late_answer_is_dropped():
    broker, port = online(timeout_ms=1000)
    broker.handle_request(10, CTX, "c", 4, ALTER)
    assert 1010 in port.wakes
    broker.on_tick(1009)
    assert port.responses == []
    broker.on_tick(1010)
    (_, _, response), *rest = port.responses
    assert not rest and codes(response) == [ErrorCode.REQUEST_TIMED_OUT]
    late = port.last(EnvelopeRequest)
    late.reply(controller_answer(late.message, ALTER_OK))
    assert len(port.responses) == 1
    assert broker.metrics()["forwarding.late_answers_total"] == 1


def test_never_sent_before_the_deadline_is_a_definite_not_controller():
    broker, port = online(timeout_ms=1000)
    port.leader_id = -1
    broker.handle_request(10, CTX, "c", 5, ALTER)
    broker.on_tick(500)
    assert port.sent_of(EnvelopeRequest) == []
    broker.on_tick(1010)
    (_, _, response), *rest = port.responses
    assert not rest and codes(response) == [ErrorCode.NOT_CONTROLLER]
    port.leader_id = 100
    broker.on_leader_change(1020)
    assert port.sent_of(EnvelopeRequest) == []
    assert broker.metrics()["forwarding.timeouts_definite_total"] == 1


def test_deadline_after_only_refusals_is_definite_too():
    broker, port = online(timeout_ms=1000, backoff_ms=600)
    broker.handle_request(0, CTX, "c", 5, ALTER)
    port.last(EnvelopeRequest).reply(EnvelopeResponse(ErrorCode.NOT_CONTROLLER))
    broker.on_tick(1000)  # backing off when the deadline passes: not in flight
    (_, _, response), *_ = port.responses
    assert codes(response) == [ErrorCode.NOT_CONTROLLER]


def test_cluster_authorization_failure_becomes_unknown_server_error():
    broker, port = online()
    create = CreateTopicsRequest((CreatableTopic("a", 1, 1), CreatableTopic("b", 1, 1)))
    broker.handle_request(10, CTX, "c", 6, create)
    port.last(EnvelopeRequest).reply(EnvelopeResponse(ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
    (_, _, response), *_ = port.responses
    assert isinstance(response, CreateTopicsResponse)
    assert [(t.name, t.error_code) for t in response.topics] == [
        ("a", ErrorCode.UNKNOWN_SERVER_ERROR),
        ("b", ErrorCode.UNKNOWN_SERVER_ERROR),
    ]
    assert broker.metrics()["forwarding.authorization_failures_total"] == 1
    assert len(port.sent_of(EnvelopeRequest)) == 1


def test_inner_answers_pass_through_unchanged_including_their_errors():
    broker, port = online()
    create = CreateTopicsRequest((CreatableTopic("a", 1, 1),))
    broker.handle_request(10, CTX, "c", 8, create)
    inner = CreateTopicsResponse(
        (CreatableTopicResult("a", uuid.UUID(int=5), ErrorCode.TOPIC_ALREADY_EXISTS, "exists"),)
    )
    env = port.last(EnvelopeRequest)
    env.reply(controller_answer(env.message, inner))
    assert port.responses == [("c", 8, inner)]


def test_an_undecodable_inner_answer_is_unknown_server_error_not_a_crash():
    broker, port = online()
    creation = AclCreation(
        ResourceType.TOPIC, "t", PatternType.LITERAL, "User:bob", "*", AclOperation.READ, AclPermissionType.ALLOW
    )
    broker.handle_request(10, CTX, "c", 9, CreateAclsRequest((creation,)))
    port.last(EnvelopeRequest).reply(EnvelopeResponse(ErrorCode.NONE, b"\x00\x01garbage"))
    (_, _, response), *rest = port.responses
    assert not rest and [r.error_code for r in response.results] == [ErrorCode.UNKNOWN_SERVER_ERROR]
    assert broker.metrics()["forwarding.errors_total"] == 1


def test_remote_time_is_measured_from_send_to_answer():
    broker, port = online(timeout_ms=10_000)
    broker.handle_request(1000, CTX, "c", 1, ALTER)
    broker.on_tick(1300)  # the process calls the broker (and advances its clock) before the answer
    env = port.last(EnvelopeRequest)
    env.reply(controller_answer(env.message, ALTER_OK))
    m = broker.metrics()
    assert m["forwarding.remote_time_ms_max"] == 300 and m["forwarding.queue_time_ms_max"] == 0


def test_with_the_wire_frame_the_broker_forwards_it_as_is_and_passes_the_encoded_answer_back():
    """The real runtime gives the broker the client's frame: no encoding again on the way in, and the
    controller's encoded answer goes back as those very bytes once its header matches."""
    broker, port = online()
    frame = CODEC.encode_request(7, ALTER)
    broker.handle_request(10, RequestContext("User:alice", frame=frame), "client-a", 7, ALTER)
    env = port.last(EnvelopeRequest)
    assert env.message.request_data is frame  # the same bytes object: forwarded, not rebuilt
    reply = controller_answer(env.message, ALTER_OK)
    env.reply(reply)
    ((reply_to, cid, response),) = port.responses
    assert (reply_to, cid) == ("client-a", 7)
    assert response == EncodedResponse(reply.response_data)
    assert CODEC.decode(response.frame).message == ALTER_OK


def test_with_the_wire_frame_an_answer_whose_header_does_not_match_is_decoded_and_refused():
    broker, port = online()
    broker.handle_request(10, RequestContext("User:alice", frame=CODEC.encode_request(7, ALTER)), "c", 7, ALTER)
    env = port.last(EnvelopeRequest)
    wrong_id = EnvelopeResponse(ErrorCode.NONE, CODEC.encode_response(8, ALTER_OK))  # answers another request
    env.reply(wrong_id)
    ((_, _, response),) = port.responses
    assert response == ALTER_OK  # decoded the old way; the broker answers with the client's own id
    broker.handle_request(20, RequestContext("User:alice", frame=CODEC.encode_request(9, ALTER)), "c", 9, ALTER)
    port.last(EnvelopeRequest).reply(EnvelopeResponse(ErrorCode.NONE, b"\x00\x01garbage"))
    assert codes(port.responses[-1][2]) == [ErrorCode.UNKNOWN_SERVER_ERROR]
