"""The quorum controller's settings, named as Kafka names them in `server.properties`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields

from node.bugs import BUGS_KEY, NO_BUGS, Bugs, UnknownBugError, parse_bugs
from node.raft.config import ConfigError
from node.raft.records import MAX_BATCH_BYTES
from node.security.authorizer import Authorizer

METADATA_VERSION = "metadata.version"


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    broker_session_timeout_ms: int = 9_000
    broker_heartbeat_interval_ms: int = 2_000
    num_partitions: int = 1
    default_replication_factor: int = 1
    delete_topic_enable: bool = True
    # Feature levels the controller finalizes when it finds none in the log (the cluster's bootstrap):
    # a broker must support each of them to register.
    metadata_version: int = 1
    # The authorizer's settings; the process builds the Authorizer from them (security.authorizer).
    authorizer_enabled: bool = False
    super_users: tuple[str, ...] = ()
    allow_everyone_if_no_acl_found: bool = False
    # One request = one atomic batch; a batch over these limits is refused whole (MESSAGE_TOO_LARGE)
    # before anything is appended. They match the Raft core's own limits.
    max_batch_records: int = 10_000
    max_batch_bytes: int = MAX_BATCH_BYTES - 64
    bugs: Bugs = NO_BUGS  # planted bugs switched on (node/bugs.py); empty in every real deployment

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> ControllerConfig:
        """Read the keys of PROPERTY_NAMES from `props`; others are ignored. Bad values raise ConfigError."""
        values: dict[str, object] = {}
        for f in fields(cls):
            key = PROPERTY_NAMES[f.name]
            text = props.get(key)
            if text is None:
                continue
            text = text.strip()
            if f.name == "bugs":
                try:
                    values[f.name] = parse_bugs(text)
                except UnknownBugError as exc:
                    raise ConfigError(f"{key}: {exc}") from None
            elif f.name == "super_users":
                values[f.name] = tuple(p.strip() for p in text.split(";") if p.strip())
            elif f.type == "bool":
                if text.lower() not in ("true", "false"):
                    raise ConfigError(f"{key}: {text!r} is not true or false")
                values[f.name] = text.lower() == "true"
            else:
                try:
                    number = int(text)
                except ValueError:
                    raise ConfigError(f"{key}: {text!r} is not an integer") from None
                if number < 1:
                    raise ConfigError(f"{key}: {number} must be at least 1")
                values[f.name] = number
        config = cls(**values)  # type: ignore[arg-type]
        config.validate()
        return config

    def validate(self) -> None:
        if self.broker_heartbeat_interval_ms >= self.broker_session_timeout_ms:
            raise ConfigError(
                f"broker.heartbeat.interval.ms ({self.broker_heartbeat_interval_ms}) must be below "
                f"broker.session.timeout.ms ({self.broker_session_timeout_ms})"
            )
        for p in self.super_users:
            if ":" not in p:
                raise ConfigError(f"super.users: {p!r} is not a principal like User:name")


# Field -> the `server.properties` key (Kafka's name where Kafka has one).
PROPERTY_NAMES: dict[str, str] = {
    "broker_session_timeout_ms": "broker.session.timeout.ms",
    "broker_heartbeat_interval_ms": "broker.heartbeat.interval.ms",
    "num_partitions": "num.partitions",
    "default_replication_factor": "default.replication.factor",
    "delete_topic_enable": "delete.topic.enable",
    "metadata_version": "metadata.version",
    "authorizer_enabled": "authorizer.enabled",  # Kafka: authorizer.class.name set or not
    "super_users": "super.users",
    "allow_everyone_if_no_acl_found": "allow.everyone.if.no.acl.found",
    "max_batch_records": "controller.max.batch.records",
    "max_batch_bytes": "controller.max.batch.bytes",
    "bugs": BUGS_KEY,
}


def make_authorizer(config: ControllerConfig) -> Authorizer | None:
    """The authorizer `config` asks for (None when `authorizer.enabled` is false): pass it to the
    controller, and its `cluster_action` to the process as its ClusterAction check."""
    if not config.authorizer_enabled:
        return None
    return Authorizer(config.super_users, config.allow_everyone_if_no_acl_found)


__all__ = ["METADATA_VERSION", "PROPERTY_NAMES", "ControllerConfig", "make_authorizer"]
