"""The admin client against real sockets: scripted servers (tests/client/fake_cluster.py) stand in for the
cluster, so each answer, silence and dropped connection can be chosen; the end-to-end tests against the
real cluster live with the cluster's tests."""

from __future__ import annotations

import asyncio
import inspect
import uuid
from collections.abc import Iterator

import pytest

from node.client import AdminClient, AlterConfigOp, ConfigResource, NewTopic, PartitionChange, SyncAdminClient
from node.client import errors as E
from node.client.results import AclBinding, AclFilter
from node.protocol import acls as A
from node.protocol import admin as M
from node.protocol import broker_api as B
from node.protocol.errors import ErrorCode
from node.protocol.registry import BROKER_API_KEYS, CONTROLLER_API_KEYS
from node.runtime.local_cluster import unused_address
from tests.client.answers import TOPIC_ID, altered, cluster_answer, created
from tests.client.fake_cluster import CLOSE, HANG, FakeCluster

SHORT = {"request_timeout_ms": 400, "connect_timeout_ms": 400, "retry_backoff_ms": 20}


@pytest.fixture
def cluster() -> Iterator[FakeCluster]:
    with FakeCluster() as c:
        yield c


def run(coro):
    return asyncio.run(coro)


async def with_client(servers: str, body, **options):
    async with AdminClient(servers, **{**SHORT, **options}) as admin:
        return await body(admin)


# --- happy paths and conversions -----------------------------------------------------------------------


def test_create_topic_sends_the_request_and_returns_the_topic_id(cluster):
    server = cluster.add(created)
    topic_id = run(with_client(server.address, lambda a: a.create_topic("t", 3, 3, configs={"retention.ms": "5"})))
    assert topic_id == TOPIC_ID
    [request] = server.requests(M.CreateTopicsRequest)
    assert request.topics == (M.CreatableTopic("t", 3, 3, (), (("retention.ms", "5"),)),)
    assert server.received[0].principal == "User:ANONYMOUS"


def test_explicit_assignment_replaces_the_counts(cluster):
    server = cluster.add(created)
    run(with_client(server.address, lambda a: a.create_topics([NewTopic("t", assignments={1: [2, 3], 0: [1, 2]})])))
    [request] = server.requests(M.CreateTopicsRequest)
    topic = request.topics[0]
    assert (topic.num_partitions, topic.replication_factor) == (-1, -1)
    assert topic.assignments == (M.CreatableReplicaAssignment(0, (1, 2)), M.CreatableReplicaAssignment(1, (2, 3)))


def test_per_resource_errors_are_typed_and_definite(cluster):
    def answer(request):
        return M.CreateTopicsResponse(
            (
                M.CreatableTopicResult("a", TOPIC_ID, ErrorCode.NONE),
                M.CreatableTopicResult("b", TOPIC_ID, ErrorCode.TOPIC_ALREADY_EXISTS, "exists"),
            )
        )

    server = cluster.add(answer)
    results = run(with_client(server.address, lambda a: a.create_topics([NewTopic("a"), NewTopic("b"), NewTopic("c")])))
    assert results["a"].ok
    assert isinstance(results["b"].error, E.TopicAlreadyExistsError) and results["b"].error.definite
    assert results["b"].error.resource == "topic:b"
    # the answer left "c" out: its fate is unknown
    assert isinstance(results["c"].error, E.ProtocolError) and not results["c"].error.definite
    with pytest.raises(E.TopicAlreadyExistsError):
        run(with_client(server.address, lambda a: a.create_topic("b")))


def test_request_timed_out_from_a_forwarding_broker_is_indefinite(cluster):
    server = cluster.add(lambda r: altered(r, ErrorCode.REQUEST_TIMED_OUT))
    resource = ConfigResource.topic("t")
    with pytest.raises(E.RequestTimedOutError) as caught:
        run(with_client(server.address, lambda a: a.incremental_alter_config(resource, [AlterConfigOp.set("k", "v")])))
    assert not caught.value.definite


