"""Committed loss for every workload's data model: list-append, register and set; both verdicts each."""

from __future__ import annotations

import pytest

from checkers.committed_loss import check_committed_loss
from checkers.verdict import UNKNOWN
from tests.checkers.events import Events

K, J = "t/a", "t/b"


def _appends() -> Events:
    """Two acknowledged append transactions over two keys, and one that failed."""
    events = Events()
    events.op(0, "txn", 0, 10, invoke=[["append", K, "1:0"], ["append", J, "2:0"]])
    events.op(1, "txn", 20, 30, invoke=[["append", K, "3:0"]])
    events.op(2, "txn", 40, 50, invoke=[["append", J, "4:0"]], kind="fail")
    return events


def _read(events: Events, process: int, at: float, values: dict[str, list[str]]) -> Events:
    invoke = [["r", k, None] for k in values]
    return events.op(process, "txn", at, at + 5, invoke=invoke, value=[["r", k, v] for k, v in values.items()])


def test_list_append_with_every_acknowledged_element_in_the_final_read_is_valid() -> None:
    events = _read(_appends(), 3, 100, {K: ["1:0", "3:0"], J: ["2:0"]})
    verdict = check_committed_loss(events.history(), "list-append")
    assert verdict.valid is True
    assert verdict.details["acknowledged_count"] == 3 and verdict.details["lost-count"] == 0
    assert verdict.details["keys"][K] == {"valid": True, "acknowledged": 2, "reads": 1, "lost": 0}


def test_list_append_a_lost_append_names_its_key_and_element() -> None:
    events = _read(_appends(), 3, 100, {K: ["1:0"], J: ["2:0"]})
    verdict = check_committed_loss(events.history(), "list-append")
    assert verdict.valid is False
    assert verdict.details["lost"] == {"count": 1, "elements": [[K, "3:0"]]}
    assert verdict.details["lost-count"] == 1


def test_list_append_an_element_missing_then_back_is_stale_not_lost() -> None:
    events = _read(_appends(), 3, 100, {K: ["1:0"]})
    _read(events, 4, 200, {K: ["1:0", "3:0"], J: ["2:0"]})
    verdict = check_committed_loss(events.history(), "list-append")
    assert verdict.valid is True
    assert verdict.details["stale"] == {"count": 1, "elements": [[K, "3:0"]]}


def test_list_append_a_failed_append_that_shows_up_is_failed_present() -> None:
    events = _read(_appends(), 3, 100, {K: ["1:0", "3:0"], J: ["2:0", "4:0"]})
    verdict = check_committed_loss(events.history(), "list-append")
    assert verdict.valid is False
    assert verdict.details["failed_present"]["elements"] == [[J, "4:0"]]
    assert verdict.details["anomalies"] == {"failed_present": [[J, "4:0"]]}


def test_list_append_reads_at_brokers_are_not_used() -> None:
    events = _appends()
    events.op(
        3,
        "read-broker",
        100,
        105,
        invoke={"reads": [["r", K, None]]},
        value={"metadata_offset": 1, "reads": [["r", K, []]]},
    )
    verdict = check_committed_loss(events.history(), "list-append")
    assert verdict.valid == UNKNOWN and verdict.details["read_count"] == 0


def _register() -> Events:
    events = Events()
    events.op(0, "write", 0, 10, invoke=1, key="k")
    events.op(1, "write", 20, 30, invoke=2, key="k")
    return events


def test_register_final_value_from_the_last_write_is_valid() -> None:
    events = _register().op(2, "read", 100, 105, value=2, key="k")
    verdict = check_committed_loss(events.history(), "register")
    assert verdict.valid is True and verdict.details["lost-count"] == 0


def test_register_final_value_older_than_an_acknowledged_write_loses_it() -> None:
    events = _register().op(2, "read", 100, 105, value=1, key="k")
    verdict = check_committed_loss(events.history(), "register")
    assert verdict.valid is False
    lost = verdict.details["lost"]["elements"]
    assert [(x["key"], x["value"], x["final_value"]) for x in lost] == [("k", 2, 1)]


def test_register_nil_after_acknowledged_writes_loses_them_all() -> None:
    events = _register().op(2, "read", 100, 105, value=None, key="k")
    verdict = check_committed_loss(events.history(), "register")
    assert verdict.valid is False and verdict.details["lost-count"] == 2


def test_register_concurrent_writes_may_end_either_way() -> None:
    events = Events()
    events.op(0, "write", 0, 50, invoke=1, key="k")
    events.op(1, "write", 10, 40, invoke=2, key="k")
    events.op(2, "read", 100, 105, value=1, key="k")
    assert check_committed_loss(events.history(), "register").valid is True


def test_register_an_indeterminate_writer_may_land_last() -> None:
    events = Events()
    events.op(0, "write", 0, None, invoke=1, key="k")  # never completed: may take effect any time
    events.op(1, "write", 20, 30, invoke=2, key="k")
    events.op(2, "read", 100, 105, value=1, key="k")
    assert check_committed_loss(events.history(), "register").valid is True


def test_register_values_nobody_wrote_or_only_a_failed_write_wrote() -> None:
    garbage = _register().op(2, "read", 100, 105, value=7, key="k")
    verdict = check_committed_loss(garbage.history(), "register")
    assert verdict.valid is False and verdict.details["unexpected"]["count"] == 1
    failed = Events().op(0, "write", 0, 10, invoke=1, key="k", kind="fail").op(1, "read", 20, 30, value=1, key="k")
    verdict = check_committed_loss(failed.history(), "register")
    assert verdict.valid is False and verdict.details["failed_present"]["count"] == 1


def test_register_without_reads_is_unknown() -> None:
    assert check_committed_loss(_register().history(), "register").valid == UNKNOWN


def test_set_model_is_set_full() -> None:
    events = Events().op(0, "add", 0, 10, invoke=1).op(1, "read", 20, 30, value=[])
    verdict = check_committed_loss(events.history(), "set")
    assert verdict.valid is False and verdict.details["lost-count"] == 1
    with pytest.raises(ValueError, match="unknown loss model"):
        check_committed_loss(events.history(), "bank")
