"""A whole run against a real Apache Kafka 4.x cluster (KRaft, 3 combined nodes) on the netns backend
(root; the jars setup.sh fetched): config-register under kill -9, judged by every checker."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from harness.runner import run_test
from harness.test_spec import Cluster, TestSpec
from tests.harness_netns.conftest import heal_if_left, needs_root

pytestmark = [pytest.mark.root, needs_root]


def test_config_register_on_kafka_under_kill_gets_a_verdict_from_every_checker(tmp_path: Path):
    spec = TestSpec(
        name="kafka-run-test",
        seed=5,
        backend="netns",
        sut="kafka",
        cluster=Cluster(combined=3),
        workload="config-register",
        nemesis=("kill",),
        nemesis_interval_s=5.0,
        nemesis_duration_s=5.0,
        time_limit_s=20.0,
        rate=40.0,
        recovery_s=5.0,
    )
    try:
        result = run_test(spec, root=tmp_path, say=lambda _: None, progress=False, draw_plots=False)
    finally:
        for run_dir in (p for p in tmp_path.glob("*/*") if p.is_dir() and not p.is_symlink()):
            heal_if_left(run_dir)
    assert result.error is None, result.error
    path = result.run.path
    events = [json.loads(line) for line in (path / "history.jsonl").read_text().splitlines()]
    kills = [e for e in events if e["process"] == "nemesis" and e["f"] == "start-kill" and e["type"] == "info"]
    assert any(e["value"].get("targets") for e in kills)  # a node was killed
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
    # nothing the run started is left: no Kafka process, no namespace
    entries = [json.loads(line) for line in (path / "ledger.jsonl").read_text().splitlines()]
    for pid in {e["pid"] for e in entries if e.get("op") == "update" and "pid" in e}:
        cmdline = Path(f"/proc/{pid}/cmdline")
        assert not cmdline.exists() or b"kafka.Kafka" not in cmdline.read_bytes(), f"Kafka pid {pid} still runs"
    ours = {e["name"] for e in entries if e.get("kind") == "netns"}
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    assert not ours & {line.split()[0] for line in listed.splitlines() if line.strip()}
