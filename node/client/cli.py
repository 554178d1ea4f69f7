"""`kchaos admin`: Kafka's admin tools (kafka-topics, kafka-configs, kafka-acls, ...) for a kraft-chaos cluster.

    kchaos admin --bootstrap-server 127.0.0.2:9092 topics --create --topic t --partitions 3 --replication-factor 3
    kchaos admin --bootstrap-server 127.0.0.2:9092 configs --alter --entity-type topics --entity-name t \\
        --add-config retention.ms=1000,cleanup.policy=[compact,delete]
    kchaos admin --bootstrap-server 127.0.0.2:9092 brokers list --json

The connection options (`--bootstrap-server`, `--user`, `--password`, `--timeout`, `--json`) may also
follow the tool name, as in Kafka's own tools. Every error, bad flags included, is one line on stderr
and exit code 254; a server's error names its Kafka error code and whether the request certainly did
not happen.

This module holds the flags only (`cli_parsing` reads them); the tools are in `admin_tools`, imported
when one runs, so that `kchaos admin ... --help` does not load the client, its codec and its schemas.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from node.client.cli_parsing import DEFAULT_TIMEOUT_MS, PASSWORD_ENV


def _connection_options(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
    """The same options on `admin` and on each tool; a tool's copy only overrides what it is given."""

    def default(value: object) -> object:
        return argparse.SUPPRESS if suppress else value

    parser.add_argument(
        "--bootstrap-server",
        metavar="HOST:PORT[,HOST:PORT...]",
        default=default(None),
        help="brokers or controllers to talk to (controllers for --linearizable)",
    )
    parser.add_argument("--user", default=default(None), help="SASL/PLAIN username (principal User:NAME)")
    parser.add_argument("--password", default=default(None), help=f"SASL/PLAIN password (default: ${PASSWORD_ENV})")
    parser.add_argument(
        "--timeout",
        type=int,
        metavar="MS",
        default=default(DEFAULT_TIMEOUT_MS),
        help=f"give up on a call after this many ms (default {DEFAULT_TIMEOUT_MS})",
    )
    parser.add_argument("--json", action="store_true", default=default(False), help="print JSON")


def _tool(name: str) -> Callable[[argparse.Namespace], int]:
    """The tool `name` of `admin_tools`, imported only when it runs."""

    def run(args: argparse.Namespace) -> int:
        from node.client import admin_tools

        return getattr(admin_tools, name)(args)

    return run


def register(subparsers: argparse._SubParsersAction) -> None:
    admin = subparsers.add_parser(
        "admin", description="administer a cluster: topics, configs, ACLs, brokers (like Kafka's admin tools)"
    )
    _connection_options(admin, suppress=False)
    tools = admin.add_subparsers(dest="admin_tool", metavar="TOOL", required=True)

    topics = tools.add_parser("topics", help="create, describe, list or delete topics (kafka-topics.sh)")
    action = topics.add_mutually_exclusive_group(required=True)
    for flag, text in (
        ("--create", "create a topic"),
        ("--describe", "describe topics"),
        ("--list", "list topic names"),
        ("--delete", "delete a topic"),
    ):
        action.add_argument(flag, action="store_true", help=text)
    topics.add_argument("--topic", help="the topic (for --describe: only this one)")
    topics.add_argument("--partitions", type=int, help="partition count (--create)")
    topics.add_argument("--replication-factor", type=int, help="replicas per partition (--create)")
    topics.add_argument(
        "--replica-assignment",
        metavar="B:B,B:B",
        help="explicit replicas: partitions separated by ',', broker ids by ':' (--create)",
    )
    topics.add_argument("--config", action="append", default=[], metavar="K=V", help="a topic config (--create)")
    topics.set_defaults(func=_tool("topics_command"))

    configs = tools.add_parser("configs", help="alter or describe topic and broker configs (kafka-configs.sh)")
    action = configs.add_mutually_exclusive_group(required=True)
    action.add_argument("--alter", action="store_true", help="change configs (IncrementalAlterConfigs)")
    action.add_argument("--describe", action="store_true", help="show configs (DescribeConfigs)")
    configs.add_argument("--entity-type", required=True, choices=("topics", "brokers"))
    configs.add_argument("--entity-name", help="a topic name or a broker id")
    configs.add_argument("--entity-default", action="store_true", help="the cluster-wide broker default")
    configs.add_argument("--add-config", metavar="K=V,K2=[A,B]", help="SET these configs")
    configs.add_argument("--delete-config", metavar="K,K2", help="DELETE these configs")
    configs.add_argument("--append-config", metavar="K=[A,B]", help="APPEND to list configs (kraft-chaos extension)")
    configs.add_argument(
        "--subtract-config", metavar="K=[A,B]", help="SUBTRACT from list configs (kraft-chaos extension)"
    )
    configs.add_argument(
        "--linearizable",
        action="store_true",
        help="--describe at the active controller after a read barrier (give controller addresses)",
    )
    configs.set_defaults(func=_tool("configs_command"))

    acls = tools.add_parser("acls", help="add, remove or list ACLs (kafka-acls.sh)")
    action = acls.add_mutually_exclusive_group(required=True)
    action.add_argument("--add", action="store_true", help="create ACLs")
    action.add_argument("--remove", action="store_true", help="delete matching ACLs")
    action.add_argument("--list", action="store_true", help="list matching ACLs")
    acls.add_argument("--allow-principal", action="append", default=[], metavar="User:NAME")
    acls.add_argument("--deny-principal", action="append", default=[], metavar="User:NAME")
    acls.add_argument("--principal", action="append", default=[], metavar="User:NAME", help="filter (--list)")
    acls.add_argument("--operation", action="append", default=[], help="Read, Write, Create, Alter, ... or All")
    acls.add_argument("--topic", action="append", default=[], help="a topic resource (repeatable)")
    acls.add_argument("--cluster", action="store_true", help="the cluster resource")
    acls.add_argument(
        "--resource-pattern-type",
        choices=("literal", "prefixed", "any", "match"),
        help="how resource names match (default: literal; any/match only for --list/--remove)",
    )
    acls.add_argument("--host", help="client host the ACL applies to (default for --add: *, every host)")
    acls.set_defaults(func=_tool("acls_command"))

    cluster = tools.add_parser("cluster", help="describe the cluster (id, controller, brokers)")
    cluster.add_argument("action", choices=("describe",))
    cluster.set_defaults(func=_tool("cluster_command"))

    brokers = tools.add_parser("brokers", help="list registered brokers with state and epoch")
    brokers.add_argument("action", choices=("list",))
    brokers.set_defaults(func=_tool("brokers_command"))

    election = tools.add_parser(
        "leader-election", help="elect preferred or unclean leaders (kafka-leader-election.sh, KIP-460)"
    )
    election.add_argument("--election-type", required=True, choices=("preferred", "unclean"))
    which = election.add_mutually_exclusive_group(required=True)
    which.add_argument("--topic", help="the topic (with --partition)")
    which.add_argument("--all-topic-partitions", action="store_true", help="every partition of every topic")
    election.add_argument("--partition", type=int, help="the partition of --topic")
    election.set_defaults(func=_tool("leader_election_command"))

    for tool in (topics, configs, acls, cluster, brokers, election):
        _connection_options(tool, suppress=True)


# --- shared ----------------------------------------------------------------------------------------
