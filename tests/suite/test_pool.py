"""The run pool: a crashed or hung task fails alone with `RunLost` and the reason; the others finish."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from harness.pool import RunLost, RunPool


def square(x: int) -> int:
    return x * x


def die(code: int) -> None:
    os._exit(code)


def hang() -> None:
    time.sleep(3600)


def raise_value() -> None:
    raise ValueError("bad cell")


def kill_self() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def test_results_crashes_hangs_and_errors_are_each_their_own() -> None:
    pool = RunPool(2, grace_s=1.0)
    try:
        ok = [pool.submit(square, n) for n in range(5)]
        crashed = pool.submit(die, 3)
        killed = pool.submit(kill_self)
        hung = pool.submit_with_timeout(1.0, hang)
        failed = pool.submit(raise_value)
        after = pool.submit(square, 7)  # a replaced worker takes the next task
        assert [f.result(timeout=120) for f in ok] == [0, 1, 4, 9, 16]
        with pytest.raises(RunLost, match="exited with code 3"):
            crashed.result(timeout=120)
        with pytest.raises(RunLost, match="died of signal 9"):
            killed.result(timeout=120)
        with pytest.raises(RunLost, match="hung: no verdict within 1 s"):
            hung.result(timeout=120)
        with pytest.raises(ValueError, match="bad cell"):
            failed.result(timeout=120)
        assert after.result(timeout=120) == 49
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    assert not pool._workers  # every worker process stopped


def hang_marked(path: str) -> None:
    Path(path).write_text("started")
    time.sleep(3600)


def test_stop_ends_running_tasks_at_once(tmp_path) -> None:
    pool = RunPool(1, grace_s=1.0)
    marker = tmp_path / "started"
    running = pool.submit(hang_marked, str(marker))
    queued = [pool.submit(hang) for _ in range(3)]
    deadline = time.monotonic() + 120
    while not marker.exists() and time.monotonic() < deadline:  # the first task is under way
        time.sleep(0.05)
    pool.stop()
    with pytest.raises(RunLost, match="stopped: the batch was interrupted"):
        running.result(timeout=60)
    assert all(f.cancelled() or isinstance(f.exception(timeout=60), RunLost) for f in queued)
    assert not pool._workers
    pool.shutdown()  # after stop: nothing left to do, returns at once
