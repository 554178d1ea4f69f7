"""A `kchaos run --backend docker` SIGKILLed mid-run (setup, a fault being applied, teardown) and then
`kchaos heal`ed leaves the host exactly as it was: our containers and networks (by label), namespace
names, rules, mounts, processes (the engine too, when the run started it), temp files. The full ten
moments: benchmarks/bench_kill_leaks.py."""

from __future__ import annotations

import os
import shutil
import signal
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


def test_heal_kills_what_runs_in_a_container_namespace_without_a_ledgered_pid(tmp_path):
    """A delay daemon is started in a container's namespace with `ip netns exec`: it is no process of the
    container and outlives its removal. If the harness was killed before it wrote the daemon's PID, the
    undo of the namespace's name must kill it; before, heal only dropped the name and the daemon ran on.
    (No engine needed: the name's undo is the same whoever made the namespace.)"""
    from harness.backends.ledger import Ledger, heal
    from harness.backends.resources import netns_names, netns_pids

    ledger = Ledger.create(tmp_path / "ledger.jsonl")
    name = f"kc{os.urandom(3).hex()}-x"
    ledger.record("docker-netns", name=name)
    sleeper = None
    try:
        subprocess.run(["ip", "netns", "add", name], check=True)
        ledger.record("delay_daemon", netns=name, argv=["sleep", "300"])  # no pid: killed right here
        sleeper = subprocess.Popen(["ip", "netns", "exec", name, "sleep", "300"], start_new_session=True)
        wait_for(lambda: netns_pids(name) == [sleeper.pid], 30, what="the process in the namespace")
        report = heal(ledger.path)
        assert report.ok and any("killed 1 process" in r for r in report.removed), report
        assert sleeper.wait(timeout=10) == -signal.SIGKILL
        assert name not in netns_names()
    finally:
        if sleeper is not None and sleeper.poll() is None:
            sleeper.kill()
            sleeper.wait()
        subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)
