"""The real runtime end to end: 3 voters + 1 observer as OS processes on 127.0.0.x.

Records come in through the test-only `POST /v1/append` endpoint (`kchaos.test.append.enable`); the
quorum protocol itself has no client API. What is on disk is checked with `FileStorage.load()` after
the nodes have stopped.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from node.protocol.admin import CreatableTopic, CreateTopicsRequest
from node.protocol.codec import BinaryCodec
from node.raft.quorum_state import QuorumStateData
from node.raft.records import RecordBatch
from node.runtime.file_storage import FileStorage
from node.runtime.local_cluster import NodeProcess, NodeSpec, find_leader, plan_cluster, status, wait_for
from node.runtime.metrics import GAUGES, parse_prometheus
from tests.runtime.test_runtime_parts import KIP_STATUS_FIELDS

REPO = Path(__file__).resolve().parents[2]
KIP_METRICS = [*GAUGES, "current-state"]  # KIP-595's "Metrics" table
TIMEOUTS = {
    "quorum.fetch.timeout.ms": "1500",
    "quorum.election.timeout.ms": "1000",
    "quorum.election.backoff.max.ms": "500",
    "quorum.request.timeout.ms": "1000",
}


class Appender:
    """Appends over keep-alive HTTP connections to whichever node leads; remembers what committed."""

    def __init__(self) -> None:
        self.committed: dict[int, bytes] = {}  # offset -> record

    def append_one(self, spec: NodeSpec, record: bytes, conn_cache: dict) -> bool:
        conn = conn_cache.get(spec.node_id)
        if conn is None:
            conn = conn_cache[spec.node_id] = http.client.HTTPConnection(spec.host, spec.metrics_port, timeout=10)
        conn.request("POST", "/v1/append", body=record + b"\n")
        resp = conn.getresponse()
        doc = json.loads(resp.read())
        if resp.status != 200:
            return False
        assert doc["base_offset"] == doc["last_offset"]
        self.committed[doc["base_offset"]] = record
        return True

    def append_many(self, spec: NodeSpec, prefix: str, count: int, workers: int = 8) -> int:
        def work(worker: int) -> int:
            cache: dict = {}
            ok = 0
            for i in range(worker, count, workers):
                ok += self.append_one(spec, f"{prefix}-{i}".encode(), cache)
            for conn in cache.values():
                conn.close()
            return ok

        with ThreadPoolExecutor(workers) as pool:
            return sum(pool.map(work, range(workers)))


def quorum_describe(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "node.runtime", "quorum", "describe", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )


def garbage_is_refused(spec: NodeSpec, payload: bytes) -> bool:
    """Send `payload` to the node's quorum port; True when the node closes that connection."""
    with socket.create_connection((spec.host, spec.port), timeout=5) as sock:
        sock.sendall(payload)
        try:
            return sock.recv(1024) == b""
        except ConnectionResetError:
            return True


def data_records(batches: tuple[RecordBatch, ...]) -> dict[int, bytes]:
    return {b.base_offset + i: r for b in batches if not b.control for i, r in enumerate(b.records)}


@pytest.fixture
def cluster(tmp_path):
    plan = plan_cluster(tmp_path, voters=3, observers=1, settings=TIMEOUTS)
    procs = {spec.node_id: NodeProcess(spec).start() for spec in plan.nodes}
    try:
        yield plan, procs
    finally:
        for proc in procs.values():
            if proc.alive():
                proc.signal(signal.SIGKILL)
                proc.wait(10)


