"""Running a suite: every run lands in the suite's own results root with the suite id in test.json,
a line per finished run in runs.jsonl, a crashed or hung run is an unknown verdict with the reason,
the budget leaves runs out, and --resume runs only what is missing."""

from __future__ import annotations

import itertools
import json
import os
import time
from pathlib import Path

import pytest

from harness import suite as suites
from harness.cli import main
from harness.suite import RunRecord, SuiteRunner, load_suite

SMALL = """\
name = "tiny"
seeds = 2
run_timeout = "2m"

[defaults]
time_limit_s = 6
nemesis_interval_s = 2
nemesis_duration_s = 2
recovery_s = 10
rate = 30
concurrency = 3

[matrix]
workloads = ["config-register"]
nemeses = { kill = ["kill"], calm = [] }
clusters = ["3"]
backends = ["sim"]
"""


def fake_run(spec, cell_id: str, root: str, suite_id: str) -> RunRecord:
    """A stand-in worker (no cluster): seed 2 of the kill cell hangs, seed 1 of the calm cell crashes;
    at rate 31 every run takes 2 s and none fails; at rate 32 seed 1 of the kill cell is invalid at
    once and every other run hangs; at rate 33 seed 2 of the calm cell is invalid, every other run valid."""
    if spec.rate == 31:
        time.sleep(2)
        return RunRecord(cell_id, spec.seed, "valid", 0, "", [], "", 2.0)
    if spec.rate == 33:
        valid = not (cell_id.endswith("/calm/3/sim") and spec.seed == 2)
        return RunRecord(cell_id, spec.seed, "valid" if valid else "invalid", 0 if valid else 1, "", [], "", 0.01)
    if spec.rate == 32:
        if cell_id.endswith("/kill/3/sim") and spec.seed == 1:
            return RunRecord(cell_id, 1, "invalid", 1, "lost: 1 acknowledged write lost", ["lost"], "", 0.01)
        time.sleep(3600)
    if cell_id.endswith("/kill/3/sim") and spec.seed == 2:
        time.sleep(3600)
    if cell_id.endswith("/calm/3/sim") and spec.seed == 1:
        os._exit(9)
    return RunRecord(cell_id, spec.seed, "valid", 0, "", [], f"{root}/{spec.name}", 0.01, None, {"lost": 0})


def test_a_suite_runs_into_its_own_root_and_resumes(tmp_path, capsys) -> None:
    path = tmp_path / "tiny.toml"
    path.write_text(SMALL)
    results = tmp_path / "results"
    code = main(["suite", str(path), "--results", str(results), "--jobs", "2"])
    out, err = capsys.readouterr()
    assert code == 0, (out, err)
    root = (results / "suites" / "tiny" / "latest").resolve()
    meta = json.loads((root / "suite.json").read_text())
    assert meta["name"] == "tiny" and meta["cells"] == ["config-register/kill/3/sim", "config-register/calm/3/sim"]
    journal = suites.read_journal(root)
    assert sorted(journal) == [
        "config-register/calm/3/sim#1",
        "config-register/calm/3/sim#2",
        "config-register/kill/3/sim#1",
        "config-register/kill/3/sim#2",
    ]
    for record in journal.values():
        run_dir = Path(record.run_dir)
        assert run_dir.parent.parent == root and record.verdict == "valid"
        test = json.loads((run_dir / "test.json").read_text())
        assert test["suite"] == {"id": meta["id"], "cell": record.cell, "seed": record.seed} == {
            "id": f"tiny/{root.name}", "cell": record.cell, "seed": test["seed"],
        }  # fmt: skip
        assert record.measures["lost"] == 0 and "p99_outside_faults_ms" in record.measures
    assert "| config-register/kill/3/sim | 2/2 | 2 | 0 | 0 | valid | - |" in out
    assert "[4/4 runs, 2/2 cells, 0 failed, 0 unknown, ETA 0s]" in err

    # an interrupted suite: one run's line never made it to the journal
    lines = (root / "runs.jsonl").read_text().splitlines()
    lost = json.loads(lines[1])
    (root / "runs.jsonl").write_text("\n".join(lines[:1] + lines[2:]) + "\n")
    before = {p for p in root.glob("*/2*")}
    code = main(["suite", str(path), "--results", str(results), "--resume"])
    out, err = capsys.readouterr()
    assert code == 0 and "resuming: 3 of 4 runs already done" in err, err
    new = {p for p in root.glob("*/2*")} - before
    assert len(new) == 1 and json.loads((next(iter(new)) / "test.json").read_text())["seed"] == lost["seed"]
    assert len(suites.read_journal(root)) == 4


