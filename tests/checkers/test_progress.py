"""The progress line of long checks: silent when quick, then what the check has done so far."""

from __future__ import annotations

import io
import time

from checkers import linearizable
from checkers.gen import register_history
from checkers.history import load_history
from checkers.progress import ProgressLine, Tracker


def test_a_quick_check_prints_nothing() -> None:
    stream = io.StringIO()
    with ProgressLine(Tracker(keys=3), stream, after_s=5.0):
        pass
    assert stream.getvalue() == ""


def test_a_slow_check_prints_what_it_has_done_every_interval() -> None:
    stream = io.StringIO()  # not a terminal: one line per interval
    tracker = Tracker()
    with ProgressLine(tracker, stream, after_s=0.02, every_s=0.02):
        tracker.key_done(1, 3)
        tracker.states = 1234
        deadline = time.monotonic() + 5
        while "1,234 configurations" not in stream.getvalue() and time.monotonic() < deadline:
            time.sleep(0.01)
    lines = stream.getvalue().splitlines()
    assert lines and all(line.startswith("checking: ") for line in lines)
    assert any("1/3 keys decided" in line and "1,234 configurations searched" in line for line in lines)


def test_the_linearizability_check_reports_every_key_it_decides(tmp_path) -> None:
    history = load_history(register_history(600, keys=4, processes=5, seed=3).write_jsonl(tmp_path / "h.jsonl"))
    for jobs in (1, 2):
        tracker = Tracker()
        verdict = linearizable.check(history, "register", jobs=jobs, tracker=tracker)
        assert verdict.valid is True
        assert (tracker.done, tracker.keys) == (4, 4)
