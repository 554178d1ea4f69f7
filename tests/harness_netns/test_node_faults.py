"""Clock, disk and pause faults on a real 3-controller reference cluster in namespaces, each effect
seen from outside: the node's wall clock and fsync latency on /metrics, its exit code and last
line, its silence while paused, and the quorum's committed logs staying safe under the clock faults.
Records go in through the test-only `POST /v1/append` (acknowledged = committed)."""

from __future__ import annotations

import hashlib
import http.client
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from harness.backends.netns import NetnsBackend
from harness.db.kraft import METRICS_PORT, KraftDB
from harness.test_spec import Cluster
from node.runtime.metrics import parse_prometheus
from tests.harness_netns.conftest import heal_if_left, leftovers, needs_root
from vocab.faults.kinds import ClockFault, DiskFault

pytestmark = [pytest.mark.root, needs_root]
WINDOW_MS = 3000
STALL_MS = 300
SETTINGS = {"kchaos.test.append.enable": "true", "metrics.sample.window.ms": str(WINDOW_MS)}


@dataclass
class Quorum:
    backend: NetnsBackend
    db: KraftDB

    def get(self, node: str, path: str, timeout: float = 3.0) -> bytes | None:
        conn = http.client.HTTPConnection(self.backend.address(node), METRICS_PORT, timeout=timeout)
        try:
            conn.request("GET", path)
            return conn.getresponse().read()
        except OSError:
            return None
        finally:
            conn.close()

    def metrics(self, node: str) -> dict:
        raw = self.get(node, "/metrics")
        assert raw is not None, f"{node} does not answer /metrics"
        return parse_prometheus(raw.decode())

    def skew_ms(self, node: str) -> float:
        """The node's wall clock minus ours, read from /metrics."""
        before, wall, after = self.wall_reading(node)
        return wall - (before + after) / 2

    def wall_reading(self, node: str) -> tuple[float, float, float]:
        """(our wall clock before asking, the node's wall clock, ours after), in ms: the node read its
        clock somewhere in between, however loaded the machine."""
        before = time.time() * 1000
        wall = self.metrics(node)["wall-clock-ms"]
        return before, wall, time.time() * 1000

    def append(self, node: str, record: bytes, timeout: float = 5.0) -> int | None:
        """The committed offset, or None when the node did not acknowledge the record."""
        conn = http.client.HTTPConnection(self.backend.address(node), METRICS_PORT, timeout=timeout)
        try:
            conn.request("POST", "/v1/append", body=record + b"\n")
            resp = conn.getresponse()
            doc = json.loads(resp.read())
            return doc["base_offset"] if resp.status == 200 else None
        except (OSError, http.client.HTTPException, ValueError):
            return None
        finally:
            conn.close()

    def leader(self, timeout: float = 60.0, among: list[str] | None = None) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            leader = self.db.leader()
            if leader is not None and (among is None or leader in among):
                return leader
            time.sleep(0.2)
        raise AssertionError(f"no leader{f' among {among}' if among else ''} within {timeout:g} s")

    def committed(self, node: str) -> tuple[dict[int, str], int, int]:
        """The node's committed data records (offset -> digest), the offset its log starts at (below it
        its snapshot replaced the log) and the offset its committed log ends at, all read at one instant."""
        raw = self.get(node, "/v1/dump", timeout=10)
        assert raw is not None, f"{node} does not answer /v1/dump"
        doc = json.loads(raw)
        start = doc["snapshot"]["end_offset"]
        entries = doc["committed_log"]
        end = entries[-1]["offset"] + 1 if entries else start
        return {e["offset"]: e["digest"] for e in entries if not e["control"]}, start, end

    def make_healthy(self) -> None:
        for node in self.db.nodes:
            self.backend.resume(node)
            self.backend.disk_heal(node)
            self.backend.clock_reset(node)
        for node in self.db.nodes:
            if not self.backend.is_alive(node):
                self.backend.restart(node)
        self.db.wait_ready(120)


@dataclass(eq=False)
class Writer(threading.Thread):
    """Appends numbered records to whoever leads, remembering what was acknowledged (and when)."""

    quorum: Quorum
    acked: dict[int, bytes] = field(default_factory=dict)
    ack_times: list[float] = field(default_factory=list)
    stop_event: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        super().__init__(daemon=True)

    def run(self) -> None:
        i = 0
        while not self.stop_event.is_set():
            leader = self.quorum.db.leader()
            if leader is None:
                time.sleep(0.1)
                continue
            record = f"w-{i}".encode()
            i += 1
            offset = self.quorum.append(leader, record)
            if offset is not None:
                self.acked[offset] = record
                self.ack_times.append(time.monotonic())
            time.sleep(0.02)

    def acked_since(self, t: float) -> int:
        return sum(1 for a in self.ack_times if a > t)

    def stop(self) -> None:
        self.stop_event.set()
        self.join(timeout=30)


