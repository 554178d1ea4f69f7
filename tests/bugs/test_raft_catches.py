"""The matrix catches the Raft bugs whose windows need targeted faults or durable-state invariants:
KAFKA-12619 (the high watermark before the new epoch's LeaderChange is committed: Figure 8) through
the `elected-behind` targeted fault and the commit-safety invariant, and a vote granted without being
persisted through the durable-votes invariant (votes that elect a leader are durable), with every fault kind on."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from harness.bug_matrix import Matrix, MatrixConfig
from harness.test_spec import Cluster
from vocab.faults.kinds import FAULT_KINDS

EXPECTED = {
    "raft-hwm-before-leader-change-committed": "commit safety",
    "raft-vote-not-persisted": "election safety",
}


def test_the_matrix_catches_figure8_and_a_forgotten_vote_within_a_few_runs() -> None:
    with tempfile.TemporaryDirectory(prefix="kchaos-bugs-") as root:
        config = MatrixConfig(
            bugs=tuple(EXPECTED),
            workloads=("config-register",),
            nemeses=(tuple(k for k in FAULT_KINDS if k != "redeliver"),),  # the kinds it was tuned on
            seeds=4,
            budget_s=4 * 42.0,
            sweep=0,
            cluster=Cluster(controllers=3, brokers=2),
            jobs=1,
            results=root,
        )
        result = Matrix(config).run()
        assert sorted(bug.bug.name for bug in result.bugs) == sorted(EXPECTED)  # no bug left unjudged
        for bug in result.bugs:
            first = bug.first
            assert first is not None, (bug.bug.name, [(r.cell.label, r.valid, r.error) for r in bug.runs])
            checkers = json.loads((Path(first.run_dir) / "results.json").read_text())["checkers"]
            violation = checkers["sim-invariants"]["violation"]
            assert EXPECTED[bug.bug.name] in violation, (bug.bug.name, violation)
            assert bug.sim_to_catch_s is not None and bug.sim_to_catch_s <= 300
