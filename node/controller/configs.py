"""IncrementalAlterConfigs (SET, DELETE, APPEND, SUBTRACT) and the legacy AlterConfigs.

Each resource is checked as a whole: an unknown resource, a config name not in the catalog, a bad
value, a repeated key or APPEND/SUBTRACT on a non-list config fails that resource (and writes none of
its changes) with Kafka's error code (a bad value: INVALID_CONFIG for a topic, INVALID_REQUEST for a
broker, as Kafka answers). The `ConfigRecord`s of every resource that passed go into one
batch, so a request's changes become visible together or not at all.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from node.controller.config_catalog import join_list, lookup, split_list
from node.controller.context import ControllerContext, Reply
from node.metadata.describe import config_resource_error
from node.metadata.image import MetadataImage
from node.metadata.records import ConfigRecord
from node.process.ports import RequestContext
from node.protocol.acls import CLUSTER_RESOURCE_NAME, AclOperation, ResourceType
from node.protocol.admin import (
    AlterConfigsRequest,
    AlterConfigsResource,
    AlterConfigsResourceResponse,
    AlterConfigsResponse,
    ConfigOperation,
    ConfigResourceType,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResource,
    IncrementalAlterConfigsResponse,
)
from node.protocol.errors import ErrorCode


class ConfigRefusal(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def _check_access(ctl: ControllerContext, ctx: RequestContext, rtype: int, rname: str) -> None:
    """Authorization first (so an unauthorized client learns nothing), then the resource itself."""
    if rtype == ConfigResourceType.TOPIC:
        if not ctl.allowed(ctx, AclOperation.ALTER_CONFIGS, ResourceType.TOPIC, rname):
            raise ConfigRefusal(ErrorCode.TOPIC_AUTHORIZATION_FAILED, f"not authorized to alter topic {rname!r}")
    elif rtype == ConfigResourceType.BROKER and not ctl.allowed(
        ctx, AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME
    ):
        raise ConfigRefusal(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "not authorized to alter broker configs")
    code, message = config_resource_error(ctl.working, rtype, rname)
    if code != ErrorCode.NONE:
        raise ConfigRefusal(code, message or "bad resource")


def _known(rtype: int, name: str, value: str | None) -> None:
    """The config exists for this resource type and `value` (when given) is valid for it."""
    definition = lookup(rtype, name)
    if definition is None:
        raise ConfigRefusal(ErrorCode.INVALID_CONFIG, f"unknown config {name!r}")
    if value is not None:
        problem = definition.check(value)
        if problem is not None:
            # Kafka answers a bad broker-config value with INVALID_REQUEST, a bad topic-config value
            # with INVALID_CONFIG (benchmarks/kafka_differential.py).
            code = ErrorCode.INVALID_REQUEST if rtype == ConfigResourceType.BROKER else ErrorCode.INVALID_CONFIG
            raise ConfigRefusal(code, problem)


def _incremental(view: MetadataImage, resource: IncrementalAlterConfigsResource) -> list[ConfigRecord]:
    rtype, rname = int(resource.resource_type), resource.resource_name
    records: list[ConfigRecord] = []
    seen: set[str] = set()
    for change in resource.configs:
        name, op, value = change.name, change.config_operation, change.value
        if name in seen:
            raise ConfigRefusal(ErrorCode.INVALID_REQUEST, f"config {name!r} appears twice")
        seen.add(name)
        if op not in (ConfigOperation.SET, ConfigOperation.DELETE, ConfigOperation.APPEND, ConfigOperation.SUBTRACT):
            raise ConfigRefusal(ErrorCode.INVALID_REQUEST, f"unknown config operation {int(op)} for {name!r}")
        _known(rtype, name, None)
        definition = lookup(rtype, name)
        assert definition is not None
        current = view.config(rtype, rname, name)
        if op == ConfigOperation.DELETE:
            if current is not None:
                records.append(ConfigRecord(rtype, rname, name, None))
            continue
        if value is None:
            raise ConfigRefusal(ErrorCode.INVALID_CONFIG, f"{ConfigOperation(op).name} of {name!r} needs a value")
        if op == ConfigOperation.SET:
            _known(rtype, name, value)
            records.append(ConfigRecord(rtype, rname, name, value))
            continue
        if not definition.is_list:
            raise ConfigRefusal(
                ErrorCode.INVALID_CONFIG, f"{ConfigOperation(op).name} needs a list config; {name!r} is not one"
            )
        _known(rtype, name, value)
        items = split_list(definition.default if current is None else current)
        delta = split_list(value)
        if op == ConfigOperation.APPEND:
            items += [x for x in dict.fromkeys(delta) if x not in items]
        else:
            items = [x for x in items if x not in delta]
        records.append(ConfigRecord(rtype, rname, name, join_list(items)))
    return records


def _replacement(view: MetadataImage, resource: AlterConfigsResource) -> list[ConfigRecord]:
    """Legacy AlterConfigs: the resource's dynamic configs become exactly the ones given."""
    rtype, rname = int(resource.resource_type), resource.resource_name
    wanted: dict[str, str] = {}
    seen: set[str] = set()
    for name, value in resource.configs:
        if name in seen:
            raise ConfigRefusal(ErrorCode.INVALID_REQUEST, f"config {name!r} appears twice")
        seen.add(name)
        _known(rtype, name, value)
        if value is not None:
            wanted[name] = value
    records = [ConfigRecord(rtype, rname, n, None) for n in sorted(view.configs(rtype, rname)) if n not in wanted]
    records += [ConfigRecord(rtype, rname, n, v) for n, v in wanted.items()]
    return records


