"""Whole `kchaos run --backend sim` runs of the gate's `redeliver` and `no-pre-vote` cells: the correct
cluster passes them on every workload; the planted bug each one is there for fails them (and the
Vote handler's bug passes the same cell with pre-vote on, which is why the cell turns it off)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from harness.runner import run_test
from harness.suite import load_suite
from harness.test_spec import TestSpec, load_test
from vocab.errors import UserError
from vocab.faults.catalogue import CATALOGUE

GATE = load_suite(Path(__file__).resolve().parents[2] / "suites" / "gate.toml")
WORKLOADS = ("config-append", "config-register", "isr-changes", "registrations")


def cell_spec(name: str, workload: str, seed: int = 1, **changes) -> TestSpec:
    """The gate's cell `name` x `workload` at `seed`, with `changes` to its test spec. The gate runs each
    of these cells on two workloads only (to stay cheap); for the other two the cell's settings are
    taken with that workload, since the correct cluster must pass them there too."""
    cells = [c for c in GATE.cells if c.nemesis == name]
    same = [c for c in cells if c.workload == workload]
    assert cells and len(same) <= 1, (name, workload)
    return dataclasses.replace(GATE.spec((same or cells)[0], seed), workload=workload, **changes)


def verdict(spec: TestSpec, root: Path) -> tuple[bool | str | None, dict]:
    result = run_test(spec, root=root, say=lambda _: None)
    checkers = json.loads((result.run.path / "results.json").read_text())["checkers"]
    return result.valid, checkers


def test_the_cells_say_what_they_do():
    redeliver = cell_spec("redeliver", "config-append")
    assert redeliver.nemesis == ("redeliver", "kill") and redeliver.pre_vote
    assert redeliver.nemesis_options["redeliver"] == {"modes": ["stale"], "probability": 1.0}
    no_pre_vote = cell_spec("no-pre-vote", "config-register")
    assert not no_pre_vote.pre_vote and no_pre_vote.to_dict()["pre_vote"] is False
    assert "redeliver" in CATALOGUE and CATALOGUE["redeliver"].modes == ("duplicate", "stale")


def test_pre_vote_off_from_a_test_file_and_from_the_command_line(tmp_path):
    path = tmp_path / "t.toml"
    path.write_text('workload = "config-register"\nnemesis = ["kill"]\nbackend = "sim"\npre_vote = false\n')
    assert load_test(path).pre_vote is False
    assert load_test(path, {"pre_vote": True}).pre_vote is True
    path.write_text("pre_vote = 3\n")
    with pytest.raises(UserError, match=r"t\.toml:1: pre_vote: expected true or false, got integer 3"):
        load_test(path)


@pytest.mark.parametrize("workload", WORKLOADS)
def test_the_correct_cluster_passes_the_redeliver_and_no_pre_vote_cells(tmp_path, workload):
    for nemesis in ("redeliver", "no-pre-vote"):
        valid, checkers = verdict(cell_spec(nemesis, workload, seed=2, time_limit_s=15.0), tmp_path / nemesis)
        assert valid is True, (nemesis, {k: v.get("valid") for k, v in checkers.items()})


def test_a_begin_quorum_epoch_of_an_older_epoch_accepted_is_caught_by_the_redeliver_cell(tmp_path):
    """Seed 5: issue 30's election changes moved the runs' timing, and seeds 1-4 of this cell no longer
    meet the bug's window (5 and 6 do; the gate catches the bug at its own seeds with the forger's
    replayed BeginQuorumEpoch too)."""
    bug = ("raft-begin-epoch-accepts-older-epoch",)
    valid, checkers = verdict(cell_spec("redeliver", "config-register", seed=5, bugs=bug), tmp_path / "on")
    assert valid is False
    assert "epoch went back" in checkers["sim-invariants"]["violation"]
    # The same cell without the stale copies passes at this seed: the copies open the bug's window.
    quiet = cell_spec("redeliver", "config-register", seed=5, bugs=bug, nemesis=("kill",), nemesis_options={})
    assert verdict(quiet, tmp_path / "off")[0] is True


def test_a_vote_granted_to_a_stale_log_is_caught_only_with_pre_vote_off(tmp_path):
    bug = ("raft-vote-skips-log-up-to-date-check",)
    valid, checkers = verdict(cell_spec("no-pre-vote", "config-register", bugs=bug), tmp_path / "off")
    assert valid is False and checkers["sim-invariants"]["valid"] is False
    with_pre_vote = cell_spec("no-pre-vote", "config-register", bugs=bug, pre_vote=True)
    assert verdict(with_pre_vote, tmp_path / "on")[0] is True


def test_real_nodes_get_pre_vote_off_through_their_server_properties():
    from harness.db import SUTS

    on, off = cell_spec("redeliver", "config-append"), cell_spec("no-pre-vote", "config-register")
    assert "kchaos.raft.pre.vote.enable" not in SUTS["kraft"](on).settings
    assert SUTS["kraft"](off).settings["kchaos.raft.pre.vote.enable"] == "false"
