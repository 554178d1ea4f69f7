"""Builds a node's process from its config: the Raft core plus the roles of `process.roles`.

The controller and the broker read their settings from the same server.properties (Kafka's names);
the authorizer and the principal this node uses towards the others come from the security keys
(see `server_config`). A broker registers its listeners as they are configured, its first one
being where other brokers reach it.
"""

from __future__ import annotations

import functools
import random
import uuid

from node.broker.broker import Broker
from node.broker.config import BrokerConfig
from node.controller.config import ControllerConfig
from node.controller.controller import QuorumController
from node.metadata.snapshot import snapshot_bytes
from node.process.ports import ANONYMOUS
from node.process.process import NodeProcess
from node.protocol.broker_api import Listener as WireListener
from node.raft.config import ConfigError
from node.raft.node import RaftNode
from node.runtime.server_config import ServerConfig
from node.security.authorizer import Authorizer

SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SASL_PLAINTEXT": 2}
SNAPSHOT_EVERY_KEY = "metadata.log.max.snapshot.interval.records"  # kraft-chaos's: records between snapshots
DEFAULT_SNAPSHOT_EVERY = 20_000


def own_principal(config: ServerConfig) -> str:
    return f"User:{config.sasl_login[0]}" if config.sasl_login else ANONYMOUS


def authorizer_of(config: ServerConfig) -> Authorizer | None:
    if not config.authorizer:
        return None
    return Authorizer(config.super_users, config.allow_everyone_if_no_acl_found, enabled=True)


def _snapshot_every(config: ServerConfig) -> int:
    text = config.settings.get(SNAPSHOT_EVERY_KEY)
    if text is None:
        return DEFAULT_SNAPSHOT_EVERY
    try:
        value = int(text)
    except ValueError:
        raise ConfigError(f"{config.source}: {SNAPSHOT_EVERY_KEY}={text!r} is not an integer") from None
    if value < 0:
        raise ConfigError(f"{config.source}: {SNAPSHOT_EVERY_KEY}={value} must be >= 0 (0: never)")
    return value


def build_process(config: ServerConfig, raft: RaftNode, rng: random.Random) -> NodeProcess:
    """The node's process; ConfigError when a controller or broker setting is bad."""
    authorizer = authorizer_of(config)
    controller_config = None
    if "controller" in config.roles:
        settings = dict(config.settings)
        settings.setdefault("authorizer.enabled", "true" if config.authorizer else "false")
        try:
            controller_config = ControllerConfig.from_properties(settings)
        except ConfigError as exc:
            raise ConfigError(f"{config.source}: {exc}") from None
    broker_config = (
        BrokerConfig.from_properties(config.node_id, config.settings, config.source)
        if "broker" in config.roles
        else None
    )
    listeners = tuple(
        WireListener(lsn.name, lsn.host, lsn.port, SECURITY_PROTOCOL_IDS[lsn.security_protocol])
        for lsn in config.broker_listeners
    )
    incarnation = uuid.UUID(int=rng.getrandbits(128), version=4)

    return NodeProcess(
        raft,
        controller=(lambda port: QuorumController(port, controller_config, authorizer)) if controller_config else None,
        broker=(lambda port: Broker(port, broker_config, incarnation, listeners, authorizer=authorizer))
        if broker_config
        else None,
        cluster_action=authorizer.cluster_action if authorizer is not None else None,
        own_principal=own_principal(config),
        snapshot_every_records=_snapshot_every(config) if controller_config else 0,
        snapshot_maker=functools.partial(snapshot_bytes, bugs=config.bugs) if config.bugs else snapshot_bytes,
        rng=random.Random(rng.getrandbits(64)),
    )


__all__ = ["authorizer_of", "build_process", "own_principal"]
