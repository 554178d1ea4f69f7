"""Registers with small repeated values (issue 29): the symmetry of equal ops, the read-from
witnesses, and the generator of Jepsen's cas-register shape."""

from __future__ import annotations

import pytest

from checkers.gen import cas_register_history
from checkers.history import pair, read_events
from checkers.linearizable import check, check_key, summarize
from checkers.models import RegisterModel
from checkers.register_search import NO_NEED, urgent_first
from checkers.verdict import UNKNOWN
from tests.checkers.lin_helpers import history

MODEL = RegisterModel()
EQUAL_WRITERS = 12


def _equal_writes(last_read: int) -> list:
    """Twelve processes write 1 at once, then one reads `last_read` (1: valid, 2: nobody wrote 2
    in time... except the one write of 2 that ended before all of them began)."""
    rows = [(0, 99, "invoke", "write", 2), (1, 99, "ok", "write", 2)]
    for p in range(EQUAL_WRITERS):
        rows.append((10 + p, p, "invoke", "write", 1))
    for p in range(EQUAL_WRITERS):
        rows.append((100 + p, p, "ok", "write", 1))
    rows += [(200, 98, "invoke", "read", None), (201, 98, "ok", "read", last_read)]
    return history(*rows).ops


@pytest.mark.parametrize("native", [True, False])
def test_equal_concurrent_writes_are_tried_in_one_order(native):
    """Without the symmetry the search visits every subset of the twelve equal writes (4,096)."""
    res = check_key(MODEL, None, _equal_writes(1), zones=False, native=native)
    assert res.valid is True
    assert res.states <= 4 * EQUAL_WRITERS


@pytest.mark.parametrize("native", [True, False])
def test_the_symmetric_search_still_proves_invalid(native):
    res = check_key(MODEL, None, _equal_writes(2), zones=False, native=native)
    assert res.valid is False
    assert res.states <= 4 * EQUAL_WRITERS


@pytest.mark.parametrize("values", [2, 3, 30])
def test_pruned_and_unpruned_searches_agree_on_small_cas_registers(values):
    """Soundness of the cuts on the shape they are for: the unpruned search (no symmetry, no
    witnesses, no pruner) is the reference; both verdicts occur among the draws."""
    verdicts = set()
    for seed in range(40):
        gen = cas_register_history(60, processes=6, values=values, crash_rate=0.1, duration_ms=(5, 60), seed=seed)
        if seed % 2:  # one read made to see another value: often not linearizable any more
            read = next(e for e in gen.events if e["f"] == "read" and e["type"] == "ok" and e["index"] > 20)
            read["value"] = ((read["value"] or 0) + 1) % values
        ops = pair(read_events(gen.events)).ops
        fast = check_key(MODEL, None, ops)
        ref = check_key(MODEL, None, ops, prune=False)
        assert fast.valid == ref.valid, (seed, fast.valid, ref.valid)
        verdicts.add(fast.valid)
    assert verdicts == {True, False}


def test_a_read_of_a_value_overwritten_before_it_began_is_proven_without_a_search():
    gen = cas_register_history(3000, processes=30, values=10, seed=1, stale_read=True)
    verdict = check(pair(read_events(gen.events)), "register")
    assert verdict.valid is False
    (res,) = verdict.details["results"]
    assert res["method"] == "zones"
    first = res["stuck"][0]
    assert first["id"] == gen.stale_reads[0] and first["doomed"]
    assert "returned before op" in first["why"]


def test_the_same_draw_without_the_stale_read_is_valid():
    gen = cas_register_history(3000, processes=30, values=10, seed=1)
    assert check(pair(read_events(gen.events)), "register").valid is True


def test_a_crashed_writer_of_the_value_leaves_the_read_possible():
    """An info write of 1 may land any time after its invoke: reading 1 after 2 is not a proof."""
    rows = [
        (-2, 3, "invoke", "write", 1),  # 1 written twice: repeated values, so no zones
        (-1, 3, "ok", "write", 1),
        (0, 0, "invoke", "write", 1),
        (1, 0, "info", "write", 1),
        (2, 1, "invoke", "write", 2),
        (3, 1, "ok", "write", 2),
        (4, 2, "invoke", "read", None),
        (5, 2, "ok", "read", 1),
    ]
    assert MODEL.zones(*_split(history(*rows).ops)) is None
    assert check_key(MODEL, None, history(*rows).ops).valid is True


def test_the_initial_nil_counts_as_a_write_before_everything():
    rows = [
        (0, 0, "invoke", "write", 1),
        (1, 0, "ok", "write", 1),
        (2, 1, "invoke", "write", 1),  # a repeated value: no zones, the witnesses apply
        (3, 1, "ok", "write", 1),
        (4, 2, "invoke", "read", None),
        (5, 2, "ok", "read", None),
    ]
    zv = MODEL.zones(*_split(history(*rows).ops))
    assert zv is not None and zv.valid is False and "nil" in zv.why


