"""Topic-config keys (`<topic>/<config>`) as Kafka requests, and their answers as plain values.

Several keys in one request: an IncrementalAlterConfigs or DescribeConfigs request holds one resource
per topic, each with its keys, in the order the keys were given. A value as read is the key's
*dynamic* value (the raw config string), or None while the key only has its default: the same thing
the committed log's image holds (`config-timeline.jsonl`), so the two compare directly.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from node.client.errors import server_error
from node.protocol.admin import (
    AlterableConfig,
    ConfigOperation,
    ConfigResourceType,
    ConfigSource,
    DescribeConfigsRequest,
    DescribeConfigsResource,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResource,
)
from node.protocol.errors import ErrorCode


def key_of(topic: str, config: str) -> str:
    return f"{topic}/{config}"


def split_key(key: str) -> tuple[str, str]:
    topic, _, config = key.partition("/")
    return topic, config


def _by_topic(keys: Iterable[str]) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = {}
    for key in keys:
        topic, config = split_key(key)
        grouped.setdefault(topic, []).append(config)
    return grouped


def alter_request(changes: Sequence[tuple[str, ConfigOperation, str]]) -> IncrementalAlterConfigsRequest:
    """One request for `(key, operation, value)` changes (one resource per topic)."""
    per_topic: dict[str, list[AlterableConfig]] = {}
    for key, operation, value in changes:
        topic, config = split_key(key)
        per_topic.setdefault(topic, []).append(AlterableConfig(config, operation, value))
    return IncrementalAlterConfigsRequest(
        tuple(
            IncrementalAlterConfigsResource(ConfigResourceType.TOPIC, topic, tuple(configs))
            for topic, configs in per_topic.items()
        )
    )


def describe_request(keys: Sequence[str]) -> DescribeConfigsRequest:
    return DescribeConfigsRequest(
        tuple(
            DescribeConfigsResource(ConfigResourceType.TOPIC, topic, tuple(configs))
            for topic, configs in _by_topic(keys).items()
        )
    )


def alter_errors(response: Any) -> dict[str, Exception | None]:
    """Per topic of an IncrementalAlterConfigs answer: None (applied) or the typed error."""
    return {
        r.resource_name: None if r.error_code == ErrorCode.NONE else server_error(r.error_code, r.error_message)
        for r in response.responses
    }


class MissingValue(Exception):
    """A DescribeConfigs answer without a key that was asked for."""


def described_values(response: Any, keys: Sequence[str]) -> dict[str, str | None]:
    """Each key's dynamic value (None: only its default) from a DescribeConfigs answer. Raises the
    typed error of a resource that failed, or `MissingValue`."""
    results = {r.resource_name: r for r in response.results}
    values: dict[str, str | None] = {}
    for key in keys:
        topic, config = split_key(key)
        result = results.get(topic)
        if result is None:
            raise MissingValue(f"no DescribeConfigs result for topic {topic!r}")
        if result.error_code != ErrorCode.NONE:
            raise server_error(result.error_code, result.error_message)
        entry = next((c for c in result.configs if c.name == config), None)
        if entry is None:
            raise MissingValue(f"no value for {key!r} in the DescribeConfigs answer")
        dynamic = entry.config_source == ConfigSource.DYNAMIC_TOPIC_CONFIG
        values[key] = entry.value if dynamic else None
    return values