@pytest.fixture(scope="module")
def quorum(tmp_path_factory) -> Iterator[Quorum]:
    run_dir = tmp_path_factory.mktemp("node-faults") / "run"
    db = KraftDB(Cluster(controllers=3), SETTINGS)
    backend = NetnsBackend(run_dir, list(db.nodes))
    try:
        backend.setup()
        backend.enable_faults(["clock", "pause", "disk_stall", "disk_fail"])
        db.install(backend, run_dir)
        db.wait_ready(120)
        yield Quorum(backend, db)
        db.stop_all()
    finally:
        backend.teardown()
        heal_if_left(run_dir)
    assert not leftovers(backend.bridge)


@pytest.fixture
def healthy(quorum) -> Iterator[Quorum]:
    yield quorum
    quorum.make_healthy()


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} within {timeout:g} s")
        time.sleep(0.1)


def test_clock_bumps_on_the_leader_show_on_metrics_and_the_quorum_stays_safe(healthy):
    q = healthy
    writer = Writer(q)
    writer.start()
    try:
        leader = q.leader()
        others = [n for n in q.db.nodes if n != leader]
        wait_for(lambda: writer.acked_since(0) >= 5, 60, "no append acknowledged")
        node_clock = q.metrics(leader)["node-clock-ms"]
        q.backend.clock(leader, ClockFault("bump", delta_ms=-300_000))  # five minutes back
        assert q.skew_ms(leader) == pytest.approx(-300_000, abs=2_000)
        assert all(abs(q.skew_ms(n)) < 2_000 for n in others)
        assert q.metrics(leader)["node-clock-ms"] >= node_clock  # the node's own clock never goes back
        time.sleep(2)
        q.backend.clock(leader, ClockFault("bump", delta_ms=330_000))  # bumps add up: 30 s ahead
        assert q.skew_ms(leader) == pytest.approx(30_000, abs=2_000)
        # what the node's core runs on is that wall clock (Kafka's Time.milliseconds()), not a monotonic one
        assert q.metrics(leader)["node-clock-ms"] - time.time() * 1000 == pytest.approx(30_000, abs=2_000)
        time.sleep(2)
        q.backend.clock_reset(leader)
        assert abs(q.skew_ms(leader)) < 2_000
        reset_at = time.monotonic()
        wait_for(lambda: writer.acked_since(reset_at) >= 5, 90, "the quorum made no progress after the reset")
    finally:
        writer.stop()
    assert len(writer.acked) >= 10
    # A follower learns the high watermark a fetch after the leader, and a leader change leaves it
    # unknown a while: compare the logs once every node has committed past the last acknowledgement.
    top = max(writer.acked)
    dumps: dict[str, tuple[dict[int, str], int, int]] = {}

    def all_committed_past_top() -> bool:
        dumps.update((n, q.committed(n)) for n in q.db.nodes)
        return all(end > top for _log, _start, end in dumps.values())

    wait_for(all_committed_past_top, 60, f"not every node committed past acknowledged offset {top}")
    for offset, record in writer.acked.items():  # every node holds every acknowledged record where it said
        digest = hashlib.sha256(record).hexdigest()
        for node, (log, start, _end) in dumps.items():
            if offset >= start:  # below start, a snapshot holds it (runs snapshot every few records)
                assert log.get(offset) == digest, (node, offset, start)
    logs = [log for log, _start, _end in dumps.values()]
    for a in logs:  # and the nodes agree wherever their logs overlap
        for b in logs:
            assert all(a[o] == b[o] for o in a.keys() & b.keys())


def test_clock_rate_and_strobe_reach_a_running_node(healthy):
    q = healthy
    fast, strobed = [n for n in q.db.nodes if n != q.leader()][:2]
    q.backend.clock(fast, ClockFault("rate", rate=1.5))
    before1, wall1, after1 = q.wall_reading(fast)
    t0 = time.monotonic()
    q.backend.clock(strobed, ClockFault("strobe", delta_ms=10_000, period_ms=200, duration_ms=3_000))
    seen = []
    while time.monotonic() - t0 < 2.5:
        seen.append(q.skew_ms(strobed))
        time.sleep(0.05)
    assert any(abs(s - 10_000) < 1_000 for s in seen) and any(abs(s) < 1_000 for s in seen)
    before2, wall2, after2 = q.wall_reading(fast)
    # The node's clock ran 1.5x over a true interval that lies between the readings' inner and outer
    # bounds: exact however long the requests took (20 ms for the clock's and the metrics' rounding).
    assert 1.5 * (before2 - after1) - 20 <= wall2 - wall1 <= 1.5 * (after2 - before1) + 20
    q.backend.clock_reset(fast)
    assert abs(q.skew_ms(fast)) < 1_000
    wait_for(lambda: abs(q.skew_ms(strobed)) < 1_000, 30, "the strobe did not end at the true time")
    leader = q.leader()
    wait_for(lambda: q.append(leader, b"after-clock-faults") is not None, 60, "no append after the clock faults")