def _split(ops):
    det = [o for o in ops if o.complete_time is not None and MODEL.keep(o)]
    info = [o for o in ops if o.complete_time is None and MODEL.keep(o)]
    return sorted(det, key=lambda o: o.invoke_time), sorted(info, key=lambda o: o.invoke_time)


def test_an_undecided_key_names_the_window_it_could_not_linearize_and_a_budget():
    gen = cas_register_history(2000, processes=30, values=10, seed=1)
    h = pair(read_events(gen.events))
    verdict = check(h, "register", max_states=2_000)
    assert verdict.valid == UNKNOWN
    (res,) = verdict.details["results"]
    window = res["undecided"]
    ids = [op.id for op in h.ops]
    assert ids.index(window["from_op"]) <= ids.index(window["to_op"])
    assert window["window_ops"] >= 2
    assert window["estimated_states"] > res["states"]
    assert any("could not linearize the window of" in line for line in summarize(verdict))


def _cas_from_seven(cases: int, extra_sevens: list[tuple[int, int | None]]) -> list:
    """write 7, then `cases` successful cas from 7 (7→1, 7→2, ...) all at once, ending at 50, 51, ...;
    each (invoke, end) of `extra_sevens` is another write of 7 (end None: crashed, may land any time).
    Each cas from 7 ends a stretch of 7, so the k-th of them needs k stretches of 7 by its end."""
    rows: list[tuple] = [(0, 0, "invoke", "write", 7), (1, 0, "ok", "write", 7)]
    for k in range(cases):
        rows += [(10, 10 + k, "invoke", "cas", [7, 1 + k]), (50 + k, 10 + k, "ok", "cas", [7, 1 + k])]
    for k, (start, end) in enumerate(extra_sevens):
        rows.append((start, 20 + k, "invoke", "write", 7))
        rows.append((start + 1, 20 + k, "info", "write", 7) if end is None else (end, 20 + k, "ok", "write", 7))
    return history(*rows).ops


def _doomed_after_the_first_write(ops) -> int:
    """The register pruner's answer at the configuration where only the first write of 7 is linearized."""
    from checkers.linearizable.prepared import candidates, prepare

    p = prepare(MODEL, ops)
    assert p.ops[0].f == "write" and p.ops[0].invoke_value == 7
    cands, _ = candidates(p, 1, 0)
    return MODEL.pruner(p.ops, p.info)(7, 1, 0, cands)


@pytest.mark.parametrize(
    ("cases", "extra", "valid"),
    [
        (2, [], False),  # one stretch of 7 for two cas from 7
        (2, [(12, 60)], True),  # a second write of 7 between them
        (2, [(51, 60)], True),  # invoked just as the second cas ends: still concurrent with it
        (2, [(52, 60)], False),  # invoked after both ended: too late
        (2, [(12, None)], True),  # a crashed write of 7 may land between them
        (3, [(12, 60)], False),  # three cas from 7, two stretches
        (3, [(12, 60), (13, 61)], True),
    ],
)
@pytest.mark.parametrize("native", [True, False])
def test_cas_from_the_same_value_need_a_stretch_each(cases, extra, valid, native):
    """The pruner's count (Hall's condition over the cas from v by deadline) decides the same as the
    search without any cut, both verdicts, at the boundary (invoked exactly at the deadline) too."""
    ops = _cas_from_seven(cases, extra)
    assert check_key(MODEL, None, ops, zones=False, prune=False).valid is valid
    assert check_key(MODEL, None, ops, zones=False, native=native).valid is valid
    assert check(ops, "register").valid is valid


def test_the_pruner_counts_stretches_of_a_value():
    """Two cas from 7 pending with only the current 7: doomed at once (before this count the pruner
    let the search go on until the second cas found no 7); with a second writer of 7: not doomed."""
    assert _doomed_after_the_first_write(_cas_from_seven(2, [])) >= 0
    assert _doomed_after_the_first_write(_cas_from_seven(2, [(12, 60)])) == -1
    assert _doomed_after_the_first_write(_cas_from_seven(2, [(12, None)])) == -1
    assert _doomed_after_the_first_write(_cas_from_seven(3, [(12, 60)])) >= 0


DISTINCT_WRITERS = 10


