"""`kchaos run` on the command line: verdict and run directory printed, flags over the file, bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import main
from vocab.errors import EXIT_ERROR


def run_cli(argv: list[str], capsys) -> tuple[int, str, str]:
    code = main(["run", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_sim_run_prints_verdict_and_run_dir_and_saves_the_resolved_test(tmp_path, capsys):
    test_file = tmp_path / "t.toml"
    test_file.write_text('name = "from-file"\ntime_limit_s = 30\nconcurrency = 3\nnemesis = ["kill"]\n')
    code, out, _ = run_cli(
        [
            "--test",
            str(test_file),
            "--backend",
            "sim",
            "--seed",
            "4",
            "--time-limit",
            "4s",
            "--nodes",
            "3",
            "--recovery",
            "1s",
            "--results",
            str(tmp_path / "results"),
            "--no-progress",
        ],
        capsys,
    )
    assert code == 0
    assert "verdict: valid (exit 0)" in out
    run_dir = Path(out.split("run directory: ")[1].split()[0])
    assert f"report: {run_dir / 'report.html'}" in out and (run_dir / "report.html").is_file()
    test = json.loads((run_dir / "test.json").read_text())
    assert (test["name"], test["time_limit_s"], test["concurrency"]) == ("from-file", 4.0, 3)
    assert (test["nemesis"], test["seed"], test["nodes"]) == (["kill"], 4, ["n1", "n2", "n3"])
    assert run_dir.parent.name == "from-file"


def test_a_past_runs_test_json_runs_the_same_test_again_with_flags_winning(tmp_path, capsys):
    common = ["--backend", "sim", "--recovery", "1s", "--no-progress"]
    shape = ["--nodes", "3", "--nemesis", "kill", "--seed", "4", "--time-limit", "4s", "--concurrency", "3"]
    code, out, _ = run_cli([*common, *shape, "--results", str(tmp_path / "first")], capsys)
    assert code == 0
    first = Path(out.split("run directory: ")[1].split()[0])
    code, out, _ = run_cli(
        [*common, "--test", str(first / "test.json"), "--rate", "7", "--results", str(tmp_path / "again")], capsys
    )
    assert code == 0, out
    again = Path(out.split("run directory: ")[1].split()[0])
    before, after = (json.loads((d / "test.json").read_text()) for d in (first, again))
    assert after.pop("rate") == 7 and before.pop("rate") != 7  # the flag won
    assert {k: v for k, v in after.items() if k != "started_at"} == {
        k: v for k, v in before.items() if k != "started_at"
    }  # seed, cluster, faults, time limit: the same test


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("time_limit_s = \n", "invalid TOML"),
        ("bogus = 1\n", "bogus: unknown key"),
        ('nemesis = ["meteor"]\n', "unknown fault kind 'meteor'"),
        ('nemesis = ["clock"]\n[nemesis_options.clock]\nrate = 0\n', "nemesis_options.clock.rate: must be >= 0.01"),
        ('workload = "nope"\n', "unknown workload 'nope'"),
        ("concurrency = 0\n", "concurrency: must be >= 1"),
    ],
)
def test_bad_test_file_is_a_one_line_error(tmp_path, capsys, text, expected):
    bad = tmp_path / "bad.toml"
    bad.write_text(text)
    code, _out, err = run_cli(["--test", str(bad), "--results", str(tmp_path / "r")], capsys)
    assert code == EXIT_ERROR
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kchaos: error: ") and str(bad) in lines[0]
    assert expected in lines[0] and "Traceback" not in err
    assert not (tmp_path / "r").exists()  # nothing ran


def test_missing_test_file_and_bad_flag_are_one_line_errors(tmp_path, capsys):
    code, _, err = run_cli(["--test", str(tmp_path / "none.toml")], capsys)
    assert code == EXIT_ERROR and "cannot read test file" in err and len(err.strip().splitlines()) == 1
    code, _, err = run_cli(["--backend", "sim", "--nodes", "three"], capsys)
    assert code == EXIT_ERROR and "--nodes" in err and len(err.strip().splitlines()) == 1


def test_the_workload_comes_from_the_test_file_or_the_flag(tmp_path, capsys):
    test_file = tmp_path / "append.toml"
    test_file.write_text('workload = "config-append"\n\n[workload_options]\nactive_keys = 4\nmax_txn_length = 3\n')
    common = ["--backend", "sim", "--seed", "2", "--time-limit", "3s", "--recovery", "1s", "--nodes", "3+2"]
    common += ["--results", str(tmp_path / "results"), "--no-progress"]
    code, out, _ = run_cli(["--test", str(test_file), *common], capsys)
    assert code == 0, out
    run_dir = Path(out.split("run directory: ")[1].split()[0])
    test = json.loads((run_dir / "test.json").read_text())
    assert test["workload"] == "config-append" and test["workload_options"] == {"active_keys": 4, "max_txn_length": 3}
    assert "elle-list-append" in json.loads((run_dir / "results.json").read_text())["checkers"]
    code, out, _ = run_cli(["--test", str(test_file), "--workload", "config-register", *common], capsys)
    run_dir = Path(out.split("run directory: ")[1].split()[0])
    assert code == 0 and json.loads((run_dir / "test.json").read_text())["workload"] == "config-register"


def test_workload_options_it_cannot_use_are_a_one_line_error(tmp_path, capsys):
    argv = ["--backend", "sim", "--workload", "config-append", "--workload-option", "max_txn_length=50"]
    code, _out, err = run_cli([*argv, "--results", str(tmp_path / "r"), "--no-progress"], capsys)
    assert code == EXIT_ERROR and "Traceback" not in err
    errors = [line for line in err.splitlines() if "error" in line]
    assert errors == [
        "kchaos run: error: workload config-append: [workload_options] config-append needs topics, "
        "active_keys, key_span_ops >= 1 and 1 <= max_txn_length <= 10"
    ]


def test_a_backend_that_cannot_start_is_one_line_without_a_traceback(tmp_path):
    """The netns backend with no `ip` on the PATH fails while provisioning, before it creates anything:
    the user sees what failed, not a Python traceback."""
    env = {**os.environ, "PATH": str(tmp_path / "empty")}
    proc = subprocess.run(
        [sys.executable, "-m", "harness", "run", "--backend", "netns", "--time-limit", "2s", "--no-progress",
         "--results", str(tmp_path / "results")],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert proc.returncode == EXIT_ERROR
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "kchaos run: error: ip: command not found" in proc.stderr.splitlines()
    assert "verdict: error (exit 254)" in proc.stdout
