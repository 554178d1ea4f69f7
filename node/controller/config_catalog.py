"""The configs kraft-chaos knows, with Kafka's names, types, defaults and validity rules.

The topic configs are Apache Kafka 4.1's (benchmarks/kafka_differential.py compares the names and
defaults with a real Kafka: message.downconversion.enable is gone since 4.0, KIP-724).

The controller refuses a name not listed here for its resource type (INVALID_CONFIG), a value that
does not parse or is out of range (INVALID_CONFIG), and APPEND/SUBTRACT on a config that is not a
list. Describe answers show the defaults for keys that are not set dynamically.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from node.protocol.admin import ConfigResourceType

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1
_THROTTLED_REPLICA = re.compile(r"^\d+:\d+$")


@dataclass(frozen=True, slots=True)
class ConfigDef:
    name: str
    kind: str  # "int", "long", "double", "bool", "enum", "list"
    default: str
    low: float | None = None
    high: float | None = None
    choices: frozenset[str] = frozenset()  # enum values, or the allowed items of a list
    item_check: Callable[[str], bool] | None = None  # list items without fixed choices
    why: str = ""  # why some valid-looking values are refused (a bool with `choices`)
    also: str | None = None  # a number outside [low, high] that is valid too (gzip's -1: "the default")

    @property
    def is_list(self) -> bool:
        return self.kind == "list"

    def check(self, value: str) -> str | None:
        """None when `value` is valid, else why not."""
        if self.kind in ("int", "long", "double"):
            try:
                number: float = float(value) if self.kind == "double" else int(value.strip())
            except ValueError:
                return f"{self.name}: {value!r} is not a valid {self.kind}"
            if self.also is not None and value.strip() == self.also:
                return None
            limit = INT_MAX if self.kind == "int" else LONG_MAX
            if self.kind != "double" and not -limit - 1 <= number <= limit:
                return f"{self.name}: {value} does not fit a {self.kind}"
            if self.low is not None and number < self.low:
                return f"{self.name}: {value} is below the minimum {self.low:g}"
            if self.high is not None and number > self.high:
                return f"{self.name}: {value} is above the maximum {self.high:g}"
            return None
        if self.kind == "bool":
            if value.strip().lower() not in ("true", "false"):
                return f"{self.name}: {value!r} is not a boolean"
            if self.choices and value.strip().lower() not in self.choices:
                return f"{self.name}: {value.strip()} is not allowed here ({self.why})"
            return None
        if self.kind == "enum":
            return None if value in self.choices else f"{self.name}: {value!r} is not one of {sorted(self.choices)}"
        for item in split_list(value):
            if self.choices and item not in self.choices:
                return f"{self.name}: {item!r} is not one of {sorted(self.choices)}"
            if self.item_check is not None and not self.item_check(item):
                return f"{self.name}: {item!r} is not a valid item"
        return None


def split_list(value: str) -> list[str]:
    """Kafka's list syntax: comma-separated, blanks around items ignored, "" is the empty list."""
    return [item.strip() for item in value.split(",") if item.strip()]


def join_list(items: list[str]) -> str:
    return ",".join(items)


def _throttled(item: str) -> bool:
    return item == "*" or bool(_THROTTLED_REPLICA.match(item))


_COMPRESSION = frozenset({"uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"})
_TIMESTAMP = frozenset({"CreateTime", "LogAppendTime"})
_CLEANUP = frozenset({"delete", "compact"})

