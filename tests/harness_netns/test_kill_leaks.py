"""A `kchaos run --backend netns` SIGKILLed mid-run (setup, a fault being applied, teardown) and then
`kchaos heal`ed leaves the host exactly as it was: namespaces, links, nft/iptables rules, mounts,
processes, temp files. The full ten moments: benchmarks/bench_kill_leaks.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from tests.harness_netns.conftest import needs_root
from tests.harness_netns.kill_leaks import NETNS_MOMENTS, check_kill_heal

pytestmark = [pytest.mark.root, needs_root]


@pytest.mark.parametrize("moment", ["setup", "pause", "lose_unsynced", "teardown"])
def test_a_sigkilled_netns_run_is_healed_without_a_trace(tmp_path, moment):
    check_kill_heal("netns", tmp_path, NETNS_MOMENTS[moment], seed=1)


def test_heal_stops_a_lazyfs_daemon_started_before_its_pid_was_ledgered(tmp_path):
    """The harness was killed between starting a lazyfs daemon and writing its PID, and heal runs before
    the daemon has mounted (here: it is held stopped until heal is done). Heal must find it by its
    command line; before, the daemon lived on, mounted and served after heal had gone."""
    from harness.backends.lazyfs.layout import StateDir
    from harness.backends.lazyfs.mount import REPO_ROOT
    from harness.backends.ledger import Ledger, heal
    from harness.backends.procs import find_by_argv
    from harness.backends.resources import is_mounted, record_mount

    ledger = Ledger.create(tmp_path / "ledger.jsonl")
    state, mountpoint = StateDir(tmp_path / "state"), tmp_path / "data"
    state.make()
    mountpoint.mkdir()
    argv = [sys.executable, "-m", "harness.backends.lazyfs", str(state.root), str(mountpoint)]
    ledger.record("lazyfs_daemon", node="x", argv=argv)  # as mount_lazyfs does, up to its Popen
    record_mount(ledger, str(mountpoint))
    daemon = subprocess.Popen(argv, cwd=REPO_ROOT, start_new_session=True, stderr=subprocess.DEVNULL)
    try:
        os.kill(daemon.pid, signal.SIGSTOP)  # not mounted yet when heal looks
        assert heal(ledger.path).ok
        assert find_by_argv(argv) == []
        daemon.wait(timeout=30)
        assert not is_mounted(str(mountpoint))
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
        if is_mounted(str(mountpoint)):
            subprocess.run(["umount", "-l", str(mountpoint)], check=False)


def test_restarting_a_node_that_exited_by_itself_reaps_it(tmp_path):
    """A node that fail-stops (disk_fail) is started again by the nemesis: the dead incarnation is reaped
    (its log files closed, its libfaketime files removed) and its ledger entry is done. Before, its files
    stayed open and its entry outstanding until teardown, one more per fail-stop."""
    from harness.backends.netns import NetnsBackend

    with NetnsBackend(tmp_path / "run", ["a"]) as backend:
        first = backend.start("a", ["sh", "-c", "exit 3"])
        assert first.popen.wait(timeout=10) == 3
        backend.restart("a")
        assert backend.ledger is not None and backend.ledger.entry(first.ledger_id).done
        assert all(f.closed for f in first.logs)
