"""The log tap times the committed log (commit-times.jsonl) for the quorum-progress check."""

from __future__ import annotations

import json
import random
from pathlib import Path

from checkers.quorum_progress import COMMITS_NAME, read_commit_times
from harness.db.kraft_tap import LogTap
from harness.runner import run_test
from node.metadata.dump import log_entries, snapshot_dump
from tests.harness_run.helpers import sim_spec
from tests.metadata.random_controller import RandomController

HEADER = {"voters": ["c1"], "nodes": ["c1"], "ids": {"c1": 1}, "fetch_timeout_ms": 2000, "request_timeout_ms": 2000}


def test_the_tap_writes_a_header_then_a_line_each_time_the_end_moves(tmp_path: Path) -> None:
    batches = RandomController(random.Random(3)).batches(30)
    tap = LogTap(tmp_path, HEADER)
    tap.mark(5)  # nothing tapped yet: end 0, still a first line so the file starts with its header
    tap.add([(snapshot_dump(None), list(log_entries(batches[:10], with_records=True)))])
    tap.mark(10)
    tap.mark(20)  # the end did not move: no line
    tap.add([(snapshot_dump(None), list(log_entries(batches[:20], with_records=True)))])
    tap.mark(30)
    lines = [json.loads(line) for line in (tmp_path / COMMITS_NAME).read_text().splitlines()]
    assert lines[0] == HEADER
    assert lines[1:] == [
        {"time": 5, "end": 0},
        {"time": 10, "end": batches[9].last_offset + 1},
        {"time": 30, "end": batches[19].last_offset + 1},
    ]
    assert read_commit_times(tmp_path / COMMITS_NAME).end_at(29) == batches[9].last_offset + 1


def test_without_a_header_the_tap_writes_no_commit_times(tmp_path: Path) -> None:
    tap = LogTap(tmp_path)
    tap.mark(5)
    assert not (tmp_path / COMMITS_NAME).exists()


def test_a_sim_run_times_its_committed_log(tmp_path: Path) -> None:
    result = run_test(sim_spec(seed=5), root=tmp_path, say=lambda _: None)
    run = result.run.path
    commits = read_commit_times(run / COMMITS_NAME)
    assert commits.voters == ("c1", "c2", "c3") and commits.ids["b2"] == 5 and commits.fetch_timeout_ms == 2000
    assert len(commits.times) > 10 and commits.times == sorted(commits.times)
    final = max(
        json.loads((run / "nodes" / n / "node-stats.json").read_text())["high_watermark"] for n in commits.voters
    )
    assert 0 < commits.ends[-1] <= final  # the tap saw committed offsets only
    verdict = json.loads((run / "results.json").read_text())["checkers"]["quorum-progress"]
    assert verdict["valid"] is True and verdict["reads_judged"] > 0
