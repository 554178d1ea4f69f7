"""Whole KRaft clusters in the simulator: which node plays which role and how its nodes are configured.

With `SimConfig(cluster=ClusterConfig(...))` every simulated host runs a `NodeProcess` (the Raft core
plus a quorum controller and/or a broker) instead of a bare Raft core. Node ids follow one layout:

    1 .. controllers                          controller-only voters
    controllers+1 .. controllers+combined     combined voters (controller and broker in one process)
    after those, `brokers` of them            broker-only observers

`node.sim.components.build_process` builds a host's process; its components come from
`node.controller` and `node.broker`, imported when the first process is built; `components=False`
(or a tree without them) runs the bare `NodeProcess`, which replicates and replays the metadata log
but serves no controller or broker API.

Who a request comes from matters once the authorizer is on, so the world asks `inbound_context` for
the `RequestContext` of every node-to-node request: the sender's inter-node principal, which is a
super user, and the listener a real node would have used ("CONTROLLER" towards a controller for the
quorum and controller APIs, "PLAINTEXT", the inter-broker listener, otherwise).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from node.bugs import NO_BUGS, Bugs, parse_bugs
from node.process.ports import RequestContext
from node.process.process import CONTROLLER_LISTENER
from node.protocol import messages
from node.protocol.broker_api import (
    AlterPartitionRequest,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    EnvelopeRequest,
    FetchSnapshotRequest,
)

BROKER_LISTENER = "PLAINTEXT"
SIM_PORT = 9092  # every simulated host "listens" here; hosts differ by address

_TO_CONTROLLER = frozenset(messages.REQUESTS) | {
    FetchSnapshotRequest,
    BrokerRegistrationRequest,
    BrokerHeartbeatRequest,
    AlterPartitionRequest,
    EnvelopeRequest,
}


@dataclass(frozen=True, slots=True)
class Roles:
    controller: bool
    broker: bool

    @property
    def label(self) -> str:
        return "combined" if self.controller and self.broker else "controller" if self.controller else "broker"


@dataclass(frozen=True)
class ClusterConfig:
    """The cluster's shape and the settings every process gets (timeouts in virtual milliseconds)."""

    controllers: int = 3
    brokers: int = 3
    combined: int = 0
    components: bool = True  # build the controller / broker state machines when node/ has them
    authorizer: bool = False  # enforce ACLs (super users: the inter-node principals and `super_users`)
    super_users: tuple[str, ...] = ("User:admin",)
    inter_node_principal: str | None = None  # None: "User:node-<id>" per node
    security_protocol: str = "PLAINTEXT"
    broker_heartbeat_interval_ms: int = 500
    broker_session_timeout_ms: int = 3000
    replica_lag_time_max_ms: int = 3000
    request_timeout_ms: int = 5000  # the broker's deadline for a forwarded request
    snapshot_every_records: int = 0  # 0: no snapshots
    bugs: Bugs = NO_BUGS  # planted bugs in every process (node/bugs.py); names or "a,b" are accepted too
    controller_options: Mapping[str, Any] = field(default_factory=dict)  # extra controller config fields
    broker_options: Mapping[str, Any] = field(default_factory=dict)  # extra broker config fields

    def __post_init__(self) -> None:
        object.__setattr__(self, "bugs", parse_bugs(self.bugs))
        if self.controllers < 0 or self.brokers < 0 or self.combined < 0:
            raise ValueError("controllers, brokers and combined must be >= 0")
        if self.voters < 1:
            raise ValueError("a cluster needs at least one controller or combined node")

    @property
    def voters(self) -> int:
        return self.controllers + self.combined

    @property
    def controller_ids(self) -> tuple[int, ...]:
        return tuple(range(1, self.voters + 1))

    @property
    def broker_ids(self) -> tuple[int, ...]:
        """Every node with the broker role: the combined voters, then the broker-only observers."""
        return tuple(range(self.controllers + 1, self.voters + self.brokers + 1))

    def roles(self, node_id: int) -> Roles:
        if 1 <= node_id <= self.controllers:
            return Roles(controller=True, broker=False)
        if node_id <= self.voters:
            return Roles(controller=True, broker=True)
        return Roles(controller=False, broker=True)

    def principal(self, node_id: int) -> str:
        return self.inter_node_principal or f"User:node-{node_id}"

    def all_super_users(self, node_ids: tuple[int, ...]) -> tuple[str, ...]:
        inter_node = {self.principal(n) for n in node_ids}
        return tuple(sorted(inter_node | set(self.super_users)))


def host_address(node_id: int) -> str:
    """The simulated IP of a node (for endpoints and client-host fields)."""
    return f"10.0.{node_id // 256}.{node_id % 256}"


def inbound_context(config: ClusterConfig, src: int, dst_roles: Roles, message: object) -> RequestContext:
    """The `RequestContext` a request from node `src` arrives with at a node with `dst_roles`."""
    to_controller = dst_roles.controller and (not dst_roles.broker or type(message) in _TO_CONTROLLER)
    return RequestContext(
        principal=config.principal(src),
        client_host=host_address(src),
        listener_name=CONTROLLER_LISTENER if to_controller else BROKER_LISTENER,
        security_protocol=config.security_protocol,
    )


def incarnation_id(rng: random.Random) -> uuid.UUID:
    """A fresh broker incarnation id per process start, from the process's seeded RNG."""
    return uuid.UUID(int=rng.getrandbits(128), version=4)


# A builder of the components of one process: (cluster config, roles, node id, incarnation, every
# node id) -> keyword arguments for NodeProcess (controller=..., broker=..., cluster_action=...).
ComponentBuilder = Callable[[ClusterConfig, Roles, int, uuid.UUID, tuple[int, ...]], dict[str, Any]]


__all__ = [
    "BROKER_LISTENER",
    "SIM_PORT",
    "ClusterConfig",
    "ComponentBuilder",
    "Roles",
    "host_address",
    "inbound_context",
    "incarnation_id",
]
