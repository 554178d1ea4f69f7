"""Routing of the broker: reads from the image, refusals while not ONLINE, authorization, bad input."""

from __future__ import annotations

import uuid

import pytest

from node.broker import Broker, BrokerConfig, BrokerState
from node.controller.config_catalog import DEFAULTS
from node.metadata import describe
from node.process.ports import RequestContext
from node.protocol.acls import DescribeAclsRequest, DescribeAclsResponse
from node.protocol.admin import (
    AlterConfigsRequest,
    AlterConfigsResource,
    ConfigResourceType,
    CreatableTopic,
    CreateTopicsRequest,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    DescribeConfigsResource,
    MetadataRequest,
)
from node.protocol.broker_api import (
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    EnvelopeRequest,
    FetchSnapshotRequest,
    SnapshotId,
)
from node.protocol.errors import ErrorCode
from node.protocol.messages import VoteRequest
from node.protocol.replication import ReplicaHeartbeatRequest, ReplicaHeartbeatResponse
from node.security.authorizer import Authorizer
from tests.broker.fakes import CLUSTER, INCARNATION, LISTENERS, T1, FakePort, ImageBuilder, bring_online, make_broker

CLIENT = RequestContext("User:alice", "127.0.0.5")
READS = [
    DescribeConfigsRequest((DescribeConfigsResource(ConfigResourceType.TOPIC, "orders"),)),
    MetadataRequest(None),
    DescribeAclsRequest(),
    DescribeClusterRequest(True),
]


def with_topic(broker_port):
    broker, port = broker_port
    images = ImageBuilder(port.image)
    images.register(1)
    images.topic(T1, "orders", ((1,), (1,), 1))
    return broker, port


@pytest.mark.parametrize("request_", READS, ids=lambda r: type(r).__name__)
def test_reads_are_answered_from_the_image_with_its_offset(request_):
    broker, port = with_topic(make_broker(leader_id=100))
    bring_online(broker, port)
    broker.handle_request(10, CLIENT, "c", 2, request_)
    ((reply_to, cid, response),) = port.responses
    assert (reply_to, cid) == ("c", 2)
    assert response.metadata_offset == port.image.last_offset >= 0
    expected = {
        DescribeConfigsRequest: lambda: describe.describe_configs(port.image, request_, DEFAULTS),
        MetadataRequest: lambda: describe.metadata(port.image, request_, 100),
        DescribeAclsRequest: lambda: describe.describe_acls(port.image, request_),
        DescribeClusterRequest: lambda: describe.describe_cluster(port.image, request_, 100),
    }[type(request_)]()
    assert response == expected


