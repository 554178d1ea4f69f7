"""The zone analysis (unique-value registers) and the search's unique-value guard, each against the
reference search and brute force; hard single-key histories decided; the viewer's counterexample."""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from checkers.gen import register_history
from checkers.history import pair, read_events
from checkers.linearizable import check, check_key, prepare
from checkers.models import RegisterModel
from checkers.viewer import build_data
from tests.checkers import oracle
from tests.checkers.lin_helpers import drawn_register_history, history, raw_events

MODEL = RegisterModel()


def zone_verdict(h):
    p = prepare(MODEL, h.ops)
    return MODEL.zones(p.ops, p.info)


def decide_all_ways(ops, *, reference: bool = True) -> dict[str, object]:
    """The verdict of each path: zones (+ guarded search), guarded search alone, and (if asked) the
    reference search without any model cut."""
    out = {
        "zones": check_key(MODEL, None, ops).valid,
        "search": check_key(MODEL, None, ops, zones=False).valid,
    }
    if reference:
        out["reference"] = check_key(MODEL, None, ops, prune=False).valid
    return out


# --- hand-built: each rule, both verdicts -------------------------------------------------------


def test_read_write_history_is_decided_valid_by_zones_alone():
    h = history(
        (0, 0, "invoke", "write", 1),
        (1, 1, "invoke", "read", None),
        (2, 0, "ok", "write", 1),
        (3, 1, "ok", "read", 1),
        (4, 0, "invoke", "write", 2),
        (5, 0, "ok", "write", 2),
        (6, 1, "invoke", "read", None),
        (7, 1, "ok", "read", 2),
    )
    assert zone_verdict(h).valid is True
    assert check_key(MODEL, None, h.ops).valid is True  # (the quick search decides this one first)


def test_zones_decide_a_read_write_key_the_search_gives_up_on():
    gen = register_history(3000, processes=20, crash_rate=0.1, mix=(0.6, 0.4, 0.0), seed=2)
    h = pair(read_events(gen.events))
    res = check_key(MODEL, None, h.ops, max_states=1)  # the search alone: unknown at once
    assert res.valid is True and res.method == "zones"
    assert check_key(MODEL, None, h.ops, max_states=1, zones=False).reason == "state budget"


def test_a_stale_read_is_a_backward_zone_inside_a_forward_one():
    # write 1, then write 2 (both complete), then a read of 1 begins: 1 can never come back.
    h = history(
        (0, 0, "invoke", "write", 1),
        (1, 0, "ok", "write", 1),
        (2, 0, "invoke", "write", 2),
        (3, 0, "ok", "write", 2),
        (4, 1, "invoke", "read", None),
        (5, 1, "ok", "read", 1),
    )
    zv = zone_verdict(h)
    assert zv.valid is False
    verdict = check(h)
    [res] = verdict.details["results"]
    assert res["valid"] is False and res["method"] == "zones"
    first = res["stuck"][0]
    assert first["id"] == 4 and first["doomed"] and not first["legal"] and first["needs"] == "state == 1"
    assert 2 in first["because"]  # the write of 2 that overwrote 1 for good
    assert res["linearization"][:1] == [0]  # a partial linearization is still shown


def test_overlapping_forward_zones():
    # 1 and 2 are each read after an op that saw the other had returned: neither order works.
    rows = (
        (0, 0, "invoke", "write", 1),
        (1, 1, "invoke", "write", 2),
        (2, 0, "ok", "write", 1),
        (3, 1, "ok", "write", 2),
        (4, 2, "invoke", "read", None),
        (5, 3, "invoke", "read", None),
        (6, 2, "ok", "read", 2),
        (7, 3, "ok", "read", 1),
    )
    h = history(*rows)
    assert zone_verdict(h).valid is False
    assert oracle.linearizable(raw_events(*rows), oracle.register_step) is False
    assert check(h).valid is False
    # Overlapping in time only at one end point is fine: the read of 1 may precede the write of 2.
    ok_rows = (
        (0, 0, "invoke", "write", 1),
        (1, 0, "ok", "write", 1),
        (1, 1, "invoke", "read", None),
        (2, 1, "ok", "read", 1),
        (2, 2, "invoke", "write", 2),
        (3, 2, "ok", "write", 2),
    )
    assert zone_verdict(history(*ok_rows)).valid is True
    assert oracle.linearizable(raw_events(*ok_rows), oracle.register_step) is True


def test_read_before_its_write_began_and_unwritten_values_and_double_cas():
    early = history(
        (0, 1, "invoke", "read", None), (1, 1, "ok", "read", 5), (2, 0, "invoke", "write", 5), (3, 0, "ok", "write", 5)
    )
    assert zone_verdict(early).valid is False and check(early).valid is False
    nobody = history((0, 1, "invoke", "read", None), (1, 1, "ok", "read", 7))
    assert "nobody writes 7" in zone_verdict(nobody).why
    twice_rows = (
        (0, 0, "invoke", "write", 1),
        (1, 0, "ok", "write", 1),
        (2, 1, "invoke", "cas", [1, 2]),
        (3, 2, "invoke", "cas", [1, 3]),
        (4, 1, "ok", "cas", [1, 2]),
        (5, 2, "ok", "cas", [1, 3]),
    )
    assert zone_verdict(history(*twice_rows)).valid is False
    assert oracle.linearizable(raw_events(*twice_rows), oracle.register_step) is False


