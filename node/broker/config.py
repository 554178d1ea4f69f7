"""A broker's settings, with Kafka's property names and defaults where Kafka has them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields

from node.bugs import BUGS_KEY, NO_BUGS, Bugs, UnknownBugError, parse_bugs
from node.protocol.broker_api import BrokerRegistrationFeature
from node.raft.config import ConfigError

# The feature ranges this broker software supports; the controller refuses a broker lacking an
# enabled feature level (KIP-631).
DEFAULT_FEATURES = (BrokerRegistrationFeature("metadata.version", 1, 1),)


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    node_id: int
    heartbeat_interval_ms: int = 2000  # broker.heartbeat.interval.ms
    # request.timeout.ms: how long a forwarded admin write may wait for the active controller.
    request_timeout_ms: int = 30_000
    retry_backoff_ms: int = 100  # retry.backoff.ms: between attempts after NOT_CONTROLLER or no answer
    replica_lag_time_max_ms: int = 30_000  # replica.lag.time.max.ms
    # kchaos.replica.heartbeat.interval.ms: how often a follower tells each leader it is alive (the
    # stand-in for a follower's Fetch; Kafka fetches continuously, replica.fetch.wait.max.ms = 500).
    replica_heartbeat_interval_ms: int = 500
    rack: str | None = None  # broker.rack
    features: tuple[BrokerRegistrationFeature, ...] = DEFAULT_FEATURES
    bugs: Bugs = NO_BUGS  # planted bugs switched on (node/bugs.py); empty in every real deployment

    # Kafka's property names -> field names, for config files and `kchaos sim` flags.
    PROPERTY_NAMES = {
        "broker.heartbeat.interval.ms": "heartbeat_interval_ms",
        "request.timeout.ms": "request_timeout_ms",
        "retry.backoff.ms": "retry_backoff_ms",
        "replica.lag.time.max.ms": "replica_lag_time_max_ms",
        "kchaos.replica.heartbeat.interval.ms": "replica_heartbeat_interval_ms",
        "broker.rack": "rack",
        BUGS_KEY: "bugs",
    }

    def __post_init__(self) -> None:
        if self.node_id < 0:
            raise ConfigError(f"node.id: {self.node_id} must be >= 0")
        by_field = {attr: key for key, attr in self.PROPERTY_NAMES.items()}
        for name in (
            "heartbeat_interval_ms",
            "request_timeout_ms",
            "retry_backoff_ms",
            "replica_lag_time_max_ms",
            "replica_heartbeat_interval_ms",
        ):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{by_field[name]}: {getattr(self, name)} must be > 0")
        if self.replica_heartbeat_interval_ms >= self.replica_lag_time_max_ms:
            raise ConfigError(
                f"kchaos.replica.heartbeat.interval.ms ({self.replica_heartbeat_interval_ms}) must be below "
                f"replica.lag.time.max.ms ({self.replica_lag_time_max_ms}), or every follower would lag"
            )

    @classmethod
    def from_properties(cls, node_id: int, props: Mapping[str, str], where: str = "config") -> BrokerConfig:
        """Build from Kafka-style properties; keys this class does not know are ignored (the server
        config reports unknown keys). A bad value raises ConfigError naming the key and `where`."""
        kwargs: dict[str, object] = {}
        types = {f.name: f.type for f in fields(cls)}
        for key, attr in cls.PROPERTY_NAMES.items():
            if key not in props:
                continue
            value = props[key].strip()
            if attr == "bugs":
                try:
                    kwargs[attr] = parse_bugs(value)
                except UnknownBugError as e:
                    raise ConfigError(f"{where}: {key}: {e}") from None
            elif types[attr] == "int":
                try:
                    kwargs[attr] = int(value)
                except ValueError:
                    raise ConfigError(f"{where}: {key}={value!r} is not an integer") from None
            else:
                kwargs[attr] = value or None
        try:
            return cls(node_id=node_id, **kwargs)  # type: ignore[arg-type]
        except ConfigError as e:
            raise ConfigError(f"{where}: {e}") from None


__all__ = ["DEFAULT_FEATURES", "BrokerConfig"]
