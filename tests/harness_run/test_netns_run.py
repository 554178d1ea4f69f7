"""Whole runs on the netns backend (root): a valid run that leaves nothing behind, and a harness killed
with SIGKILL mid-run whose history still parses and whose leftovers `kchaos heal` removes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.cli import main
from harness.runner import run_test
from harness.test_spec import Cluster
from tests.harness_netns.conftest import heal_if_left, marked_pids, needs_root, run_leftovers
from tests.harness_run.helpers import sim_spec

pytestmark = [pytest.mark.root, needs_root]

REPO = Path(__file__).resolve().parents[2]


def _run_dirs(root: Path) -> list[Path]:
    return [p for p in root.glob("*/*") if p.is_dir() and not p.is_symlink()]


def test_reference_cluster_under_partition_and_kill_is_valid_and_leaves_nothing(tmp_path, capsys):
    spec = sim_spec(
        seed=12,
        backend="netns",
        cluster=Cluster(controllers=3, brokers=2),
        time_limit_s=20.0,
        nemesis_interval_s=2.0,
        nemesis_duration_s=3.0,
        concurrency=5,
        rate=30.0,
    )
    try:
        result = run_test(spec, root=tmp_path, say=lambda _: None, progress=False)
    finally:
        for run_dir in _run_dirs(tmp_path):
            heal_if_left(run_dir)
    assert result.error is None, result.error
    events = [json.loads(line) for line in (result.run.path / "history.jsonl").read_text().splitlines()]
    kinds = {e["f"] for e in events if e["process"] == "nemesis" and e["type"] == "info"}
    assert {"start-partition", "start-kill"} <= kinds
    assert sum(1 for e in events if e["process"] != "nemesis" and e["type"] == "ok") > 50
    assert result.valid is True and result.exit_code == 0, result.checker_lines
    for node in ("c1", "c2", "c3", "b1", "b2"):
        assert (result.run.path / "nodes" / node / "committed-log.jsonl").is_file()
        assert not list((result.run.path / "nodes" / node / "data").glob("*.json*"))  # dumps kept once, not twice
        # the whole node is exercised: SASL/PLAIN listeners, the authorizer, snapshots
        props = (result.run.path / "nodes" / node / "server.properties").read_text()
        assert "CONTROLLER:SASL_PLAINTEXT,BROKER:SASL_PLAINTEXT" in props and "authorizer.class.name=" in props
        assert "metadata.log.max.snapshot.interval.records=20" in props and "kchaos.test.cluster=true" in props
    results = json.loads((result.run.path / "results.json").read_text())
    forgery = results["checkers"]["forgery"]
    assert forgery["valid"] is True and forgery["ops"] >= 5 and forgery["nodes_checked"] == 5
    assert not run_leftovers(tmp_path)
    assert not marked_pids(str(tmp_path))
    assert "elapsed," not in capsys.readouterr().err  # progress=False (--no-progress, suites): no progress line


def test_sigkilled_harness_leaves_a_parsable_history_and_heal_restores_the_machine(tmp_path, capsys):
    argv = [sys.executable, "-m", "harness", "run", "--backend", "netns", "--nodes", "3+2", "--seed", "3",
            "--time-limit", "60s", "--nemesis-interval", "2s", "--nemesis-duration", "3s",
            "--results", str(tmp_path), "--no-progress"]  # fmt: skip
    harness = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        history: Path | None = None
        while time.monotonic() < deadline and harness.poll() is None:
            found = list(tmp_path.glob("*/*/history.jsonl"))
            if found and found[0].read_text().count("\n") >= 100:
                history = found[0]
                break
            time.sleep(0.2)
        assert history is not None, "the run never got going"
        os.kill(harness.pid, signal.SIGKILL)
        harness.wait(timeout=10)
        run_dir = history.parent
        assert marked_pids(str(tmp_path)), "the killed harness's nodes should still run until healed"
        for number, line in enumerate(history.read_text().splitlines(), start=1):
            event = json.loads(line)
            assert event["index"] == number - 1
        assert main(["heal", str(run_dir)]) == 0
        capsys.readouterr()
    finally:
        if harness.poll() is None:
            harness.kill()
            harness.wait()
        for run_dir in _run_dirs(tmp_path):
            heal_if_left(run_dir)
    assert not marked_pids(str(tmp_path))
    assert not run_leftovers(tmp_path)


def test_config_append_left_running_is_valid_with_dumps_over_http_and_heal_removes_it(tmp_path, monkeypatch):
    import harness.db.kraft as kraft

    # snapshots on, so that the final logs start late and the HTTP log tap has work to do
    monkeypatch.setitem(kraft.NODE_SETTINGS, kraft.SNAPSHOT_INTERVAL, "60")
    spec = sim_spec(
        seed=21,
        backend="netns",
        workload="config-append",
        cluster=Cluster(controllers=3, brokers=2),
        time_limit_s=15.0,
        nemesis_interval_s=2.0,
        nemesis_duration_s=3.0,
        concurrency=5,
        rate=30.0,
        recovery_s=5.0,
        leave_db_running=True,
    )
    try:
        result = run_test(spec, root=tmp_path, say=lambda _: None, progress=False)
        run_dir = result.run.path
        assert result.error is None, result.error
        assert marked_pids(str(tmp_path)), "the nodes should still be running"
        assert result.valid is True and result.exit_code == 0, result.checker_lines
        results = json.loads((run_dir / "results.json").read_text())
        assert set(results["checkers"]) >= {"elle-list-append", "image-reads", "image-replay", "log-agreement"}
        reads = results["checkers"]["image-reads"]
        assert reads["verified"] == reads["reads"] > 0
        assert results["checkers"]["image-replay"]["nodes_replayed"] == ["b1", "b2", "c1", "c2", "c3"]
        for node in ("c1", "c2", "c3", "b1", "b2"):  # fetched over HTTP: the nodes never stopped
            dumped = run_dir / "nodes" / node
            assert (dumped / "committed-log.jsonl").is_file() and (dumped / "metadata-image.json").is_file()
            assert not (dumped / "data" / "metadata-image.json").exists()  # no clean stop wrote one
        assert (run_dir / "log-tap.jsonl").stat().st_size > 0
        firsts = []  # a node restarted by the last heal may not know the high watermark yet: an empty log
        for node in ("c1", "c2", "c3", "b1", "b2"):
            line = (run_dir / "nodes" / node / "committed-log.jsonl").open().readline()
            firsts += [json.loads(line)["offset"]] if line.strip() else []
        assert max(firsts) > 0  # snapshots replaced the log start: reads below it were checked thanks to the tap
        assert main(["heal", str(run_dir)]) == 0
    finally:
        for left in _run_dirs(tmp_path):
            heal_if_left(left)
    assert not marked_pids(str(tmp_path))
    assert not run_leftovers(tmp_path)
