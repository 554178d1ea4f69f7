"""config-append's checkers on hand-built histories in the workload's own shape: a valid history passes;
a lost append, a duplicate element, a G1c, a stale controller read, a broker read that is not the image
at its offset and a broker going backwards each fail with the right anomaly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from checkers.committed_loss import check_committed_loss
from checkers.elle import check_list_append
from checkers.image_reads import Timeline, check_image_reads
from harness.run_report import analyze_run
from tests.checkers.events import Events
from tests.harness_store.histories import write_run
from workloads.config_append import BROKER_READ, TXN

K = "append-0/leader.replication.throttled.replicas"
J = "append-0/follower.replication.throttled.replicas"


def appends(*pairs: tuple[str, str]) -> list[list[Any]]:
    return [["append", k, v] for k, v in pairs]


def read_txn(events: Events, process: int, start: float, end: float, values: dict[str, list[str]]) -> None:
    events.op(
        process,
        TXN,
        start,
        end,
        invoke=[["r", k, None] for k in values],
        value=[["r", k, v] for k, v in values.items()],
        node="c1",
    )


def broker_read(events: Events, process: int, start: float, node: str, offset: int, values: dict) -> None:
    invoke = {"reads": [["r", k, None] for k in values]}
    value = {"metadata_offset": offset, "reads": [["r", k, v] for k, v in values.items()]}
    events.op(process, BROKER_READ, start, start + 4, invoke=invoke, value=value, node=node)


class Scenario:
    """A partition healed at 100 ms; appends and reads on both sides of it; the committed log puts
    T1 (K 1:0, J 2:0) at offset 5, T2 (K 3:0) at 7 and T3 (J 4:0) at 9."""

    def __init__(self) -> None:
        self.events = Events()
        self.entries = [(5, K, "1:0"), (5, J, "2:0"), (7, K, "1:0,3:0"), (9, J, "2:0,4:0")]
        e = self.events
        e.nemesis("start-partition", 0, {"targets": ["c1"]})
        e.op(0, TXN, 10, 20, invoke=appends((K, "1:0"), (J, "2:0")), value=appends((K, "1:0"), (J, "2:0")))
        e.op(1, TXN, 30, 40, invoke=appends((K, "3:0")), value=appends((K, "3:0")))
        read_txn(e, 2, 50, 60, {K: ["1:0", "3:0"], J: ["2:0"]})
        broker_read(e, 3, 62, "b1", 5, {K: ["1:0"], J: ["2:0"]})
        broker_read(e, 4, 66, "b2", 7, {K: ["1:0", "3:0"]})
        e.nemesis("stop-partition", 100)
        e.op(0, TXN, 110, 120, invoke=appends((J, "4:0")), value=appends((J, "4:0")))

    def finish(self, final: dict[str, list[str]] | None = None) -> Events:
        read_txn(self.events, 5, 130, 140, final or {K: ["1:0", "3:0"], J: ["2:0", "4:0"]})
        broker_read(self.events, 6, 150, "b1", 9, {K: ["1:0", "3:0"], J: ["2:0", "4:0"]})
        return self.events

    def timeline(self) -> Timeline:
        return Timeline.build([[-1, 9]], self.entries, end=9, complete=True)


def _anomalies(verdict: Any) -> list[str]:
    return sorted(verdict.details["anomaly_types"]) if "anomaly_types" in verdict.details else []


def test_a_valid_config_append_history_passes_every_checker() -> None:
    scenario = Scenario()
    history = scenario.finish().history()
    assert check_list_append(history, "strict-serializable").valid is True
    assert check_committed_loss(history, "list-append").valid is True
    verdict = check_image_reads(history, scenario.timeline())
    assert verdict.valid is True and verdict.details["verified"] == 3


def test_a_lost_append_is_committed_loss() -> None:
    scenario = Scenario()
    scenario.entries = scenario.entries[:3]  # the log lost T3's record too
    history = scenario.finish({K: ["1:0", "3:0"], J: ["2:0"]}).history()
    loss = check_committed_loss(history, "list-append")
    assert loss.valid is False and loss.details["lost"]["elements"] == [[J, "4:0"]]
    # Elle sees the same thing as a stale read of J after T3 was acknowledged
    assert "G-single-realtime" in check_list_append(history, "strict-serializable").details["violations"]


def test_a_duplicate_element_is_reported() -> None:
    history = Scenario().finish({K: ["1:0", "3:0", "3:0"], J: ["2:0", "4:0"]}).history()
    verdict = check_list_append(history, "strict-serializable")
    assert verdict.valid is False and "duplicate-elements" in verdict.details["violations"]


def test_a_read_showing_an_append_its_own_process_makes_later_is_g1c() -> None:
    # Transactions are all-append or all-read here, so a G1c needs the process order to close it: the
    # read sees 2:0 before 1:0, and 2:0 is appended by the reader's own process afterwards.
    events = Events()
    events.op(1, TXN, 0, 10, invoke=appends((K, "1:0")), value=appends((K, "1:0")))
    read_txn(events, 0, 20, 30, {K: ["2:0", "1:0"]})
    events.op(0, TXN, 40, 50, invoke=appends((K, "2:0")), value=appends((K, "2:0")))
    read_txn(events, 2, 60, 70, {K: ["2:0", "1:0"]})
    verdict = check_list_append(events.history(), "strict-serializable")
    assert verdict.valid is False and "G1c-process" in verdict.details["violations"]
    explanation = verdict.details["anomalies"]["G1c-process"][0]["explanation"]
    assert "2:0" in explanation and "1:0" in explanation


def test_a_stale_read_at_the_controller_is_not_strict_serializable() -> None:
    events = Events()
    events.op(0, TXN, 0, 10, invoke=appends((K, "1:0")), value=appends((K, "1:0")))
    read_txn(events, 1, 20, 30, {K: []})  # began after the append was acknowledged
    read_txn(events, 2, 40, 50, {K: ["1:0"]})
    history = events.history()
    verdict = check_list_append(history, "strict-serializable")
    assert verdict.valid is False and verdict.details["violations"] == ["G-single-realtime"]
    assert check_list_append(history, "serializable").valid is True  # only real time rules it out


def test_a_broker_read_that_is_not_the_image_at_its_offset_is_an_image_mismatch() -> None:
    scenario = Scenario()
    broker_read(scenario.events, 7, 70, "b2", 8, {K: ["1:0"]})  # at 8 the image has K = 1:0,3:0
    verdict = check_image_reads(scenario.finish().history(), scenario.timeline())
    assert verdict.valid is False and "image-mismatch" in _anomalies(verdict)


def test_a_broker_going_backwards_is_an_offset_regression() -> None:
    scenario = Scenario()
    broker_read(scenario.events, 7, 80, "b2", 5, {K: ["1:0"], J: ["2:0"]})  # b2 was at 7 at 66..70
    verdict = check_image_reads(scenario.finish().history(), scenario.timeline())
    assert verdict.valid is False and _anomalies(verdict) == ["offset-regression"]


def _stored(root: Path, events: Events, timeline: Timeline) -> Path:
    run = write_run(root, events.raw(), name="config-append", workload="config-append", recovery_s=1.0)
    lines = [{"intervals": timeline.intervals, "end": timeline.end, "complete": timeline.complete}]
    lines += [{"offset": o, "key": k, "value": v} for o, k, v in Scenario().entries]
    (run.path / "config-timeline.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return run.path


def test_a_stored_config_append_run_gets_the_workload_checkers_and_the_end_of_run_checks(tmp_path: Path) -> None:
    scenario = Scenario()
    analysis = analyze_run(_stored(tmp_path, scenario.finish(), scenario.timeline()))
    verdicts = {v.checker: v for v in analysis.verdicts}
    assert list(verdicts) == ["elle-list-append", "committed-loss", "image-reads", "availability"]
    assert analysis.valid is True, {n: v.valid for n, v in verdicts.items()}
    assert verdicts["elle-list-append"].details["consistency_model"] == "strict-serializable"
    assert verdicts["committed-loss"].details["loss_model"] == "list-append"
    assert verdicts["availability"].details["recovery_window_s"] == 1.0
    assert abs(verdicts["availability"].details["time_to_recover_s"] - 0.02) < 1e-9
    results = json.loads((analysis.run.path / "results.json").read_text())
    assert results["workload"] == "config-append"
    assert results["checks"] == {
        "workload": ["elle-list-append", "committed-loss", "image-reads"],
        "end_of_run": ["availability"],
    }
    report = (analysis.run.path / "report.html").read_text()
    assert "Workload: config-append" in report and "end of run" in report and BROKER_READ in report

    broken = Scenario()
    broker_read(broken.events, 7, 80, "b2", 5, {K: ["1:0"], J: ["2:0"]})
    analysis = analyze_run(_stored(tmp_path, broken.finish(), broken.timeline()))
    assert analysis.valid is False and analysis.exit_code == 1
    assert {v.checker: v.valid for v in analysis.verdicts}["image-reads"] is False
