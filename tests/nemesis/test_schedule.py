"""The combined nemesis schedule (vocab.generators.schedule.NemesisSchedule) in virtual time:
overlapping kinds, weights, the limit on active faults, the final phase, determinism."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest

from vocab.faults.catalogue import HEAL_ORDER
from vocab.generators import NEMESIS, Op, Outcome, heal_all, nemesis, nemesis_schedule, run_virtual, seconds
from vocab.generators import time_limit as limit_time
from vocab.generators.core import NS_PER_MS, Rng


def nemesis_ok(op: Op, rng: Rng) -> Outcome:
    return Outcome("info", 5 * NS_PER_MS, {"kind": op.f.split("-", 1)[1]})


def run_schedule(gen, seed: int = 1, execute=nemesis_ok) -> list[dict]:
    return run_virtual(gen, execute, concurrency=1, seed=seed)


def windows(history: list[dict]) -> list[tuple[str, int, int]]:
    """(kind, start completion time, stop completion time) of every fault, the SCHEMA.md way."""
    out, open_ = [], {}
    nem = [e for e in history if e["process"] == NEMESIS and e["type"] != "invoke"]
    for e in nem:
        action, kind = e["f"].split("-", 1)
        if action == "start" and e["type"] == "info":
            open_[kind] = e["time"]
        elif action == "stop" and kind in open_:
            out.append((kind, open_.pop(kind), e["time"]))
    return out


def overlapping(ws: list[tuple[str, int, int]]) -> int:
    """The most windows open at one moment."""
    points = sorted([(s, 1) for _, s, _ in ws] + [(e, -1) for _, _, e in ws], key=lambda p: (p[0], p[1]))
    best = now = 0
    for _, d in points:
        now += d
        best = max(best, now)
    return best


def test_several_kinds_overlap_each_with_its_own_window():
    gen = limit_time(120.0, nemesis(nemesis_schedule(["clock", "kill", "disk_stall"], 2.0, 5.0, max_active=3)))
    ws = windows(run_schedule(gen))
    assert {k for k, _, _ in ws} == {"clock", "kill", "disk_stall"}
    assert overlapping(ws) == 3
    for kind in ("clock", "kill", "disk_stall"):  # one window of a kind at a time, each as long as asked
        mine = sorted((s, e) for k, s, e in ws if k == kind)
        assert all(e1 <= s2 for (_, e1), (s2, _) in itertools.pairwise(mine))
        assert all(e - s == seconds(5.0) + 5 * NS_PER_MS for s, e in mine)


def test_max_active_one_is_one_fault_at_a_time_interval_after_the_stop():
    history = run_schedule(limit_time(60.0, nemesis(nemesis_schedule(["clock", "kill"], 2.0, 3.0, max_active=1))))
    ws = windows(history)
    assert overlapping(ws) == 1 and len(ws) > 5
    starts = [e for e in history if e["type"] == "invoke" and e["f"].startswith("start")]
    stops = [e for e in history if e["type"] == "info" and e["f"].startswith("stop")]
    for stop, start in zip(stops, starts[1:], strict=False):
        assert start["time"] - stop["time"] == seconds(2.0)


def test_max_active_two_of_three_kinds():
    gen = limit_time(200.0, nemesis(nemesis_schedule(["a", "b", "c"], 1.0, 6.0, max_active=2)))
    ws = windows(run_schedule(gen))
    assert overlapping(ws) == 2


def test_weights_are_respected_over_many_draws():
    gen = limit_time(2_000.0, nemesis(nemesis_schedule(["a", "b", "c"], 0.5, 0.1, weights={"a": 6, "b": 3, "c": 1})))
    counts = Counter(e["f"] for e in run_schedule(gen) if e["type"] == "invoke" and e["f"].startswith("start"))
    total = sum(counts.values())
    assert total > 2_000
    for kind, weight in (("a", 0.6), ("b", 0.3), ("c", 0.1)):
        assert abs(counts[f"start-{kind}"] / total - weight) < 0.04, counts


def test_a_weight_of_zero_never_starts_and_all_zero_is_nothing():
    gen = limit_time(100.0, nemesis(nemesis_schedule(["a", "b"], 1.0, 1.0, weights={"a": 0})))
    assert {e["f"] for e in run_schedule(gen)} == {"start-b", "stop-b"}
    assert run_schedule(nemesis(nemesis_schedule(["a"], 1.0, 1.0, weights={"a": 0}))) == []


def test_modes_come_from_the_kinds_own_list():
    modes = {"kill": ["leader", "minority"], "clock": ["bump"]}
    gen = limit_time(200.0, nemesis(nemesis_schedule(["kill", "clock"], 1.0, 1.0, modes, max_active=2)))
    starts = [e for e in run_schedule(gen) if e["type"] == "invoke" and e["f"].startswith("start")]
    assert {e["value"]["mode"] for e in starts if e["f"] == "start-kill"} == {"leader", "minority"}
    assert {e["value"]["mode"] for e in starts if e["f"] == "start-clock"} == {"bump"}


def test_a_failed_start_opens_no_window_and_the_kind_may_start_again():
    def kill_fails(op: Op, rng: Rng) -> Outcome:
        return Outcome("fail" if op.f == "start-kill" else "info", NS_PER_MS)

    history = run_schedule(
        limit_time(60.0, nemesis(nemesis_schedule(["kill", "pause"], 1.0, 2.0, max_active=2))), 1, kill_fails
    )
    fs = Counter(e["f"] for e in history if e["type"] == "invoke")
    assert fs["start-kill"] > 3 and fs["stop-kill"] == 0 and fs["stop-pause"] > 3


def test_same_seed_same_schedule_other_seed_other_schedule():
    def gen():
        return limit_time(60.0, nemesis(nemesis_schedule(["a", "b", "c"], 1.0, 3.0, {"a": ["x", "y"]}, max_active=3)))

    assert run_schedule(gen(), seed=5) == run_schedule(gen(), seed=5)
    assert run_schedule(gen(), seed=5) != run_schedule(gen(), seed=6)


def test_the_final_phase_stops_every_kind_in_heal_order_after_the_main_phase():
    kinds = ["kill", "partition", "clock", "pause"]
    main = limit_time(10.0, nemesis(nemesis_schedule(kinds, 1.0, 30.0, max_active=4)))
    history = run_virtual([main, nemesis(heal_all([*kinds, "buggify"], HEAL_ORDER))], nemesis_ok, concurrency=1, seed=3)
    starts = [e for e in history if e["type"] == "invoke" and e["f"].startswith("start")]
    assert len(starts) == 4  # every kind was active when the main phase ended (no stop was due) ...
    healing = [e["f"] for e in history if e["type"] == "invoke" and e["time"] >= starts[-1]["time"]][1:]
    assert healing == ["stop-buggify", "stop-partition", "stop-clock", "stop-pause", "stop-kill"]  # ... then all stop
    assert {k for k, _, _ in windows(history)} == set(kinds)
    assert heal_all(["kill", "partition"]) == heal_all(["partition", "kill", "kill"])  # no order: sorted, once each


def _starts(history: list[dict]) -> list[str]:
    return [e["f"].removeprefix("start-") for e in history if e["type"] == "invoke" and e["f"].startswith("start")]


def test_a_deck_deals_every_kind_once_per_round_in_an_order_drawn_per_round():
    kinds = ["a", "b", "c", "d", "e"]
    orders = set()
    for seed in range(1, 41):
        gen = limit_time(100.0, nemesis(nemesis_schedule(kinds, 1.0, 0.5, draw="deck")))  # one at a time
        starts = _starts(run_schedule(gen, seed=seed))
        rounds = [starts[i : i + 5] for i in range(0, len(starts) - len(starts) % 5, 5)]
        assert len(rounds) > 10 and all(sorted(r) == kinds for r in rounds), starts
        orders.update(tuple(r) for r in rounds)
    assert len(orders) > 60  # 120 orders of 5 kinds, and the deck draws among them


def test_a_random_draw_misses_kinds_that_a_deck_does_not():
    """Why the deck exists: in a short run the first starts of a random draw often repeat a kind."""
    kinds = ["partition", "kill", "pause", "clock"]
    missed = 0
    for seed in range(1, 41):
        random_first = _starts(run_schedule(limit_time(20.0, nemesis(nemesis_schedule(kinds, 4.0, 1.0))), seed))[:4]
        deck = nemesis(nemesis_schedule(kinds, 4.0, 1.0, max_active=4, draw="deck"))
        assert sorted(_starts(run_schedule(limit_time(20.0, deck), seed))[:4]) == sorted(kinds)
        missed += len(set(random_first)) < 4
    assert missed > 20  # 1 - 4!/4^4 = 91 % of orders repeat a kind


def test_a_deck_with_faults_still_active_skips_them_in_its_round_and_honours_zero_weights():
    kinds = ["a", "b", "c", "z"]
    gen = nemesis(nemesis_schedule(kinds, 1.0, 2.5, weights={"z": 0}, max_active=2, draw="deck"))
    history = run_schedule(limit_time(300.0, gen), seed=7)
    starts = _starts(history)
    assert "z" not in starts and overlapping(windows(history)) == 2
    counts = Counter(starts)
    assert len(starts) > 100 and max(counts.values()) - min(counts.values()) <= len(starts) // 10, counts
    for kind in ("a", "b", "c"):  # never two windows of one kind at once
        mine = sorted((s, e) for k, s, e in windows(history) if k == kind)
        assert all(e1 <= s2 for (_, e1), (s2, _) in itertools.pairwise(mine))


def test_an_unknown_draw_is_refused():
    with pytest.raises(ValueError, match="draw must be one of random, deck, got 'shuffle'"):
        nemesis_schedule(["kill"], 1.0, 1.0, draw="shuffle")