def test_crashed_and_hung_runs_are_unknown_with_the_reason_and_the_budget_stops_new_runs(tmp_path) -> None:
    path = tmp_path / "tiny.toml"
    path.write_text(SMALL.replace('run_timeout = "2m"', 'run_timeout = "3s"'))
    suite = load_suite(path)
    root = tmp_path / "root"
    root.mkdir()
    result = SuiteRunner(suite, root, "tiny/x", jobs=2, worker=fake_run).run()
    by_key = result.records
    assert by_key["config-register/kill/3/sim#1"].verdict == "valid"
    hung = by_key["config-register/kill/3/sim#2"]
    crashed = by_key["config-register/calm/3/sim#1"]
    assert hung.verdict == "unknown" and "hung: no verdict within 3 s" in hung.line
    assert crashed.verdict == "unknown" and "exited with code 9" in crashed.line
    assert result.cell_verdict(suite.cells[0]) == "unknown" and result.exit_code == 2
    assert len(suites.read_journal(root)) == 4  # every run has its line, the lost ones too

    path.write_text(SMALL.replace("rate = 30", "rate = 31").replace("seeds = 2", 'seeds = 2\nbudget = "1s"'))
    slow = load_suite(path)  # the first run takes 2 s: the budget is spent when it ends
    other = tmp_path / "other"
    other.mkdir()
    result = SuiteRunner(slow, other, "tiny/y", jobs=1, worker=fake_run).run()
    assert list(result.records) == ["config-register/kill/3/sim#1"] and len(result.skipped) == 3
    assert result.exit_code == 2  # runs left out: the suite did not decide


def test_fail_fast_stops_at_the_first_invalid_run(tmp_path) -> None:
    """The calm cell's first run hangs beside the invalid one: it is stopped, not waited for until the
    2-minute run timeout would have recorded it as hung, and the two runs of seed 2 never start."""
    path = tmp_path / "tiny.toml"
    path.write_text(SMALL.replace("rate = 30", "rate = 32"))
    suite = load_suite(path)
    suite.fail_fast = True
    root = tmp_path / "root"
    root.mkdir()
    result = SuiteRunner(suite, root, "tiny/ff", jobs=2, worker=fake_run).run()
    assert list(result.records) == ["config-register/kill/3/sim#1"]
    assert result.records["config-register/kill/3/sim#1"].verdict == "invalid"
    assert result.stopped_by == "fail-fast" and len(result.skipped) == 3
    assert sorted((c.nemesis, seed) for c, seed in result.skipped) == [("calm", 1), ("calm", 2), ("kill", 2)]
    assert len(suites.read_journal(root)) == 1  # the stopped run has no line: it was not run
    assert result.exit_code == 1
    assert ", 3 not run (fail-fast)" in suites.table_markdown(result)


def test_first_runs_named_runs_ahead_and_fail_fast_ends_there(tmp_path) -> None:
    """`--first`: only the order moves. A cell known to fail, named first, ends a fail-fast suite after
    one run; without it the same suite runs the three valid runs before it."""
    path = tmp_path / "tiny.toml"
    path.write_text(SMALL.replace("rate = 30", "rate = 33"))
    suite = load_suite(path)
    order = [(c.nemesis, seed) for c, seed in suites.first_runs(suite.runs(), ["*/calm/*", "*/kill/*#2"])]
    assert order == [("calm", 1), ("calm", 2), ("kill", 2), ("kill", 1)]
    assert suites.first_runs(suite.runs(), []) == suite.runs()
    suite.fail_fast = True
    for first, ran in (((), 4), (("config-register/calm/3/sim#2",), 1)):
        suite.first = first
        root = tmp_path / f"root-{ran}"
        root.mkdir()
        result = SuiteRunner(suite, root, "tiny/first", jobs=1, worker=fake_run).run()
        assert len(result.records) == ran and result.exit_code == 1
        assert result.records["config-register/calm/3/sim#2"].verdict == "invalid"
        assert len(result.skipped) == 4 - ran