def test_incremental_alter_configs_carries_every_operation(cluster):
    server = cluster.add(altered)
    ops = [
        AlterConfigOp.set("a", "1"),
        AlterConfigOp.delete("b"),
        AlterConfigOp.append("c", "x"),
        AlterConfigOp.subtract("d", "y"),
    ]
    results = run(with_client(server.address, lambda a: a.incremental_alter_configs({ConfigResource.broker(2): ops})))
    assert results[ConfigResource.broker(2)].ok
    [request] = server.requests(M.IncrementalAlterConfigsRequest)
    assert request.resources[0].resource_type == M.ConfigResourceType.BROKER
    assert request.resources[0].resource_name == "2"
    assert [(c.name, c.config_operation, c.value) for c in request.resources[0].configs] == [
        ("a", M.ConfigOperation.SET, "1"),
        ("b", M.ConfigOperation.DELETE, None),
        ("c", M.ConfigOperation.APPEND, "x"),
        ("d", M.ConfigOperation.SUBTRACT, "y"),
    ]


def test_describe_configs_returns_entries_and_the_metadata_offset(cluster):
    def answer(request):
        r = request.resources[0]
        configs = (M.DescribeConfigsResourceResult("retention.ms", "5", False, M.ConfigSource.DYNAMIC_TOPIC_CONFIG),)
        return M.DescribeConfigsResponse(
            (M.DescribeConfigsResult(0, None, r.resource_type, r.resource_name, configs),), 42
        )

    server = cluster.add(answer)
    described = run(with_client(server.address, lambda a: a.describe_configs([ConfigResource.topic("t")])))
    assert described.metadata_offset == 42 and described.server == server.address
    assert described.resources[ConfigResource.topic("t")].values() == {"retention.ms": "5"}


def test_cluster_view_brokers_with_fenced_state_and_epochs(cluster):
    server = cluster.add(lambda r: cluster_answer())
    brokers = run(with_client(server.address, lambda a: a.list_brokers()))
    assert [(b.broker_id, b.state, b.epoch, b.rack) for b in brokers] == [
        (4, "fenced", 12, "r1"),
        (5, "online", 40, None),
    ]
    [request] = server.requests(M.DescribeClusterRequest)
    assert request.include_fenced_brokers


def test_describe_topics_reports_partitions_and_unknown_topics(cluster):
    def answer(request):
        partition = M.MetadataResponsePartition(0, 0, 1, 3, (1, 2), (1,), 8)
        return M.MetadataResponse(
            (M.MetadataResponseBroker(1, "h", 1),),
            "c1",
            1,
            (
                M.MetadataResponseTopic(0, "t", TOPIC_ID, (partition,)),
                M.MetadataResponseTopic(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "gone", uuid.UUID(int=0)),
            ),
            17,
        )

    server = cluster.add(answer)
    topics = run(with_client(server.address, lambda a: a.describe_topics(["t", "gone"])))
    [p] = topics["t"].partitions
    assert (p.leader, p.leader_epoch, p.replicas, p.isr, p.partition_epoch) == (1, 3, (1, 2), (1,), 8)
    assert isinstance(topics["gone"].error, E.UnknownTopicError)


