"""Every partition mode of the catalogue as a grudge (node -> the nodes it must not hear from).

Pure functions of the cluster's shape, the current leader and a seeded RNG, over any sortable node
names: the nemesis uses them with names ("c1"), the simulator's own fault injector with integer ids.
Backends only ever see the resulting grudge (`Backend.partition`), so they never import this module.
"""

from __future__ import annotations

import random
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from vocab.faults.grudges import complete, isolate
from vocab.faults.targets import ClusterView, NoTarget, majority_size

Node = Any  # str in the harness, int in the simulator
Grudge = dict[Node, frozenset[Node]]


@dataclass(frozen=True)
class Partition:
    """A grudge plus what the history says about it: the nodes it is aimed at and mode details."""

    mode: str
    grudge: Grudge
    targets: list[Node]
    details: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        """For a history value: the grudge as dst -> sorted sources (only nodes that lose someone)."""
        cut = {str(dst): sorted(str(s) for s in srcs) for dst, srcs in sorted(self.grudge.items()) if srcs}
        return {"targets": [str(t) for t in self.targets], **self.details, "grudge": cut}


def recorded(mode: str, value: dict[str, Any], nodes: Sequence[str]) -> Partition:
    """The partition a history's start-partition value describes (`Partition.describe`), for a replay:
    its grudge over the nodes this cluster has, its targets and details as they were."""
    known = set(nodes)
    grudge = {
        str(dst): frozenset(str(s) for s in srcs if str(s) in known)
        for dst, srcs in value["grudge"].items()
        if str(dst) in known and isinstance(srcs, list)
    }
    details = {k: v for k, v in value.items() if k not in ("kind", "mode", "targets", "grudge")}
    targets = [str(t) for t in value.get("targets", []) if str(t) in known]
    return Partition(mode, {dst: srcs for dst, srcs in grudge.items() if srcs}, targets, details)