def test_failed_first_starts_with_last_times_invalid_runs(tmp_path, capsys) -> None:
    """`--failed-first` reads the suite's latest root under --results: its invalid run goes first
    (here the only run a 1 s budget lets start), and a suite never run before says so."""
    path = tmp_path / "tiny.toml"
    path.write_text(SMALL.replace("rate = 30", "rate = 33"))
    suite = load_suite(path)
    assert suites.failed_last_time(tmp_path, suite) == ()
    root, suite_id = suites.new_suite_root(tmp_path, suite)
    SuiteRunner(suite, root, suite_id, jobs=2, worker=fake_run).run()
    assert suites.failed_last_time(tmp_path, suite) == ("config-register/calm/3/sim#2",)
    argv = ["suite", str(path), "--failed-first", "--budget", "1s", "--jobs", "1", "--results", str(tmp_path)]
    main(argv)
    assert "failed first: config-register/calm/3/sim#2" in capsys.readouterr().err
    (first, *_) = suites.read_journal((tmp_path / "suites" / "tiny" / "latest").resolve()).values()
    assert (first.cell, first.seed) == ("config-register/calm/3/sim", 2)
    fresh = tmp_path / "fresh"
    main([*argv[:-1], str(fresh), "--seeds", "1", "--budget", "1ms"])
    assert "failed first: none failed last time" in capsys.readouterr().err


def test_run_timeout_flag_overrides_the_files(tmp_path, capsys) -> None:
    """`--run-timeout` replaces the file's hang limit (a loaded CI machine needs more): a real simulated
    run of the tiny suite takes seconds, so at 0.2 s each is stopped as hung and the suite is unknown."""
    path = tmp_path / "tiny.toml"
    path.write_text(SMALL)
    argv = ["suite", str(path), "--seeds", "1", "--jobs", "1", "--results", str(tmp_path), "--quiet"]
    assert main([*argv, "--run-timeout", "0.2s"]) == 2
    out = capsys.readouterr().out
    assert out.count("run lost: hung: no verdict within 0.2 s") == 2, out


def test_a_seed_range_on_the_command_line_runs_those_seeds_and_a_resume_keeps_them(tmp_path, capsys) -> None:
    """`--seeds A..B` explores seeds no earlier soak ran (the simulator replays 1..N unchanged)."""
    path = tmp_path / "tiny.toml"
    path.write_text(SMALL.replace('nemeses = { kill = ["kill"], calm = [] }', "nemeses = { calm = [] }"))
    argv = ["suite", str(path), "--seeds", "41..42", "--jobs", "2", "--results", str(tmp_path), "--quiet"]
    assert main(argv) == 0
    (root,) = {p.parent.resolve() for p in tmp_path.glob("suites/tiny/*/suite.json")}  # and latest
    assert sorted(r.seed for r in suites.read_journal(root).values()) == [41, 42]
    assert json.loads((root / "suite.json").read_text())["seeds"] == [41, 42]
    capsys.readouterr()
    assert main(["suite", str(path), "--resume", str(root), "--results", str(tmp_path), "--quiet"]) == 0
    assert "| 2/2 | 2 | 0 | 0 | valid |" in capsys.readouterr().out  # the resume found both seeds done
    assert sorted(r.seed for r in suites.read_journal(root).values()) == [41, 42]