def test_disk_stall_raises_the_nodes_measured_fsync_latency_by_about_the_stall(healthy):
    q = healthy
    leader = q.leader()
    for i in range(5):
        q.append(leader, f"base-{i}".encode())
    baseline = q.metrics(leader)
    assert baseline["fsync-total"] > 0 and baseline["fsync-latency-avg"] < STALL_MS / 2
    q.backend.disk(leader, DiskFault("stall", ops=("fsync",), delay_ms=STALL_MS))
    start = time.monotonic()
    acked = 0
    while time.monotonic() - start < WINDOW_MS / 1000 + 1:  # long enough for the window to hold only stalls
        acked += q.append(leader, f"stalled-{acked}".encode(), timeout=10) is not None
    stalled = q.metrics(leader)
    assert acked >= 2
    assert stalled["fsync-latency-avg"] >= STALL_MS * 0.9 and stalled["fsync-latency-max"] >= STALL_MS
    q.backend.disk_heal(leader)


def last_line(q: Quorum, node: str) -> str:
    return (q.backend.run_dir / "nodes" / node / "stderr.log").read_text().strip().splitlines()[-1]


def test_eio_on_fsync_fail_stops_the_leader_with_one_line_and_loses_nothing_it_acknowledged(healthy):
    q = healthy
    leader = q.leader()
    assert q.append(leader, b"before-eio") is not None
    proc = q.backend.process(leader)
    assert proc is not None
    q.backend.disk(leader, DiskFault("fail", ops=("fsync",), errno="EIO"))
    # The leader never counts its own failed fsync, but its fsync runs beside replication: both
    # followers can store a record and commit it (two of three) before the error ends the leader
    # (CI, stop 41). So an acknowledgement may come; what it acknowledged must then be on the others.
    acked = {}
    for i in range(3):
        record = f"after-eio-{i}".encode()
        offset = q.append(leader, record)
        if offset is not None:
            acked[offset] = hashlib.sha256(record).hexdigest()
    assert proc.popen.wait(timeout=60) == 254
    line = last_line(q, leader)
    data_dir = str(q.db.data_dir(leader))
    assert line.startswith(f"kchaos: error: node {q.db.node_id(leader)}:")
    # the log's fdatasync, or the fsync of a snapshot or quorum-state written meanwhile (runs snapshot often)
    assert ("fdatasync" in line or "fsync" in line) and "EIO" in line and data_dir in line, line
    others = [n for n in q.db.nodes if n != leader]
    new_leader = q.leader(among=others)
    assert q.append(new_leader, b"after-failover") is not None
    log, start, _end = q.committed(new_leader)  # the new leader has committed its own epoch's record
    assert all(log.get(offset) == digest for offset, digest in acked.items() if offset >= start), (acked, start)
    q.backend.disk_heal(leader)
    q.backend.restart(leader)
    wait_for(lambda: q.get(leader, "/v1/status") is not None, 60, "the healed node did not come back")


def test_enospc_on_write_fail_stops_a_follower_while_the_others_commit(healthy):
    q = healthy
    leader = q.leader()
    follower = next(n for n in q.db.nodes if n != leader)
    proc = q.backend.process(follower)
    assert proc is not None
    q.backend.disk(follower, DiskFault("fail", ops=("write",), errno="ENOSPC"))
    committed = sum(q.append(leader, f"enospc-{i}".encode()) is not None for i in range(5))
    assert proc.popen.wait(timeout=60) == 254
    line = last_line(q, follower)
    # the first write it makes: a log segment, or quorum-state if an election came first
    assert line.startswith(f"kchaos: error: node {q.db.node_id(follower)}:"), line
    assert "ENOSPC (No space left on device)" in line and str(q.db.data_dir(follower)) in line, line
    assert committed >= 1 or q.append(q.leader(), b"two-of-three") is not None  # a majority still commits


def test_a_paused_leader_stops_answering_is_replaced_and_answers_after_resume(healthy):
    q = healthy
    leader = q.leader()
    epoch = json.loads(q.get(leader, "/v1/status") or b"{}")["epoch"]
    q.backend.pause(leader)
    assert q.get(leader, "/v1/status", timeout=1.0) is None
    others = [n for n in q.db.nodes if n != leader]
    new_leader = q.leader(among=others)
    new_status = json.loads(q.get(new_leader, "/v1/status") or b"{}")
    assert new_status["epoch"] > epoch
    q.backend.resume(leader)
    wait_for(lambda: q.get(leader, "/v1/status") is not None, 30, "the resumed node did not answer")
    wait_for(
        lambda: json.loads(q.get(leader, "/v1/status") or b"{}").get("epoch", 0) >= new_status["epoch"],
        30,
        "the resumed node did not learn the new epoch",
    )