def test_acls_round_trip_through_the_wire_types(cluster):
    wire = ("TOPIC", "t", "LITERAL", "User:bob", "*", "READ", "ALLOW")
    rtype, name, pattern, principal, host, op, perm = wire
    values = (A.ResourceType[rtype], name, A.PatternType[pattern], principal, host, A.AclOperation[op])
    binding = AclBinding(*values, A.AclPermissionType[perm])
    matching = A.DeleteAclsMatchingAcl(0, None, *values, A.AclPermissionType[perm])

    def answer(request):
        if isinstance(request, A.CreateAclsRequest):
            return A.CreateAclsResponse((A.AclCreationResult(ErrorCode.NONE),))
        if isinstance(request, A.DeleteAclsRequest):
            return A.DeleteAclsResponse((A.DeleteAclsFilterResult(ErrorCode.NONE, None, (matching,)),))
        acl = A.AclDescription("User:bob", "*", A.AclOperation.READ, A.AclPermissionType.ALLOW)
        return A.DescribeAclsResponse(
            0, None, (A.DescribeAclsResource(A.ResourceType.TOPIC, "t", A.PatternType.LITERAL, (acl,)),), 5
        )

    server = cluster.add(answer)

    async def body(admin):
        return (
            await admin.create_acls([binding]),
            await admin.describe_acls(AclFilter(principal="User:bob")),
            await admin.delete_acls([AclFilter(A.ResourceType.TOPIC, "t")]),
        )

    created_, described, deleted = run(with_client(server.address, body))
    assert created_[0].ok and created_[0].binding == binding
    assert described.bindings == (binding,) and described.metadata_offset == 5
    assert deleted[0].deleted == (binding,)
    assert server.requests(A.DescribeAclsRequest)[0].principal_filter == "User:bob"
    [create] = server.requests(A.CreateAclsRequest)
    assert create.creations == (A.AclCreation(*values, A.AclPermissionType.ALLOW),)
    [delete] = server.requests(A.DeleteAclsRequest)
    assert delete.filters == (
        A.DeleteAclsFilter(
            A.ResourceType.TOPIC, "t", A.PatternType.ANY, None, None, A.AclOperation.ANY, A.AclPermissionType.ANY
        ),
    )


def test_broker_side_calls(cluster):
    topic = uuid.UUID(int=9)

    def answer(request):
        if isinstance(request, B.BrokerRegistrationRequest):
            return B.BrokerRegistrationResponse(ErrorCode.NONE, 77)
        if isinstance(request, B.BrokerHeartbeatRequest):
            return B.BrokerHeartbeatResponse(ErrorCode.NONE, True, False, False)
        return B.AlterPartitionResponse(
            ErrorCode.NONE,
            (
                B.AlterPartitionTopicResult(
                    topic,
                    (
                        B.AlterPartitionPartitionResult(0, ErrorCode.NONE, 1, 2, (1, 2), 4),
                        B.AlterPartitionPartitionResult(1, ErrorCode.INVALID_UPDATE_VERSION),
                    ),
                ),
            ),
        )

    server = cluster.add(answer, api_keys=CONTROLLER_API_KEYS)
    listener = B.Listener("PLAINTEXT", "127.0.0.9", 9092, 0)

    async def body(admin):
        epoch = await admin.register_broker(9, "c1", uuid.uuid4(), [listener])
        beat = await admin.broker_heartbeat(9, epoch, 100)
        changes = [PartitionChange(topic, 0, 2, (1, 2), 3), PartitionChange(topic, 1, 2, (1,), 3)]
        return epoch, beat, await admin.alter_partition(9, epoch, changes)

    epoch, beat, results = run(with_client(server.address, body))
    assert epoch == 77 and beat.is_caught_up and not beat.is_fenced
    assert results[(topic, 0)].isr == (1, 2) and results[(topic, 0)].partition_epoch == 4
    assert results[(topic, 1)].error.code == ErrorCode.INVALID_UPDATE_VERSION and results[(topic, 1)].error.definite
    [request] = server.requests(B.AlterPartitionRequest)
    assert [p.partition_index for p in request.topics[0].partitions] == [0, 1]


def test_stale_broker_epoch_raises_a_typed_definite_error(cluster):
    server = cluster.add(
        lambda r: B.BrokerHeartbeatResponse(ErrorCode.STALE_BROKER_EPOCH), api_keys=CONTROLLER_API_KEYS
    )
    with pytest.raises(E.StaleBrokerEpochError) as caught:
        run(with_client(server.address, lambda a: a.broker_heartbeat(1, 5, 0)))
    assert caught.value.definite and caught.value.resource == "broker:1"


# --- definite or not --------------------------------------------------------------------------------------


