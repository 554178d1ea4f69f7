"""No false alarms: thousands of generated histories of valid executions, checked under every model
the execution satisfies (and the assumptions it justifies), must never be flagged.

The executions (tests/checkers/elle_executions.py) come from a small database under four concurrency
controls; each test below runs a fixed, seeded range of them, so a failure names its seed.
"""

from __future__ import annotations

import pytest

from checkers.elle import check_list_append, check_rw_register
from checkers.elle.anomalies import MODELS, implied_models
from checkers.history import pair, read_events
from tests.checkers.elle_executions import execute

SEEDS = range(300)

# The strongest model each control satisfies; every model it implies must hold too.
STRONGEST = {
    "serial": "strict-serializable",
    "serializable": "serializable",
    "snapshot": "strong-snapshot-isolation",
    "read-committed": "strong-read-committed",
}
# rw-register version-order assumptions each execution justifies
ASSUMPTIONS = {
    "serial": {"wfr_keys": True, "sequential_keys": True, "linearizable_keys": True},
    "serializable": {"wfr_keys": True},
    "snapshot": {"wfr_keys": True, "sequential_keys": True, "linearizable_keys": True},
    "read-committed": {"wfr_keys": True, "sequential_keys": True, "linearizable_keys": True},
}
TRANSACTIONAL = [m for m in MODELS if m not in implied_models("linearizable")]


def models_for(control: str) -> list[str]:
    return sorted(implied_models(STRONGEST[control]) & set(TRANSACTIONAL))


def test_each_control_is_checked_under_several_models():
    assert "read-committed" in models_for("snapshot") and "snapshot-isolation" in models_for("snapshot")
    assert "serializable" not in models_for("snapshot")
    assert len(models_for("serial")) > 20


@pytest.mark.parametrize("control", sorted(STRONGEST))
@pytest.mark.parametrize("workload", ["list-append", "rw-register"])
def test_valid_executions_are_never_flagged(control, workload):
    models = models_for(control)
    for seed in SEEDS:
        history = pair(read_events(execute(control, workload, seed)))
        for model in (STRONGEST[control], models[seed % len(models)]):
            if workload == "list-append":
                verdict = check_list_append(history, model)
            else:
                verdict = check_rw_register(history, model, **ASSUMPTIONS[control])
            assert verdict.valid in (True, "unknown"), (seed, model, verdict.details["violations"], verdict.details)
            undecided = "empty-transaction-graph" in verdict.details["anomaly_types"]
            assert verdict.valid is True or undecided or verdict.details["txns_by_type"]["ok"] == 0, (seed, model)
