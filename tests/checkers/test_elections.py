"""The elections measure: epochs per elected leader, split votes, and the time without a leader after
a stop of the active controller, from the committed LeaderChange records and the commit times."""

from __future__ import annotations

import json
from pathlib import Path

from checkers.elections import check_elections, summarize
from checkers.history import load_history

S = 1_000_000_000


def _run(tmp: Path, leader_changes: list[tuple[int, int]], final_epoch: int, stops: list[tuple[int, str]]) -> Path:
    """A run dir: node c1's committed log with LeaderChange records at (epoch, offset), its last epoch,
    one commit-times point per second (offset t*10 by t s), and leader stops at (time s, signal)."""
    node = tmp / "nodes" / "c1"
    node.mkdir(parents=True)
    entries = [{"offset": off, "epoch": epoch, "control": True, "leader_id": 1} for epoch, off in leader_changes]
    (node / "committed-log.jsonl").write_text("".join(json.dumps(e) + "\n" for e in entries))
    (node / "node-stats.json").write_text(json.dumps({"epoch": final_epoch}))
    header = {"voters": ["c1", "c2", "c3"], "ids": {"c1": 1, "c2": 2, "c3": 3}, "fetch_timeout_ms": 2000}
    header |= {"request_timeout_ms": 2000, "nodes": ["c1", "c2", "c3"], "brokers": []}
    points = [json.dumps({"time": t * S, "end": t * 10}) for t in range(1, 30)]
    (tmp / "commit-times.jsonl").write_text("\n".join([json.dumps(header), *points]) + "\n")
    events = []
    for i, (t, signal) in enumerate(stops):
        value = {"kind": "kill", "mode": "leader", "targets": ["c1"], **({"signal": signal} if signal else {})}
        events.append({"index": 2 * i, "time": t * S, "process": "nemesis", "type": "invoke", "f": "start-kill"})
        events.append(
            {"index": 2 * i + 1, "time": t * S, "process": "nemesis", "type": "info", "f": "start-kill", "value": value}
        )
    (tmp / "history.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    return tmp


def test_counts_epochs_without_a_leader_and_times_each_kind_of_leader_stop(tmp_path: Path) -> None:
    # epochs 1, 2 and 5 elected leaders (records at offsets 0, 35, 81); 3 and 4 split; the node is at 6
    run = _run(tmp_path, [(1, 0), (2, 35), (5, 81)], 6, [(3, None), (7, "TERM")])
    verdict = check_elections(load_history(run / "history.jsonl"), run)
    d = verdict.details
    assert verdict.valid is True
    assert (d["elections"], d["leader_epochs"], d["split_votes"], d["elections_per_leader_change"]) == (6, 3, 3, 2.0)
    # the kill at 3 s: offset 35 committed by 4 s (end 40); the TERM at 7 s: offset 81 by 9 s (end 90)
    assert d["leaderless_after_kill_s"] == 1.0 and d["leaderless_after_resign_s"] == 2.0
    assert d["leaderless_unrecovered"] == 0
    assert "3 split" in summarize(verdict)[0]


def test_a_stop_after_which_no_leader_committed_is_unrecovered(tmp_path: Path) -> None:
    run = _run(tmp_path, [(1, 0)], 4, [(5, None)])
    d = check_elections(load_history(run / "history.jsonl"), run).details
    assert d["leaderless_unrecovered"] == 1 and d["leaderless_after_kill_s"] is None and d["split_votes"] == 3


def test_an_unreadable_dump_makes_the_verdict_unknown(tmp_path: Path) -> None:
    run = _run(tmp_path, [(1, 0)], 1, [])
    (run / "nodes" / "c1" / "committed-log.jsonl").write_text("{not json\n{}\n")
    verdict = check_elections(load_history(run / "history.jsonl"), run)
    assert verdict.valid == "unknown" and "committed-log.jsonl:1" in verdict.details["error"]
