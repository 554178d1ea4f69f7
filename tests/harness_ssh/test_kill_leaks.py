"""A `kchaos run --backend ssh` SIGKILLed mid-run (setup, a node starting, a fault being applied over SSH,
teardown) and then `kchaos heal`ed leaves the hosts exactly as they were: packet filter tables in each
host, mounts, processes (nodes, remote control commands), faketime files, temp files here. The hosts are
sshd in network namespaces (tests/harness_ssh/sshd_hosts.py). The full ten moments:
benchmarks/bench_kill_leaks.py --backend ssh."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.harness_netns.kill_leaks import SSH_MOMENTS, check_kill_heal
from tests.harness_ssh.sshd_hosts import SshHosts, needs_sshd, sshd_hosts

pytestmark = [pytest.mark.root, needs_sshd]


@pytest.fixture(scope="module")
def hosts(tmp_path_factory) -> Iterator[SshHosts]:
    with sshd_hosts(tmp_path_factory.mktemp("ssh"), ["h1", "h2", "h3", "h4", "h5"]) as found:
        yield found


@pytest.mark.parametrize("moment", ["setup", "partition", "pause", "teardown"])
def test_a_sigkilled_ssh_run_is_healed_without_a_trace(hosts, tmp_path, moment):
    result = check_kill_heal("ssh", tmp_path, SSH_MOMENTS[moment], seed=1, hosts=hosts)
    assert result.outstanding_before_heal > 0 and result.leaks == {}
