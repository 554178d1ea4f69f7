"""Nightly runs: the last N nights kept, and a trend report that names a new failure and a measure
worse beyond noise, and nothing when tonight is like the nights before."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from harness import nightly
from harness.cli import main
from harness.suite import RunRecord
from tests.fuzz.planted import plant_a_crash

CELL, OTHER = "config-register/kill/3/sim", "config-append/kill/3/sim"


def night(suite_dir: Path, stamp: str, runs: list[RunRecord]) -> Path:
    root = suite_dir / stamp
    root.mkdir(parents=True)
    (root / "suite.json").write_text(json.dumps({"id": f"nightly/{stamp}", "name": "nightly"}))
    (root / "runs.jsonl").write_text("".join(json.dumps(r.__dict__) + "\n" for r in runs))
    return root


def run(cell: str, seed: int, verdict: str = "valid", **measures) -> RunRecord:
    line = "linearizable: False (2 ops)" if verdict == "invalid" else ""
    return RunRecord(cell, seed, verdict, 0, line, [], f"/r/{cell}/{seed}", 1.0, None, measures)


def test_trend_names_new_failures_and_regressions_beyond_noise(tmp_path) -> None:
    where = tmp_path / "suites" / "nightly"
    for i, p99 in enumerate((100.0, 110.0, 95.0, 105.0)):  # four ordinary nights
        night(where, f"2026112{i}T020000Z", [
            run(CELL, 1, p99_outside_faults_ms=p99, failover_s=3.0),
            run(OTHER, 1, p99_outside_faults_ms=50.0, availability_during_faults_pct=80.0),
        ])  # fmt: skip
    quiet = nightly.trend(nightly.nights(where))
    assert quiet.findings == []  # within noise: nothing named
    night(where, "20261124T020000Z", [
        run(CELL, 1, p99_outside_faults_ms=125.0, failover_s=9.0),  # p99 within 25 %, failover 3x
        run(OTHER, 1, "invalid", p99_outside_faults_ms=50.0, availability_during_faults_pct=60.0),
        run(OTHER, 2, p99_outside_faults_ms=50.0, availability_during_faults_pct=79.0),
    ])  # fmt: skip
    t = nightly.trend(nightly.nights(where))
    named = {(f.cell, f.kind, f.measure) for f in t.findings}
    assert named == {
        (CELL, "regression", "failover_s"),
        (OTHER, "new-failure", ""),
        (OTHER, "regression", "availability_during_faults_pct"),
    }
    failure = next(f for f in t.findings if f.kind == "new-failure")
    assert "seed 1: linearizable: False (2 ops) (/r/config-append/kill/3/sim/1)" in failure.text
    page = nightly.trend_markdown(t)
    assert "3 regressions" in page and "failover_s 9.0 s tonight, median 3.0 s over 4 earlier nights" in page

    night(where, "20261125T020000Z", [run(CELL, 1, p99_outside_faults_ms=100.0), run(OTHER, 1)])
    fixed = nightly.trend(nightly.nights(where))
    assert [(f.cell, f.kind) for f in fixed.findings] == [(OTHER, "fixed")] and not fixed.regressions

    removed = nightly.prune(where, 2)
    assert len(removed) == 4 and [n.name for n in nightly.nights(where)] == ["20261124T020000Z", "20261125T020000Z"]
    (where / "notes").mkdir()  # not a night: never touched
    assert nightly.prune(where, 1) and (where / "notes").is_dir()


TINY = """\
name = "tiny-nightly"
seeds = 1

[defaults]
time_limit_s = 5
nemesis_interval_s = 2
nemesis_duration_s = 1
recovery_s = 10
rate = 30
concurrency = 3

[matrix]
workloads = ["config-register"]
nemeses = { kill = ["kill"] }
clusters = ["3"]

