"""Target modes and every partition mode's grudge, on the shapes a test can have."""

from __future__ import annotations

import itertools
import random
from collections import Counter

import pytest

from vocab.faults import partitions
from vocab.faults.catalogue import PARTITION_MODES, TARGET_MODES
from vocab.faults.targets import ClusterView, NoTarget, choose

SPLIT = ClusterView(("c1", "c2", "c3", "b1", "b2"), ("c1", "c2", "c3"), ("b1", "b2"), leader="c2")
FIVE = ClusterView(("c1", "c2", "c3", "c4", "c5", "b1"), ("c1", "c2", "c3", "c4", "c5"), ("b1",), leader="c4")
COMBINED = ClusterView(("n1", "n2", "n3"), ("n1", "n2", "n3"), ("n1", "n2", "n3"), leader=None)


def draws(mode: str, view: ClusterView, n: int = 200, eligible=None) -> list[list[str]]:
    rng = random.Random(7)
    return [choose(mode, view, rng, eligible) for _ in range(n)]


def test_leader_is_the_current_leader_and_a_controller_when_none_is_known():
    assert all(t == ["c2"] for t in draws("leader", SPLIT))
    picked = {t[0] for t in draws("leader", COMBINED)}
    assert picked == {"n1", "n2", "n3"}
    with pytest.raises(NoTarget, match="the leader c2 cannot be targeted"):
        choose("leader", SPLIT, random.Random(1), eligible=["c1", "c3"])


@pytest.mark.parametrize(("view", "minority", "majority"), [(SPLIT, 1, 2), (FIVE, 2, 3), (COMBINED, 1, 2)])
def test_minority_and_majority_count_the_controllers(view, minority, majority):
    for mode, size in (("minority", minority), ("majority", majority)):
        seen = draws(mode, view)
        assert all(len(t) == size and set(t) <= set(view.controllers) for t in seen)
        assert len({tuple(t) for t in seen}) > 1  # random, not always the same nodes
        assert all(t == sorted(t, key=view.nodes.index) for t in seen)  # in node order


def test_modes_pick_only_what_they_name():
    assert all(t == ["c1", "c2", "c3", "b1", "b2"] for t in draws("all", SPLIT, 5))
    assert draws("controllers", SPLIT, 1) == [["c1", "c2", "c3"]]
    assert draws("brokers", SPLIT, 1) == [["b1", "b2"]]
    assert {t[0] for t in draws("follower", SPLIT)} == {"c1", "c3"}
    assert {t[0] for t in draws("one-broker", SPLIT)} == {"b1", "b2"}
    assert {t[0] for t in draws("one-controller", SPLIT)} == {"c1", "c2", "c3"}
    counts = Counter(t[0] for t in draws("one", SPLIT, 1000))
    assert set(counts) == set(SPLIT.nodes) and min(counts.values()) > 120  # about uniform


def test_only_eligible_nodes_are_picked_and_none_is_an_error():
    assert {t[0] for t in draws("one", SPLIT, eligible=["c3", "b2"])} == {"c3", "b2"}
    assert all(t == ["c1"] for t in draws("majority", SPLIT, eligible=["c1", "b1"]))  # what is left
    with pytest.raises(NoTarget):
        choose("one", SPLIT, random.Random(1), eligible=[])
    with pytest.raises(NoTarget, match="no minority"):
        choose("minority", ClusterView(("c1",), ("c1",), ()), random.Random(1))
    with pytest.raises(NoTarget):
        choose("brokers", ClusterView(("c1", "c2"), ("c1", "c2"), ()), random.Random(1))
    for mode in TARGET_MODES:  # every mode is known
        choose(mode, FIVE, random.Random(1))


# --- partitions ---------------------------------------------------------------------------------------


def hears(grudge, dst, src) -> bool:
    return partitions.hears(grudge, dst, src)


def build(mode: str, view: ClusterView, seed: int = 3) -> partitions.Partition:
    return partitions.build(mode, view, random.Random(seed))


def components(grudge, nodes) -> list[set[str]]:
    return [{m for m in nodes if hears(grudge, n, m) and hears(grudge, m, n)} | {n} for n in nodes]


@pytest.mark.parametrize("view", [SPLIT, FIVE, COMBINED])
def test_random_halves_cuts_the_nodes_in_two_halves(view):
    for seed in range(10):
        p = build("random-halves", view, seed)
        small = set(p.targets)
        large = set(view.nodes) - small
        assert len(small) == len(view.nodes) // 2 and len(large) >= len(small)
        for a, b in itertools.product(small, large):
            assert not hears(p.grudge, a, b) and not hears(p.grudge, b, a)
        for a, b in itertools.permutations(large, 2):
            assert hears(p.grudge, a, b)