def test_with_cas_a_clean_zone_analysis_leaves_the_key_to_the_search():
    h = history(
        (0, 0, "invoke", "write", 1),
        (1, 0, "ok", "write", 1),
        (2, 1, "invoke", "cas", [1, 2]),
        (3, 1, "ok", "cas", [1, 2]),
        (4, 2, "invoke", "cas", [1, 3]),
        (5, 2, "fail", "cas", [1, 3]),
        (6, 3, "invoke", "read", None),
        (7, 3, "ok", "read", 2),
    )
    assert zone_verdict(h).valid is None
    res = check_key(MODEL, None, h.ops)
    assert res.valid is True and res.method == "search"


def test_repeated_values_are_not_for_zones():
    h = history(
        (0, 0, "invoke", "write", 1), (1, 0, "ok", "write", 1), (2, 0, "invoke", "write", 1), (3, 0, "ok", "write", 1)
    )
    assert zone_verdict(h) is None
    assert MODEL.guard(*_split(h)) is None


def _split(h):
    p = prepare(MODEL, h.ops)
    return p.ops, p.info


# --- cross-checks ---------------------------------------------------------------------------------


def unique_perturbed(gen, data):
    """Some read results and cas outcomes changed at random; written values stay unique."""
    events = [dict(e) for e in gen.events]
    written = sorted({e["value"] if e["f"] == "write" else e["value"][1] for e in events if e["f"] != "read"})
    for e in events:
        if e["type"] == "ok" and e["f"] == "read" and data.draw(st.booleans()):
            e["value"] = data.draw(st.sampled_from([None, *written, 99]))
        elif e["type"] in ("ok", "fail") and e["f"] == "cas" and data.draw(st.booleans()):
            e["type"] = "fail" if e["type"] == "ok" else "ok"
    return events, pair(read_events(events))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_zones_and_guard_agree_with_brute_force(data):
    cas = data.draw(st.booleans())
    gen = drawn_register_history(data, mix=(0.5, 0.3, 0.2) if cas else (0.5, 0.5, 0.0))
    events, h = unique_perturbed(gen, data)
    expected = oracle.linearizable(events, oracle.register_step)
    zv = zone_verdict(h)
    if zv is not None and zv.valid is not None:
        assert zv.valid is expected
    if zv is not None and not any(op.f == "cas" for op in h.ops if MODEL.keep(op)):
        assert zv.valid is not None  # reads and writes only: zones always decide
    assert decide_all_ways(h.ops) == {"zones": expected, "search": expected, "reference": expected}


def test_generated_histories_all_paths_agree_good_and_bad():
    """Medium histories that the reference search (no model cuts) still decides, good and bad."""
    seen = set()
    for seed in range(12):
        gen = register_history(
            300, processes=6, crash_rate=0.1, fail_rate=0.02, stale_reads=seed % 2, seed=seed, latency=300
        )
        h = pair(read_events(gen.events))
        ways = decide_all_ways(h.ops)
        assert len(set(ways.values())) == 1, (seed, ways)
        assert ways["zones"] is (not gen.stale_reads)
        seen.add(ways["zones"])
    assert seen == {True, False}


def test_hard_single_key_histories_are_decided():
    """Issue 16's repro, made smaller to keep the test quick: one key, 30 processes, 10% crashed ops,
    cas; good, with a stale read, and with a cas outcome flipped. The reference search leaves such
    histories undecided for minutes; with zones and the guard each is decided."""
    for stale in (0, 1):
        gen = register_history(1500, processes=30, crash_rate=0.1, fail_rate=0.01, stale_reads=stale, seed=5)
        h = pair(read_events(gen.events))
        res = check_key(MODEL, None, h.ops, max_states=300_000)
        assert res.valid is (not stale)
        if stale:
            assert res.method == "zones" and res.stuck[0]["id"] == gen.stale_reads[0]
    gen = register_history(1500, processes=30, crash_rate=0.1, fail_rate=0.01, seed=7)
    events = [dict(e) for e in gen.events]
    flip = random.Random(7).choice([e for e in events if e["type"] == "fail" and e["f"] == "cas"])
    flip["type"] = "ok"
    h = pair(read_events(events))
    assert (
        check_key(MODEL, None, h.ops, max_states=300_000).valid
        == check_key(MODEL, None, h.ops, zones=False, max_states=300_000).valid
    )


def test_a_zone_counterexample_renders_in_the_viewer():
    gen = register_history(300, processes=6, crash_rate=0.1, stale_reads=1, seed=3)
    h = pair(read_events(gen.events))
    verdict = check(h)
    data = build_data(h, verdict)
    [lane] = data["lanes"]
    assert lane["valid"] is False and lane["stuck"][0]["id"] == gen.stale_reads[0]
    ids = {op["id"] for op in lane["ops"]}
    assert set(lane["linearization"]) <= ids and len(lane["states_after"]) == len(lane["linearization"])
