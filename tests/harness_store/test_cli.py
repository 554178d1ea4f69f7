"""`kchaos analyze` and `kchaos results list`, registered on a fresh parser as harness/cli.py does."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from harness import analyze_cli, results_cli, store
from tests.harness_store.histories import register_history, write_run
from vocab.errors import EXIT_ERROR, UserError


def kchaos(*argv: str) -> int:
    """Parse and dispatch like harness.cli.main: a UserError is one line on stderr and exit 254."""
    parser = argparse.ArgumentParser(prog="kchaos")
    sub = parser.add_subparsers(dest="command")
    analyze_cli.register(sub)
    results_cli.register(sub)
    args = parser.parse_args(list(argv))
    try:
        return int(args.func(args))
    except UserError as exc:
        print(f"kchaos: error: {exc}")
        return EXIT_ERROR


def test_analyze_prints_verdict_and_report(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = write_run(root, register_history(seed=1, ops_per_process=8))
    assert kchaos("analyze", str(good.path), "--jobs", "1") == 0
    out = capsys.readouterr().out
    assert f"{good.run_id}: valid (exit 0)" in out
    assert f"report: {good.path / 'report.html'}" in out
    bad = write_run(root, register_history(seed=1, ops_per_process=8, stale=True))
    assert kchaos("analyze", str(root / "latest"), "--jobs", "1") == 1  # via the latest link
    out = capsys.readouterr().out
    assert f"{bad.run_id}: INVALID (exit 1)" in out and "stale.key" in out
    assert json.loads(bad.results_json.read_text())["valid"] is False


def test_analyze_checker_override(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = write_run(root, register_history(seed=1, ops_per_process=4, stale=True))
    assert kchaos("analyze", str(run.path), "--checker", "log-agreement") == 2
    assert f"{run.run_id}: unknown (exit 2)" in capsys.readouterr().out


def test_analyze_bad_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert kchaos("analyze", str(tmp_path / "nope")) == EXIT_ERROR
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "nope: does not exist" in out
    assert kchaos("analyze", str(tmp_path)) == EXIT_ERROR
    assert "no test.json" in capsys.readouterr().out
    assert kchaos("analyze", str(tmp_path), "--jobs", "0") == EXIT_ERROR


def test_results_list(root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    valid = write_run(root, register_history(seed=2, ops_per_process=3), name="reg", started_at="2026-11-20T08:00:00Z")
    kill = write_run(root, [], name="kill", started_at="2026-11-21T09:30:00Z")
    assert kchaos("analyze", str(valid.path), "--jobs", "1") == 0
    capsys.readouterr()
    elsewhere = root.parent / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # runs outside the working directory are shown by their absolute path
    assert kchaos("results", "list", "--root", str(root)) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [line for line in lines if "│" in line]
    assert "kill" in rows[0] and "2026-11-21 09:30:00" in rows[0] and "incomplete" in rows[0]
    assert "reg" in rows[1] and "2026-11-20 08:00:00" in rows[1] and "valid" in rows[1]
    assert " 9 " in rows[1]  # 3 processes x 3 ops
    assert str(valid.path) in rows[1] and str(kill.path) in rows[0]
    monkeypatch.chdir(root.parent)  # and runs under it by their relative path
    assert kchaos("results", "list", "--root", str(root)) == 0
    assert f"results/reg/{valid.path.name}" in capsys.readouterr().out
    monkeypatch.setenv(store.ENV_ROOT, str(root))  # the root from the environment
    assert kchaos("results", "list", "--test", "reg") == 0
    out = capsys.readouterr().out
    assert "reg" in out and "kill" not in out
    assert kchaos("results", "list", "--limit", "1") == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if "│" in line]
    assert len(rows) == 1 and "kill" in rows[0]  # the newest run only


def test_results_list_empty_and_missing_roots(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "results").mkdir()
    assert kchaos("results", "list", "--root", str(tmp_path / "results")) == 0
    assert "no runs under" in capsys.readouterr().out
    assert kchaos("results", "list", "--root", str(tmp_path / "missing")) == EXIT_ERROR
    assert "not a directory" in capsys.readouterr().out
    assert kchaos("results", "list", "--root", str(tmp_path), "--limit", "0") == EXIT_ERROR


def test_through_the_kchaos_entry_point(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from harness import cli

    run = write_run(root, register_history(seed=1, ops_per_process=4, stale=True))
    assert cli.main(["analyze", str(run.path), "--jobs", "1"]) == 1
    assert cli.main(["results", "list", "--root", str(root)]) == 0
    assert "invalid" in capsys.readouterr().out
    assert cli.main(["analyze", str(root / "nope")]) == EXIT_ERROR
    err = capsys.readouterr().err
    assert err.startswith("kchaos: error: run directory") and err.count("\n") == 1