def test_quorum_elects_commits_survives_kill_9_and_recovers(cluster):
    plan, procs = cluster
    voters = plan.voters
    appender = Appender()

    leader = wait_for(lambda: find_leader(voters), 30, what="a leader")
    leader_spec = plan.node(leader["node_id"])
    for spec in plan.nodes:  # the followers and the observer find the leader
        wait_for(
            lambda s=spec: (st := status(s)) and st["leader_id"] == leader_spec.node_id,
            30,
            what=f"node {spec.node_id} to follow the leader",
        )
    assert appender.append_many(leader_spec, "a", 1000) == 1000

    # A garbage frame, an impossible length and a truncated frame: each closes only its own connection.
    follower_spec = next(v for v in voters if v.node_id != leader_spec.node_id)
    assert garbage_is_refused(leader_spec, b"\x00\x00\x00\x05hello")
    assert garbage_is_refused(follower_spec, b"\x7f\xff\xff\xff" + os.urandom(64))
    assert garbage_is_refused(leader_spec, b"\x00\x00\x00\x20\x00\x01\x00\x00" + os.urandom(28))
    # A well-formed frame of an API nobody serves (its key rewritten to 9999) is refused the same way.
    frame = bytearray(BinaryCodec().encode_request(9, CreateTopicsRequest((CreatableTopic("t"),))))
    frame[4:6] = (9999).to_bytes(2, "big")
    assert garbage_is_refused(leader_spec, bytes(frame))
    assert appender.append_many(leader_spec, "b", 100) == 100  # the quorum kept committing
    assert "closing connection from" in procs[leader_spec.node_id].log_text()
    assert "closing connection from" in procs[follower_spec.node_id].log_text()

    # quorum describe, asked of every node.
    everyone = ",".join(n.address for n in plan.nodes)
    status_out = quorum_describe("--status", "--bootstrap-server", everyone)
    assert status_out.returncode == 0, status_out.stderr
    fields = dict(re.split(r":\s+", line, maxsplit=1) for line in status_out.stdout.splitlines())
    assert list(fields) == KIP_STATUS_FIELDS
    assert int(fields["LeaderId"]) == leader_spec.node_id
    assert int(fields["HighWatermark"]) > max(appender.committed)
    assert fields["CurrentVoters"] == "[1, 2, 3]"
    assert fields["ClusterId"] == status(leader_spec)["cluster_id"]
    replication = quorum_describe("--replication", "--bootstrap-server", everyone)
    assert replication.returncode == 0, replication.stderr
    lines = [line.split() for line in replication.stdout.splitlines()]
    assert lines[0] == ["ReplicaId", "LogEndOffset", "Lag", "LagTimeMs", "Status"]
    assert {int(row[0]): row[4] for row in lines[1:]} == {
        **{v.node_id: "Follower" for v in voters},
        leader_spec.node_id: "Leader",
        4: "Observer",
    }
    # One address is enough: the observer asks the leader for us (as Kafka's brokers forward it).
    observer_only = quorum_describe("--status", "--bootstrap-server", plan.node(4).address, "--timeout-ms", "5000")
    assert observer_only.returncode == 0, observer_only.stderr
    assert f"LeaderId:               {leader_spec.node_id}" in observer_only.stdout

    # kill -9 the leader: a new leader in a higher epoch, and the quorum goes on committing.
    old_epoch = leader["epoch"]
    procs[leader_spec.node_id].signal(signal.SIGKILL)
    procs[leader_spec.node_id].wait(10)
    survivors = [v for v in voters if v.node_id != leader_spec.node_id]
    new_leader = wait_for(lambda: find_leader(survivors, old_epoch + 1), 30, what="a new leader")
    assert new_leader["epoch"] > old_epoch
    new_leader_spec = plan.node(new_leader["node_id"])
    assert appender.append_many(new_leader_spec, "c", 200) == 200
    # One log line per role change (benchmarks/bench_failover.py times a failover's phases by them):
    # the pre-vote round in the old epoch, the candidacy, the leadership, the active controller.
    n, epoch = new_leader_spec.node_id, new_leader["epoch"]
    active = f"node {n}: leader in epoch {epoch}, controller active"
    wait_for(lambda: active in procs[n].log_text(), 30, what="the new leader's controller-active line")
    lines = procs[n].log_text()
    assert f"node {n}: prospective in epoch {old_epoch}\n" in lines
    assert lines.index(f"node {n}: candidate in epoch {epoch}\n") < lines.index(f"node {n}: leader in epoch {epoch}\n")

    # A torn tail on the killed node's log: it is cut on restart, and the node catches up.
    killed = leader_spec
    segment = sorted((killed.data_dir / "__cluster_metadata-0").glob("*.log"))[-1]
    with open(segment, "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x99\x99\x00\x00\x01\x00torn")
    procs[killed.node_id] = NodeProcess(killed).start()
    target = status(new_leader_spec)["high_watermark"]
    wait_for(
        lambda: (s := status(killed)) and s["high_watermark"] >= target and s["leader_id"] == new_leader_spec.node_id,
        30,
        what="the restarted node to catch up",
    )
    restarted_log = procs[killed.node_id].log_text().split("node.runtime")[-1]
    assert "start-up recovery: truncated" in restarted_log
    loaded = re.findall(r"loaded quorum-state epoch (\d+) .*; log end offset (\d+)", restarted_log)
    assert loaded and int(loaded[-1][0]) >= old_epoch and int(loaded[-1][1]) > 1000

    # SIGTERM on the leader: it resigns with EndQuorumEpoch and exits 0; a successor takes over.
    resigning = new_leader_spec
    procs[resigning.node_id].signal(signal.SIGTERM)
    assert procs[resigning.node_id].wait(15) == 0
    others = [v for v in voters if v.node_id != resigning.node_id]
    assert any(
        f"EndQuorumEpoch from leader {resigning.node_id} of epoch {new_leader['epoch']}" in procs[v.node_id].log_text()
        for v in others
    )
    successor = wait_for(lambda: find_leader(others, new_leader["epoch"] + 1), 30, what="a successor")
    assert appender.append_many(plan.node(successor["node_id"]), "d", 50) == 50
    procs[resigning.node_id] = NodeProcess(resigning).start()  # back, to catch up like the others

    # Every committed record is on every node, at the offset it was committed at.
    final_hwm = status(plan.node(successor["node_id"]))["high_watermark"]
    for spec in plan.nodes:
        if procs[spec.node_id].alive():
            wait_for(
                lambda s=spec: (st := status(s)) and st["high_watermark"] >= final_hwm, 30, what=f"node {spec.node_id}"
            )
    # The broker (node 4) heartbeats the new controller, whose fence or unfence records may commit at
    # any moment: the gauge lies between the high watermarks read just before and just after it.
    successor_spec = plan.node(successor["node_id"])
    before = status(successor_spec)["high_watermark"]
    metrics = parse_prometheus(_get(successor_spec, "/metrics"))
    after = status(successor_spec)["high_watermark"]
    assert metrics["current-state"] == "leader" and final_hwm <= before <= metrics["high-watermark"] <= after
    assert set(KIP_METRICS) <= set(metrics)
    assert metrics["append-records-rate"] > 0
    observer_metrics = parse_prometheus(_get(plan.node(4), "/metrics"))
    assert observer_metrics["current-state"] == "observer" and observer_metrics["fetch-records-rate"] > 0
    for proc in procs.values():
        if proc.alive():
            assert proc.stop() == 0
    for spec in plan.nodes:
        with FileStorage(spec.data_dir, spec.node_id) as storage:
            on_disk = data_records(storage.load().batches)
        missing = {o: r for o, r in appender.committed.items() if on_disk.get(o) != r}
        assert not missing, f"node {spec.node_id} lacks {len(missing)} committed records"