def test_bad_suite_input_is_one_line_and_exit_254(tmp_path, capsys) -> None:
    path = tmp_path / "tiny.toml"
    path.write_text(SMALL)
    for argv, message in (
        (["suite", str(tmp_path / "none.toml")], "cannot read suite file"),
        (["suite", str(path), "--jobs", "0"], "--jobs: must be >= 1, got 0"),
        (["suite", str(path), "--seeds", "x"], "--seeds: expected an integer"),
        (["suite", str(path), "--seeds", "9..7"], "--seeds: the range '9..7' is empty"),
        (["suite", str(path), "--seeds", "99999999999999999999"], "--seeds: at most 1,000,000 seeds per cell"),
        (["suite", str(path), "--bug", "nope"], "--bug: unknown planted bug 'nope'"),
        (["suite", str(path), "--resume", str(tmp_path)], "not a suite directory (no suite.json)"),
        (["gate", str(path), "--budget", "soon"], "--budget: expected a duration"),
        (["gate", str(path), "--run-timeout", "-3s"], "--run-timeout: "),
        (["gate", str(path), "--first", "nope/*"], "--first nope/*: matches no run of suite tiny"),
        (["suite", str(path), "--first", "*/kill/*#x"], "--first */kill/*#x: a seed after '#' must be a number"),
        (["suite", str(path), "--first", "*/kill/*#7"], "--first */kill/*#7: matches no run of suite tiny"),
        (["suite", str(path), "--nosuch"], "kchaos suite: error: unrecognized arguments: --nosuch"),
    ):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's own errors exit from inside the parser
            code = exc.code
        assert code == 254, argv
        captured = capsys.readouterr()
        assert captured.err.count("\n") == 1 and message in captured.err, (argv, captured.err)


def stamped_run(spec, cell_id: str, root: str, suite_id: str) -> RunRecord:
    """A stand-in worker that records when it ran (a file per run in the suite root)."""
    start = time.time()
    time.sleep(0.5)
    Path(root, f"{cell_id.replace('/', '_')}-{spec.seed}.span").write_text(f"{spec.backend} {start} {time.time()}")
    return RunRecord(cell_id, spec.seed, "valid", 0, "", [], "", 0.5)


def test_real_backend_runs_wait_for_a_cluster_slot_while_sim_runs_fill_the_jobs(tmp_path) -> None:
    text = SMALL.replace('backends = ["sim"]', 'backends = ["netns", "sim"]').replace(
        "seeds = 2", "seeds = 2\nreal_jobs = 1"
    )
    path = tmp_path / "mixed.toml"
    path.write_text(text)
    suite = load_suite(path)
    assert suite.real_limit() == 1
    root = tmp_path / "root"
    root.mkdir()
    result = SuiteRunner(suite, root, "tiny/m", jobs=3, worker=stamped_run).run()
    assert len(result.records) == 8
    spans = [p.read_text().split() for p in root.glob("*.span")]
    real = sorted((float(a), float(b)) for kind, a, b in spans if kind == "netns")
    sim = sorted((float(a), float(b)) for kind, a, b in spans if kind == "sim")
    assert len(real) == 4 and all(end <= nxt for (_, end), (nxt, _) in itertools.pairwise(real))  # one at a time
    overlapping = any(a < d and c < b for a, b in sim for c, d in sim if (a, b) != (c, d))
    assert overlapping  # the simulated runs used the other jobs meanwhile


@pytest.mark.spark
def test_report_runs_the_spark_reports_over_the_suite(tmp_path, capsys) -> None:
    path = tmp_path / "tiny.toml"
    path.write_text(SMALL.replace("seeds = 2", "seeds = 1").replace("calm = []", 'calm = ["partition"]'))
    results = tmp_path / "results"
    assert main(["suite", str(path), "--results", str(results), "--report", "--quiet"]) == 0
    capsys.readouterr()
    report = (results / "suites" / "tiny" / "latest" / "_report").resolve()
    summary = json.loads((report / "summary.json").read_text())
    assert summary["runs"]["included"] == 2 and summary["runs"]["passed"] == 2 and (report / "report.html").is_file(), (
        summary.get("runs")
    )
