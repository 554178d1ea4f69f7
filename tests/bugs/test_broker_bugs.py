"""Each planted broker bug changes what the broker does; the correct broker does not."""

from __future__ import annotations

from node.bugs import Bugs
from node.process.ports import RequestContext
from node.protocol.admin import (
    AlterableConfig,
    ConfigOperation,
    ConfigResourceType,
    DescribeConfigsRequest,
    DescribeConfigsResource,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResource,
)
from node.protocol.broker_api import EnvelopeRequest
from node.protocol.errors import ErrorCode
from tests.broker.fakes import bring_online, make_broker

CTX = RequestContext("User:alice", "127.0.0.9", "PLAINTEXT", "PLAINTEXT")
ALTER = IncrementalAlterConfigsRequest(
    (
        IncrementalAlterConfigsResource(
            ConfigResourceType.TOPIC, "orders", (AlterableConfig("retention.ms", ConfigOperation.SET, "1000"),)
        ),
    )
)


def online(*names: str):
    broker, port = make_broker(leader_id=100, request_timeout_ms=5_000, bugs=Bugs(frozenset(names)))
    bring_online(broker, port, now_ms=0)
    port.sent.clear()
    return broker, port


def test_forward_resend_after_an_ambiguous_failure() -> None:
    """The Envelope was sent and the connection died without an answer: it may have been applied."""

    def envelopes_sent(*names: str) -> tuple[int, list]:
        broker, port = online(*names)
        broker.handle_request(10, CTX, "client", 7, ALTER)
        port.last(EnvelopeRequest).reply(None)
        broker.on_tick(1_000)  # past retry.backoff.ms, before the request's deadline
        return len(port.sent_of(EnvelopeRequest)), [r[2] for r in port.responses]

    count, answers = envelopes_sent()
    assert count == 1 and answers[0].responses[0].error_code == ErrorCode.REQUEST_TIMED_OUT  # at most once
    count, answers = envelopes_sent("broker-forward-resend-ambiguous")
    assert count == 2 and answers == []  # sent again: a second application if the first one committed


def test_read_reports_an_offset_its_image_has_not_applied_kafka_13836() -> None:
    def offset(*names: str) -> tuple[int, int]:
        broker, port = online(*names)
        applied = port.image.last_offset
        port.next_append_offset = lambda: applied + 6  # type: ignore[method-assign]  # fetched, not applied
        request = DescribeConfigsRequest((DescribeConfigsResource(ConfigResourceType.TOPIC, "orders", ()),))
        broker.handle_request(10, CTX, "client", 8, request)
        return port.responses[-1][2].metadata_offset, applied

    reported, applied = offset()
    assert reported == applied
    reported, applied = offset("broker-read-offset-not-applied")
    assert reported == applied + 5