def _get(spec: NodeSpec, path: str) -> str:
    conn = http.client.HTTPConnection(spec.host, spec.metrics_port, timeout=5)
    try:
        conn.request("GET", path)
        return conn.getresponse().read().decode()
    finally:
        conn.close()


def _start_expecting_refusal(plan, spec: NodeSpec, extra: dict[str, str] | None = None) -> str:
    path = spec.config_path
    path.write_text(plan.properties(spec, extra))
    proc = NodeProcess(spec).start()
    try:
        code = proc.wait(30)
    finally:
        if proc.alive():
            proc.signal(signal.SIGKILL)
            proc.wait(10)
    assert code == 254
    errors = [line for line in proc.log_text().splitlines() if line.startswith("kchaos: error:")]
    assert len(errors) == 1 and "Traceback" not in proc.log_text()
    return errors[0]


def test_a_corrupt_quorum_state_file_refuses_to_start(tmp_path):
    plan = plan_cluster(tmp_path, voters=1)
    spec = plan.nodes[0]
    with FileStorage(spec.data_dir, spec.node_id) as storage:
        storage.load()
        storage.write_quorum_state(QuorumStateData(leader_id=-1, leader_epoch=7, voted_id=1, current_voters=(1,)))
    state_file = spec.data_dir / "__cluster_metadata-0" / "quorum-state"
    state_file.write_bytes(state_file.read_bytes().replace(b'"leaderEpoch":7', b'"leaderEpoch":8'))
    error = _start_expecting_refusal(plan, spec)
    assert "corrupt quorum-state" in error and str(state_file) in error
    assert b'"leaderEpoch":8' in state_file.read_bytes()  # never silently reset


