"""A clock set back to the true time stands still until real time catches up, so time-judging checkers
must treat a clock fault as lasting past its stop (regression: registrations false alarms under clock
faults, sweep seeds 16, 96, 136 of `kchaos bugs`)."""

from __future__ import annotations

import pytest

from checkers.history import FaultWindow

S = 1_000_000_000


@pytest.mark.parametrize(
    ("value", "after_s"),
    [
        ({"mode": "bump", "delta_ms": 10_000}, 10.0),  # ahead 10 s at the stop: frozen 10 s
        ({"mode": "bump", "delta_ms": -60_000}, 0.0),  # behind: the reset jumps forward, nothing lags
        ({"mode": "strobe", "delta_ms": 2_000, "period_ms": 100}, 2.0),
        ({"mode": "rate", "rate": 1.5}, 1.5),  # 3 s at x1.5: 1.5 s ahead at the stop
        ({"mode": "rate", "rate": 0.5}, 0.0),
    ],
)
def test_a_clock_fault_lasts_as_long_as_its_clock_was_ahead(value, after_s):
    window = FaultWindow("clock", 10 * S, 13 * S, value)
    assert window.aftereffect_ns == int(after_s * S)


def test_other_faults_end_at_their_stop():
    assert FaultWindow("pause", 0, S, {"targets": ["c1"]}).aftereffect_ns == 0
    assert FaultWindow("clock", 0, None, {"mode": "bump", "delta_ms": 5_000}).aftereffect_ns == 5_000_000_000
