"""Clock faults on a real process: libfaketime + the kchaos_clock shim, driven through ClockControl.

No namespaces needed (the mechanism is the same inside one), only libfaketime and gcc.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from harness.backends import clocks
from harness.backends.clocks import ClockControl, HostClock
from harness.backends.ledger import Ledger, heal
from harness.backends.procs import remove_faketime_files
from tests.harness_netns.conftest import HERE
from vocab.faults.kinds import ClockFault

try:
    clocks.find_libfaketime()
    HAVE_FAKETIME = True
except Exception:
    HAVE_FAKETIME = False
needs_faketime = pytest.mark.skipif(not HAVE_FAKETIME, reason="needs libfaketime (apt-get install faketime)")


class Child:
    """clock_child.py under the clock preloads; asks it for its wall clock."""

    def __init__(self, control: ClockControl) -> None:
        control.process_starting()
        env = {**os.environ, **clocks.preload_env(control.path)}
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "clock_child.py")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )

    def ask(self, command: str) -> dict:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def skew(self) -> float:
        """Its wall clock minus ours, in seconds (the round trip bounds the error: milliseconds)."""
        before, wall, after = self.wall_reading()
        return wall - (before + after) / 2

    def wall_reading(self) -> tuple[float, float, float]:
        """(our wall clock before asking, the child's, ours after), in seconds: the child read its
        clock somewhere in between, however loaded the machine."""
        before = time.time()
        wall = self.ask("now")["wall"]
        return before, wall, time.time()

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()
        remove_faketime_files(self.proc.pid)  # libfaketime's, left by a killed process


@pytest.fixture
def ledger(tmp_path) -> Ledger:
    return Ledger.create(tmp_path / "ledger.jsonl")


@pytest.fixture
def control(tmp_path, ledger) -> Iterator[ClockControl]:
    control = ClockControl(ledger, "n1", tmp_path / "nodes" / "n1" / "faketime")
    control.create()
    yield control
    control.stop_strobe()


@pytest.fixture
def child(control) -> Iterator[Child]:
    child = Child(control)
    yield child
    child.close()


def test_host_clock_model_keeps_the_clock_continuous_across_rate_changes_and_restarts():
    clock = HostClock().bumped(100.0, 30.0)  # +30 s at t=100
    assert clock.offset_at(500.0) == 30.0
    fast = clock.with_rate(200.0, 1.5)  # from t=200 it gains 0.5 s per second
    assert fast.offset_at(200.0) == 30.0 and fast.offset_at(210.0) == pytest.approx(35.0)
    # libfaketime computes t + (t - start)(rate - 1) + OFFSET: the spec makes that equal our model
    for start in (0.0, 150.0, 200.0, 260.0):
        offset = float(fast.faketime_spec(start).split()[0])
        for t in (start, 300.0, 1000.0):
            assert t + (t - start) * 0.5 + offset == pytest.approx(t + fast.offset_at(t), abs=1e-3)
    assert fast.faketime_spec(0.0).endswith(" x1.5\n")
    assert HostClock().faketime_spec(123.0) == clocks.TRUE_TIME


@needs_faketime
def test_bump_moves_a_running_process_clock_both_ways_by_seconds_to_minutes_and_reset_restores(control, child, ledger):
    assert abs(child.skew()) < 0.5
    control.apply(ClockFault("bump", delta_ms=90_000))
    assert child.skew() == pytest.approx(90.0, abs=0.5)
    assert [e.kind for e in ledger.outstanding()] == ["clock"]
    control.apply(ClockFault("bump", delta_ms=-690_000))  # bumps add up: now ten minutes behind
    assert child.skew() == pytest.approx(-600.0, abs=0.5)
    control.apply(ClockFault("reset"))
    assert abs(child.skew()) < 0.5
    assert ledger.outstanding() == []


@needs_faketime
def test_rate_makes_the_clock_run_faster_from_now_without_a_jump_while_sleeps_stay_real(control, child):
    time.sleep(2.0)  # libfaketime's own rate would count from the process start: a 1 s jump here
    before = child.skew()
    control.apply(ClockFault("rate", rate=1.5))
    b1, w1, a1 = child.wall_reading()
    assert w1 - (b1 + a1) / 2 == pytest.approx(before, abs=0.3)  # no jump when the rate changes
    time.sleep(2.0)
    b2, w2, a2 = child.wall_reading()
    # 1.5x over a true interval between the readings' inner and outer bounds, however loaded the machine
    assert 1.5 * (b2 - a1) - 0.02 <= w2 - w1 <= 1.5 * (a2 - b1) + 0.02
    # waits are not scaled: asyncio's timers and time.sleep keep real time under a rate. A scaled 1 s
    # sleep would take 0.67 s at 1.5x; a load can only make a sleep longer, so the lower bound decides.
    slept = child.ask("sleep 1.0")
    assert slept["sleep"] >= 0.98 and slept["asyncio"] >= 0.98
    control.apply(ClockFault("rate", rate=0.5))
    slow = child.ask("sleep 1.0")
    assert 0.98 <= slow["sleep"] < 1.8 and 0.98 <= slow["asyncio"] < 1.8


@needs_faketime
def test_a_process_started_under_a_rate_gets_its_host_clock(control):
    control.apply(ClockFault("rate", rate=2.0))
    time.sleep(1.0)
    child = Child(control)  # a restart: its libfaketime counts the rate from this new start
    try:
        child.ask("now")  # started and answering: the round trip below is short even on a loaded machine
        # The host clock gains a second per second at 2x: bracket the measurement instead of racing it.
        low = control.clock.offset_at(time.time())
        skew = child.skew()
        high = control.clock.offset_at(time.time())
        assert low > 0.9
        assert low - 0.3 <= skew <= high + 0.3, (low, skew, high)
    finally:
        child.close()


@needs_faketime
def test_strobe_flips_between_skewed_and_true_then_ends_at_the_true_time(control, child, ledger):
    control.apply(ClockFault("strobe", delta_ms=5_000, period_ms=100, duration_ms=1_500))
    assert control.strobing and [e.kind for e in ledger.outstanding()] == ["clock"]
    seen = []
    deadline = time.monotonic() + 1.2
    while time.monotonic() < deadline:
        seen.append(child.skew())
        time.sleep(0.02)
    assert any(abs(s - 5.0) < 0.3 for s in seen) and any(abs(s) < 0.3 for s in seen)
    assert all(abs(s - 5.0) < 0.3 or abs(s) < 0.3 for s in seen)
    deadline = time.monotonic() + 10
    while control.strobing and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not control.strobing
    assert abs(child.skew()) < 0.3
    assert ledger.outstanding() == []


@needs_faketime
def test_heal_of_a_crashed_harness_puts_the_clock_back(control, child, ledger):
    control.apply(ClockFault("bump", delta_ms=-45_000))
    assert child.skew() == pytest.approx(-45.0, abs=0.5)
    # the harness "dies" here: a fresh process heals from the ledger file alone
    report = heal(ledger.path)
    assert report.ok and any("clock of n1" in r for r in report.removed)
    assert abs(child.skew()) < 0.5
    assert heal(ledger.path).removed == []


def test_a_strobe_faster_than_the_minimum_period_is_refused(control):
    with pytest.raises(ValueError, match="period"):
        control.apply(ClockFault("strobe", delta_ms=1_000, period_ms=1, duration_ms=100))