def _alter(
    ctl: ControllerContext,
    ctx: RequestContext,
    request: IncrementalAlterConfigsRequest | AlterConfigsRequest,
    reply: Reply,
    changes: Callable[[MetadataImage, Any], list[ConfigRecord]],
) -> None:
    """Check each resource, collect the records of those that pass, answer per resource."""
    keys = [(int(r.resource_type), r.resource_name) for r in request.resources]
    duplicates = {k for k in keys if keys.count(k) > 1}
    results: list[AlterConfigsResourceResponse] = []
    records: list[ConfigRecord] = []
    for key, resource in zip(keys, request.resources, strict=True):
        code, message = ErrorCode.NONE, None
        try:
            if key in duplicates:
                raise ConfigRefusal(ErrorCode.INVALID_REQUEST, "the same resource appears twice")
            _check_access(ctl, ctx, *key)
            records.extend(changes(ctl.working, resource))
        except ConfigRefusal as refusal:
            code, message = refusal.code, str(refusal)
        results.append(AlterConfigsResourceResponse(code, message, resource.resource_type, resource.resource_name))
    incremental = isinstance(request, IncrementalAlterConfigsRequest)
    response = (IncrementalAlterConfigsResponse if incremental else AlterConfigsResponse)(tuple(results))
    if "ctl-config-change-not-atomic" in ctl.config.bugs and not request.validate_only and len(records) > 1:
        _write_one_by_one(ctl, request, records, reply, response)
        return
    ctl.write(request, [] if request.validate_only else records, reply, lambda _outcome: response)


_NEXT = object()  # the planted bug's chain: a record committed, write the next one (no answer yet)


def _write_one_by_one(
    ctl: ControllerContext, request: object, records: list[ConfigRecord], reply: Reply, response: object
) -> None:
    """The planted bug `ctl-config-change-not-atomic`: each record in a batch of its own, the next one
    written once the one before has committed, and the answer after the last. Written all at once they
    would still share a batch whenever the Raft core's group commit or the process's joining of a
    burst of requests put them together, and the bug would show only on an idle controller."""

    def step(i: int) -> None:
        if i == len(records) - 1:
            ctl.write(request, records[i:], reply, lambda _outcome: response)
            return

        def answer(message: object) -> None:  # only a failure of a record before the last answers
            if message is not _NEXT:
                reply(message)

        def committed(_outcome: object) -> object:
            step(i + 1)
            return _NEXT

        ctl.write(request, records[i : i + 1], answer, committed)

    step(0)


def handle_incremental_alter_configs(
    ctl: ControllerContext, now_ms: int, ctx: RequestContext, request: IncrementalAlterConfigsRequest, reply: Reply
) -> None:
    _alter(ctl, ctx, request, reply, _incremental)


def handle_alter_configs(
    ctl: ControllerContext, now_ms: int, ctx: RequestContext, request: AlterConfigsRequest, reply: Reply
) -> None:
    _alter(ctl, ctx, request, reply, _replacement)


__all__ = ["handle_alter_configs", "handle_incremental_alter_configs"]