def build(mode: str, view: ClusterView, rng: random.Random) -> Partition:
    """The partition of `mode` for this cluster now (NoTarget when the mode cannot apply)."""
    nodes = list(view.nodes)
    if len(nodes) < 2:
        raise NoTarget("a partition needs at least two nodes")
    if mode == "random-halves":
        shuffled = nodes[:]
        rng.shuffle(shuffled)
        small, large = shuffled[: len(nodes) // 2], shuffled[len(nodes) // 2 :]
        return Partition(mode, complete([small, large]), _ordered(small, nodes))
    if mode in ("isolate-one", "isolate-leader"):
        victim = view.leader if mode == "isolate-leader" else None
        details = {"leader": view.leader} if mode == "isolate-leader" else {}
        if victim is None:
            victim = rng.choice(list(view.controllers) if mode == "isolate-leader" else nodes)
        return Partition(mode, isolate(victim, nodes), [victim], details)
    if mode == "majorities-ring":
        grudge, ring = majorities_ring(view.controllers, nodes, rng)
        return Partition(mode, grudge, _ordered(ring, nodes), {"ring": [str(n) for n in ring]})
    if mode == "bridge":
        grudge, bridge_node = bridge(nodes, rng)
        return Partition(mode, grudge, [bridge_node])
    if mode == "one-way":
        victim = rng.choice(nodes)
        direction = rng.choice(("deaf", "mute"))
        return Partition(mode, one_way(victim, nodes, direction), [victim], {"direction": direction})
    if mode == "controllers-from-brokers":
        brokers = list(view.broker_only)
        if not brokers:
            raise NoTarget("controllers-from-brokers needs broker-only nodes (every broker here is a controller)")
        return Partition(mode, complete([[n for n in nodes if n not in brokers], brokers]), brokers)
    if mode == "leader-from-controllers":
        controllers = list(view.controllers)
        if len(controllers) < 2:
            raise NoTarget("leader-from-controllers needs at least two controllers")
        leader = view.leader if view.leader in controllers else rng.choice(controllers)
        others = [c for c in controllers if c != leader]
        return Partition(mode, cut_off(leader, others, nodes), [leader], {"leader": view.leader})
    if mode == "isolate-each-controller":
        controllers = list(view.controllers)
        if len(controllers) < 2:
            raise NoTarget("isolate-each-controller needs at least two controllers")
        return Partition(mode, isolate_each(controllers, nodes), controllers)
    raise ValueError(f"unknown partition mode {mode!r}")


def _ordered(some: Iterable[Node], nodes: Sequence[Node]) -> list[Node]:
    chosen = set(some)
    return [n for n in nodes if n in chosen]


def symmetric(links: dict[Node, set[Node]], everyone: Sequence[Node]) -> Grudge:
    """The grudge that leaves exactly `links` (who hears whom; a node always hears itself) among
    `everyone`; nodes not in `links` keep hearing everyone."""
    grudge: Grudge = {}
    for node, hears in links.items():
        grudge[node] = frozenset(m for m in links if m != node and m not in hears)
    for node in everyone:
        grudge.setdefault(node, frozenset())
    return grudge


def majorities_ring(voters: Sequence[Node], nodes: Sequence[Node], rng: random.Random) -> tuple[Grudge, list[Node]]:
    """Voters shuffled onto a ring; each hears its nearest neighbours, links added nearest-first
    until each hears a majority, so no single majority holds together. Other nodes hear everyone."""
    ring = list(voters)
    n = len(ring)
    if n < 3:
        raise NoTarget("majorities-ring needs at least three controllers")
    rng.shuffle(ring)
    need = majority_size(n)
    reach = (need - 1) // 2

    def dist(i: int, j: int) -> int:
        return min((i - j) % n, (j - i) % n)

    hears = {i: {j for j in range(n) if dist(i, j) <= reach} for i in range(n)}
    for i in range(n):
        while len(hears[i]) < need:
            others = [j for j in range(n) if j not in hears[i]]
            # nearest first, preferring nodes that still need links, clockwise on ties
            j = min(others, key=lambda j: (len(hears[j]) >= need, dist(i, j), (j - i) % n))
            hears[i].add(j)
            hears[j].add(i)
    links = {ring[i]: {ring[j] for j in hears[i]} for i in range(n)}
    return symmetric(links, nodes), ring


def bridge(nodes: Sequence[Node], rng: random.Random) -> tuple[Grudge, Node]:
    """Jepsen's bridge: the nodes split in two halves that cannot hear each other, except one node
    (the bridge) that hears and is heard by both."""
    if len(nodes) < 3:
        raise NoTarget("a bridge needs at least three nodes")
    shuffled = list(nodes)
    rng.shuffle(shuffled)
    bridge_node, rest = shuffled[0], shuffled[1:]
    left, right = rest[: len(rest) // 2], rest[len(rest) // 2 :]
    grudge: Grudge = {n: frozenset(right) for n in left}
    grudge.update({n: frozenset(left) for n in right})
    grudge[bridge_node] = frozenset()
    return grudge, bridge_node


def one_way(node: Node, nodes: Sequence[Node], direction: str) -> Grudge:
    """An asymmetric partition: `deaf` — `node` hears no one but is heard; `mute` — no one hears
    `node`, which still hears everyone."""
    others = [n for n in nodes if n != node]
    if direction == "deaf":
        return {node: frozenset(others)}
    if direction == "mute":
        return {n: frozenset({node}) for n in others}
    raise ValueError(f"one-way direction must be deaf or mute, got {direction!r}")


def cut_off(node: Node, peers: Sequence[Node], nodes: Sequence[Node]) -> Grudge:
    """`node` and `peers` cannot hear each other (both ways); every other link stays."""
    grudge: Grudge = {n: frozenset() for n in nodes}
    grudge[node] = frozenset(peers)
    for peer in peers:
        grudge[peer] = frozenset({node})
    return grudge


def isolate_each(controllers: Sequence[Node], nodes: Sequence[Node]) -> Grudge:
    """No controller hears another; every other link stays."""
    grudge: Grudge = {c: frozenset(d for d in controllers if d != c) for c in controllers}
    for node in nodes:
        grudge.setdefault(node, frozenset())
    return grudge


def hears(grudge: Grudge, dst: Hashable, src: Hashable) -> bool:
    """Whether `dst` hears `src` under `grudge`."""
    return src not in grudge.get(dst, frozenset())
