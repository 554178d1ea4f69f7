"""Kafka clients nobody here wrote (confluent-kafka = librdkafka, and kafka-python) against the real
reference cluster: 3 controllers + 2 brokers as OS processes on loopback, the clients bootstrapping
from the brokers' listeners, which sniff Kafka's framing from a connection's first frame.

Each client's view (brokers, topics, partitions, configs) must match `kchaos admin`'s, which speaks
our own framing to the same ports. Bad input in Kafka's framing: an ApiVersions of an unknown version
gets UNSUPPORTED_VERSION, and a garbage frame closes only its own connection.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka.admin as ck_admin
import kafka.admin as kafka_admin
import kafka.errors as kafka_errors
import pytest
from confluent_kafka import ElectionType, KafkaError, KafkaException, TopicPartition
from confluent_kafka import TopicCollection as ck_TopicCollection

from node.client import SyncAdminClient
from node.protocol.kafka_wire import Reader
from node.runtime.local_cluster import (
    LocalCluster,
    NodeProcess,
    find_leader,
    kill_all,
    plan_cluster,
    sasl_settings,
    wait_for,
)
from tests.runtime.test_kraft_cluster import SETTINGS, wait_online

REPO = Path(__file__).resolve().parents[2]
UNSUPPORTED_VERSION = 35
TOPIC_PREFIX = "kafka-client-"


@contextlib.contextmanager
def running(
    base: Path, settings: dict[str, str], login: dict[str, str], procs: dict[int, NodeProcess] | None = None
) -> Iterator[LocalCluster]:
    """3 controllers + 2 brokers, up once each broker's image sees both brokers unfenced; every
    process is SIGKILLed by PID at the end (their logs printed when the tests failed). `procs`, when
    given, holds the processes by node id (a test that restarts one puts the new process there)."""
    plan = plan_cluster(base / "cluster", voters=3, observers=2, settings={**SETTINGS, **settings})
    procs = {} if procs is None else procs
    procs.update({spec.node_id: NodeProcess(spec).start() for spec in plan.nodes})
    passed = False
    try:
        wait_for(lambda: find_leader(plan.voters), 30, what="a leader")
        for broker in plan.brokers:
            with SyncAdminClient(broker.address, request_timeout_ms=10_000, **login) as admin:
                wait_online(admin, 2)
        yield plan
        passed = True
    finally:
        kill_all(procs.values())
        if not passed:
            for proc in procs.values():
                print(f"----- node {proc.spec.node_id} -----\n{proc.log_text()[-3000:]}")


CLUSTER_PROCESSES: dict[int, NodeProcess] = {}  # the `cluster` fixture's processes, by node id


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[LocalCluster]:
    with running(tmp_path_factory.mktemp("kafka"), {}, {}, CLUSTER_PROCESSES) as plan:
        yield plan


def kchaos_admin(plan: LocalCluster, *args: str) -> object:
    done = subprocess.run(
        [sys.executable, "-m", "harness", "admin", "--bootstrap-server", plan.brokers_bootstrap, "--json", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def our_view(plan: LocalCluster) -> dict:
    """What `kchaos admin` (our framing) says: cluster id and brokers by id."""
    cluster = kchaos_admin(plan, "cluster", "describe")
    return {
        "cluster_id": cluster["cluster_id"],
        "brokers": {b["broker_id"]: (b["host"], b["port"]) for b in cluster["brokers"] if not b.get("fenced")},
    }


def agrees(ours, theirs: object, what: str) -> None:
    """Our view (`ours()`) comes to equal the client's: each broker answers from its own image, which
    follows the metadata log a little behind the others, so the two may briefly differ."""

    def same() -> bool:
        with contextlib.suppress(Exception):
            return ours() == theirs
        return False

    with contextlib.suppress(TimeoutError):
        wait_for(same, 10, interval=0.2, what=what)
    assert ours() == theirs, what


def our_partitions(plan: LocalCluster, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
    """partition -> (leader, replicas, isr), as our admin client reads them from a broker."""
    with SyncAdminClient(plan.brokers_bootstrap) as admin:
        described = admin.describe_topics([topic])[topic]
    return {p.partition: (p.leader, sorted(p.replicas), sorted(p.isr)) for p in described.partitions}


def our_config(plan: LocalCluster, topic: str) -> dict[str, str | None]:
    from node.client import ConfigResource

    with SyncAdminClient(plan.brokers_bootstrap) as admin:
        return admin.describe_config(ConfigResource.topic(topic), linearizable=False)


# --- confluent-kafka (librdkafka) ------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")  # on purpose: legacy
def test_confluent_kafka_admin(cluster):
    view = our_view(cluster)
    admin = ck_admin.AdminClient({"bootstrap.servers": cluster.brokers_bootstrap})

    metadata = admin.list_topics(timeout=10)
    assert {b.id: (b.host, b.port) for b in metadata.brokers.values()} == view["brokers"]
    assert metadata.cluster_id == view["cluster_id"]
    assert metadata.controller_id in view["brokers"]  # a broker, as in Kafka's KRaft mode

    described = admin.describe_cluster().result(10)
    assert described.cluster_id == view["cluster_id"]
    assert {n.id: (n.host, n.port) for n in described.nodes} == view["brokers"]
    assert described.controller.id in view["brokers"]

    topic = TOPIC_PREFIX + "ck"
    futures = admin.create_topics([ck_admin.NewTopic(topic, 3, 2, config={"cleanup.policy": "compact"})])
    assert futures[topic].result(10) is None
    again = admin.create_topics([ck_admin.NewTopic(topic, 1, 1)])
    with pytest.raises(Exception) as caught:
        again[topic].result(10)
    assert "TOPIC_ALREADY_EXISTS" in str(caught.value)

    def partitions():
        md = admin.list_topics(topic=topic, timeout=10).topics[topic]
        if md.error is not None or len(md.partitions) != 3:
            return None
        return {p.id: (p.leader, sorted(p.replicas), sorted(p.isrs)) for p in md.partitions.values()}

    theirs = wait_for(partitions, 10, what="the topic in librdkafka's metadata")
    agrees(lambda: our_partitions(cluster, topic), theirs, "partitions")
    # describe_topics (librdkafka sends Metadata v12 with the topic named)
    described_topic = admin.describe_topics(ck_TopicCollection([topic]))[topic].result(10)
    assert {
        p.id: (p.leader.id, sorted(n.id for n in p.replicas), sorted(n.id for n in p.isr))
        for p in described_topic.partitions
    } == theirs

    resource = ck_admin.ConfigResource(ck_admin.ResourceType.TOPIC, topic)
    configs = admin.describe_configs([resource])[resource].result(10)
    assert configs["cleanup.policy"].value == "compact"

    resource.add_incremental_config(
        ck_admin.ConfigEntry("cleanup.policy", "delete", incremental_operation=ck_admin.AlterConfigOpType.APPEND)
    )
    resource.add_incremental_config(
        ck_admin.ConfigEntry("retention.ms", "60000", incremental_operation=ck_admin.AlterConfigOpType.SET)
    )
    admin.incremental_alter_configs([resource])[resource].result(10)
    keys = ("cleanup.policy", "retention.ms")

    def theirs_configs() -> dict[str, str] | None:
        fresh = ck_admin.ConfigResource(ck_admin.ResourceType.TOPIC, topic)
        found = admin.describe_configs([fresh])[fresh].result(10)
        values = {k: found[k].value for k in keys if k in found}
        return values if values.get("retention.ms") == "60000" else None

    theirs_now = wait_for(theirs_configs, 10, what="the alter in librdkafka's view")
    assert theirs_now == {"cleanup.policy": "compact,delete", "retention.ms": "60000"}
    agrees(lambda: {k: our_config(cluster, topic).get(k) for k in keys}, theirs_now, "configs")

    # legacy AlterConfigs replaces the topic's whole dynamic config
    legacy = ck_admin.ConfigResource(ck_admin.ResourceType.TOPIC, topic, set_config={"retention.ms": "5000"})
    assert admin.alter_configs([legacy])[legacy].result(10) is None
    replaced = {"cleanup.policy": "delete", "retention.ms": "5000"}  # cleanup.policy is back to its default
    agrees(lambda: {k: our_config(cluster, topic).get(k) for k in keys}, replaced, "configs replaced")

    assert admin.delete_topics([topic])[topic].result(10) is None
    wait_for(lambda: topic not in admin.list_topics(timeout=10).topics, 10, what="the topic gone")
    agrees(lambda: topic in kchaos_admin(cluster, "topics", "--list"), False, "topic deleted")


# --- kafka-python --------------------------------------------------------------------------------


def test_kafka_python_admin(cluster):
    view = our_view(cluster)
    admin = kafka_admin.KafkaAdminClient(bootstrap_servers=cluster.brokers_bootstrap.split(","))
    try:
        described = admin.describe_cluster()
        assert described["cluster_id"] == view["cluster_id"]
        assert {b["broker_id"]: (b["host"], b["port"]) for b in described["brokers"]} == view["brokers"]
        assert described["controller_id"] in view["brokers"]

        topic = TOPIC_PREFIX + "kp"
        created = admin.create_topics([kafka_admin.NewTopic(topic, 2, 2)])
        assert [(t["name"], t["error_code"], t["num_partitions"]) for t in created["topics"]] == [(topic, 0, 2)]
        wait_for(lambda: topic in admin.list_topics(), 10, what="the topic in kafka-python's list")
        agrees(lambda: topic in kchaos_admin(cluster, "topics", "--list"), True, "topic listed")

        described_topics = admin.describe_topics([topic])
        [meta] = described_topics
        theirs = {
            p["partition_index"]: (p["leader_id"], sorted(p["replica_nodes"]), sorted(p["isr_nodes"]))
            for p in meta["partitions"]
        }
        agrees(lambda: our_partitions(cluster, topic), theirs, "partitions")

        def alter(configs: dict) -> None:
            resource = kafka_admin.ConfigResource(kafka_admin.ConfigResourceType.TOPIC, topic, configs=configs)
            result = admin.alter_configs([resource], raise_on_unknown=False, incremental=True)
            assert result == {"topic": {topic: "OK"}}

        def described() -> dict[str, str]:
            resource = kafka_admin.ConfigResource(kafka_admin.ConfigResourceType.TOPIC, topic)
            found = admin.describe_configs([resource])["topic"][topic]
            return {key: entry["value"] for key, entry in found.items()}

        op = kafka_admin.AlterConfigOp
        alter({"retention.ms": "1234", "cleanup.policy": (op.APPEND, "compact")})
        wait_for(lambda: described().get("retention.ms") == "1234", 10, what="the alter applied")
        assert described() == {"retention.ms": "1234", "cleanup.policy": "delete,compact"}
        keys = ("retention.ms", "cleanup.policy")
        agrees(lambda: {k: our_config(cluster, topic).get(k) for k in keys}, described(), "configs")
        alter({"retention.ms": (op.DELETE, None), "cleanup.policy": (op.SUBTRACT, "delete")})
        wait_for(lambda: "retention.ms" not in described(), 10, what="the delete applied")
        assert described() == {"cleanup.policy": "compact"}
        agrees(lambda: our_config(cluster, topic)["cleanup.policy"], "compact", "subtracted")

        admin.delete_topics([topic])
        wait_for(lambda: topic not in admin.list_topics(), 10, what="the topic gone")
    finally:
        admin.close()


# --- bad input in Kafka's framing ----------------------------------------------------------------


def kafka_request(api_key: int, version: int, correlation_id: int, body: bytes = b"", flexible: bool = False) -> bytes:
    client_id = b"raw-test"
    header = struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id
    if flexible:
        header += b"\x00"  # no tagged fields
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def read_frame(sock: socket.socket) -> bytes:
    def exactly(n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return data

    (length,) = struct.unpack(">i", exactly(4))
    return exactly(length)


def closed_by_peer(sock: socket.socket) -> bool:
    sock.settimeout(10)
    with contextlib.suppress(ConnectionResetError):
        return sock.recv(1) == b""
    return True


def test_unsupported_version_and_garbage(cluster):
    host, port = cluster.brokers[0].address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(kafka_request(18, 99, 7, b"\x00\x00\x00", flexible=True))
        answer = read_frame(s)
        correlation_id, error, count = struct.unpack_from(">ihi", answer)
        assert (correlation_id, error) == (7, UNSUPPORTED_VERSION)
        keys = {struct.unpack_from(">hhh", answer, 10 + 6 * i) for i in range(count)}
        assert (18, 0, 3) in keys and (3, 0, 12) in keys
        # the same connection still works: ApiVersions v0 now succeeds
        s.sendall(kafka_request(18, 0, 8))
        assert struct.unpack_from(">ih", read_frame(s)) == (8, 0)
        # a version of Metadata not served closes the connection, as Kafka's broker does
        s.sendall(kafka_request(3, 99, 9, b"\x00" * 8, flexible=True))
        assert closed_by_peer(s)

    with socket.create_connection((host, int(port)), timeout=10) as bystander:
        bystander.sendall(kafka_request(18, 3, 1, b"\x01\x01\x00", flexible=True))
        assert struct.unpack_from(">ih", read_frame(bystander)) == (1, 0)
        with socket.create_connection((host, int(port)), timeout=10) as bad:
            bad.sendall(kafka_request(18, 3, 1, b"\x01\x01\x00", flexible=True))
            read_frame(bad)
            bad.sendall(struct.pack(">i", 12) + b"\xff" * 12)  # an API key nobody serves
            assert closed_by_peer(bad)
        bystander.sendall(kafka_request(18, 3, 2, b"\x01\x01\x00", flexible=True))
        assert struct.unpack_from(">ih", read_frame(bystander)) == (2, 0)
    assert our_view(cluster)["brokers"]  # our own framing on the same port still answers


def test_a_controller_listener_speaks_kafka_too(cluster):
    """Kafka serves the admin APIs on its controllers' listener (KIP-919); so does the cluster, and its
    Metadata there lists the controllers, not the brokers."""
    host, port = cluster.voters[0].address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(kafka_request(18, 3, 5, b"\x01\x01\x00", flexible=True))
        correlation_id, error, count = struct.unpack_from(">ihB", read_frame(s))
        assert (correlation_id, error) == (5, 0) and count - 1 >= 7
        s.sendall(kafka_request(3, 1, 6, struct.pack(">i", -1)))  # Metadata v1, every topic
        answer = read_frame(s)
        assert struct.unpack_from(">i", answer) == (6,)
        assert struct.unpack_from(">i", answer, 4)[0] == len(cluster.voters)  # the voters (KIP-919's view)


def test_confluent_kafka_bootstrapped_on_the_controllers_talks_to_the_active_one(cluster):
    """The config workloads' linearizable reads through librdkafka (workloads/kafka_client.py): an
    AdminClient bootstrapped on the controller listeners sees the voters and the active controller,
    so its DescribeConfigs goes to the controller that answers after a read barrier."""
    admin = ck_admin.AdminClient({"bootstrap.servers": ",".join(v.address for v in cluster.voters)})
    leader = find_leader(cluster.voters)["leader_id"]
    described = admin.describe_cluster().result(10)
    assert {n.id: f"{n.host}:{n.port}" for n in described.nodes} == {v.node_id: v.address for v in cluster.voters}
    assert described.controller.id == leader
    topic = TOPIC_PREFIX + "via-controllers"
    assert admin.create_topics([ck_admin.NewTopic(topic, 1, 1)])[topic].result(10) is None
    resource = ck_admin.ConfigResource(ck_admin.ResourceType.TOPIC, topic)
    resource.add_incremental_config(
        ck_admin.ConfigEntry("retention.ms", "4321", incremental_operation=ck_admin.AlterConfigOpType.SET)
    )
    assert admin.incremental_alter_configs([resource])[resource].result(10) is None
    [read] = admin.describe_configs([ck_admin.ConfigResource(ck_admin.ResourceType.TOPIC, topic)]).values()
    assert read.result(10)["retention.ms"].value == "4321"  # at the active controller: no image lag


def test_answers_leave_in_request_order(cluster):
    """A forwarded write (CreateTopics) answers after a read (Metadata) sent behind it would; Kafka
    clients match answers to requests in order, so the read's answer waits for the write's."""
    name = b"kafka-client-order"
    create = struct.pack(">ih", 1, len(name)) + name + struct.pack(">ihiii", 1, 1, 0, 0, 10_000)
    metadata = struct.pack(">i", -1)
    host, port = cluster.brokers[0].address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(kafka_request(18, 0, 1))
        read_frame(s)
        s.sendall(kafka_request(19, 0, 2, create) + kafka_request(3, 1, 3, metadata))
        first, second = read_frame(s), read_frame(s)
    assert struct.unpack_from(">i", first) == (2,)
    assert struct.unpack_from(">i", second) == (3,)
    # CreateTopics v0: [topic: name, error_code]
    assert struct.unpack_from(f">ih{len(name)}sh", first, 4) == (1, len(name), name, 0)


# --- SASL/PLAIN and the authorizer ---------------------------------------------------------------

USERS = {"admin": "admin-secret", "alice": "alice-secret"}


@pytest.fixture(scope="module")
def sasl_cluster(tmp_path_factory) -> Iterator[LocalCluster]:
    """The same cluster with SASL/PLAIN on every listener and the authorizer on; `admin` is a super
    user (the nodes log in as it), `alice` has no ACLs."""
    login = {"username": "admin", "password": USERS["admin"]}
    with running(tmp_path_factory.mktemp("kafka-sasl"), sasl_settings(USERS, "admin"), login) as plan:
        yield plan


def ck_sasl(plan: LocalCluster, user: str, password: str) -> ck_admin.AdminClient:
    return ck_admin.AdminClient(
        {
            "bootstrap.servers": plan.brokers_bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": user,
            "sasl.password": password,
        }
    )


def kp_sasl(plan: LocalCluster, user: str, password: str, **more: int) -> kafka_admin.KafkaAdminClient:
    return kafka_admin.KafkaAdminClient(
        bootstrap_servers=plan.brokers_bootstrap.split(","),
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_plain_username=user,
        sasl_plain_password=password,
        **more,
    )


def test_sasl_plain_with_each_client(sasl_cluster):
    topic = TOPIC_PREFIX + "sasl"
    admin = ck_sasl(sasl_cluster, "admin", USERS["admin"])
    assert admin.create_topics([ck_admin.NewTopic(topic, 1, 2)])[topic].result(10) is None
    wait_for(lambda: topic in admin.list_topics(timeout=10).topics, 10, what="the topic")

    kp = kp_sasl(sasl_cluster, "admin", USERS["admin"])
    try:
        assert {b["broker_id"] for b in kp.describe_cluster()["brokers"]} == {b.node_id for b in sasl_cluster.brokers}
        wait_for(lambda: topic in kp.list_topics(), 10, what="the topic in kafka-python's list")
    finally:
        kp.close()

    # alice authenticates but holds no ACLs: she sees no topics and may not create one
    alice = ck_sasl(sasl_cluster, "alice", USERS["alice"])
    assert topic not in alice.list_topics(timeout=10).topics
    with pytest.raises(ck_admin.KafkaException) as caught:
        alice.create_topics([ck_admin.NewTopic(TOPIC_PREFIX + "alice", 1, 1)])[TOPIC_PREFIX + "alice"].result(10)
    assert "AUTHORIZATION_FAILED" in str(caught.value)


def test_a_wrong_password_is_refused(sasl_cluster, caplog):
    errors: list = []
    bad = ck_admin.AdminClient(
        {
            "bootstrap.servers": sasl_cluster.brokers_bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "admin",
            "sasl.password": "wrong",
            "error_cb": errors.append,
            "log_level": 0,  # the failures are asserted, not printed
        }
    )
    with pytest.raises(ck_admin.KafkaException):
        bad.list_topics(timeout=3)
    bad.poll(1)  # serves error_cb
    assert any(e.code() == KafkaError._AUTHENTICATION and "Invalid username or password" in e.str() for e in errors)
    with caplog.at_level(logging.WARNING, logger="kafka"), pytest.raises(kafka_errors.KafkaTimeoutError):
        kp_sasl(
            sasl_cluster, "admin", "wrong", bootstrap_timeout_ms=3000
        )  # kafka-python keeps trying until its bootstrap times out
    assert any("SaslAuthenticationFailedError" in r.getMessage() for r in caplog.records)


def our_acls(plan: LocalCluster) -> set[tuple[str, str, str, str, str, str]]:
    """(resource type, name, principal, host, operation, permission) of every ACL, per `kchaos admin`."""
    listed = kchaos_admin(plan, "--user", "admin", "--password", USERS["admin"], "acls", "--list")
    keys = ("resource_type", "resource_name", "principal", "host", "operation", "permission")
    return {tuple(acl[k] for k in keys) for acl in listed}  # type: ignore[misc]


def ck_acls(admin: ck_admin.AdminClient, principal: str) -> set[tuple[str, str, str, str, str, str]]:
    only = ck_admin.AclBindingFilter(
        ck_admin.ResourceType.ANY,
        None,
        ck_admin.ResourcePatternType.ANY,
        principal,
        None,
        ck_admin.AclOperation.ANY,
        ck_admin.AclPermissionType.ANY,
    )
    return {
        (b.restype.name, b.name, b.principal, b.host, b.operation.name, b.permission_type.name)
        for b in admin.describe_acls(only).result(10)
    }


def test_acls_with_each_client(sasl_cluster):
    """librdkafka grants alice Describe on a topic (she then sees it), kafka-python grants her
    DescribeConfigs; each client lists what `kchaos admin` lists; kafka-python deletes them all."""
    topic = TOPIC_PREFIX + "acl"
    admin = ck_sasl(sasl_cluster, "admin", USERS["admin"])
    assert admin.create_topics([ck_admin.NewTopic(topic, 1, 1)])[topic].result(10) is None
    binding = ck_admin.AclBinding(
        ck_admin.ResourceType.TOPIC,
        topic,
        ck_admin.ResourcePatternType.LITERAL,
        "User:alice",
        "*",
        ck_admin.AclOperation.DESCRIBE,
        ck_admin.AclPermissionType.ALLOW,
    )
    assert admin.create_acls([binding])[binding].result(10) is None
    alice = ck_sasl(sasl_cluster, "alice", USERS["alice"])
    wait_for(lambda: topic in alice.list_topics(timeout=10).topics, 10, what="alice sees the topic")

    kp = kp_sasl(sasl_cluster, "admin", USERS["admin"])
    try:
        pattern = kafka_admin.ResourcePattern(kafka_admin.ResourceType.TOPIC, topic)
        acl = kafka_admin.ACL(
            "User:alice", "*", kafka_admin.ACLOperation.DESCRIBE_CONFIGS, kafka_admin.ACLPermissionType.ALLOW, pattern
        )
        created = kp.create_acls([acl])
        assert (len(created["succeeded"]), created["failed"]) == (1, [])
        expected = {
            ("TOPIC", topic, "User:alice", "*", "DESCRIBE", "ALLOW"),
            ("TOPIC", topic, "User:alice", "*", "DESCRIBE_CONFIGS", "ALLOW"),
        }
        agrees(lambda: ck_acls(admin, "User:alice"), expected, "librdkafka's ACLs")
        agrees(lambda: our_acls(sasl_cluster), expected, "our ACLs")
        kp_filter = kafka_admin.ACLFilter(
            principal="User:alice",
            host="*",
            operation=kafka_admin.ACLOperation.ANY,
            permission_type=kafka_admin.ACLPermissionType.ANY,
            resource_pattern=kafka_admin.ResourcePatternFilter(
                kafka_admin.ResourceType.ANY, None, kafka_admin.ACLResourcePatternType.ANY
            ),
        )
        acls, error = kp.describe_acls(kp_filter)
        assert error is kafka_errors.NoError
        assert {(a.resource_pattern.resource_name, a.operation.name) for a in acls} == {
            (topic, "DESCRIBE"),
            (topic, "DESCRIBE_CONFIGS"),
        }
        [(_, deleted, error)] = kp.delete_acls([kp_filter])
        assert error is kafka_errors.NoError and len(deleted) == 2
    finally:
        kp.close()
    agrees(lambda: ck_acls(admin, "User:alice"), set(), "librdkafka's ACLs deleted")
    agrees(lambda: our_acls(sasl_cluster), set(), "our ACLs deleted")


def test_elect_leaders_needs_alter_on_the_cluster(sasl_cluster):
    """ElectLeaders through librdkafka as a principal without Alter on the cluster: refused with
    CLUSTER_AUTHORIZATION_FAILED (forwarded, judged by the controller as the client)."""
    alice = ck_sasl(sasl_cluster, "alice", USERS["alice"])
    tp = TopicPartition(TOPIC_PREFIX + "not-alices", 0)
    with pytest.raises(KafkaException) as refused:  # the top-level error code fails the whole call
        alice.elect_leaders(ElectionType.PREFERRED, [tp]).result(20)
    assert refused.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED, refused.value


def test_describe_quorum_in_kafka_framing(cluster):
    """DescribeQuorum v1 (what kafka-metadata-quorum.sh sends) on a broker and on a controller."""
    topic = b"\x13__cluster_metadata"  # compact string
    body = b"\x02" + topic + b"\x02" + struct.pack(">i", 0) + b"\x00" + b"\x00" + b"\x00"
    leader = find_leader(cluster.voters)
    answers = []
    for node in (cluster.brokers[0], cluster.voters[0]):
        host, port = node.address.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as s:
            s.sendall(kafka_request(18, 3, 1, b"\x01\x01\x00", flexible=True))
            read_frame(s)
            s.sendall(kafka_request(55, 1, 2, body, flexible=True))
            answers.append(read_frame(s))
    for answer in answers:
        r = Reader(answer, 4)
        r.tagged_fields()  # response header v1
        assert r.int("int16") == 0 and r.uvarint() == 2 and r.string(True) == "__cluster_metadata"
        assert r.uvarint() == 2 and (r.int("int32"), r.int("int16")) == (0, 0)
        leader_id, epoch = r.int("int32"), r.int("int32")
        assert leader_id == leader["leader_id"] and epoch >= leader["epoch"]
        r.int("int64")  # high watermark
        voters = [
            (r.int("int32"), r.int("int64"), r.int("int64"), r.int("int64"), r.tagged_fields())[0]
            for _ in range(r.uvarint() - 1)
        ]
        observers = [
            (r.int("int32"), r.int("int64"), r.int("int64"), r.int("int64"), r.tagged_fields())[0]
            for _ in range(r.uvarint() - 1)
        ]
        assert sorted(voters) == [v.node_id for v in cluster.voters]
        assert sorted(observers) == [b.node_id for b in cluster.brokers]


def test_describe_topic_partitions_in_kafka_framing(cluster):
    """DescribeTopicPartitions v0 (what Kafka 4's kafka-topics.sh --describe sends): every partition."""
    with SyncAdminClient(cluster.brokers_bootstrap) as admin:
        if "kafka-client-dtp" not in admin.describe_topics(None):
            admin.create_topic("kafka-client-dtp", 2, 2)
    ours = wait_for(lambda: _swallow(lambda: our_partitions(cluster, "kafka-client-dtp")), 10, what="the topic")
    host, port = cluster.brokers[0].address.rsplit(":", 1)
    body = b"\x02" + b"\x11kafka-client-dtp" + b"\x00" + struct.pack(">i", 2000) + b"\xff" + b"\x00"

    def ask() -> dict[int, tuple[int, list[int], list[int]]] | None:
        with socket.create_connection((host, int(port)), timeout=10) as s:
            s.sendall(kafka_request(18, 3, 1, b"\x01\x01\x00", flexible=True))
            read_frame(s)
            s.sendall(kafka_request(75, 0, 2, body, flexible=True))
            r = Reader(read_frame(s), 4)
        r.tagged_fields()
        assert r.int("int32") == 0 and r.uvarint() == 2  # throttle, one topic
        if r.int("int16") != 0:
            return None  # not in this broker's image yet
        assert r.string(True) == "kafka-client-dtp"
        r.take(17)  # topic id, is_internal
        partitions = {}
        for _ in range(r.uvarint() - 1):
            error, index, leader, _epoch = r.int("int16"), r.int("int32"), r.int("int32"), r.int("int32")
            replicas = [r.int("int32") for _ in range(r.uvarint() - 1)]
            isr = [r.int("int32") for _ in range(r.uvarint() - 1)]
            assert error == 0 and r.uvarint() == 0 and r.uvarint() == 0  # ELR and last known ELR: null
            assert r.uvarint() == 1  # no offline replicas
            r.tagged_fields()
            partitions[index] = (leader, sorted(replicas), sorted(isr))
        return partitions

    assert wait_for(ask, 10, what="the topic on the broker") == ours


def test_confluent_kafka_elect_leaders_after_a_broker_restart(cluster):
    """KIP-460 through librdkafka: a restarted broker is back in the ISR but no longer leads its
    preferred partition; a preferred election moves the leadership back (forwarded by a broker to the
    active controller), and librdkafka's, our client's and `kchaos admin`'s views agree. Runs last in
    the module: it restarts a broker (and waits until both are online again)."""
    topic = TOPIC_PREFIX + "elect"
    first, second = (b.node_id for b in cluster.brokers)
    with SyncAdminClient(cluster.brokers_bootstrap) as admin:
        admin.create_topic(topic, assignments={0: [first, second]})
    settled = (first, [first, second], [first, second])
    assert wait_for(lambda: _swallow(lambda: our_partitions(cluster, topic)) == {0: settled}, 20, what="the topic")

    spec = next(b for b in cluster.brokers if b.node_id == first)
    CLUSTER_PROCESSES[first].stop()  # SIGTERM: a controlled shutdown hands its leaderships over
    CLUSTER_PROCESSES[first] = NodeProcess(spec).start()
    with SyncAdminClient(cluster.brokers_bootstrap, request_timeout_ms=10_000) as admin:
        wait_online(admin, 2)
    moved = (second, [first, second], [first, second])  # back in the ISR, not leading
    assert wait_for(lambda: _swallow(lambda: our_partitions(cluster, topic)) == {0: moved}, 30, what="the ISR")

    admin = ck_admin.AdminClient({"bootstrap.servers": cluster.brokers_bootstrap})
    tp = TopicPartition(topic, 0)
    assert admin.elect_leaders(ElectionType.PREFERRED, [tp]).result(20) == {tp: None}
    agrees(lambda: our_partitions(cluster, topic), {0: settled}, "the preferred replica leads again")

    def theirs() -> tuple[int, list[int], list[int]]:
        p = admin.list_topics(topic, timeout=10).topics[topic].partitions[0]
        return p.leader, sorted(p.replicas), sorted(p.isrs)

    agrees(theirs, settled, "librdkafka sees the new leader")
    described = kchaos_admin(cluster, "topics", "--describe", "--topic", topic)
    assert [(p["leader"], sorted(p["isr"])) for p in described[0]["partitions"]] == [(first, [first, second])]

    # Again: nothing to do (ELECTION_NOT_NEEDED), through librdkafka and through `kchaos admin`.
    again = admin.elect_leaders(ElectionType.PREFERRED, [tp]).result(20)[tp]  # per partition, not raised
    assert isinstance(again, KafkaError) and again.code() == KafkaError.ELECTION_NOT_NEEDED, again
    kp = kafka_admin.KafkaAdminClient(bootstrap_servers=cluster.brokers_bootstrap.split(","))
    try:
        answer = kp.elect_leaders(0, {topic: [0]}, raise_errors=False)
    finally:
        kp.close()
    results = [
        (r.topic, p.partition_id, p.error_code) for r in answer.replica_election_results for p in r.partition_result
    ]
    assert (answer.API_VERSION, answer.error_code, results) == (2, 0, [(topic, 0, KafkaError.ELECTION_NOT_NEEDED)])
    ours = kchaos_admin(cluster, "leader-election", "--election-type", "unclean", "--topic", topic, "--partition", "0")
    assert [(r["topic"], r["partition"], r["error"]["code"]) for r in ours] == [(topic, 0, 84)]


def _swallow(call):  # type: ignore[no-untyped-def]
    with contextlib.suppress(Exception):
        return call()
    return None
