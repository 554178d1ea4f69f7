"""The played-broker workloads on real processes (netns backend, root): one short run of each under
partition + kill is valid, its brokers really lived and died, and it leaves nothing of its own behind."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from harness.runner import run_test
from harness.test_spec import Cluster
from tests.harness_netns.conftest import heal_if_left, marked_pids, needs_root
from tests.harness_run.helpers import sim_spec

pytestmark = [pytest.mark.root, needs_root]


def _bridge(run_dir: Path) -> str:
    for line in (run_dir / "ledger.jsonl").read_text().splitlines():
        entry = json.loads(line)
        if entry.get("kind") == "link" and entry.get("type") == "bridge":
            return entry["name"]
    raise AssertionError("the run's ledger names no bridge")


@pytest.mark.parametrize("workload", ["registrations", "isr-changes"])
def test_a_short_netns_run_is_valid_and_leaves_nothing(tmp_path, workload):
    spec = sim_spec(
        seed=21,
        backend="netns",
        cluster=Cluster(controllers=3, brokers=2),
        workload=workload,
        time_limit_s=15.0,
        nemesis_interval_s=3.0,
        nemesis_duration_s=3.0,
        concurrency=5,
        rate=40.0,
    )
    try:
        result = run_test(spec, root=tmp_path, say=lambda _: None, progress=False)
    finally:
        for run_dir in (p for p in tmp_path.glob("*/*") if p.is_dir() and not p.is_symlink()):
            heal_if_left(run_dir)
    assert result.error is None, result.error
    assert result.valid is True and result.exit_code == 0, result.checker_lines
    run_dir = result.run.path
    events = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]
    done = [e for e in events if e["process"] != "nemesis" and e["type"] == "ok"]
    assert sum(1 for e in done if e["f"] == "heartbeat") > 30
    if workload == "isr-changes":
        assert sum(1 for e in done if e["f"] == "alter") > 10
    results = json.loads((run_dir / "results.json").read_text())
    assert results["checkers"]["registrations"]["counts"]["image_dumps"] == 5
    bridge = _bridge(run_dir)
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout
    assert bridge not in netns and bridge not in links
    assert not marked_pids(str(tmp_path))
