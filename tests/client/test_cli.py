"""`kchaos admin`: flag parsing, one-line errors with exit 254, and the tools against scripted servers."""

from __future__ import annotations

import json
import sys
import uuid

import pytest

from node.client.cli import register
from node.client.cli_parsing import parse_config_pairs, split_top_level
from node.protocol import acls as A
from node.protocol import admin as M
from node.protocol.errors import ErrorCode
from node.runtime.local_cluster import unused_address
from tests.client.answers import altered, cluster_answer, created
from tests.client.fake_cluster import FakeCluster
from vocab.errors import EXIT_ERROR, OneLineParser, UserError


def kchaos(argv: list[str]) -> int:
    """What harness.cli.main does once COMMANDS names node.client.cli."""
    parser = OneLineParser(prog="kchaos")
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except UserError as exc:
        print(f"kchaos: error: {exc}", file=sys.stderr)
        return EXIT_ERROR


@pytest.fixture
def cluster():
    with FakeCluster() as c:
        yield c


def one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    return lines[0]


def test_config_values_split_at_top_level_commas_only():
    assert parse_config_pairs("a=1, b=[x,y],c=", "--add-config") == [("a", "1"), ("b", "x,y"), ("c", "")]
    assert split_top_level("k1,k2", "--delete-config") == ["k1", "k2"]
    for bad, problem in (("a", "not NAME=VALUE"), ("b=[x,y", "unclosed"), ("b=x]", "unbalanced")):
        with pytest.raises(UserError, match=problem):
            parse_config_pairs(bad, "--add-config")


@pytest.mark.parametrize(
    "argv",
    [
        ["admin", "topics", "--create", "--bogus"],
        ["admin", "--bogus", "brokers", "list"],
        ["admin", "topics", "--partitions", "three", "--create"],
        ["admin", "topics", "--create", "--describe"],
        ["admin", "configs", "--describe", "--entity-type", "users"],
        ["admin"],
    ],
)
def test_a_bad_flag_is_one_line_and_exit_254(argv, capsys):
    with pytest.raises(SystemExit) as caught:
        kchaos(argv)
    assert caught.value.code == EXIT_ERROR
    assert one_line(capsys.readouterr().err).startswith("kchaos admin")


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        (["admin", "brokers", "list"], "--bootstrap-server is required"),
        (["admin", "--bootstrap-server", "nohost", "brokers", "list"], "is not HOST:PORT"),
        (["admin", "--bootstrap-server", "h:1", "--user", "alice", "brokers", "list"], "needs --password"),
        (["admin", "--bootstrap-server", "h:1", "topics", "--create"], "needs --topic"),
        (
            [
                "admin",
                "--bootstrap-server",
                "h:1",
                "configs",
                "--alter",
                "--entity-type",
                "topics",
                "--entity-name",
                "t",
            ],
            "needs --add-config",
        ),
        (
            [
                "admin",
                "--bootstrap-server",
                "h:1",
                "configs",
                "--describe",
                "--entity-type",
                "brokers",
                "--entity-name",
                "x",
            ],
            "not a number",
        ),
        (
            [
                "admin",
                "--bootstrap-server",
                "h:1",
                "acls",
                "--add",
                "--topic",
                "t",
                "--allow-principal",
                "User:a",
                "--operation",
                "Fly",
            ],
            "unknown operation 'Fly'",
        ),
        (
            [
                "admin",
                "--bootstrap-server",
                "h:1",
                "acls",
                "--add",
                "--operation",
                "Read",
                "--allow-principal",
                "alice",
                "--topic",
                "t",
            ],
            "not TYPE:NAME",
        ),
    ],
)
def test_bad_input_is_a_user_error(argv, problem, capsys, monkeypatch):
    monkeypatch.delenv("KCHAOS_ADMIN_PASSWORD", raising=False)
    assert kchaos(argv) == EXIT_ERROR
    line = one_line(capsys.readouterr().err)
    assert problem in line and line.startswith("kchaos: error:")