[gate]
recovery_after_heal_s = 10
"""


def test_nightly_end_to_end_keeps_the_last_nights(tmp_path, capsys) -> None:
    suite = tmp_path / "tiny.toml"
    suite.write_text(TINY)
    results = tmp_path / "results"
    for _ in range(3):
        code = main(["nightly", str(suite), "--results", str(results), "--keep", "2", "--quiet"])
        out = capsys.readouterr().out
        assert code == 0, out
    kept = nightly.nights(results / "suites" / "tiny-nightly")
    assert len(kept) == 2
    newest = kept[-1].root
    assert (newest / "gate-junit.xml").is_file() and (newest / "trend.html").is_file()
    # the simulator replays each seed byte for byte: the same measures every night, no regression
    assert json.loads((newest / "trend.json").read_text())["regressions"] == 0
    assert "# Nightly trend: tiny-nightly/" in out and "against 1 earlier nights" in out
    assert main(["nightly", str(suite), "--results", str(results), "--trend-only", "--quiet"]) == 0
    assert main(["nightly", str(suite), "--results", str(results), "--keep", "0"]) == 254


def test_nightly_fuzz_runs_after_the_suite_and_a_finding_fails_the_night(tmp_path, capsys, monkeypatch) -> None:
    """`--fuzz`: the fuzzer after tonight's suite, its lines in <night>/fuzz.txt, seeded by the night;
    a clean fuzz keeps the night's exit code, a finding (a planted crash) turns a passing night into 1."""
    suite = tmp_path / "tiny.toml"
    suite.write_text(TINY)
    results = tmp_path / "results"
    assert main(["nightly", str(suite), "--results", str(results), "--fuzz", "2s", "--quiet"]) == 0
    night = nightly.nights(results / "suites" / "tiny-nightly")[-1].root
    text = (night / "fuzz.txt").read_text()
    seed = int(re.sub(r"\D", "", night.name)) % (1 << 31)
    assert text.startswith(f"kchaos nightly --fuzz: seed {seed}, budget 2 s") and "0 distinct findings" in text, text
    assert f"fuzz {night / 'fuzz.txt'} (0 findings)" in capsys.readouterr().err

    plant_a_crash(monkeypatch)
    assert main(["nightly", str(suite), "--results", str(results), "--fuzz", "10m", "--fuzz-inputs", "1500"]) == 1
    out = capsys.readouterr().out
    night = nightly.nights(results / "suites" / "tiny-nightly")[-1].root
    assert "FINDING" in out and "RuntimeError('planted')" in (night / "fuzz.txt").read_text()
    assert "replay: kchaos fuzz --replay " in (night / "fuzz.txt").read_text()


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--fuzz", "0s"], "--fuzz: must be > 0"),
        (["--fuzz", "soon"], "--fuzz: expected a duration"),
        (["--fuzz-real-node", "10"], "--fuzz-real-node needs --fuzz"),
        (["--fuzz-inputs", "10"], "--fuzz-inputs needs --fuzz"),
        (["--fuzz", "1m", "--fuzz-inputs", "0"], "--fuzz-inputs must be > 0"),
        (["--fuzz", "1m", "--trend-only"], "--fuzz does not apply with --trend-only"),
    ],
)
def test_nightly_fuzz_options_are_checked_before_anything_runs(tmp_path, capsys, argv, says) -> None:
    suite = tmp_path / "tiny.toml"
    suite.write_text(TINY)
    assert main(["nightly", str(suite), "--results", str(tmp_path / "results"), *argv]) == 254
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1, err
    assert not (tmp_path / "results").exists()


def test_next_seeds_follow_the_highest_seed_of_any_night_kept(tmp_path) -> None:
    where = tmp_path / "suites" / "soak"
    assert nightly.next_seeds(where, 5) == "1..5"  # no night yet
    for stamp, seeds in (("20261101T010000Z", [1, 2, 3]), ("20261102T010000Z", [41, 40])):
        night(where, stamp, [])
        meta = {"id": f"soak/{stamp}", "name": "soak", "seeds": seeds}
        (where / stamp / "suite.json").write_text(json.dumps(meta))
    (where / "20261103T010000Z").mkdir()  # a night killed before it wrote suite.json: not a night
    (where / "20261103T010000Z" / "suite.json").write_text("{")
    assert nightly.next_seeds(where, 5) == "42..46"


def test_nightly_seeds_next_runs_new_seeds_each_night(tmp_path, capsys) -> None:
    suite = tmp_path / "tiny.toml"
    suite.write_text(TINY)
    results = tmp_path / "results"
    for _ in range(2):
        assert main(["nightly", str(suite), "--results", str(results), "--seeds", "next"]) == 0
    said = capsys.readouterr().err
    assert "--seeds next: seeds 1..1" in said and "--seeds next: seeds 2..2" in said, said
    ran = [sorted({r.seed for r in n.records.values()}) for n in nightly.nights(results / "suites" / "tiny-nightly")]
    assert ran == [[1], [2]]
