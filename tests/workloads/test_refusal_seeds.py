"""Issue 24's soak seeds: isr-changes under every fault kind, where the active controller answered
AlterPartition refusals (INVALID_UPDATE_VERSION) against a partition epoch its working state held
but that never committed. A read barrier's marker had committed at the offset promised to the
stalled append, and the controller released the refusals by that offset. Each seed must now be
judged valid by partition-cas (and by every other checker)."""

from __future__ import annotations

import json

import pytest

from harness.cli import main
from vocab.errors import EXIT_VALID

FAULTS = "partition,packet,clock,kill,pause,disk_stall,disk_fail,lose_unsynced,corrupt"
RUN = [
    *("run", "--backend", "sim", "--workload", "isr-changes", "--time-limit", "60", "--nodes", "3+2"),
    *("--nemesis-interval", "5", "--nemesis-duration", "5", "--recovery", "10", "--no-progress"),
]


@pytest.mark.parametrize("seed", [41, 171, 193])
def test_refusals_are_not_answered_from_uncommitted_state(tmp_path, seed):
    code = main([*RUN, "--nemesis", FAULTS, "--seed", str(seed), "--results", str(tmp_path)])
    results = tmp_path / "latest" / "results.json"
    verdicts = json.loads(results.read_text())["checkers"]
    assert verdicts["partition-cas"]["valid"] is True, verdicts["partition-cas"]
    assert code == EXIT_VALID, {name: v["valid"] for name, v in verdicts.items()}