def test_connection_options_may_follow_the_tool_name(cluster, capsys):
    server = cluster.add(lambda r: cluster_answer())
    assert kchaos(["admin", "brokers", "list", "--bootstrap-server", server.address, "--timeout", "2000"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["ID", "HOST", "PORT", "RACK", "STATE", "EPOCH"]
    assert out[1].split() == ["4", "h", "1", "r1", "FENCED", "12"]
    assert out[2].split() == ["5", "127.0.0.5", "9092", "-", "ONLINE", "40"]


def test_cluster_describe_json(cluster, capsys):
    server = cluster.add(lambda r: cluster_answer(controller_id=2))
    assert kchaos(["admin", "--bootstrap-server", server.address, "--json", "cluster", "describe"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["controller_id"] == 2 and data["cluster_id"] == "c1" and data["metadata_offset"] == 99
    assert [(b["broker_id"], b["fenced"], b["epoch"]) for b in data["brokers"]] == [(4, True, 12), (5, False, 40)]


def test_topics_create_sends_counts_and_configs(cluster, capsys):
    server = cluster.add(created)
    argv = ["admin", "--bootstrap-server", server.address, "topics", "--create", "--topic", "t"]
    argv += ["--partitions", "3", "--replication-factor", "2", "--config", "a=1", "--config", "b=[x,y]"]
    assert kchaos(argv) == 0
    [request] = server.requests(M.CreateTopicsRequest)
    assert request.topics == (M.CreatableTopic("t", 3, 2, (), (("a", "1"), ("b", "x,y"))),)
    assert "Created topic t" in capsys.readouterr().out


def test_a_server_error_is_one_line_naming_the_code_and_the_fate(cluster, capsys):
    server = cluster.add(lambda r: created(r, ErrorCode.TOPIC_ALREADY_EXISTS))
    argv = ["admin", "--bootstrap-server", server.address, "topics", "--create", "--topic", "t"]
    assert kchaos(argv) == EXIT_ERROR
    line = one_line(capsys.readouterr().err)
    assert "TOPIC_ALREADY_EXISTS" in line and "it did not happen" in line


def test_an_unreachable_cluster_is_one_line(capsys):
    address = "{}:{}".format(*unused_address())
    assert kchaos(["admin", "--bootstrap-server", address, "--timeout", "300", "brokers", "list"]) == EXIT_ERROR
    line = one_line(capsys.readouterr().err)
    assert "list brokers failed" in line and address in line


def test_configs_alter_sends_set_delete_append_subtract(cluster):
    server = cluster.add(altered)
    argv = ["admin", "--bootstrap-server", server.address, "configs", "--alter", "--entity-type", "brokers"]
    argv += ["--entity-default", "--add-config", "a=1,l=[x,y]", "--delete-config", "d", "--append-config", "l=z"]
    argv += ["--subtract-config", "l=[x]"]
    assert kchaos(argv) == 0
    [request] = server.requests(M.IncrementalAlterConfigsRequest)
    [resource] = request.resources
    assert (resource.resource_type, resource.resource_name) == (M.ConfigResourceType.BROKER, "")
    assert [(c.name, c.config_operation.name, c.value) for c in resource.configs] == [
        ("a", "SET", "1"),
        ("l", "SET", "x,y"),
        ("l", "APPEND", "z"),
        ("l", "SUBTRACT", "x"),
        ("d", "DELETE", None),
    ]


def test_configs_describe_prints_values_and_offset(cluster, capsys):
    def answer(request):
        r = request.resources[0]
        entry = M.DescribeConfigsResourceResult("retention.ms", "9", False, M.ConfigSource.DYNAMIC_TOPIC_CONFIG)
        return M.DescribeConfigsResponse(
            (M.DescribeConfigsResult(0, None, r.resource_type, r.resource_name, (entry,)),), 12
        )

    server = cluster.add(answer)
    argv = [
        "admin",
        "--bootstrap-server",
        server.address,
        "configs",
        "--describe",
        "--entity-type",
        "topics",
        "--entity-name",
        "t",
    ]
    assert kchaos(argv) == 0
    out = capsys.readouterr().out
    assert "metadata offset 12" in out and "retention.ms=9 (source=DYNAMIC_TOPIC_CONFIG)" in out


def test_acls_add_makes_one_binding_per_principal_and_operation(cluster):
    server = cluster.add(lambda r: A.CreateAclsResponse(tuple(A.AclCreationResult(0) for _ in r.creations)))
    argv = ["admin", "--bootstrap-server", server.address, "acls", "--add", "--allow-principal", "User:a"]
    argv += ["--deny-principal", "User:b", "--operation", "Read", "--operation", "describe_configs", "--topic", "p-"]
    argv += ["--resource-pattern-type", "prefixed"]
    assert kchaos(argv) == 0
    [request] = server.requests(A.CreateAclsRequest)
    got = {(c.principal, c.operation, c.permission_type, c.resource_pattern_type, c.host) for c in request.creations}
    assert got == {
        (p, op, perm, A.PatternType.PREFIXED, "*")
        for p, perm in (("User:a", A.AclPermissionType.ALLOW), ("User:b", A.AclPermissionType.DENY))
        for op in (A.AclOperation.READ, A.AclOperation.DESCRIBE_CONFIGS)
    }


def test_acls_list_without_a_resource_lists_everything(cluster, capsys):
    acl = A.AclDescription("User:a", "*", A.AclOperation.ALTER, A.AclPermissionType.ALLOW)
    resource = A.DescribeAclsResource(A.ResourceType.CLUSTER, "kafka-cluster", A.PatternType.LITERAL, (acl,))
    server = cluster.add(lambda r: A.DescribeAclsResponse(0, None, (resource,), 3))
    assert kchaos(["admin", "--bootstrap-server", server.address, "acls", "--list"]) == 0
    [request] = server.requests(A.DescribeAclsRequest)
    assert request == A.DescribeAclsRequest()
    out = capsys.readouterr().out
    assert "resourceType=CLUSTER, name=kafka-cluster" in out and "operation=ALTER" in out


def test_topics_describe_prints_partitions(cluster, capsys):
    partition = M.MetadataResponsePartition(0, 0, 2, 5, (2, 3), (2,), 6)
    topic = M.MetadataResponseTopic(0, "t", uuid.UUID(int=1), (partition,))
    server = cluster.add(lambda r: M.MetadataResponse((), "c1", 1, (topic,), 4))
    assert kchaos(["admin", "--bootstrap-server", server.address, "topics", "--describe", "--topic", "t"]) == 0
    out = capsys.readouterr().out
    assert "PartitionCount: 1" in out and "Leader: 2\tLeaderEpoch: 5\tReplicas: 2,3\tIsr: 2" in out


@pytest.mark.parametrize(
    "args, problem",
    [
        (["--topic", "t"], "--topic needs --partition"),
        (["--all-topic-partitions", "--partition", "0"], "--partition goes with --topic"),
    ],
)
def test_leader_election_bad_input(args, problem, capsys):
    argv = ["admin", "--bootstrap-server", "h:1", "leader-election", "--election-type", "preferred", *args]
    assert kchaos(argv) == EXIT_ERROR
    assert problem in one_line(capsys.readouterr().err)


def _elected(request: M.ElectLeadersRequest, *codes: int) -> M.ElectLeadersResponse:
    [topic] = request.topic_partitions
    results = tuple(M.ElectLeadersPartitionResult(p, c) for p, c in zip(topic.partitions, codes, strict=True))
    return M.ElectLeadersResponse(ErrorCode.NONE, (M.ElectLeadersTopicResult(topic.topic, results),))


def test_leader_election_already_elected_is_success_and_a_refusal_is_not(cluster, capsys):
    done = cluster.add(lambda r: _elected(r, ErrorCode.ELECTION_NOT_NEEDED))
    argv = ["admin", "--bootstrap-server", done.address, "leader-election", "--election-type", "unclean"]
    assert kchaos([*argv, "--topic", "t", "--partition", "3"]) == 0
    [request] = done.requests(M.ElectLeadersRequest)
    assert request.election_type == M.ElectionType.UNCLEAN
    assert request.topic_partitions == (M.ElectLeadersTopicPartitions("t", (3,)),)
    assert "Valid replica already elected for partitions t-3" in capsys.readouterr().out
    refused = cluster.add(lambda r: _elected(r, ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE))
    argv = ["admin", "--bootstrap-server", refused.address, "leader-election", "--election-type", "preferred"]
    assert kchaos([*argv, "--topic", "t", "--partition", "0"]) == EXIT_ERROR
    assert "PREFERRED_LEADER_NOT_AVAILABLE" in one_line(capsys.readouterr().err)
