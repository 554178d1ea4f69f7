"""A `kchaos run --backend netns` SIGKILLed mid-run (setup, a fault being applied, teardown) and then
`kchaos heal`ed leaves the host exactly as it was: namespaces, links, nft/iptables rules, mounts,
processes, temp files. The full ten moments: benchmarks/bench_kill_leaks.py."""

from __future__ import annotations

import pytest

from tests.harness_netns.conftest import needs_root
from tests.harness_netns.kill_leaks import NETNS_MOMENTS, check_kill_heal

pytestmark = [pytest.mark.root, needs_root]


@pytest.mark.parametrize("moment", ["setup", "pause", "lose_unsynced", "teardown"])
def test_a_sigkilled_netns_run_is_healed_without_a_trace(tmp_path, moment):
    check_kill_heal("netns", tmp_path, NETNS_MOMENTS[moment], seed=1)
