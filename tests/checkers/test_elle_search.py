"""The cycle search on large components, its budget report, and the model lattice at the CLI."""

from __future__ import annotations

import json

import pytest

from checkers.elle import check_list_append
from checkers.elle.anomalies import ALIASES, FORBIDS, MODELS, implied_models, ruled_out
from harness.cli import main
from tests.checkers.txn_builder import Builder, append, r


def long_g_single(n: int) -> Builder:
    """A wr chain through n transactions, thousands of forward rw edges that close nothing, and one
    reader at the end that missed the chain's first append: one G-single, n + 1 transactions long."""
    b = Builder().txn(0, [append(0, 0)])
    for i in range(1, n):
        b.txn(i % 5, [r(i - 1, [i - 1]), append(i, i)])
        if i + 6 < n:
            b.txn(5 + i % 3, [r(i - 1, [i - 1]), r(i + 6, [])])  # rw forward: no cycle of its own
    return b.txn(9, [r(n - 1, [n - 1]), r(0, [])])


def test_a_long_g_single_in_a_large_component_is_found():
    verdict = check_list_append(long_g_single(3000).history(), "serializable")
    assert verdict.valid is False
    assert verdict.details["anomaly_counts"] == {"G-single": 1}
    assert verdict.details["anomalies"]["G-single"][0]["length"] == 3001


def write_skew() -> Builder:
    return Builder().concurrent((0, [r("x", []), append("y", 1)]), (1, [r("y", []), append("x", 1)]))


def test_a_search_that_gives_up_says_what_it_searched_and_still_names_a_cycle():
    # a figure of eight through X: X -rw-> A -ww-> X and X -rw-> B -ww-> X. Walking both loops takes
    # two rw edges, never adjacent, but repeats X: no simple G-nonadjacent, and proving that takes a
    # simple-path search per start edge, which a zero budget stops after the first
    from checkers.elle.anomalies import FORBIDS
    from checkers.elle.core import search_component
    from checkers.elle.graph import RW, WW, DepGraph, cycle_specs

    x, a, b = 0, 1, 2
    graph = DepGraph(3)
    for u, v, kind in ((x, a, RW), (a, x, WW), (x, b, RW), (b, x, WW)):
        graph.add(u, v, kind)
    nonadjacent = [s for s in cycle_specs(False, False) if s.name == "G-nonadjacent"]
    cycles, report = search_component(graph, [x, a, b], nonadjacent, FORBIDS["snapshot-isolation"], budget=0)
    assert report is not None and report["gave_up_on"] == ["G-nonadjacent"]
    assert report["component_size"] == 3 and report["does_not_contain"] == []
    assert report["searched"][0]["result"] == "gave up after 1 of 2 start edges"
    assert report["fallback_cycle"] == "G-single" and [c.name for c in cycles] == ["G-single"]
    # with a budget, the search proves there is none
    cycles, report = search_component(graph, [x, a, b], nonadjacent, FORBIDS["snapshot-isolation"], budget=1000)
    assert (cycles, report) == ([], None)


def test_the_timeout_makes_the_verdict_unknown_only_without_a_forbidden_anomaly(monkeypatch):
    import checkers.elle.core as core

    h = write_skew().history()

    def gives_up(graph, component, specs, forbidden, budget):
        return [core.any_cycle(graph.out, set(component))], {"component_size": len(component), "gave_up_on": ["x"]}

    monkeypatch.setattr(core, "search_component", gives_up)
    assert check_list_append(h, "snapshot-isolation").valid == "unknown"  # the fallback G2-item is allowed
    assert check_list_append(h, "serializable").valid is False


def test_lattice_is_ordered_and_every_model_forbids_what_weaker_ones_do():
    for model in MODELS:
        for weaker in implied_models(model):
            assert FORBIDS[weaker] <= FORBIDS[model], (model, weaker)
    assert "G-single" in FORBIDS["snapshot-isolation"] and "G2-item" not in FORBIDS["snapshot-isolation"]
    assert "lost-update" in FORBIDS["snapshot-isolation"] and "lost-update" not in FORBIDS["read-committed"]
    assert "G-nonadjacent" in FORBIDS["snapshot-isolation"]
    assert "internal" not in FORBIDS["read-committed"] and "internal" in FORBIDS["read-atomic"]
    assert "G-single-process" in FORBIDS["strong-session-snapshot-isolation"]
    assert "G-single-process" not in FORBIDS["snapshot-isolation"]
    assert "G1c-realtime" in FORBIDS["strong-read-committed"]
    assert ruled_out({"G0"}) == (
        ["read-uncommitted"],
        sorted(m for m in MODELS if "G0" in FORBIDS[m] and m != "read-uncommitted"),
    )


