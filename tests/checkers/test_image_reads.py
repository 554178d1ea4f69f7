"""Image reads: broker answers judged at the level they promise (the committed image at their offset,
never backwards), with and without a committed-value timeline."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from checkers.history import HistoryError
from checkers.image_reads import Timeline, TimelineError, check_from_args, check_image_reads, load_timeline
from checkers.verdict import UNKNOWN
from tests.checkers.events import Events

K, J = "t/a", "t/b"

# K gets "1:0" at offset 5 and "1:0,2:0" at offset 9; J gets "3:0" at offset 7
TIMELINE = Timeline.build([[-1, 12]], [(5, K, "1:0"), (9, K, "1:0,2:0"), (7, J, "3:0")], end=12, complete=True)


def _read(events: Events, process: int, start: float, end: float, node: str, offset: int, values: dict) -> Events:
    invoke = {"reads": [["r", k, None] for k in values]}
    value = {"metadata_offset": offset, "reads": [["r", k, v] for k, v in values.items()]}
    return events.op(process, "read-broker", start, end, invoke=invoke, value=value, node=node)


def _valid() -> Events:
    events = Events()
    _read(events, 0, 0, 5, "b1", 4, {K: [], J: []})
    _read(events, 1, 10, 15, "b2", 6, {K: ["1:0"], J: []})
    _read(events, 0, 20, 25, "b1", 8, {K: ["1:0"], J: ["3:0"]})
    _read(events, 1, 30, 35, "b2", 12, {K: ["1:0", "2:0"], J: ["3:0"]})
    return events


def test_answers_equal_to_the_committed_image_at_their_offsets_are_valid() -> None:
    verdict = check_image_reads(_valid().history(), TIMELINE)
    assert verdict.valid is True
    assert (verdict.details["reads"], verdict.details["verified"], verdict.details["unverified"]) == (4, 4, 0)
    assert verdict.details["nodes"] == ["b1", "b2"]


def test_an_answer_that_is_not_the_image_at_its_offset_is_an_image_mismatch() -> None:
    events = _valid()
    _read(events, 2, 40, 45, "b1", 10, {K: ["1:0"]})  # 2:0 was committed at 9: the image at 10 has it
    verdict = check_image_reads(events.history(), TIMELINE)
    assert verdict.valid is False and verdict.details["anomaly_types"] == ["image-mismatch"]
    example = verdict.details["anomalies"]["image-mismatch"][0]
    assert example["key"] == K and example["expected"] == ["1:0", "2:0"] and example["read"]["metadata_offset"] == 10


def test_a_broker_going_backwards_is_an_offset_regression() -> None:
    events = _valid()
    _read(events, 0, 40, 45, "b2", 6, {K: ["1:0"]})  # b2 answered at 12 (completed at 35) before
    verdict = check_image_reads(events.history(), TIMELINE)
    assert verdict.valid is False and verdict.details["anomaly_types"] == ["offset-regression"]
    example = verdict.details["anomalies"]["offset-regression"][0]
    assert (example["node"], example["earlier"]["metadata_offset"], example["later"]["metadata_offset"]) == (
        "b2",
        12,
        6,
    )


def test_concurrent_reads_of_one_broker_may_come_back_in_any_order() -> None:
    events = Events()
    _read(events, 0, 0, 50, "b1", 9, {K: ["1:0", "2:0"]})
    _read(events, 1, 10, 20, "b1", 6, {K: ["1:0"]})  # overlaps the first: no real-time order
    assert check_image_reads(events.history(), TIMELINE).valid is True


def test_different_brokers_may_be_at_different_offsets() -> None:
    events = Events()
    _read(events, 0, 0, 5, "b1", 12, {K: ["1:0", "2:0"]})
    _read(events, 1, 10, 15, "b2", 4, {K: []})  # later, but another broker: it may lag
    assert check_image_reads(events.history(), TIMELINE).valid is True


def test_history_only_checks_work_without_a_timeline() -> None:
    events = Events()
    _read(events, 0, 0, 5, "b1", 8, {K: ["1:0"]})
    _read(events, 1, 10, 15, "b2", 8, {K: ["9:0"]})  # the same offset, another answer
    verdict = check_image_reads(events.history(), None)
    assert verdict.valid is False and verdict.details["anomaly_types"] == ["offset-disagreement"]
    shrinking = Events()
    _read(shrinking, 0, 0, 5, "b1", 9, {K: ["1:0", "2:0"]})
    _read(shrinking, 1, 10, 15, "b2", 11, {K: ["2:0"]})  # a higher offset that is no extension
    verdict = check_image_reads(shrinking.history(), None)
    assert verdict.valid is False and verdict.details["anomaly_types"] == ["non-monotonic-image"]
    assert check_image_reads(_valid().history(), None).valid == UNKNOWN  # nothing to check them against


def test_an_offset_past_every_committed_log_is_a_violation_only_when_the_dumps_are_complete() -> None:
    events = _valid()
    _read(events, 2, 40, 45, "b1", 20, {K: ["1:0", "2:0"]})
    verdict = check_image_reads(events.history(), TIMELINE)
    assert verdict.valid is False and verdict.details["anomaly_types"] == ["offset-beyond-log"]
    partial = Timeline.build(TIMELINE_INTERVALS, TIMELINE_ENTRIES, end=12, complete=False)
    verdict = check_image_reads(events.history(), partial)
    assert verdict.valid is True and verdict.details["unverified"] == 1


TIMELINE_INTERVALS = [[-1, 12]]
TIMELINE_ENTRIES = [(5, K, "1:0"), (9, K, "1:0,2:0"), (7, J, "3:0")]


def test_intervals_start_from_a_whole_state_and_offsets_between_them_are_not_covered() -> None:
    # known 3..6 (the state at 3: K = "1:0") and 10..12 (at 10: K = "1:0,2:0", J = "3:0")
    timeline = Timeline.build(
        [[3, 6], [10, 12]], [(3, K, "1:0"), (10, K, "1:0,2:0"), (10, J, "3:0"), (12, J, "3:0,4:0")], end=12
    )
    assert timeline.covers(2) is None and timeline.covers(8) is None and timeline.covers(11) == 1
    assert timeline.value(0, J, 5) is None and timeline.value(1, J, 11) == "3:0"
    events = Events()
    _read(events, 0, 0, 5, "b1", 4, {K: ["1:0"], J: []})
    _read(events, 1, 10, 15, "b2", 8, {K: ["1:0"]})
    _read(events, 0, 20, 25, "b1", 12, {K: ["1:0", "2:0"], J: ["3:0", "4:0"]})
    verdict = check_image_reads(events.history(), timeline)
    assert verdict.valid is True and (verdict.details["verified"], verdict.details["unverified"]) == (2, 1)


def test_registers_compare_as_integers() -> None:
    timeline = Timeline.build([[-1, 5]], [(2, K, "17")], end=5)
    events = Events()
    _read(events, 0, 0, 5, "b1", 1, {K: None})
    _read(events, 0, 10, 15, "b1", 3, {K: 17})
    assert check_image_reads(events.history(), timeline, value_kind="int").valid is True
    _read(events, 0, 20, 25, "b1", 4, {K: 16})
    assert check_image_reads(events.history(), timeline, value_kind="int").valid is False


def test_no_image_reads_is_vacuously_valid_and_bad_values_are_errors() -> None:
    verdict = check_image_reads(Events().op(0, "txn", 0, 1, invoke=[]).history(), TIMELINE)
    assert verdict.valid is True and "nothing to check" in verdict.details["reason"]
    bad = Events().op(0, "read-broker", 0, 1, invoke={}, value={"reads": []}, node="b1")
    with pytest.raises(HistoryError, match="metadata_offset"):
        check_image_reads(bad.history(), TIMELINE)


def test_timeline_files_load_and_bad_ones_name_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "config-timeline.jsonl"
    lines = [{"intervals": [[-1, 12]], "end": 12, "complete": True}]
    lines += [{"offset": o, "key": k, "value": v} for o, k, v in TIMELINE_ENTRIES]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    loaded = load_timeline(path)
    assert loaded.complete and loaded.end == 12 and loaded.value(0, K, 10) == "1:0,2:0"
    args = SimpleNamespace(timeline=None, dumps=str(tmp_path), history=str(tmp_path / "h.jsonl"))
    assert check_from_args(_valid().history(), args).valid is True
    path.write_text('{"intervals": [[-1, 3]]}\n{"offset": "x", "key": "k"}\n')
    with pytest.raises(TimelineError, match=r"config-timeline.jsonl:2: an entry needs an integer 'offset'"):
        load_timeline(path)
    missing = SimpleNamespace(timeline=None, dumps=str(tmp_path / "none"), history=str(tmp_path / "h.jsonl"))
    verdict = check_from_args(_valid().history(), missing)
    assert verdict.valid == UNKNOWN and "timeline_missing" in verdict.details