def test_timeout_after_sending_is_indefinite_and_a_write_is_not_resent(cluster):
    silent = cluster.add(lambda r: HANG)
    other = cluster.add(altered)
    resource = ConfigResource.topic("t")
    with pytest.raises(E.ClientTimeoutError) as caught:
        run(
            with_client(
                f"{silent.address},{other.address}",
                lambda a: a.incremental_alter_configs({resource: [AlterConfigOp.set("k", "v")]}),
            )
        )
    assert not caught.value.definite and caught.value.server == silent.address
    assert len(silent.requests(M.IncrementalAlterConfigsRequest)) == 1
    assert other.requests() == []  # at most once: never sent a second time


def test_connection_lost_after_sending_is_indefinite(cluster):
    server = cluster.add(lambda r: CLOSE)
    with pytest.raises(E.ConnectionLostError) as caught:
        run(with_client(server.address, lambda a: a.create_topic("t", 1, 1)))
    assert not caught.value.definite
    assert len(server.requests(M.CreateTopicsRequest)) == 1


def test_connection_refused_is_definite():
    address = "{}:{}".format(*unused_address())
    with pytest.raises(E.ConnectError) as caught:
        run(with_client(address, lambda a: a.create_topic("t", 1, 1)))
    assert caught.value.definite and caught.value.server == address


def test_a_refused_bootstrap_server_is_skipped(cluster):
    server = cluster.add(created)
    refused = "{}:{}".format(*unused_address())
    assert run(with_client(f"{refused},{server.address}", lambda a: a.create_topic("t"))) == TOPIC_ID


def test_a_read_moves_on_from_a_silent_server(cluster):
    silent = cluster.add(lambda r: HANG)
    good = cluster.add(lambda r: cluster_answer(3))
    description = run(
        with_client(
            f"{silent.address},{good.address}",
            lambda a: a.describe_cluster(),
            attempt_timeout_ms=100,
            request_timeout_ms=5000,
        )
    )
    assert description.controller_id == 3


def test_undecodable_answer_is_indefinite(cluster):
    server = cluster.add(lambda r: B.BrokerHeartbeatResponse(ErrorCode.NONE))  # the wrong response type
    with pytest.raises(E.ProtocolError) as caught:
        run(with_client(server.address, lambda a: a.create_topic("t")))
    assert not caught.value.definite


def test_unencodable_request_is_definite_and_not_sent(cluster):
    server = cluster.add(created)
    with pytest.raises(E.InvalidRequestError) as caught:
        run(with_client(server.address, lambda a: a.create_topic("x" * 40_000, 1, 1)))
    assert caught.value.definite and server.requests() == []


# --- finding the controller -------------------------------------------------------------------------------


def test_not_controller_fails_over_to_the_next_bootstrap_server_and_sticks(cluster):
    follower = cluster.add(lambda r: altered(r, ErrorCode.NOT_CONTROLLER), api_keys=CONTROLLER_API_KEYS)
    active = cluster.add(altered, api_keys=CONTROLLER_API_KEYS)
    resource = ConfigResource.topic("t")

    async def body(admin):
        await admin.incremental_alter_config(resource, [AlterConfigOp.set("k", "1")])
        await admin.incremental_alter_config(resource, [AlterConfigOp.set("k", "2")])

    run(with_client(f"{follower.address},{active.address}", body))
    assert len(follower.requests()) == 1  # refused once (definite, so resending elsewhere is safe)
    assert [r.resources[0].configs[0].value for r in active.requests()] == ["1", "2"]


def test_not_controller_everywhere_ends_definite_at_the_deadline(cluster):
    a = cluster.add(lambda r: altered(r, ErrorCode.NOT_CONTROLLER))
    b = cluster.add(lambda r: altered(r, ErrorCode.NOT_CONTROLLER))
    resource = ConfigResource.topic("t")
    with pytest.raises(E.NotControllerError) as caught:
        run(
            with_client(
                f"{a.address},{b.address}", lambda c: c.incremental_alter_config(resource, [AlterConfigOp.delete("k")])
            )
        )
    assert caught.value.definite
    assert len(a.requests()) >= 2 and len(b.requests()) >= 1  # retried with backoff until the deadline