def _distinct_writes(*reads: int) -> list:
    """Ten processes write 1..10 at once, then the reads come one after another. Two earlier writes
    of 99 make the values repeat (the repeated-value cuts apply). Until the last of the ten lands,
    the state's value cannot be observed (every read waits for the pending writes), so the search
    forgets it: the configurations are the subsets of the ten, not the subsets times the last value."""
    rows = [(0, 98, "invoke", "write", 99), (1, 98, "ok", "write", 99)]
    rows += [(2, 98, "invoke", "write", 99), (3, 98, "ok", "write", 99)]
    rows += [(10 + p, p, "invoke", "write", p + 1) for p in range(DISTINCT_WRITERS)]
    rows += [(100 + p, p, "ok", "write", p + 1) for p in range(DISTINCT_WRITERS)]
    for k, value in enumerate(reads):
        rows += [(200 + 2 * k, 97, "invoke", "read", None), (201 + 2 * k, 97, "ok", "read", value)]
    return history(*rows).ops


@pytest.mark.parametrize("native", [True, False])
@pytest.mark.parametrize(("reads", "valid"), [((1,), True), ((1, 1), True), ((1, 2), False)])
def test_a_value_nobody_can_observe_is_forgotten(reads, valid, native):
    """Both verdicts, with the cut and without it (prune=False: no cuts at all); with it the search
    stays within the 1,024 subsets of the ten writes (without it: 2,326 configurations for the
    valid one, 5,123 for the invalid one)."""
    ops = _distinct_writes(*reads)
    res = check_key(MODEL, None, ops, zones=False, native=native)
    assert res.valid is valid
    assert res.states <= 2**DISTINCT_WRITERS + 4 * DISTINCT_WRITERS
    assert check_key(MODEL, None, ops, zones=False, native=native, prune=False).valid is valid


@pytest.mark.parametrize("native", [True, False])
def test_a_value_an_indeterminate_cas_may_observe_is_kept(native):
    """No determinate op observes 1, but the crashed cas from 1 may land after it: state 1 must not
    be forgotten (the read of 5 is possible only through it)."""
    rows = [
        (0, 0, "invoke", "write", 1),
        (0, 1, "invoke", "write", 2),
        (1, 2, "invoke", "write", 2),  # 2 written twice: repeated values
        (2, 2, "ok", "write", 2),
        (5, 3, "invoke", "cas", [1, 5]),
        (6, 3, "info", "cas", [1, 5]),
        (10, 0, "ok", "write", 1),
        (10, 1, "ok", "write", 2),
        (20, 4, "invoke", "read", None),
        (30, 4, "ok", "read", 5),
    ]
    ops = history(*rows).ops
    assert check_key(MODEL, None, ops, zones=False, native=native).valid is True


@pytest.mark.parametrize("native", [True, False])
def test_a_write_nobody_observes_next_may_still_have_to_go_first(native):
    """Why the search does not put a write only right before an op that observes it (or at its
    deadline): here write 1 must go first and be overwritten at once, or the read of 2 that begins
    after write 1 returns would see 1. The only order: write 1, write 2, read, read."""
    rows = [
        (-4, 3, "invoke", "write", 7),  # 7 written twice, before the rest: repeated values
        (-3, 3, "ok", "write", 7),
        (-2, 3, "invoke", "write", 7),
        (-1, 3, "ok", "write", 7),
        (0, 0, "invoke", "write", 1),
        (0, 1, "invoke", "write", 2),
        (1, 2, "invoke", "read", None),
        (5, 1, "ok", "write", 2),
        (10, 0, "ok", "write", 1),
        (11, 4, "invoke", "read", None),
        (20, 2, "ok", "read", 2),
        (20, 4, "ok", "read", 2),
    ]
    ops = history(*rows).ops
    assert check_key(MODEL, None, ops, zones=False, native=native).valid is True


def test_the_write_the_most_urgent_candidate_needs_is_tried_first():
    """Only the order changes: the children leaving the value the earliest-deadline candidate (op 0,
    a read of 5) needs go first, the others keep their order; nothing is added or dropped."""
    needs = [5, NO_NEED, NO_NEED, NO_NEED]
    children = [(1, 7), (2, 5), (3, 8)]
    assert urgent_first(needs, children, 0, None) == [(2, 5), (1, 7), (3, 8)]
    assert urgent_first(needs, children, 0, 5) == children  # it can go now: nothing to hurry
    assert urgent_first(needs, children, 1, None) == children  # a write needs nothing


@pytest.mark.parametrize("native", [True, False])
def test_with_many_values_the_search_finds_the_awaited_write_first(native):
    """500 ops, 30 processes, values 0-99 (seed 3): in deadline order alone the search took 96,189
    configurations; trying first the write the most urgent read waits for, 4,617."""
    ops = pair(read_events(cas_register_history(500, processes=30, values=100, seed=3).events)).ops
    res = check_key(MODEL, None, ops, zones=False, native=native)
    assert res.valid is True
    assert res.states <= 20_000
