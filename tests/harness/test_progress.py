"""The plain (non-terminal) progress lines of a run: periodic, and one closing line that says something new."""

from __future__ import annotations

import io

from harness.progress import Progress


def _progress(stream: io.StringIO, clock: list[int]) -> Progress:
    return Progress(60.0, clock_ns=lambda: clock[0], live=False, stream=stream, every_s=0.0)


def _event(kind: str) -> dict:
    return {"process": 0, "type": kind}


def test_the_closing_line_is_not_a_repeat_of_the_last_periodic_one() -> None:
    """A periodic line printed right before the end said it all: the phase's line must not come twice."""
    stream, clock = io.StringIO(), [0]
    with _progress(stream, clock) as progress:
        progress.phase = "final reads"
        progress.on_event(_event("invoke"))
        clock[0] = 2_000_000_000
        progress.on_event(_event("ok"))
    lines = stream.getvalue().splitlines()
    assert [line.split("]")[0] for line in lines] == ["[final reads", "[final reads"]  # one per event, no third
    assert "ops ok 1 fail 0 info 0" in lines[-1]


def test_the_closing_line_reports_what_happened_since_the_last_periodic_one() -> None:
    stream, clock = io.StringIO(), [0]
    progress = _progress(stream, clock)
    with progress:
        progress.on_event(_event("invoke"))  # printed (every_s 0)
        progress.every_s = 3600.0  # no more periodic lines
        progress.on_event(_event("ok"))
        progress.on_event({"process": "nemesis", "type": "info"})  # the nemesis's ops are not counted
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2
    assert "ops ok 0" in lines[0] and "ops ok 1 fail 0 info 0" in lines[1]


def test_a_fault_that_came_and_went_between_two_lines_is_still_named() -> None:
    """The nemesis's 10 s grid and the lines' 10 s met just before each start: every line of a netns
    soak said `faults: none` while a fault ran half the time."""
    stream, clock, active = io.StringIO(), [0], []
    progress = Progress(
        60.0, clock_ns=lambda: clock[0], live=False, stream=stream, every_s=3600.0, faults=lambda: active
    )
    progress.on_event({"process": "nemesis", "type": "invoke", "f": "start-clock"})
    progress.on_event({"process": "nemesis", "type": "info", "f": "start-clock", "value": {"targets": ["c3"]}})
    progress.on_event({"process": "nemesis", "type": "fail", "f": "start-kill"})  # did nothing
    active.append("pause")  # started and still on
    progress.on_event({"process": "nemesis", "type": "info", "f": "start-pause"})
    progress._print()
    progress._print()
    first, second = stream.getvalue().splitlines()
    assert first.endswith("faults: pause (since the last line: clock)"), first
    assert second.endswith("faults: pause"), second  # said once, then forgotten


def test_a_quiet_progress_counts_and_prints_nothing() -> None:
    """`--no-progress` and the runs of a suite: before, they still printed a plain line every 10 s
    (the runs of `kchaos suite --quiet` on netns filled its log)."""
    stream, clock = io.StringIO(), [0]
    progress = Progress(60.0, clock_ns=lambda: clock[0], live=False, stream=stream, every_s=0.0, quiet=True)
    with progress:
        for kind in ("invoke", "ok", "invoke", "fail"):
            clock[0] += 1_000_000_000
            progress.on_event(_event(kind))
    assert stream.getvalue() == "" and progress.counts == {"ok": 1, "fail": 1, "info": 0}
