"""Whole runs against a real Apache Kafka 4.x cluster (KRaft, 3 combined nodes) on the netns backend,
and one on the docker backend (root; the jars setup.sh fetched), each judged by every checker of its
workload."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from harness.runner import run_test
from harness.test_spec import Cluster, TestSpec
from tests.harness_netns.conftest import heal_if_left, needs_root

pytestmark = [pytest.mark.root, needs_root]


def _run(
    tmp_path: Path, name: str, workload: str, nemesis: tuple[str, ...], backend: str = "netns", **more: Any
) -> tuple[Path, list[dict]]:
    """A 20 s run on 3 combined nodes, a fault every 5 s unless `more` says otherwise; its directory
    and history events. Checks that nothing the run started is left: no Kafka process, no namespace
    (on docker: no container or network of the run either)."""
    options: dict[str, Any] = {"nemesis_interval_s": 5.0, "nemesis_duration_s": 5.0, **more}
    spec = TestSpec(
        name=name,
        seed=5,
        backend=backend,
        sut="kafka",
        cluster=Cluster(combined=3),
        workload=workload,
        nemesis=nemesis,
        time_limit_s=20.0,
        rate=40.0,
        recovery_s=5.0,
        **options,
    )
    try:
        result = run_test(spec, root=tmp_path, say=lambda _: None, progress=False, draw_plots=False)
    finally:
        for run_dir in (p for p in tmp_path.glob("*/*") if p.is_dir() and not p.is_symlink()):
            heal_if_left(run_dir)
    assert result.error is None, result.error
    path = result.run.path
    entries = _no_kafka_left(path)
    if backend == "docker":
        from tests.harness_docker.test_docker_backend import _leftovers

        tag = next(e["name"][2:] for e in entries if e.get("kind") == "docker-network")
        assert not _leftovers(tag)
    ours = {e["name"] for e in entries if e.get("kind") == "netns"}
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    assert not ours & {line.split()[0] for line in listed.splitlines() if line.strip()}
    events = [json.loads(line) for line in (path / "history.jsonl").read_text().splitlines()]
    return path, events


def _no_kafka_left(run_dir: Path) -> list[dict]:
    """Checks that no Kafka JVM the run started still runs; the run's ledger entries."""
    entries = [json.loads(line) for line in (run_dir / "ledger.jsonl").read_text().splitlines()]
    for pid in {e["pid"] for e in entries if e.get("op") == "update" and "pid" in e}:
        cmdline = Path(f"/proc/{pid}/cmdline")
        assert not cmdline.exists() or b"kafka.Kafka" not in cmdline.read_bytes(), f"Kafka pid {pid} still runs"
    return entries


def _faults(events: list[dict], kind: str) -> list[dict]:
    """The faults of `kind` that had targets."""
    starts = [e for e in events if e["process"] == "nemesis" and e["f"] == f"start-{kind}" and e["type"] == "info"]
    return [e for e in starts if e["value"].get("targets")]


def test_config_register_on_kafka_under_kill_gets_a_verdict_from_every_checker(tmp_path: Path):
    path, events = _run(tmp_path, "kafka-run-test", "config-register", ("kill",))
    assert _faults(events, "kill")  # a node was killed
    ok = [e for e in events if e["process"] != "nemesis" and e["type"] == "ok"]
    assert {"read", "write"} <= {e["f"] for e in ok}
    assert {e["node"] for e in ok if e["f"] == "read"} == {"n1", "n2", "n3"}  # each read names its broker
    verdicts = json.loads((path / "results.json").read_text())["checkers"]
    # Kafka keeps what it promises for topic configs: one order, monotonic per broker, nothing lost
    assert verdicts["prefix-reads"]["valid"] is True and verdicts["prefix-reads"]["reads"] > 0
    assert verdicts["committed-loss"]["valid"] is True
    assert verdicts["availability"]["valid"] in (True, False)  # a verdict: how fast a JVM restarts varies
    for node in ("n1", "n2", "n3"):
        log = (path / "nodes" / node / "stdout.log").read_text()
        assert "Kafka Server started" in log  # Kafka's own log, in the run dir
        assert "__cluster_metadata-0" in (path / "nodes" / node / "data-dir.txt").read_text()


def test_config_register_on_kafka_in_docker_containers_under_kill_is_valid(tmp_path: Path):
    """The same cluster with one container per node: the node image carries no JDK and no jars, the
    containers see the host's JDK and the jar cache read-only at their own paths."""
    path, events = _run(tmp_path, "kafka-docker-test", "config-register", ("kill",), backend="docker")
    assert _faults(events, "kill")
    entries = [json.loads(line) for line in (path / "ledger.jsonl").read_text().splitlines()]
    ran = [e for e in entries if e.get("kind") == "docker-container" and "kafka.Kafka" in e.get("argv", ())]
    assert {e["node"] for e in ran} == {"n1", "n2", "n3"} and len(ran) > 3  # in containers; a killed one restarted
    ok = [e for e in events if e["process"] != "nemesis" and e["type"] == "ok"]
    assert {e["node"] for e in ok if e["f"] == "read"} == {"n1", "n2", "n3"}
    verdicts = json.loads((path / "results.json").read_text())["checkers"]
    assert verdicts["prefix-reads"]["reads"] > 0
    assert verdicts["availability"]["valid"] in (True, False)  # a verdict: how fast a JVM restarts varies
    assert {name: v["valid"] for name, v in verdicts.items() if name != "availability" and v["valid"] is not True} == {}
    for node in ("n1", "n2", "n3"):
        assert "Kafka Server started" in (path / "nodes" / node / "stdout.log").read_text()
        assert "__cluster_metadata-0" in (path / "nodes" / node / "data-dir.txt").read_text()


