"""`kchaos sim`: flags, output, exit codes."""

from __future__ import annotations

import json

import pytest

from harness.cli import main
from tests.sim.test_injected_bugs import EagerCommitNode


def test_a_valid_run_prints_a_summary_and_digest(capsys):
    code = main(["sim", "--seed", "3", "--duration", "5s", "--observers", "1", "--faults", "pause"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "invariants: valid" in out
    assert "trace digest: sha256:" in out
    assert "elections:" in out and "committed:" in out and "appends:" in out


def test_json_summary_and_settings(capsys):
    code = main(
        ["sim", "--seed", "4", "--duration", "3000ms", "--json", "--set", "quorum.fetch.timeout.ms=3000",
         "--drop", "0.01", "--delay", "exp:1:20"]
    )  # fmt: skip
    summary = json.loads(capsys.readouterr().out)
    assert code == 0
    assert summary["verdict"] == "valid"
    assert summary["seed"] == 4
    assert len(summary["digest"]) == 64
    assert summary["elections"] >= 1
    assert summary["simulated_s"] >= 3.0


def test_a_violation_exits_1_with_the_seed_and_first_bad_event(monkeypatch, capsys):
    monkeypatch.setattr("node.sim.world.RaftNode", EagerCommitNode)
    code = main(["sim", "--seed", "7", "--duration", "5s"])
    captured = capsys.readouterr()
    assert code == 1
    assert "invariants: invalid" in captured.out
    assert "FIRST VIOLATION: invariant violated (seed 7, t=" in captured.out
    assert "event #" in captured.out
    assert "kchaos sim --seed 7" in captured.err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--faults", "partition,flood"], "--faults: unknown fault 'flood'"),
        (["--duration", "ten"], "--duration: 'ten' is not a duration"),
        (["--set", "quorum.bogus.ms=1"], "--set: unknown setting 'quorum.bogus.ms'"),
        (["--set", "quorum.fetch.timeout.ms=soon"], "--set: quorum.fetch.timeout.ms: 'soon' is not an integer"),
        (["--set", "quorum.fetch.timeout.ms=0"], "--set: quorum.fetch.timeout.ms must be > 0"),
        (["--set", "quorum.fetch.timeout.ms"], "--set: 'quorum.fetch.timeout.ms' is not KEY=VALUE"),
        (["--delay", "9:3"], "--delay: '9:3' needs 0 <= MIN <= MAX"),
        (["--delay", "fast"], "--delay: 'fast' is not MIN:MAX"),
        (["--drop", "2"], "--drop: 2.0 is not a probability"),
        (["--voters", "0"], "--voters: 0"),
        (["--append-interval", "0"], "--append-interval: 0"),
        (["--trace", "/nonexistent-dir/t.jsonl", "--duration", "1s"], "--trace: cannot write /nonexistent-dir"),
    ],
)
def test_bad_flags_give_one_line_errors(args, message, capsys):
    code = main(["sim", *args])
    err = capsys.readouterr().err
    assert code == 254
    assert err.count("\n") == 1
    assert message in err


def test_no_pre_vote_runs_kip_595_elections(tmp_path, capsys):
    """A voter isolated by the partition faults asks for pre-votes (VoteRequest with pre_vote=True in
    the trace) unless --no-pre-vote; then its timeouts go straight to candidacies."""
    traces = {}
    for flag in ([], ["--no-pre-vote"]):
        path = tmp_path / f"trace{len(flag)}.jsonl"
        args = ["sim", "--seed", "2", "--duration", "30s", "--faults", "partition", "--json", "--trace", str(path)]
        assert main([*args, *flag]) == 0
        traces[bool(flag)] = path.read_text()
        capsys.readouterr()
    assert "pre_vote=True" in traces[False]
    assert "pre_vote=True" not in traces[True] and "VoteRequest(" in traces[True]