def test_linearizable_describe_configs_goes_only_to_the_active_controller(cluster):
    def configs(request):
        r = request.resources[0]
        return M.DescribeConfigsResponse((M.DescribeConfigsResult(0, None, r.resource_type, r.resource_name, ()),), 3)

    def not_controller(request):
        r = request.resources[0]
        code = ErrorCode.NOT_CONTROLLER
        return M.DescribeConfigsResponse((M.DescribeConfigsResult(code, None, r.resource_type, r.resource_name),))

    broker = cluster.add(configs, api_keys=BROKER_API_KEYS)
    follower = cluster.add(not_controller, api_keys=CONTROLLER_API_KEYS)
    active = cluster.add(configs, api_keys=CONTROLLER_API_KEYS)
    servers = f"{broker.address},{follower.address},{active.address}"
    described = run(with_client(servers, lambda a: a.describe_configs([ConfigResource.topic("t")], linearizable=True)))
    assert described.server == active.address
    assert broker.requests() == [] and len(follower.requests()) == 1


def test_a_call_no_bootstrap_server_serves_fails_definitely_without_waiting(cluster):
    broker = cluster.add(lambda r: HANG, api_keys=BROKER_API_KEYS)
    with pytest.raises(E.UnsupportedApiError) as caught:
        run(with_client(broker.address, lambda a: a.broker_heartbeat(1, 1, 0), request_timeout_ms=60_000))
    assert caught.value.definite and broker.requests() == []


# --- SASL -------------------------------------------------------------------------------------------------


def test_sasl_authenticated_requests_carry_the_principal(cluster):
    server = cluster.add(created, users={"alice": "secret"})
    run(with_client(server.address, lambda a: a.create_topic("t"), username="alice", password="secret"))
    assert [r.principal for r in server.received] == ["User:alice"]


def test_sasl_failure_is_definite_and_nothing_is_sent(cluster):
    server = cluster.add(created, users={"alice": "secret"})
    other = cluster.add(created, users={"alice": "secret"})
    with pytest.raises(E.AuthenticationError) as caught:
        run(
            with_client(
                f"{server.address},{other.address}", lambda a: a.create_topic("t"), username="alice", password="nope"
            )
        )
    assert caught.value.definite and caught.value.code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert server.received == [] and other.received == []


def test_no_credentials_on_a_sasl_listener_is_a_definite_refusal(cluster):
    server = cluster.add(lambda r: cluster_answer(), users={"alice": "secret"})
    with pytest.raises(E.AuthenticationError) as caught:
        run(with_client(server.address, lambda a: a.describe_cluster()))
    assert caught.value.code == ErrorCode.ILLEGAL_SASL_STATE and caught.value.definite


def test_constructor_refuses_bad_options():
    with pytest.raises(ValueError, match="not HOST:PORT"):
        AdminClient("localhost")
    with pytest.raises(ValueError, match="both"):
        AdminClient("h:1", username="alice")
    with pytest.raises(ValueError, match="request_timeout_ms"):
        AdminClient("h:1", request_timeout_ms=0)
    with pytest.raises(ValueError, match="attempt_timeout_ms"):
        AdminClient("h:1", attempt_timeout_ms=0)


# --- the blocking client ----------------------------------------------------------------------------------


def test_sync_client_offers_every_async_method():
    public = {n for n, f in inspect.getmembers(AdminClient, inspect.iscoroutinefunction) if not n.startswith("_")}
    public -= {"close"}
    assert public <= set(dir(SyncAdminClient))
    assert {"create_topic", "describe_configs", "alter_partition"} <= public


def test_sync_client_runs_calls_in_the_callers_thread(cluster):
    server = cluster.add(created)
    with SyncAdminClient(server.address, **SHORT) as admin:
        assert admin.create_topic("t") == TOPIC_ID
        assert admin.create_topic("u") == TOPIC_ID  # the connection is reused
    assert len(server.requests()) == 2
    with pytest.raises(RuntimeError, match="closed"):
        admin.create_topic("v")
