"""The tools of `kchaos admin` (see `cli`, which parses their flags): each takes the parsed flags, makes
one call through the admin client and prints what Kafka's own tool would."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

from node.client import cli_output as out
from node.client.cli_parsing import MAX_CONNECT_TIMEOUT_MS, login_from, parse_config_pairs, split_top_level
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
