"""Availability: a write must commit within the recovery window after the final heal."""

from __future__ import annotations

from checkers.availability import check_availability, is_write
from checkers.history import History
from checkers.verdict import UNKNOWN
from tests.checkers.events import Events


def _faulted(events: Events) -> Events:
    """Writes before a partition, nothing succeeding during it, the heal at 10 s."""
    events.op(0, "write", 0, 5, invoke=1)
    events.nemesis("start-partition", 1000)
    events.op(0, "write", 1500, 6500, invoke=2, kind="info")
    events.op(1, "write", 2000, 2100, invoke=3, kind="fail")
    events.nemesis("stop-partition", 10_000)
    return events


def test_a_write_committing_soon_after_the_heal_is_valid_with_its_time_to_recover() -> None:
    events = _faulted(Events())
    events.op(2, "write", 10_100, 10_350, invoke=4)
    events.op(3, "read", 10_400, 10_450, value=4)
    verdict = check_availability(events.history(), recovery_window_s=5)
    assert verdict.valid is True
    assert abs(verdict.details["time_to_recover_s"] - 0.35) < 1e-9
    assert verdict.details["writes_after_heal"] == 1 and verdict.details["writes_ok_after_heal"] == 1
    # the stretch from the first write's ack to the first ack after the heal had no ok op
    longest = verdict.details["unavailable"]["windows"][0]
    assert longest["ms"] > 10_000 and verdict.details["unavailable"]["count"] == 1


def test_nothing_committing_after_the_heal_is_invalid() -> None:
    events = _faulted(Events())
    events.op(2, "write", 10_100, 15_100, invoke=4, kind="info")
    events.op(3, "write", 10_200, 10_300, invoke=5, kind="fail")
    events.op(4, "read", 10_300, 10_400, value=None)  # reads do not count: a write must commit
    verdict = check_availability(events.history(), recovery_window_s=5)
    assert verdict.valid is False
    assert verdict.details["time_to_recover_s"] is None
    assert "no write committed within 5 s of the final heal (2 attempted after it)" in verdict.details["reason"]
    assert list(verdict.details["anomalies"]) == ["no-recovery"]


def test_a_recovery_later_than_the_window_is_invalid_and_says_when_it_came() -> None:
    events = _faulted(Events())
    events.op(2, "write", 10_100, 15_100, invoke=4, kind="info")
    events.op(5, "write", 17_000, 17_500, invoke=6)
    verdict = check_availability(events.history(), recovery_window_s=5)
    assert verdict.valid is False
    assert abs(verdict.details["time_to_recover_s"] - 7.5) < 1e-9
    assert "first one committed 7.500 s after the heal" in verdict.details["reason"]
    assert check_availability(events.history(), recovery_window_s=8).valid is True


def test_a_write_invoked_before_the_heal_does_not_count_as_recovery() -> None:
    events = _faulted(Events())
    events.op(2, "write", 9000, 10_500, invoke=4)  # began during the fault: says nothing about after
    events.op(3, "write", 10_600, 16_000, invoke=5, kind="info")
    verdict = check_availability(events.history(), recovery_window_s=5)
    assert verdict.valid is False and verdict.details["writes_after_heal"] == 1


def test_no_write_after_the_heal_cannot_be_judged() -> None:
    events = _faulted(Events())
    events.op(2, "read", 10_100, 10_200, value=1)
    verdict = check_availability(events.history(), recovery_window_s=5)
    assert verdict.valid == UNKNOWN and "no write was attempted" in verdict.details["reason"]
    assert check_availability(History(ops=[], nemesis=[])).valid == UNKNOWN


def test_without_faults_the_window_counts_from_the_first_op() -> None:
    events = Events().op(0, "write", 0, 30, invoke=1).op(1, "write", 40, 50, invoke=2)
    verdict = check_availability(events.history(), recovery_window_s=1)
    assert verdict.valid is True and verdict.details["final_heal_s"] is None
    late = Events().op(0, "write", 0, 3000, invoke=1, kind="info").op(1, "write", 3000, 3100, invoke=2)
    assert check_availability(late.history(), recovery_window_s=1).valid is False


def test_only_transactions_that_append_are_writes() -> None:
    events = Events()
    events.nemesis("stop-kill", 0)
    events.op(0, "txn", 10, 20, invoke=[["r", "k", None]], value=[["r", "k", []]])
    events.op(1, "txn", 30, 40, invoke=[["append", "k", "1:0"], ["r", "j", None]])
    history = events.history()
    read_only, appending = history.ops
    fs = frozenset({"txn"})
    assert not is_write(read_only, fs) and is_write(appending, fs)
    verdict = check_availability(history, recovery_window_s=1)
    assert verdict.valid is True and verdict.details["writes_after_heal"] == 1


def _clock_set_back(delta_ms: int) -> Events:
    """A node's clock bumped `delta_ms` ahead at 1 s and set back at the heal (10 s)."""
    events = Events()
    events.op(0, "write", 0, 5, invoke=1)
    events.nemesis("start-clock", 1000, {"kind": "clock", "mode": "bump", "targets": ["b1"], "delta_ms": delta_ms})
    events.nemesis("stop-clock", 10_000, {"kind": "clock", "targets": ["b1"]})
    events.op(1, "write", 10_100, 15_100, invoke=2, kind="info")  # its timers still wait for the clock
    return events


def test_recovery_is_counted_from_when_a_clock_set_back_has_caught_up() -> None:
    events = _clock_set_back(20_000)
    events.op(2, "write", 30_500, 30_900, invoke=3)  # 0.9 s after the clock caught up (at 30 s)
    verdict = check_availability(events.history(), recovery_window_s=5)
    assert verdict.valid is True
    assert verdict.details["final_heal_s"] == 30.0 and abs(verdict.details["time_to_recover_s"] - 0.9) < 1e-9


def test_no_write_after_a_clock_caught_up_is_still_invalid() -> None:
    events = _clock_set_back(20_000)
    events.op(2, "write", 30_500, 35_500, invoke=3, kind="info")
    verdict = check_availability(events.history(), recovery_window_s=5)
    assert verdict.valid is False and list(verdict.details["anomalies"]) == ["no-recovery"]
    # a clock set back from behind (a backward bump) runs on at once: no after-effect
    events = _clock_set_back(-20_000)
    events.op(2, "write", 30_500, 30_900, invoke=3)
    assert check_availability(events.history(), recovery_window_s=5).details["final_heal_s"] == 10.0
