"""The standard partitions as grudges."""

from __future__ import annotations

import random

import pytest

from vocab.backend import check_grudge
from vocab.faults.grudges import complete, cut_pairs, isolate, isolate_random, random_halves

NODES = ["n1", "n2", "n3", "n4", "n5"]


def test_isolate_cuts_both_directions_and_nothing_else():
    g = isolate("n3", NODES)
    assert g["n3"] == {"n1", "n2", "n4", "n5"}
    assert all(g[n] == {"n3"} for n in NODES if n != "n3")
    assert cut_pairs(g) == {(a, b) for a in NODES for b in NODES if a != b and "n3" in (a, b)}
    with pytest.raises(ValueError, match="unknown node 'n9'"):
        isolate("n9", NODES)


@pytest.mark.parametrize("seed", range(5))
def test_random_halves_is_a_complete_bipartition_with_a_majority(seed):
    g = random_halves(NODES, random.Random(seed))
    sides = {frozenset(set(NODES) - g[n]) for n in NODES}  # each node's side = who it still hears
    assert len(sides) == 2 and sorted(len(s) for s in sides) == [2, 3]
    for n in NODES:
        assert n in set(NODES) - g[n] and not (g[n] & (set(NODES) - g[n]))
    assert random_halves(NODES, random.Random(seed)) == g  # deterministic for a seed


def test_isolate_random_and_complete():
    g = isolate_random(NODES, random.Random(1))
    loner = next(n for n in NODES if len(g[n]) == 4)
    assert g == isolate(loner, NODES)
    assert complete([["n1"], ["n2"], ["n3"]]) == {
        "n1": {"n2", "n3"},
        "n2": {"n1", "n3"},
        "n3": {"n1", "n2"},
    }


def test_check_grudge_names_the_unknown_node():
    check_grudge(isolate("n1", NODES), NODES)
    with pytest.raises(ValueError, match="unknown node 'x'"):
        check_grudge({"n1": frozenset({"x"})}, NODES)