@pytest.mark.parametrize("model", [*MODELS, *ALIASES])
def test_every_model_and_alias_is_accepted_at_the_command_line(model, tmp_path, capsys):
    history = tmp_path / "history.jsonl"
    history.write_text("".join(json.dumps(e) + "\n" for e in write_skew().events))
    code = main(["check", str(history), "--checker", "elle-list-append", "--consistency-model", model])
    expected = 1 if "G2-item" in FORBIDS[ALIASES.get(model, model)] else 0
    assert code == expected, capsys.readouterr().out


def test_unknown_model_is_a_one_line_error_naming_the_known_ones(tmp_path, capsys):
    history = tmp_path / "history.jsonl"
    history.write_text("".join(json.dumps(e) + "\n" for e in write_skew().events))
    assert main(["check", str(history), "--checker", "elle-rw-register", "--consistency-model", "snapshot"]) == 254
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "unknown consistency model 'snapshot'" in err[0] and "strong-session-snapshot-isolation" in err[0]


def _name(kinds: list[int]) -> str:
    """An independent classifier of a closed walk's edge kinds (Elle's rules)."""
    from checkers.elle.graph import PROCESS, REALTIME, RW, WR

    n = len(kinds)
    rws = [i for i, k in enumerate(kinds) if k == RW]
    if not rws:
        base = "G1c" if WR in kinds else "G0"
    elif len(rws) == 1:
        base = "G-single"
    else:
        adjacent = any(kinds[i] == RW and kinds[(i + 1) % n] == RW for i in range(n))
        base = "G2-item" if adjacent else "G-nonadjacent"
    if REALTIME in kinds:
        return base + "-realtime"
    return base + "-process" if PROCESS in kinds else base


def test_search_finds_every_class_brute_force_finds_on_small_graphs():
    import itertools
    import random

    from checkers.elle.graph import EDGE_TYPES, DepGraph, cycle_specs, find_cycle, strongly_connected_components

    rng = random.Random(7)
    for _ in range(400):
        n = rng.randint(2, 5)
        graph = DepGraph(n)
        for a, b in itertools.permutations(range(n), 2):
            if rng.random() < 0.45:
                for kind in rng.sample(EDGE_TYPES, rng.randint(1, 2)):
                    graph.add(a, b, kind)
        for component in strongly_connected_components(graph.out):
            members = set(component)
            present: dict[str, int] = {}  # class -> shortest simple cycle
            for size in range(2, len(component) + 1):
                for nodes in itertools.permutations(sorted(members), size):
                    if nodes[0] != min(nodes):
                        continue
                    steps = [graph.out[nodes[i]].get(nodes[(i + 1) % size], 0) for i in range(size)]
                    if not all(steps):
                        continue
                    choices = [[k for k in EDGE_TYPES if mask & k] for mask in steps]
                    for kinds in itertools.product(*choices):
                        name = _name(list(kinds))
                        present[name] = min(present.get(name, size), size)
            for spec in cycle_specs(process=True, realtime=True):
                outcome = find_cycle(graph.out, members, spec)
                assert outcome.exhausted
                if spec.name in present:
                    assert outcome.cycle is not None, (spec.name, graph.out)
                    if "nonadjacent" not in spec.name:  # those are short, not always shortest
                        assert len(outcome.cycle.nodes) <= present[spec.name]
                if outcome.cycle is not None:
                    c = outcome.cycle
                    assert _name(c.kinds) == spec.name and len(set(c.nodes)) == len(c.nodes)
                    for i, kind in enumerate(c.kinds):
                        assert graph.out[c.nodes[i]][c.nodes[(i + 1) % len(c.nodes)]] & kind


def ring(n: int, rw_at: set[int]) -> Builder:
    """n concurrent transactions in a ring: T_i appends i to key i; the edge T_i -> T_(i+1) is rw
    (T_i read key i+1 empty) for i in `rw_at`, else wr (T_(i+1) read key i = [i])."""
    mops: list[list] = [[append(i, i)] for i in range(n)]
    for i in range(n):
        j = (i + 1) % n
        if i in rw_at:
            mops[i].insert(0, r(j, []))
        else:
            mops[j].insert(0, r(i, [i]))
    return Builder().concurrent(*enumerate(mops))


def test_a_g_nonadjacent_around_a_large_ring_is_found():
    h = ring(2000, {10, 1500}).history()
    verdict = check_list_append(h, "snapshot-isolation")
    assert verdict.valid is False and verdict.details["violations"] == ["G-nonadjacent"]
    assert verdict.details["anomalies"]["G-nonadjacent"][0]["length"] == 2000
    assert check_list_append(h, "read-committed").valid is True
    adjacent = check_list_append(ring(2000, {10, 11}).history(), "snapshot-isolation")
    assert adjacent.valid is True and adjacent.details["anomaly_types"] == ["G2-item"]
