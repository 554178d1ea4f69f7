"""Which nodes a fault hits: a target mode (`one`, `leader`, `minority`…) made concrete.

Choices come from the caller's seeded RNG and the cluster as the DB adapter describes it (its
nodes, their roles, the current leader), so a simulated run picks the same nodes every time. Only
`eligible` nodes are picked (e.g. a node already down cannot be killed again); a mode that finds no
eligible node raises `NoTarget`, which the nemesis turns into a `fail` completion.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Sequence
from dataclasses import dataclass


class NoTarget(Exception):
    """No node fits the target mode (the message says why)."""


@dataclass(frozen=True)
class ClusterView:
    """The cluster as a nemesis sees it at the moment it chooses."""

    nodes: tuple[str, ...]
    controllers: tuple[str, ...]  # voters
    brokers: tuple[str, ...]  # nodes with the broker role (combined ones included)
    leader: str | None = None

    @property
    def broker_only(self) -> tuple[str, ...]:
        return tuple(n for n in self.brokers if n not in self.controllers)

    @classmethod
    def of(cls, db: object, leader: str | None) -> ClusterView:
        """From a DB adapter (`nodes`, `roles(node)`)."""
        nodes = tuple(db.nodes)  # type: ignore[attr-defined]
        roles = {n: db.roles(n) for n in nodes}  # type: ignore[attr-defined]
        return cls(
            nodes,
            tuple(n for n in nodes if "controller" in roles[n]),
            tuple(n for n in nodes if "broker" in roles[n]),
            leader,
        )


def minority_size(voters: int) -> int:
    """The largest minority of `voters`: losing it leaves a quorum."""
    return (voters - 1) // 2


def majority_size(voters: int) -> int:
    return voters // 2 + 1


def choose(mode: str, view: ClusterView, rng: random.Random, eligible: Collection[str] | None = None) -> list[str]:
    """The nodes for target mode `mode`, in the cluster's node order (see the module docstring)."""
    ok = set(view.nodes if eligible is None else eligible)
    nodes = [n for n in view.nodes if n in ok]
    controllers = [n for n in view.controllers if n in ok]
    brokers = [n for n in view.brokers if n in ok]

    def one_of(pool: Sequence[str], what: str) -> list[str]:
        if not pool:
            raise NoTarget(f"no {what} to target")
        return [rng.choice(list(pool))]

    def some_of(pool: Sequence[str], size: int, what: str) -> list[str]:
        if size <= 0:
            raise NoTarget(f"{len(view.controllers)} controller(s) have no {what}")
        if not pool:
            raise NoTarget(f"no controller to target for a {what}")
        picked = set(rng.sample(list(pool), min(size, len(pool))))
        return [n for n in view.nodes if n in picked]

    if mode == "one":
        return one_of(nodes, "node")
    if mode == "leader":
        if view.leader is not None and view.leader in ok:
            return [view.leader]
        if view.leader is not None:
            raise NoTarget(f"the leader {view.leader} cannot be targeted now")
        return one_of(controllers, "controller (no leader is known)")
    if mode == "follower":
        return one_of([n for n in controllers if n != view.leader], "follower")
    if mode == "minority":
        return some_of(controllers, minority_size(len(view.controllers)), "minority")
    if mode == "majority":
        return some_of(controllers, majority_size(len(view.controllers)), "majority")
    if mode == "all":
        return nodes or _none("node")
    if mode == "controllers":
        return controllers or _none("controller")
    if mode == "brokers":
        return brokers or _none("broker")
    if mode == "one-controller":
        return one_of(controllers, "controller")
    if mode == "one-broker":
        return one_of(brokers, "broker")
    raise ValueError(f"unknown target mode {mode!r}")


def _none(what: str) -> list[str]:
    raise NoTarget(f"no {what} to target")