_TOPIC = (
    ConfigDef("cleanup.policy", "list", "delete", choices=_CLEANUP),
    ConfigDef("compression.gzip.level", "int", "-1", low=1, high=9, also="-1"),
    ConfigDef("compression.lz4.level", "int", "9", low=1, high=17),
    ConfigDef("compression.type", "enum", "producer", choices=_COMPRESSION),
    ConfigDef("compression.zstd.level", "int", "3", low=-131072, high=22),
    ConfigDef("delete.retention.ms", "long", "86400000", low=0),
    ConfigDef("file.delete.delay.ms", "long", "60000", low=0),
    ConfigDef("flush.messages", "long", str(LONG_MAX), low=1),
    ConfigDef("flush.ms", "long", str(LONG_MAX), low=0),
    ConfigDef("follower.replication.throttled.replicas", "list", "", item_check=_throttled),
    ConfigDef("index.interval.bytes", "int", "4096", low=0),
    ConfigDef("leader.replication.throttled.replicas", "list", "", item_check=_throttled),
    ConfigDef("local.retention.bytes", "long", "-2", low=-2),
    ConfigDef("local.retention.ms", "long", "-2", low=-2),
    ConfigDef("max.compaction.lag.ms", "long", str(LONG_MAX), low=1),
    ConfigDef("max.message.bytes", "int", "1048588", low=0),
    ConfigDef("message.timestamp.after.max.ms", "long", "3600000", low=0),
    ConfigDef("message.timestamp.before.max.ms", "long", str(LONG_MAX), low=0),
    ConfigDef("message.timestamp.type", "enum", "CreateTime", choices=_TIMESTAMP),
    ConfigDef("min.cleanable.dirty.ratio", "double", "0.5", low=0, high=1),
    ConfigDef("min.compaction.lag.ms", "long", "0", low=0),
    ConfigDef("min.insync.replicas", "int", "1", low=1),
    ConfigDef("preallocate", "bool", "false"),
    ConfigDef("remote.log.copy.disable", "bool", "false"),
    ConfigDef("remote.log.delete.on.disable", "bool", "false"),
    # No tiered storage here (as in a Kafka broker without remote.log.storage.system.enable): refused.
    ConfigDef("remote.storage.enable", "bool", "false", choices=frozenset({"false"}), why="tiered storage is off"),
    ConfigDef("retention.bytes", "long", "-1"),
    ConfigDef("retention.ms", "long", "604800000", low=-1),
    ConfigDef("segment.bytes", "int", "1073741824", low=14),
    ConfigDef("segment.index.bytes", "int", "10485760", low=4),
    ConfigDef("segment.jitter.ms", "long", "0", low=0),
    ConfigDef("segment.ms", "long", "604800000", low=1),
    ConfigDef("unclean.leader.election.enable", "bool", "false"),
)

_BROKER = (
    ConfigDef("background.threads", "int", "10", low=1),
    ConfigDef("compression.type", "enum", "producer", choices=_COMPRESSION),
    ConfigDef("follower.replication.throttled.rate", "long", str(LONG_MAX), low=0),
    ConfigDef("leader.replication.throttled.rate", "long", str(LONG_MAX), low=0),
    ConfigDef("log.cleaner.threads", "int", "1", low=0),
    ConfigDef("log.cleanup.policy", "list", "delete", choices=_CLEANUP),
    ConfigDef("log.flush.interval.ms", "long", str(LONG_MAX), low=0),
    ConfigDef("log.message.timestamp.type", "enum", "CreateTime", choices=_TIMESTAMP),
    ConfigDef("log.retention.bytes", "long", "-1"),
    ConfigDef("log.retention.ms", "long", "604800000", low=-1),
    ConfigDef("log.segment.bytes", "int", "1073741824", low=14),
    ConfigDef("max.connections", "int", str(INT_MAX), low=0),
    ConfigDef("message.max.bytes", "int", "1048588", low=0),
    ConfigDef("min.insync.replicas", "int", "1", low=1),
    ConfigDef("num.io.threads", "int", "8", low=1),
    ConfigDef("num.network.threads", "int", "3", low=1),
    ConfigDef("num.replica.fetchers", "int", "1", low=1),
    ConfigDef("unclean.leader.election.enable", "bool", "false"),
)

CATALOG: dict[int, dict[str, ConfigDef]] = {
    ConfigResourceType.TOPIC: {d.name: d for d in _TOPIC},
    ConfigResourceType.BROKER: {d.name: d for d in _BROKER},
}
DEFAULTS: dict[int, dict[str, str]] = {
    rtype: {n: d.default for n, d in defs.items()} for rtype, defs in CATALOG.items()
}


def lookup(resource_type: int, name: str) -> ConfigDef | None:
    return CATALOG.get(resource_type, {}).get(name)


__all__ = ["CATALOG", "DEFAULTS", "ConfigDef", "join_list", "lookup", "split_list"]
