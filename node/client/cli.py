"""`kchaos admin`: Kafka's admin tools (kafka-topics, kafka-configs, kafka-acls, ...) for a kraft-chaos cluster.

    kchaos admin --bootstrap-server 127.0.0.2:9092 topics --create --topic t --partitions 3 --replication-factor 3
    kchaos admin --bootstrap-server 127.0.0.2:9092 configs --alter --entity-type topics --entity-name t \\
        --add-config retention.ms=1000,cleanup.policy=[compact,delete]
    kchaos admin --bootstrap-server 127.0.0.2:9092 brokers list --json

The connection options (`--bootstrap-server`, `--user`, `--password`, `--timeout`, `--json`) may also
follow the tool name, as in Kafka's own tools. Every error, bad flags included, is one line on stderr
and exit code 254; a server's error names its Kafka error code and whether the request certainly did
not happen.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence
from typing import Any

from node.client import cli_output as out
from node.client.errors import KafkaError
from node.client.results import (
    AclBinding,
    AclFilter,
    AlterConfigOp,
    ConfigResource,
    NewTopic,
    Outcome,
)
from node.client.sync import SyncAdminClient
from node.protocol.acls import (
    CLUSTER_RESOURCE_NAME,
    WILDCARD_HOST,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from node.protocol.admin import ConfigResourceType, ElectionType
from node.protocol.errors import ErrorCode
from vocab.errors import UserError

PASSWORD_ENV = "KCHAOS_ADMIN_PASSWORD"
DEFAULT_TIMEOUT_MS = 30_000
MAX_CONNECT_TIMEOUT_MS = 5_000


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
    topics.set_defaults(func=topics_command)

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
    configs.set_defaults(func=configs_command)

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
    acls.add_argument("--host", help=f"client host the ACL applies to (default for --add: {WILDCARD_HOST})")
    acls.set_defaults(func=acls_command)

    cluster = tools.add_parser("cluster", help="describe the cluster (id, controller, brokers)")
    cluster.add_argument("action", choices=("describe",))
    cluster.set_defaults(func=cluster_command)

    brokers = tools.add_parser("brokers", help="list registered brokers with state and epoch")
    brokers.add_argument("action", choices=("list",))
    brokers.set_defaults(func=brokers_command)

    election = tools.add_parser(
        "leader-election", help="elect preferred or unclean leaders (kafka-leader-election.sh, KIP-460)"
    )
    election.add_argument("--election-type", required=True, choices=("preferred", "unclean"))
    which = election.add_mutually_exclusive_group(required=True)
    which.add_argument("--topic", help="the topic (with --partition)")
    which.add_argument("--all-topic-partitions", action="store_true", help="every partition of every topic")
    election.add_argument("--partition", type=int, help="the partition of --topic")
    election.set_defaults(func=leader_election_command)

    for tool in (topics, configs, acls, cluster, brokers, election):
        _connection_options(tool, suppress=True)


# --- shared ----------------------------------------------------------------------------------------


def login_from(args: argparse.Namespace) -> tuple[str, str] | None:
    """The SASL/PLAIN (user, password) of `--user` / `--password` (or $KCHAOS_ADMIN_PASSWORD); None
    without `--user`."""
    password = args.password if args.password is not None else os.environ.get(PASSWORD_ENV)
    if args.user is None and args.password is not None:
        raise UserError("--password needs --user")
    if args.user is not None and password is None:
        raise UserError(f"--user {args.user} needs --password (or ${PASSWORD_ENV})")
    return (args.user, password) if args.user is not None and password is not None else None


def client_from(args: argparse.Namespace) -> SyncAdminClient:
    if not args.bootstrap_server:
        raise UserError("--bootstrap-server is required")
    if args.timeout <= 0:
        raise UserError(f"--timeout must be > 0 ms, not {args.timeout}")
    username, password = login_from(args) or (None, None)
    try:
        return SyncAdminClient(
            args.bootstrap_server,
            username=username,
            password=password,
            request_timeout_ms=args.timeout,
            connect_timeout_ms=min(args.timeout, MAX_CONNECT_TIMEOUT_MS),
        )
    except ValueError as exc:
        raise UserError(f"--bootstrap-server: {exc}") from None


def _call(what: str, fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except KafkaError as exc:
        raise UserError(f"{what} failed: {_explain(exc)}") from None


def _explain(exc: KafkaError) -> str:
    fate = "it did not happen" if exc.definite else "it may have happened"
    return f"{exc} ({fate})"


def _raise_failures(what: str, outcomes: Sequence[Outcome]) -> None:
    errors = [o.error for o in outcomes if o.error is not None]
    if errors:
        raise UserError(f"{what} failed: " + "; ".join(_explain(e) for e in errors))


def _print(args: argparse.Namespace, text: str, data: Any) -> None:
    print(out.dumps(data) if args.json else text)


def split_top_level(text: str, what: str) -> list[str]:
    """Split at commas outside [...] (Kafka's syntax for list values: k=[a,b])."""
    items, depth, current = [], 0, []
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise UserError(f"{what}: unbalanced ']' in '{text}'")
        if ch == "," and depth == 0:
            items.append("".join(current))
            current = []
        else:
            current.append(ch)
    if depth:
        raise UserError(f"{what}: unclosed '[' in '{text}'")
    items.append("".join(current))
    return [item.strip() for item in items if item.strip()]


def parse_config_pairs(text: str, what: str) -> list[tuple[str, str]]:
    """`k=v,k2=[a,b]` -> [("k", "v"), ("k2", "a,b")]."""
    pairs = []
    for item in split_top_level(text, what):
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise UserError(f"{what}: '{item}' is not NAME=VALUE")
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        pairs.append((name.strip(), value))
    return pairs


# --- topics ----------------------------------------------------------------------------------------


def _parse_assignment(text: str) -> dict[int, list[int]]:
    assignment: dict[int, list[int]] = {}
    for partition, part in enumerate(text.split(",")):
        try:
            assignment[partition] = [int(b) for b in part.split(":")]
        except ValueError:
            raise UserError(f"--replica-assignment: partition {partition}: '{part}' is not BROKER:BROKER...") from None
    return assignment


def topics_command(args: argparse.Namespace) -> int:
    if (args.create or args.delete) and not args.topic:
        raise UserError(f"topics --{'create' if args.create else 'delete'} needs --topic")
    if args.create:
        assignment = _parse_assignment(args.replica_assignment) if args.replica_assignment else {}
        if assignment and (args.partitions is not None or args.replication_factor is not None):
            raise UserError(
                "--replica-assignment replaces --partitions and --replication-factor; give one or the other"
            )
        for flag, value in (("--partitions", args.partitions), ("--replication-factor", args.replication_factor)):
            if value is not None and value <= 0:
                raise UserError(f"{flag} must be > 0, not {value}")
        configs = dict(parse_config_pairs(",".join(args.config), "--config")) if args.config else {}
    with client_from(args) as admin:
        if args.create:
            topic = NewTopic(args.topic, args.partitions or -1, args.replication_factor or -1, assignment, configs)
            result = _call("create topic", lambda: admin.create_topics([topic]))[args.topic]
            _raise_failures(f"create topic '{args.topic}'", [result])
            _print(args, f"Created topic {args.topic} (id {result.topic_id}).", result)
        elif args.delete:
            result = _call("delete topic", lambda: admin.delete_topics([args.topic]))[args.topic]
            _raise_failures(f"delete topic '{args.topic}'", [result])
            _print(args, f"Deleted topic {args.topic}.", result)
        else:
            names = [args.topic] if args.topic else None
            topics = _call("describe topics", lambda: admin.describe_topics(names))
            ordered = [topics[n] for n in sorted(topics)]
            if args.list:
                _print(args, "\n".join(t.name for t in ordered if t.error is None), [t.name for t in ordered])
            else:
                _print(args, out.format_topics(ordered), ordered)
            _raise_failures("describe topics", ordered)
    return 0


# --- configs ---------------------------------------------------------------------------------------


def _config_resource(args: argparse.Namespace) -> ConfigResource:
    if args.entity_default:
        if args.entity_type != "brokers":
            raise UserError("--entity-default applies only to --entity-type brokers")
        if args.entity_name is not None:
            raise UserError("give --entity-name or --entity-default, not both")
        return ConfigResource.broker("")
    if not args.entity_name:
        raise UserError("configs needs --entity-name (or --entity-default for brokers)")
    if args.entity_type == "brokers":
        if not args.entity_name.isdigit():
            raise UserError(f"--entity-name: broker id '{args.entity_name}' is not a number")
        return ConfigResource.broker(args.entity_name)
    return ConfigResource(ConfigResourceType.TOPIC, args.entity_name)


def _config_ops(args: argparse.Namespace) -> list[AlterConfigOp]:
    ops: list[AlterConfigOp] = []
    if args.add_config:
        ops += [AlterConfigOp.set(k, v) for k, v in parse_config_pairs(args.add_config, "--add-config")]
    if args.append_config:
        ops += [AlterConfigOp.append(k, v) for k, v in parse_config_pairs(args.append_config, "--append-config")]
    if args.subtract_config:
        ops += [AlterConfigOp.subtract(k, v) for k, v in parse_config_pairs(args.subtract_config, "--subtract-config")]
    if args.delete_config:
        ops += [AlterConfigOp.delete(name) for name in split_top_level(args.delete_config, "--delete-config")]
    return ops


def configs_command(args: argparse.Namespace) -> int:
    resource = _config_resource(args)
    if args.alter:
        ops = _config_ops(args)
        if not ops:
            raise UserError("configs --alter needs --add-config, --delete-config, --append-config or --subtract-config")
        if args.linearizable:
            raise UserError("--linearizable applies only to configs --describe")
    elif any((args.add_config, args.delete_config, args.append_config, args.subtract_config)):
        raise UserError("configs --describe takes no --add/--delete/--append/--subtract-config")
    with client_from(args) as admin:
        if args.alter:
            result = _call("alter configs", lambda: admin.incremental_alter_configs({resource: ops}))[resource]
            _raise_failures(f"alter configs of {resource}", [result])
            _print(args, f"Completed updating config for {resource}.", {"resource": str(resource), "ops": ops})
        else:
            described = _call(
                "describe configs", lambda: admin.describe_configs([resource], linearizable=args.linearizable)
            )
            result = described.resources[resource]
            _raise_failures(f"describe configs of {resource}", [result])
            text = out.format_configs(resource, result, described.metadata_offset)
            _print(
                args,
                text,
                {"resource": str(resource), "metadata_offset": described.metadata_offset, **_entries(result)},
            )
    return 0


def _entries(result: Any) -> dict[str, Any]:
    return {"configs": {name: out.to_jsonable(entry) for name, entry in sorted(result.entries.items())}}


# --- acls ------------------------------------------------------------------------------------------

_OPERATIONS = {op.name.replace("_", "").lower(): op for op in AclOperation if op not in (AclOperation.UNKNOWN,)}


def _operation(text: str) -> AclOperation:
    op = _OPERATIONS.get(text.replace("_", "").replace("-", "").lower())
    if op is None or op is AclOperation.ANY:
        names = ", ".join(sorted(o.name for o in _OPERATIONS.values() if o is not AclOperation.ANY))
        raise UserError(f"--operation: unknown operation '{text}' (one of {names})")
    return op


def _principal(text: str, flag: str) -> str:
    kind, sep, name = text.partition(":")
    if not sep or not kind or not name:
        raise UserError(f"{flag}: '{text}' is not TYPE:NAME (e.g. User:alice)")
    return text


def _acl_resources(args: argparse.Namespace, *, required: bool) -> list[tuple[ResourceType, str]]:
    resources = [(ResourceType.TOPIC, t) for t in args.topic]
    if args.cluster:
        resources.append((ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME))
    if required and not resources:
        raise UserError("acls needs a resource: --topic NAME or --cluster")
    return resources


def _pattern(args: argparse.Namespace) -> PatternType:
    pattern = PatternType[(args.resource_pattern_type or "literal").upper()]
    if args.add and pattern not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise UserError("--resource-pattern-type for --add must be literal or prefixed")
    return pattern


def acls_command(args: argparse.Namespace) -> int:
    pattern = _pattern(args)
    operations = [_operation(o) for o in args.operation]
    grants = [(_principal(p, "--allow-principal"), AclPermissionType.ALLOW) for p in args.allow_principal]
    grants += [(_principal(p, "--deny-principal"), AclPermissionType.DENY) for p in args.deny_principal]
    principals = [_principal(p, "--principal") for p in args.principal]
    if args.add:
        resources = _acl_resources(args, required=True)
        if not grants or not operations:
            raise UserError("acls --add needs --allow-principal/--deny-principal and --operation")
        host = args.host or WILDCARD_HOST
        bindings = [
            AclBinding(rtype, rname, pattern, principal, host, op, permission)
            for rtype, rname in resources
            for principal, permission in grants
            for op in operations
        ]
        with client_from(args) as admin:
            outcomes = _call("create ACLs", lambda: admin.create_acls(bindings))
        _print(args, f"Adding ACLs:\n{out.format_acls(bindings)}", outcomes)
        _raise_failures("create ACLs", outcomes)
        return 0
    if args.remove:
        resources = _acl_resources(args, required=True)
        targets = grants or [(p, AclPermissionType.ANY) for p in principals] or [(None, AclPermissionType.ANY)]
        filters = [
            AclFilter(rtype, rname, pattern, principal, args.host, op, permission)
            for rtype, rname in resources
            for principal, permission in targets
            for op in (operations or [AclOperation.ANY])
        ]
        with client_from(args) as admin:
            outcomes = _call("delete ACLs", lambda: admin.delete_acls(filters))
        removed = [b for o in outcomes for b in o.deleted]
        _print(args, f"Removed ACLs:\n{out.format_acls(removed)}", outcomes)
        _raise_failures("delete ACLs", outcomes)
        return 0
    resources = _acl_resources(args, required=False)
    if resources:
        filters = [
            AclFilter(rtype, rname, pattern, principal, args.host)
            for rtype, rname in resources
            for principal in principals or [None]
        ]
    else:  # no resource named: every ACL (of these principals)
        filters = [AclFilter(principal=principal, host=args.host) for principal in principals or [None]]
    with client_from(args) as admin:
        bindings = [b for f in filters for b in _call("list ACLs", lambda f=f: admin.describe_acls(f)).bindings]
    _print(args, out.format_acls(bindings), bindings)
    return 0


# --- cluster and brokers ---------------------------------------------------------------------------


def cluster_command(args: argparse.Namespace) -> int:
    with client_from(args) as admin:
        cluster = _call("describe cluster", admin.describe_cluster)
    _print(args, out.format_cluster(cluster), cluster)
    return 0


def brokers_command(args: argparse.Namespace) -> int:
    with client_from(args) as admin:
        brokers = _call("list brokers", admin.list_brokers)
    _print(args, out.format_brokers(brokers), brokers)
    return 0


def leader_election_command(args: argparse.Namespace) -> int:
    if args.topic is not None and args.partition is None:
        raise UserError("leader-election --topic needs --partition")
    if args.all_topic_partitions and args.partition is not None:
        raise UserError("--partition goes with --topic, not with --all-topic-partitions")
    kind = ElectionType[args.election_type.upper()]
    asked = None if args.all_topic_partitions else [(args.topic, args.partition)]
    with client_from(args) as admin:
        results = _call("leader election", lambda: admin.elect_leaders(kind, asked))
    ordered = [results[k] for k in sorted(results)]
    done = [f"{r.topic}-{r.partition}" for r in ordered if r.error is None]
    already = [f"{r.topic}-{r.partition}" for r in ordered if r.error and r.error.code == ErrorCode.ELECTION_NOT_NEEDED]
    lines = [f"Successfully completed leader election ({kind.name}) for partitions {', '.join(done)}"] if done else []
    if already:
        lines.append(f"Valid replica already elected for partitions {', '.join(already)}")
    if not ordered:
        lines.append("No partition needed an election.")
    _print(args, "\n".join(lines), ordered)
    _raise_failures(
        "leader election", [r for r in ordered if r.error and r.error.code != ErrorCode.ELECTION_NOT_NEEDED]
    )
    return 0


__all__ = ["PASSWORD_ENV", "parse_config_pairs", "register", "split_top_level"]