def test_metadata_names_the_topics_and_the_controller():
    broker, port = with_topic(make_broker(leader_id=100))
    bring_online(broker, port)
    broker.handle_request(10, CLIENT, "c", 1, MetadataRequest(("orders", "nope")))
    response = port.responses[0][2]
    assert response.controller_id == 100
    assert [(t.name, t.error_code) for t in response.topics] == [
        ("orders", ErrorCode.NONE),
        ("nope", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    assert response.topics[0].topic_id == uuid.UUID(T1)


WRITE = AlterConfigsRequest((AlterConfigsResource(ConfigResourceType.TOPIC, "orders", (("a", "1"),)),))


@pytest.mark.parametrize("state", ["offline", "fenced", "stopping"])
def test_clients_get_broker_not_available_unless_online(state):
    broker, port = make_broker(leader_id=100)
    if state != "offline":
        bring_online(broker, port)
    if state == "fenced":
        broker.on_tick(60_000)
        port.last(BrokerHeartbeatRequest).reply(BrokerHeartbeatResponse(ErrorCode.NONE, True, True, False))
    if state == "stopping":
        broker.begin_shutdown(10)
    assert broker.state.name.lower() == state
    sent_before = len(port.sent)
    broker.handle_request(20, CLIENT, "c", 1, WRITE)
    broker.handle_request(20, CLIENT, "c", 2, DescribeAclsRequest())
    broker.handle_request(20, CLIENT, "c", 3, MetadataRequest(("orders",)))
    broker.handle_request(20, CLIENT, "c", 4, MetadataRequest(None))
    write, acls, named, every = (r[2] for r in port.responses)
    assert [r.error_code for r in write.responses] == [ErrorCode.BROKER_NOT_AVAILABLE]
    assert acls.error_code == ErrorCode.BROKER_NOT_AVAILABLE
    assert [t.error_code for t in named.topics] == [ErrorCode.BROKER_NOT_AVAILABLE]
    assert every.brokers == () and every.topics == () and every.metadata_offset == -1
    assert ErrorCode.BROKER_NOT_AVAILABLE.retriable
    assert port.sent_of(EnvelopeRequest) == [] and len(port.sent) == sent_before


def test_stopping_broker_still_answers_forwards_already_in_flight():
    broker, port = make_broker(leader_id=100)
    bring_online(broker, port)
    broker.handle_request(10, CLIENT, "c", 1, CreateTopicsRequest((CreatableTopic("t", 1, 1),)))
    broker.begin_shutdown(20)
    assert broker.state is BrokerState.STOPPING
    port.last(EnvelopeRequest).reply(None)
    assert len(port.responses) == 1


def authorized_broker(super_users=("User:broker",)):
    port = FakePort(node_id=1, leader_id=100)
    port.image.set_cluster_id(CLUSTER)
    with_topic((None, port))
    broker = Broker(port, BrokerConfig(node_id=1), INCARNATION, LISTENERS, CLUSTER, authorizer=Authorizer(super_users))
    bring_online(broker, port)
    return broker, port


def test_reads_are_authorized_like_the_controller_does():
    broker, port = authorized_broker()
    broker.handle_request(10, CLIENT, "c", 1, DescribeAclsRequest())
    broker.handle_request(10, CLIENT, "c", 2, MetadataRequest(None))
    broker.handle_request(10, CLIENT, "c", 3, MetadataRequest(("orders",)))
    acls, every, named = (r[2] for r in port.responses)
    assert isinstance(acls, DescribeAclsResponse) and acls.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert every.topics == ()  # left out
    assert [t.error_code for t in named.topics] == [ErrorCode.TOPIC_AUTHORIZATION_FAILED]
    broker.handle_request(10, RequestContext("User:broker"), "c", 4, MetadataRequest(None))
    assert [t.name for t in port.responses[-1][2].topics] == ["orders"]


def test_replica_heartbeats_need_cluster_action():
    broker, port = authorized_broker()
    request = ReplicaHeartbeatRequest(2, 0, 0, ())
    broker.handle_request(10, CLIENT, "forger", 1, request)
    broker.handle_request(10, RequestContext("User:broker"), "peer", 2, request)
    assert [r[2] for r in port.responses] == [
        ReplicaHeartbeatResponse(ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
        ReplicaHeartbeatResponse(ErrorCode.NONE),
    ]
    assert broker.metrics()["isr.replica_heartbeats_received_total"] == 1


def test_requests_a_broker_does_not_serve_get_invalid_request_or_nothing():
    broker, port = make_broker(leader_id=100)
    bring_online(broker, port)
    broker.handle_request(10, CLIENT, "c", 1, BrokerHeartbeatRequest(1, 1, 1))
    broker.handle_request(10, CLIENT, "c", 2, FetchSnapshotRequest(None, 1, 1, 1, SnapshotId(0, 0), 0))
    broker.handle_request(10, CLIENT, "c", 3, VoteRequest("x", 1, 1, 0, 0))
    broker.handle_request(10, CLIENT, "c", 4, object())  # no response shape: not answered, no exception
    assert [(cid, r.error_code) for _, cid, r in port.responses] == [(i, ErrorCode.INVALID_REQUEST) for i in (1, 2, 3)]
    assert port.sent_of(EnvelopeRequest) == []


def test_metrics_report_state_epoch_and_counters():
    broker, port = make_broker(leader_id=100)
    assert broker.metrics()["broker.state"] == BrokerState.OFFLINE
    bring_online(broker, port, epoch=12)
    m = broker.metrics()
    assert m["broker.state"] == BrokerState.ONLINE and m["broker.epoch"] == 12
    assert m["broker.registrations_sent_total"] == 1 and m["broker.heartbeats_sent_total"] == 1
    assert all(isinstance(v, int | float) for v in m.values())
