"""Whole sim runs that once broke the simulator's disk model (docs/trust/simulated-disk.md)."""

from __future__ import annotations

import json

from harness.runner import run_test
from harness.test_spec import TestSpec
from tests.harness_run.helpers import sim_spec
from vocab.errors import EXIT_VALID
from vocab.faults.kinds import FAULT_KINDS

# The issue-24 soak (on sim_spec's 3 controllers + 2 brokers): every fault kind at once for 60 s, a
# fault every 5 s for 5 s, the CLI's default load.
SOAK = {"nemesis": FAULT_KINDS, "time_limit_s": 60.0, "nemesis_interval_s": 5.0, "nemesis_duration_s": 5.0}
SOAK_LOAD = {"concurrency": 5, "rate": 50.0}


def soak_spec(workload: str, seed: int) -> TestSpec:
    return sim_spec(seed, name=f"soak-{workload}", workload=workload, **SOAK, **SOAK_LOAD)


def test_config_register_seed_11_restarts_on_a_snapshot_its_diverged_log_reaches(tmp_path):
    """Node c1 fetched the leader's snapshot (end 26, epoch 13) over a log that reached 26 in its own
    epoch 12; a power loss came before the ResetLog. At restart the core starts its log after epoch 13,
    and the disk model used to say 12: a false 'log disagrees' violation at t=42747 ms."""
    result = run_test(soak_spec("config-register", 11), root=tmp_path, say=lambda _: None)
    results = json.loads((result.run.path / "results.json").read_text())
    assert "sim-invariants" not in results["checkers"], results["checkers"]["sim-invariants"]
    assert result.valid is True and result.exit_code == EXIT_VALID, results["checkers"]
    assert (result.run.path / "nodes" / "_sim").exists() is False  # no invariant-violation.txt


def test_config_append_seed_207_fail_stops_in_a_log_reset_over_a_diverged_tail(tmp_path):
    """Soak seed 207 (docs/trust/soak-207.md): c3, once a leader alone with its own tail at offsets
    696-697 (epochs 8, 9), installed the leader's snapshot (end 725) and the ResetLog's directory fsync
    failed (disk_fail ENOSPC). The fail-stop hook judged the old log on the disk by the core's new HWM
    (the snapshot's end): a false 'committed entry changed' violation at t=58864 ms."""
    result = run_test(soak_spec("config-append", 207), root=tmp_path, say=lambda _: None)
    results = json.loads((result.run.path / "results.json").read_text())
    assert "sim-invariants" not in results["checkers"], results["checkers"]["sim-invariants"]
    assert result.valid is True and result.exit_code == EXIT_VALID, results["checkers"]
    assert (result.run.path / "nodes" / "_sim").exists() is False  # no invariant-violation.txt
