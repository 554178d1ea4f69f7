"""`kchaos run --backend sim` over many seeds with every fault kind at once (and the targeted faults), on
the three cluster shapes: every run valid, no recovery warning. A fast subset runs in the default suite;
the full sweep is marked `slow`."""

from __future__ import annotations

import shutil

import pytest

from harness.runner import run_test
from harness.test_spec import Cluster, TestSpec
from vocab.faults.kinds import FAULT_KINDS

SHAPES = (Cluster(controllers=3, brokers=2), Cluster(combined=3), Cluster(controllers=5, brokers=1))
SEEDS = 60  # 20 per shape; `kchaos bugs --bug none --sweep 200` (the slow matrix test) adds 200 more
CHUNK = 20


def sweep_spec(seed: int) -> TestSpec:
    return TestSpec(
        name="nemesis-sweep",
        seed=seed,
        backend="sim",
        cluster=SHAPES[seed % len(SHAPES)],
        nemesis=FAULT_KINDS,
        nemesis_interval_s=1.0,
        nemesis_duration_s=4.0,
        time_limit_s=30.0,
        concurrency=4,
        rate=40.0,
        recovery_s=10.0,  # the availability window (a power loss of every node needs several seconds)
    )


def sweep(seeds: range, root) -> list[str]:
    failures = []
    for seed in seeds:
        # No plots: a valid run's directory is removed, and `kchaos analyze RUN_DIR` draws a kept one's.
        result = run_test(sweep_spec(seed), root=root, say=lambda _: None, draw_plots=False)
        if result.exit_code != 0 or result.warnings:
            failures.append(
                f"seed {seed}: exit {result.exit_code} {result.error or ''} {result.warnings} {result.run.path}"
            )
        else:
            shutil.rmtree(result.run.path)
    return failures


def test_every_fault_at_once_fast_subset(tmp_path):
    failures = sweep(range(3), tmp_path)
    assert not failures, "\n".join(failures)


@pytest.mark.slow
@pytest.mark.parametrize("first", range(0, SEEDS, CHUNK), ids=lambda s: f"seeds{s}-{s + CHUNK - 1}")
def test_every_fault_at_once_sweep(tmp_path, first):
    failures = sweep(range(first, first + CHUNK), tmp_path)
    assert not failures, "\n".join(failures)
