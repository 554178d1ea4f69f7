"""The controller and broker of a simulated node process, built with the simulator's settings.

`build` is the default `ComponentBuilder` (`node.sim.cluster`) of `build_process`, which makes a host's
process: it turns a `ClusterConfig` into the
`NodeProcess` keyword arguments for one node (a `QuorumController` factory on controllers, a `Broker`
factory on brokers, the authorizer's ClusterAction check when the authorizer is on). Timeouts come
from the `ClusterConfig`, scaled for virtual time (a session of a few seconds instead of Kafka's 9 s)
so that a scenario fences a broker in seconds of simulated time.
"""

from __future__ import annotations

import functools
import importlib
import random
import uuid
from typing import Any

from node.metadata.records import SecurityProtocol
from node.process.process import NodeProcess
from node.sim.cluster import BROKER_LISTENER, SIM_PORT, ClusterConfig, ComponentBuilder, Roles, host_address


def available() -> bool:
    """Whether `node.controller`, `node.broker` and `node.security` can be imported (they are being
    written alongside the simulator; until then a cluster runs bare processes)."""
    try:
        for module in ("node.controller.controller", "node.broker.broker", "node.security.authorizer"):
            importlib.import_module(module)
    except ImportError:
        return False
    return True


def build(
    config: ClusterConfig, roles: Roles, node_id: int, incarnation: uuid.UUID, all_ids: tuple[int, ...]
) -> dict[str, Any]:
    from node.broker.broker import Broker
    from node.broker.config import BrokerConfig
    from node.controller.config import ControllerConfig
    from node.controller.controller import QuorumController
    from node.protocol.broker_api import Listener
    from node.security.authorizer import Authorizer

    super_users = config.all_super_users(all_ids)

    def authorizer() -> Authorizer | None:  # one per user: each caches an index of its image
        return Authorizer(super_users) if config.authorizer else None

    kwargs: dict[str, Any] = {}
    if roles.controller:
        controller_config = ControllerConfig(
            broker_session_timeout_ms=config.broker_session_timeout_ms,
            broker_heartbeat_interval_ms=config.broker_heartbeat_interval_ms,
            authorizer_enabled=config.authorizer,
            super_users=super_users,
            bugs=config.bugs,
            **dict(config.controller_options),
        )
        controller_config.validate()
        controller_authorizer = authorizer()
        kwargs["controller"] = lambda port: QuorumController(port, controller_config, controller_authorizer)
    if roles.broker:
        broker_config = BrokerConfig(
            node_id=node_id,
            heartbeat_interval_ms=config.broker_heartbeat_interval_ms,
            request_timeout_ms=config.request_timeout_ms,
            replica_lag_time_max_ms=config.replica_lag_time_max_ms,
            bugs=config.bugs,
            **dict(config.broker_options),
        )
        protocol = SecurityProtocol[config.security_protocol]
        listeners = (Listener(BROKER_LISTENER, host_address(node_id), SIM_PORT, int(protocol)),)
        broker_authorizer = authorizer()
        kwargs["broker"] = lambda port: Broker(
            port, broker_config, incarnation, listeners, authorizer=broker_authorizer
        )
    check = authorizer()
    if check is not None:
        kwargs["cluster_action"] = check.cluster_action
    return kwargs


__all__ = ["available", "build", "build_process", "default_components"]


def build_process(
    config: ClusterConfig,
    roles: Roles,
    raft: Any,
    rng: random.Random,
    all_ids: tuple[int, ...],
    incarnation: uuid.UUID,
    components: ComponentBuilder | None = None,
) -> NodeProcess:
    """The process of one host: its Raft core wrapped in a NodeProcess with the components for `roles`."""
    node_id = raft.node_id
    kwargs: dict[str, Any] = {}
    if config.components:
        builder = components or default_components()
        if builder is not None:
            kwargs = builder(config, roles, node_id, incarnation, all_ids)
    if config.snapshot_every_records > 0:
        from node.metadata.snapshot import snapshot_bytes

        kwargs.setdefault("snapshot_every_records", config.snapshot_every_records)
        kwargs.setdefault("snapshot_maker", functools.partial(snapshot_bytes, bugs=config.bugs))
    return NodeProcess(raft, own_principal=config.principal(node_id), rng=random.Random(rng.getrandbits(64)), **kwargs)


def default_components() -> ComponentBuilder | None:
    """The builder over `node.controller` and `node.broker`, or None while they do not exist yet."""
    return build if available() else None
