"""A `kchaos run --backend docker` SIGKILLed mid-run (setup, a fault being applied, teardown) and then
`kchaos heal`ed leaves the host exactly as it was: our containers and networks (by label), namespace
names, rules, mounts, processes (the engine too, when the run started it), temp files. The full ten
moments: benchmarks/bench_kill_leaks.py."""

from __future__ import annotations

import pytest

from tests.harness_netns.conftest import needs_root
from tests.harness_netns.kill_leaks import DOCKER_MOMENTS, check_kill_heal

pytestmark = [pytest.mark.root, needs_root]


@pytest.mark.parametrize("moment", ["setup", "packet", "disk", "teardown"])
def test_a_sigkilled_docker_run_is_healed_without_a_trace(tmp_path, moment):
    check_kill_heal("docker", tmp_path, DOCKER_MOMENTS[moment], seed=1)
