"""Shared fixtures: ONE SparkSession and ONE report job over a synthetic results root for the whole
reports test area (a session costs seconds to start; the job is the expensive part)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from reports.synth import SynthTest, synthesize

GAP_MS = 1000.0
MS = 1_000_000

# A run small enough to work out by hand (times in ms). Answers are in test_known_answers.py.
HAND_EVENTS = [
    (0, "0", "invoke", "write", 0),
    (5, "1", "invoke", "read", None),
    (8, "1", "ok", "read", 0),
    (10, "0", "ok", "write", 0),
    (20, "nemesis", "invoke", "start-partition", {"targets": ["n1"]}),
    (25, "nemesis", "info", "start-partition", {"targets": ["n1"]}),
    (30, "0", "invoke", "write", 1),
    (40, "1", "invoke", "read", None),
    (530, "0", "fail", "write", 1),
    (1040, "1", "info", "read", None),
    (1100, "2", "invoke", "read", None),
    (1110, "2", "ok", "read", 0),
    (1500, "nemesis", "invoke", "stop-partition", None),
    (1505, "nemesis", "info", "stop-partition", None),
    (1600, "0", "invoke", "write", 2),
    (1620, "0", "ok", "write", 2),
    (2000, "nemesis", "invoke", "start-kill", {"targets": ["n2"]}),
    (2002, "nemesis", "info", "start-kill", {"targets": ["n2"]}),
    (2100, "0", "invoke", "write", 3),
    (2200, "2", "invoke", "read", None),
    (2210, "2", "ok", "read", 3),
]
HAND_RUN = "hand-made/20261105T120000Z"


def write_hand_run(root: Path) -> Path:
    run_dir = root / HAND_RUN
    run_dir.mkdir(parents=True)
    test = {
        "schema_version": 1,
        "name": "hand-made",
        "workload": "config-register",
        "nemesis": ["partition", "kill"],
        "backend": "sim",
        "seed": 7,
        "nodes": ["n1", "n2", "n3"],
        "time_limit_s": 3,
        "concurrency": 2,
        "rate": 10,
        "started_at": "2026-11-05T12:00:00Z",
    }
    (run_dir / "test.json").write_text(json.dumps(test))
    lines = []
    for index, (ms, process, typ, f, value) in enumerate(HAND_EVENTS):
        event = {"index": index, "time": ms * MS, "process": process if process == "nemesis" else int(process)}
        event |= {"type": typ, "f": f, "value": value}
        if process != "nemesis":
            event["key"] = "k1"
        if typ in ("ok", "fail", "info") and process != "nemesis":
            event["node"] = "n3"
        if typ == "fail":
            event["error"] = "timeout"
        lines.append(json.dumps(event))
    (run_dir / "history.jsonl").write_text("\n".join(lines) + "\n")  # JSONL only: the fallback path
    results = {
        "valid": False,
        "checkers": {
            "committed-loss": {"valid": False, "lost": ["w1", "w2"]},
            "elle": {"valid": False, "anomaly-types": ["G1c"]},
        },
    }
    (run_dir / "results.json").write_text(json.dumps(results))
    return run_dir


def _damage(root: Path, good: list[Path]) -> dict[str, Path]:
    """Add what a real results root collects: broken runs, foreign folders, stray files."""
    bad: dict[str, Path] = {}
    # A truncated history: both files cut mid-way.
    cut = root / "set-kill" / "20261120T000000Z"
    shutil.copytree(good[0], cut)
    for name in ("history.parquet", "history.jsonl"):
        data = (cut / name).read_bytes()
        (cut / name).write_bytes(data[: len(data) // 2])
    bad["truncated"] = cut
    # A damaged Parquet next to an intact JSONL: used, with a warning.
    fallback = root / "set-kill" / "20261121T000000Z"
    shutil.copytree(good[4], fallback)
    (fallback / "history.parquet").write_bytes(b"PAR1 not really")
    test = json.loads((fallback / "test.json").read_text())
    test["started_at"] = "2026-11-21T00:00:00Z"
    (fallback / "test.json").write_text(json.dumps(test))
    bad["fallback"] = fallback
    # A run that never got its results.json (still running, or crashed before checking).
    unchecked = root / "config-register-partition" / "20261122T000000Z"
    shutil.copytree(good[1], unchecked)
    (unchecked / "results.json").unlink()
    bad["no_results"] = unchecked
    # Not runs at all.
    (root / "notes").mkdir()
    (root / "notes" / "todo.txt").write_text("look at run 7\n")
    bad["non_run"] = root / "notes"
    foreign = root / "other-tool" / "20261101T000000Z"
    foreign.mkdir(parents=True)
    (foreign / "test.json").write_text(json.dumps({"schema_version": 7, "name": "x"}))
    bad["foreign"] = foreign
    (root / "README.md").write_text("results\n")
    return bad


@pytest.fixture(scope="session")
def results_root(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("results")
    tests = (
        SynthTest("set-kill", "set", ("kill",), 0.45),
        SynthTest("config-register-partition", "config-register", ("partition",), 0.0, unknown_rate=0.3),
        SynthTest("set-partition-pause", "set", ("partition", "pause"), 0.0),
        SynthTest("set-lose-unsynced", "set", ("kill", "lose_unsynced"), 0.6),
    )
    good = synthesize(root, runs=16, ops=16 * 3000, nights=4, seed=11, tests=tests)
    hand = write_hand_run(root)
    bad = _damage(root, good)
    return {"root": root, "good": [*good, hand, bad["fallback"]], "hand": hand, "bad": bad}


@pytest.fixture(scope="session")
def spark() -> Iterator:
    from reports.spark_session import make_session

    session = make_session("local[2]", {"spark.sql.shuffle.partitions": "4"})
    yield session
    session.stop()


@pytest.fixture(scope="session")
def report(spark, results_root: dict, tmp_path_factory: pytest.TempPathFactory):
    from reports.job import JobOptions, run_job

    out = tmp_path_factory.mktemp("report")
    steps: list[str] = []
    result = run_job(spark, JobOptions(root=str(results_root["root"]), out=str(out), gap_ms=GAP_MS), steps.append)
    result.steps = steps
    return result