def test_isolate_leader_isolates_exactly_the_current_leader():
    p = build("isolate-leader", SPLIT)
    assert p.targets == ["c2"] and p.details == {"leader": "c2"}
    for other in SPLIT.nodes:
        if other != "c2":
            assert not hears(p.grudge, "c2", other) and not hears(p.grudge, other, "c2")
            assert all(hears(p.grudge, other, x) for x in SPLIT.nodes if x != "c2")
    p = build("isolate-one", SPLIT)
    assert len(p.targets) == 1 and all(not hears(p.grudge, p.targets[0], n) for n in SPLIT.nodes if n != p.targets[0])


@pytest.mark.parametrize("view", [SPLIT, FIVE, COMBINED])
def test_majorities_ring_every_controller_hears_a_majority_and_not_all_the_same(view):
    for seed in range(10):
        p = build("majorities-ring", view, seed)
        voters = view.controllers
        majority = len(voters) // 2 + 1
        heard = {v: frozenset(u for u in voters if u == v or hears(p.grudge, v, u)) for v in voters}
        assert all(len(h) >= majority for h in heard.values())
        assert all(hears(p.grudge, a, b) == hears(p.grudge, b, a) for a, b in itertools.permutations(voters, 2))
        assert len(set(heard.values())) > 1  # no single majority holds together
        assert any(len(h) < len(voters) for h in heard.values())  # something is cut
        for broker in view.broker_only:
            assert all(hears(p.grudge, broker, n) and hears(p.grudge, n, broker) for n in view.nodes)
    with pytest.raises(NoTarget):
        build("majorities-ring", ClusterView(("c1", "c2", "b1"), ("c1", "c2"), ("b1",)))


@pytest.mark.parametrize("view", [SPLIT, FIVE])
def test_bridge_only_the_bridge_hears_both_halves(view):
    p = build("bridge", view)
    bridge = p.targets[0]
    rest = [n for n in view.nodes if n != bridge]
    assert all(hears(p.grudge, bridge, n) and hears(p.grudge, n, bridge) for n in rest)
    sides = {frozenset(c - {bridge}) for c in components(p.grudge, rest)}
    assert len(sides) == 2 and set().union(*sides) == set(rest)
    a, b = sides
    assert all(not hears(p.grudge, x, y) for x in a for y in b)


def test_one_way_cuts_one_direction_only():
    seen = set()
    for seed in range(20):
        p = build("one-way", SPLIT, seed)
        node, direction = p.targets[0], p.details["direction"]
        seen.add(direction)
        others = [n for n in SPLIT.nodes if n != node]
        if direction == "deaf":
            assert all(not hears(p.grudge, node, o) and hears(p.grudge, o, node) for o in others)
        else:
            assert all(hears(p.grudge, node, o) and not hears(p.grudge, o, node) for o in others)
    assert seen == {"deaf", "mute"}


def test_controllers_from_brokers_and_isolate_each_controller():
    p = build("controllers-from-brokers", SPLIT)
    assert p.targets == ["b1", "b2"]
    for c, b in itertools.product(SPLIT.controllers, SPLIT.broker_only):
        assert not hears(p.grudge, c, b) and not hears(p.grudge, b, c)
    assert hears(p.grudge, "b1", "b2") and hears(p.grudge, "c1", "c3")
    with pytest.raises(NoTarget, match="broker-only"):
        build("controllers-from-brokers", COMBINED)
    p = build("isolate-each-controller", FIVE)
    for a, b in itertools.permutations(FIVE.controllers, 2):
        assert not hears(p.grudge, a, b)
    assert all(hears(p.grudge, "b1", c) and hears(p.grudge, c, "b1") for c in FIVE.controllers)


def test_leader_from_controllers_cuts_the_leader_off_from_the_controllers_only():
    """KAFKA-15489's partial partition: the leader and the other controllers cannot hear each other;
    the brokers still hear, and are heard by, everyone."""
    for view in (SPLIT, FIVE):
        p = build("leader-from-controllers", view)
        leader = view.leader
        assert p.targets == [leader] and p.details == {"leader": leader}
        for c in view.controllers:
            if c != leader:
                assert not hears(p.grudge, c, leader) and not hears(p.grudge, leader, c)
        for a, b in itertools.permutations(view.nodes, 2):
            if leader not in (a, b) or not ({a, b} <= set(view.controllers)):
                assert hears(p.grudge, a, b), (a, b)
    picked = {build("leader-from-controllers", COMBINED, seed).targets[0] for seed in range(20)}
    assert picked == {"n1", "n2", "n3"}  # no known leader: a random controller
    with pytest.raises(NoTarget, match="at least two controllers"):
        build("leader-from-controllers", ClusterView(("c1", "b1"), ("c1",), ("b1",), leader="c1"))


@pytest.mark.parametrize("mode", PARTITION_MODES)
def test_every_mode_describes_itself_for_the_history(mode):
    p = build(mode, FIVE)
    value = p.describe()
    assert value["targets"] == [str(t) for t in p.targets] and value["targets"]
    assert value["grudge"] and all(isinstance(v, list) for v in value["grudge"].values())
    cut = {(d, s) for d, srcs in value["grudge"].items() for s in srcs}
    assert cut == {(d, s) for d, srcs in p.grudge.items() for s in srcs}