def test_config_append_on_kafka_under_kill_and_clock_faults_is_valid_by_every_checker(tmp_path: Path):
    # one node or the active controller killed: a majority stays up, so writes resume within the
    # recovery window whatever a JVM's restart takes on a loaded machine
    path, events = _run(
        tmp_path,
        "kafka-append-test",
        "config-append",
        ("kill", "clock"),
        nemesis_modes={"kill": ("one", "leader"), "clock": ("bump", "rate")},
        nemesis_interval_s=3.0,
        nemesis_duration_s=3.0,
    )
    assert _faults(events, "kill") and _faults(events, "clock")
    txns = [e for e in events if e["process"] != "nemesis" and e["type"] == "ok" and e["f"] == "txn"]
    reads = [e for e in txns if all(m[0] == "r" for m in e["value"])]
    assert reads and len(reads) < len(txns)  # both appends and reads acknowledged
    assert {e["node"] for e in reads} == {"n1", "n2", "n3"}  # each read names its broker
    assert any(m[2] for e in reads for m in e["value"])  # the appends are seen
    results = json.loads((path / "results.json").read_text())
    verdicts = results["checkers"]
    assert set(verdicts) >= {"elle-list-append", "committed-loss", "stale-list-reads", "availability"}
    assert verdicts["elle-list-append"]["consistency_model"] == "serializable"
    assert verdicts["stale-list-reads"]["reads"] > 0 and "stale_window" in verdicts["stale-list-reads"]
    assert verdicts["availability"]["valid"] in (True, False)  # a verdict: how fast a JVM restarts varies
    assert {name: v["valid"] for name, v in verdicts.items() if name != "availability" and v["valid"] is not True} == {}


@pytest.mark.parametrize("workload", ["registrations", "isr-changes"])
def test_the_observation_workloads_on_kafka_under_partition_kill_and_pause_are_valid(tmp_path: Path, workload: str):
    """On Kafka registrations and isr-changes only watch (no client can register a broker or alter an
    ISR): Metadata and DescribeCluster answers from every broker while nodes fail, each answer judged."""
    path, events = _run(tmp_path, f"kafka-{workload}-test", workload, ("partition", "kill", "pause"))
    assert _faults(events, "kill") or _faults(events, "pause") or _faults(events, "partition")
    ok = [e for e in events if e["process"] != "nemesis" and e["type"] == "ok"]
    assert {e["f"] for e in ok} == {"kafka-metadata", "kafka-describe-cluster"}  # reads only
    assert {e["node"] for e in ok} == {"n1", "n2", "n3"}  # each answer names its broker
    shown = {p for e in ok if e["f"] == "kafka-metadata" for p in e["value"]["partitions"]}
    assert shown == {f"{workload}-{t}/{p}" for t in range(2) for p in range(3 if workload == "registrations" else 6)}
    results = json.loads((path / "results.json").read_text())
    verdicts = results["checkers"]
    assert set(verdicts) == {"metadata-answers", "availability"}
    answers = verdicts["metadata-answers"]["counts"]["answers"]
    assert answers["kafka-metadata"] > 0 and answers["kafka-describe-cluster"] > 0
    assert verdicts["availability"]["valid"] in (True, False)  # a verdict: how fast a JVM restarts varies
    # Kafka keeps what every image promises: no fenced leader, no fenced broker in an ISR of two or more
    assert verdicts["metadata-answers"]["valid"] is True


def test_a_kafka_node_that_cannot_start_stops_the_run_at_once_quoting_its_own_error(tmp_path: Path):
    """`--sut-setting listeners=...` on an address no node has (TEST-NET-1): Kafka's `kafka-storage
    format` accepts the config, then each JVM fails to bind and exits. The run stops within seconds,
    in Kafka's own words, rather than after the readiness timeout as "not running"; nothing is left."""
    unbindable = {"listeners": "PLAINTEXT://192.0.2.1:9092,CONTROLLER://192.0.2.1:9093"}
    spec = TestSpec(
        name="kafka-unbindable",
        seed=1,
        backend="netns",
        sut="kafka",
        cluster=Cluster(combined=3),
        workload="config-register",
        nemesis=(),
        sut_settings=unbindable,
    )
    start = time.monotonic()
    try:
        result = run_test(spec, root=tmp_path, say=lambda _: None, progress=False, draw_plots=False)
    finally:
        for run_dir in (p for p in tmp_path.glob("*/*") if p.is_dir() and not p.is_symlink()):
            heal_if_left(run_dir)
    assert time.monotonic() - start < 80, "the wait ran on after a node exited"  # the readiness timeout is 90 s
    message = result.error or ""
    assert "kafka node n" in message and " exited; its output ends: " in message, message
    assert "BindException: Cannot assign requested address" in message, message
    server_properties = (result.run.path / "nodes" / "n1" / "server.properties").read_text()
    assert "listeners=PLAINTEXT://192.0.2.1:9092,CONTROLLER://192.0.2.1:9093\n" in server_properties
    _no_kafka_left(result.run.path)
