"""The default matrix (`kchaos bugs`: every registered workload and nemesis profile, in its fixed cell
order, within its 300 s budget) catches the bugs of a deposed or cut-off leader, each with the checker
built for its rule: `raft-leader-never-resigns` (KAFKA-15489) by quorum-progress,
`ctl-no-fence-after-failover` (KAFKA-13841) by registrations, `ctl-read-without-barrier` by a
linearizable-read rule (the register's, or registrations' stale-read); the correct cluster is valid
in the cell that caught each. These catches hang on the targeted cuts (`established`, `leader-cut`)
landing in the cells the budget allows: this test keeps them there. `broker-forward-resend-ambiguous`
(KIP-590 at most once) is caught by at-most-once: a controller killed with forwarded writes committed
but unanswered. Whether the matrix's budget reaches it moves with the runs' timing (issue 30's election
changes took it out and the broker's resend of a lost registration brought it back, docs/trust/rules.md);
the gate's kill-leader cell catches it either way, and that cell is checked here."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.bug_matrix import Matrix, MatrixConfig, default_nemeses
from harness.plugins import workload_names
from harness.run_cli import registries
from harness.runner import run_test
from harness.suite import load_suite

# bug -> the checkers built for its rule (any may see it first): a read that skipped the barrier is
# a stale linearizable read to the register checker, to registrations' `stale-read` rule and, for the
# config-append workload's list reads, a real-time anomaly to Elle under strict serializability.
EXPECTED = {
    "raft-leader-never-resigns": {"quorum-progress"},
    "ctl-no-fence-after-failover": {"registrations"},
    "ctl-read-without-barrier": {"linearizable", "registrations", "elle-list-append"},
}
GATE_TOML = Path(__file__).resolve().parents[2] / "suites" / "gate.toml"


@pytest.fixture
def results() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="kchaos-catch-") as root:
        yield Path(root)


def failed(results: dict[str, Any]) -> list[str]:
    return [name for name, v in results["checkers"].items() if v.get("valid") is False]


@pytest.mark.parametrize("bug", sorted(EXPECTED))
def test_the_matrix_catches_a_deposed_leaders_bug_with_its_checker(results: Path, bug: str) -> None:
    known = registries()
    config = MatrixConfig(
        bugs=(bug,),
        workloads=workload_names("kraft"),
        nemeses=default_nemeses(tuple(known.nemeses)),
        sweep=0,
        jobs=1,
        results=str(results),
    )
    matrix = Matrix(config)
    (outcome,) = matrix.run().bugs
    first = outcome.first
    assert first is not None, [(r.cell.label, r.valid, r.error) for r in outcome.runs]
    # The budget is a number of cells fixed in advance (budget / a run's planned length); a run may end
    # a fraction of a second past its plan, so the cells, not the summed seconds, are what it bounds.
    assert len(outcome.runs) <= matrix.max_cells, (len(outcome.runs), matrix.max_cells)
    found = json.loads((Path(first.run_dir) / "results.json").read_text())
    assert EXPECTED[bug] & set(failed(found)), failed(found)
    ok = run_test(config.spec(first.cell, None), root=results / "ok", say=lambda _: None, draw_plots=False)
    assert ok.valid is True, ok.checker_lines  # the same cell, the same faults: the correct node passes


def test_the_gates_kill_leader_cell_catches_a_resent_forward_with_at_most_once(results: Path) -> None:
    bug = "broker-forward-resend-ambiguous"
    suite = load_suite(GATE_TOML, bugs=(bug,))
    (cell,) = [c for c in suite.cells if c.id == "config-register/kill-leader/3+2/sim"]
    caught = run_test(suite.spec(cell, 1), root=results / "bug", say=lambda _: None, draw_plots=False)
    assert caught.valid is False
    found = json.loads((caught.run.path / "results.json").read_text())
    assert "at-most-once" in failed(found), failed(found)
    correct = load_suite(GATE_TOML)
    ok = run_test(correct.spec(cell, 1), root=results / "ok", say=lambda _: None, draw_plots=False)
    assert ok.valid is True, ok.checker_lines
