"""The real runtime's clock: the wall clock, never backwards; timers that follow it when it jumps or
freezes; fsync latency in the metrics; storage errors that name the file and the errno."""

from __future__ import annotations

import asyncio
import errno
import os
import time

import pytest

from node.raft.events import Tick
from node.raft.quorum_state import QuorumStateData
from node.raft.records import RecordBatch
from node.raft.storage import StorageError
from node.runtime import file_storage, wall_clock
from node.runtime.file_storage import FileStorage
from node.runtime.local_cluster import plan_cluster
from node.runtime.metrics import RuntimeMetrics, parse_prometheus, render_prometheus
from node.runtime.server import NodeServer
from node.runtime.server_config import load_server_config
from node.runtime.wall_clock import WallClock


def test_the_node_clock_is_the_wall_clock_and_never_goes_back(monkeypatch):
    readings = iter([1_000, 2_000, 500, 2_500, 2_400])
    monkeypatch.setattr(wall_clock.time, "time_ns", lambda: next(readings) * 1_000_000)
    clock = WallClock()
    assert [clock.now_ms() for _ in range(4)] == [1_000, 2_000, 2_000, 2_500]
    assert clock.wall_ms() == 2_400  # the raw reading may go back; the node's time does not


class SteppedClock:
    """A node clock the test moves by hand."""

    def __init__(self, now: int) -> None:
        self.now = now

    def now_ms(self) -> int:
        return self.now

    def wall_ms(self) -> int:
        return self.now


def timer_server(tmp_path) -> tuple[NodeServer, SteppedClock, list[float]]:
    plan = plan_cluster(tmp_path, voters=1)
    server = NodeServer(load_server_config(plan.nodes[0].config_path))
    clock = SteppedClock(1_700_000_000_000)
    server.clock = clock  # type: ignore[assignment]
    ticks: list[float] = []
    server._enqueue = lambda event: ticks.append(time.monotonic()) if isinstance(event, Tick) else None  # type: ignore[method-assign]
    return server, clock, ticks


async def wait_until(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        await asyncio.sleep(0.01)
    return predicate()


def test_a_timer_fires_as_soon_as_the_wall_clock_jumps_past_its_deadline(tmp_path):
    server, clock, ticks = timer_server(tmp_path)

    async def scenario() -> None:
        server._loop = asyncio.get_running_loop()
        server._set_timer(clock.now + 600_000)  # ten minutes away on the node's clock
        await asyncio.sleep(0.3)
        assert ticks == []
        clock.now += 600_000  # the clock jumps ten minutes ahead
        assert await wait_until(lambda: ticks, timeout=10), "the timer waited for real time to pass"

    asyncio.run(scenario())


def test_a_timer_does_not_fire_while_the_node_clock_is_frozen(tmp_path):
    server, clock, ticks = timer_server(tmp_path)

    async def scenario() -> None:
        server._loop = asyncio.get_running_loop()
        server._set_timer(clock.now + 100)
        await asyncio.sleep(0.6)  # real time passes, the node's clock does not (it was set back)
        assert ticks == []
        clock.now += 100
        assert await wait_until(lambda: ticks, timeout=10)
        assert len(ticks) == 1 and server._timer is None

    asyncio.run(scenario())


def test_fsync_latency_is_measured_and_exported():
    metrics = RuntimeMetrics(window_ms=1_000, start_ms=0)
    metrics.record_fsync(100, 2.0)
    metrics.record_fsync(200, 300.0)
    snap = metrics.snapshot(250)
    assert snap["fsync-latency-avg"] == 151.0 and snap["fsync-latency-max"] == 300.0 and snap["fsync-total"] == 2
    assert metrics.snapshot(1_150)["fsync-latency-max"] == 300.0
    assert metrics.snapshot(1_250)["fsync-latency-max"] == 0.0  # out of the window
    text = render_prometheus(1, {**snap, "wall-clock-ms": 1_700_000_000_123})
    assert 'kafka_raft_manager_fsync_latency_max{node_id="1"} 300' in text
    assert parse_prometheus(text)["wall-clock-ms"] == 1_700_000_000_123


def test_a_failed_fdatasync_names_the_segment_and_the_errno(tmp_path, monkeypatch):
    storage = FileStorage(tmp_path / "data", 1)
    storage.load()
    storage.append((RecordBatch(0, 1, (b"r",)),))

    def eio(fd: int) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(file_storage.os, "fdatasync", eio)
    with pytest.raises(StorageError) as info:
        storage.flush()
    message = str(info.value)
    assert message.startswith("fdatasync ") and "00000000000000000000.log: EIO (Input/output error)" in message
    storage.close()


def test_a_failed_write_names_the_file_and_the_errno(tmp_path, monkeypatch):
    storage = FileStorage(tmp_path / "data", 1)
    storage.load()

    def enospc(fd: int, data: object) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(file_storage.os, "write", enospc)
    with pytest.raises(StorageError, match=r"^write .*quorum-state\.tmp: ENOSPC \(No space left on device\)$"):
        storage.write_quorum_state(QuorumStateData(leader_epoch=1, voted_id=1))
    storage.close()
