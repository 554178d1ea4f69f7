"""A `kchaos run --backend docker` SIGKILLed mid-run (setup, a fault being applied, teardown) and then
`kchaos heal`ed leaves the host exactly as it was: our containers and networks (by label), namespace
names, rules, mounts, processes (the engine too, when the run started it), temp files. The full ten
moments: benchmarks/bench_kill_leaks.py."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from node.runtime.local_cluster import wait_for
from tests.harness_netns.conftest import needs_root
from tests.harness_netns.kill_leaks import DOCKER_MOMENTS, check_kill_heal, snapshot, split_leaks

pytestmark = [pytest.mark.root, needs_root]


@pytest.mark.parametrize("moment", ["setup", "packet", "disk", "teardown"])
def test_a_sigkilled_docker_run_is_healed_without_a_trace(tmp_path, moment):
    check_kill_heal("docker", tmp_path, DOCKER_MOMENTS[moment], seed=1)


def test_heal_stops_a_dockerd_started_before_its_pid_was_ledgered(tmp_path):
    """The harness was killed between starting the engine and writing its PID: heal finds the engine by
    its command line (which names this run's pid file) and stops it, containerd with it. Before, heal
    said "already gone" and the engine ran on."""
    from harness.backends.docker_engine import dockerd_argv, reachable
    from harness.backends.ledger import Ledger, heal
    from harness.backends.procs import find_by_argv

    dockerd = shutil.which("dockerd")
    if dockerd is None or reachable():
        pytest.skip("needs dockerd installed and no engine running (a second one cannot take its socket)")
    marks = (str(tmp_path),)
    before = snapshot(marks)
    ledger = Ledger.create(tmp_path / "ledger.jsonl")
    argv = dockerd_argv(dockerd, ledger)
    ledger.record("dockerd", argv=argv)  # as ensure_engine does, up to its Popen
    engine = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for(lambda: reachable(), 60, what="dockerd to answer")
        report = heal(ledger.path)
        assert report.ok and report.removed, report
        assert find_by_argv(argv) == []
        engine.wait(timeout=30)
        ours, _ = split_leaks(snapshot(marks).new_since(before), marks)
        assert ours == {}
    finally:
        if engine.poll() is None:
            engine.terminate()
            engine.wait(timeout=60)
