"""Whole matrix runs (`kchaos run` on the simulator, the matrix's settings) that catch planted bugs, and
the correct cluster in the same cells: `raft-leader-never-resigns` (KAFKA-15489) by quorum-progress,
`broker-forward-resend-ambiguous` (KIP-590 at most once) by at-most-once, `ctl-read-without-barrier`
by the register's linearizability. One cell each (the first `kchaos bugs` finds), so they stay short:
six 30 s simulated runs, ~15 s wall in all."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.bug_matrix import Cell, MatrixConfig
from harness.runner import run_test

ALL_KINDS = ("partition", "packet", "clock", "kill", "pause", "disk_stall", "disk_fail", "lose_unsynced", "corrupt")


@pytest.fixture
def results() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="kchaos-catch-") as root:
        yield Path(root)


def first_catch(root: Path, bug: str, cells: list[Cell]) -> tuple[Cell, dict[str, Any]]:
    """The first of `cells` whose run with `bug` is invalid, and its results.json."""
    config = MatrixConfig(results=str(root))
    for cell in cells:
        result = run_test(config.spec(cell, bug), root=root / "bug", say=lambda _: None, draw_plots=False)
        if result.valid is False:
            return cell, json.loads((result.run.path / "results.json").read_text())
    raise AssertionError(f"{bug} not caught in {[c.label for c in cells]}")


def correct(root: Path, cell: Cell) -> dict[str, Any]:
    result = run_test(MatrixConfig(results=str(root)).spec(cell, None), root=root / "ok", say=lambda _: None)
    assert result.valid is True, result.checker_lines
    return json.loads((result.run.path / "results.json").read_text())


def failed(results: dict[str, Any]) -> list[str]:
    return [name for name, v in results["checkers"].items() if v.get("valid") is False]


def test_a_leader_that_never_resigns_is_a_zombie_to_quorum_progress(results: Path) -> None:
    """The leader, cut off from the other controllers (the simulator's targeted `leader-cut`, or the
    nemesis), keeps the requests that reach it and answers none of them."""
    cell, found = first_catch(results, "raft-leader-never-resigns", [Cell("config-register", ("partition",), 1)])
    assert failed(found) == ["quorum-progress"]
    assert {"zombie-leader", "unanswered"} & set(found["checkers"]["quorum-progress"]["anomaly_types"])
    ok = correct(results, cell)
    assert ok["checkers"]["quorum-progress"]["valid"] is True  # the same cuts: the leader resigned, answered


def test_a_forwarded_write_sent_again_is_applied_twice_for_at_most_once(results: Path) -> None:
    """Leaders die with forwarded writes committed but unanswered; the broker sends them again."""
    cell, found = first_catch(results, "broker-forward-resend-ambiguous", [Cell("config-append", ALL_KINDS, 1)])
    assert failed(found) == ["at-most-once"]
    assert found["checkers"]["at-most-once"]["anomaly_counts"]["applied-twice"] >= 1
    ok = correct(results, cell)
    assert ok["checkers"]["at-most-once"]["records_checked"] > 100


def test_a_deposed_controller_reading_without_a_barrier_is_not_linearizable(results: Path) -> None:
    """A controller cut off from the others, its clock slowed, still believes it is active and answers
    DescribeConfigs from its image after the new controller committed newer values."""
    cell, found = first_catch(results, "ctl-read-without-barrier", [Cell("config-register", ("partition", "clock"), 4)])
    assert failed(found) == ["linearizable"]
    correct(results, cell)
