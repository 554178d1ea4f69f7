"""500 seeds of random faults, every kind the simulator carries out at once (partition in all its modes,
packet loss and delay, clock bumps/strobes/rates, kill, power loss, pause, disk stall) plus the
targeted faults, with a steady append workload: zero invariant violations, and after the final heal
every run converges and passes the end-to-end checks. Each run is short in virtual time so the sweep
fits the CI budget; `test_fault_vocabulary.py` runs a fast subset in the default suite."""

from __future__ import annotations

import pytest

from node.sim.faults import FaultConfig
from node.sim.network import LinkModel
from node.sim.runner import RunConfig, run
from node.sim.workload import WorkloadConfig
from node.sim.world import SimConfig
from tests.sim.test_fault_vocabulary import SIM_KINDS

SEEDS = 500
CHUNK = 25
FAULTS = FaultConfig(kinds=SIM_KINDS, interval_ms=(500, 3000), duration_ms=(200, 5000))


def sweep_config(seed: int) -> RunConfig:
    """Vary the cluster shape and the network with the seed, so the sweep covers them too."""
    return RunConfig(
        sim=SimConfig(
            seed=seed,
            voters=5 if seed % 4 == 3 else 3,
            observers=seed % 2,
            link=LinkModel(drop=0.02 if seed % 5 == 0 else 0.0, delay_min_ms=1, delay_max_ms=5 + seed % 20),
        ),
        workload=WorkloadConfig(interval_ms=100),
        faults=FAULTS,
        duration_ms=20_000,
        quiet_max_ms=30_000,
    )


@pytest.mark.slow
@pytest.mark.parametrize("first", range(0, SEEDS, CHUNK), ids=lambda s: f"seeds{s}-{s + CHUNK - 1}")
def test_random_faults_never_violate_an_invariant(first):
    failures = []
    faults_seen = 0
    for seed in range(first, first + CHUNK):
        result = run(sweep_config(seed))
        faults_seen += sum(result.summary["faults_injected"].values())
        if not result.valid:
            failures.append(f"seed {seed}: {result.failure}")
    assert not failures, "\n".join(failures)
    assert faults_seen > CHUNK * 3  # the faults really happened
