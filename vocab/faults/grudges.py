"""The standard partitions as grudges (node -> nodes it must not hear from), for any backend."""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence

from vocab.faults.kinds import Grudge


def complete(components: Iterable[Iterable[str]]) -> dict[str, frozenset[str]]:
    """Split the nodes into components that hear only each other (both directions are cut)."""
    parts = [frozenset(c) for c in components]
    everyone = frozenset().union(*parts)
    return {node: everyone - part for part in parts for node in part}


def isolate(node: str, nodes: Sequence[str]) -> dict[str, frozenset[str]]:
    """Cut `node` off from every other node (e.g. the leader, whose id the caller supplies)."""
    if node not in nodes:
        raise ValueError(f"cannot isolate unknown node '{node}' (nodes: {', '.join(nodes)})")
    return complete([[node], [n for n in nodes if n != node]])


def isolate_random(nodes: Sequence[str], rng: random.Random) -> dict[str, frozenset[str]]:
    return isolate(rng.choice(list(nodes)), nodes)


def random_halves(nodes: Sequence[str], rng: random.Random) -> dict[str, frozenset[str]]:
    """Shuffle, then split into a smaller and a larger half (a majority stays on one side)."""
    shuffled = list(nodes)
    rng.shuffle(shuffled)
    cut = len(shuffled) // 2
    return complete([shuffled[:cut], shuffled[cut:]])


def cut_pairs(grudge: Grudge) -> set[tuple[str, str]]:
    """(dst, src) pairs whose packets are dropped, for display and tests."""
    return {(dst, src) for dst, srcs in grudge.items() for src in srcs}