def test_a_data_dir_of_another_cluster_refuses_to_start_naming_both_ids(tmp_path):
    plan = plan_cluster(tmp_path, voters=1)
    spec = plan.nodes[0]
    with FileStorage(spec.data_dir, spec.node_id) as storage:
        storage.load()
        storage.write_cluster_id("clusterAAAA")
    error = _start_expecting_refusal(plan, spec, {"cluster.id": "clusterBBBB"})
    assert "clusterAAAA" in error and "clusterBBBB" in error


def test_a_paused_leader_is_replaced_and_rejoins_as_a_follower(tmp_path):
    """SIGSTOP leaves the leader's connections open but silent: requests to it time out, the others
    elect a new leader; after SIGCONT the old leader learns the higher epoch and follows."""
    plan = plan_cluster(tmp_path, voters=3, settings=TIMEOUTS)
    procs = {spec.node_id: NodeProcess(spec).start() for spec in plan.nodes}
    try:
        leader = wait_for(lambda: find_leader(plan.voters), 30, what="a leader")
        paused = plan.node(leader["node_id"])
        procs[paused.node_id].signal(signal.SIGSTOP)
        others = [v for v in plan.voters if v.node_id != paused.node_id]
        new_leader = wait_for(lambda: find_leader(others, leader["epoch"] + 1), 30, what="a new leader")
        appender = Appender()
        assert appender.append_many(plan.node(new_leader["node_id"]), "p", 20, workers=2) == 20
        procs[paused.node_id].signal(signal.SIGCONT)
        wait_for(
            lambda: (s := status(paused)) and s["leader_id"] == new_leader["node_id"] and s["role"] == "follower",
            30,
            what="the old leader to follow",
        )
        assert "timed out" in "".join(procs[v.node_id].log_text() for v in others)
    finally:
        for proc in procs.values():
            proc.signal(signal.SIGCONT)
            proc.signal(signal.SIGKILL)
            proc.wait(10)


def test_an_observer_with_another_clusters_data_dir_stops_with_a_fatal_error(tmp_path):
    """No cluster.id in its config, so start-up cannot tell: the leader's clusterId check does."""
    plan = plan_cluster(tmp_path, voters=1, observers=1, settings={"quorum.election.timeout.ms": "200"})
    voter, observer = plan.nodes
    with FileStorage(observer.data_dir, observer.node_id) as storage:
        storage.load()
        storage.write_cluster_id("someOtherCluster")
    procs = [NodeProcess(voter).start(), NodeProcess(observer).start()]
    try:
        assert procs[1].wait(60) == 254
        errors = [line for line in procs[1].log_text().splitlines() if line.startswith("kchaos: error:")]
        assert len(errors) == 1 and "someOtherCluster" in errors[0]
        assert procs[0].alive()  # the misconfigured observer cannot take the quorum down
    finally:
        for proc in procs:
            if proc.alive():
                proc.signal(signal.SIGKILL)
                proc.wait(10)
