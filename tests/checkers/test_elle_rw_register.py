"""The rw-register checker on hand-built histories."""

from __future__ import annotations

import pytest

from checkers.elle import check_rw_register
from checkers.history import HistoryError
from tests.checkers.txn_builder import Builder, r, w


def names(verdict) -> set[str]:
    return set(verdict.details["anomaly_types"])


def test_serial_history_is_valid():
    h = (
        Builder()
        .txn(0, [r("x", None), w("x", 1)])
        .txn(1, [r("x", 1), w("x", 2), w("y", 1)])
        .txn(0, [r("x", 2), r("y", 1)])
        .history()
    )
    verdict = check_rw_register(h, "strict-serializable", linearizable_keys=True)
    assert verdict.valid is True, verdict.details
    assert verdict.details["assumptions"]["linearizable_keys"] is True


def test_write_skew_is_g2_item():
    h = Builder().concurrent((0, [r("x", None), w("y", 1)]), (1, [r("y", None), w("x", 1)])).history()
    verdict = check_rw_register(h, "serializable")
    assert verdict.valid is False
    assert names(verdict) == {"G2-item"}
    assert "read x = nil" in verdict.details["anomalies"]["G2-item"][0]["explanation"]
    assert check_rw_register(h, "snapshot-isolation").valid is True


def test_lost_update_is_found_directly_and_as_g2_item_with_wfr_keys():
    # both read 0 and each wrote over it: each read a version the other overwrote
    h = Builder().txn(0, [w("x", 0)]).concurrent((1, [r("x", 0), w("x", 1)]), (2, [r("x", 0), w("x", 2)])).history()
    verdict = check_rw_register(h, "serializable")
    assert verdict.valid is False
    assert names(verdict) == {"lost-update"}  # no version order without an assumption
    assert names(check_rw_register(h, "serializable", wfr_keys=True)) == {"G2-item", "lost-update"}
    assert check_rw_register(h, "read-committed").valid is True
    assert check_rw_register(h, "cursor-stability").valid is False
    assert check_rw_register(h, "snapshot-isolation").valid is False


def test_read_skew_is_g_single():
    h = (
        Builder()
        .txn(0, [w("x", 1), w("y", 1)])
        .concurrent((1, [r("x", 1), w("x", 2), w("y", 2)]), (2, [r("x", 1), r("y", 2)]))
        .history()
    )
    assert check_rw_register(h, "serializable").valid is True  # 1 < 2 needs wfr-keys
    verdict = check_rw_register(h, "serializable", wfr_keys=True)
    assert verdict.valid is False
    assert "G-single" in names(verdict)
    text = verdict.details["anomalies"]["G-single"][0]["explanation"]
    assert "read x = 1, which" in text and "write of 2 overwrote" in text
    assert check_rw_register(h, "read-committed", wfr_keys=True).valid is True


def test_g1a_g1b_and_garbage():
    h = (
        Builder()
        .txn(0, [w("x", 1)], kind="fail")
        .txn(1, [w("y", 1), w("y", 2)])
        .txn(2, [r("x", 1), r("y", 1), r("z", 7)])
        .history()
    )
    verdict = check_rw_register(h, "read-committed")
    assert verdict.valid is False
    assert names(verdict) == {"G1a", "G1b", "unwritten-read"}


def test_g1c():
    h = Builder().concurrent((0, [w("x", 1), r("y", 1)]), (1, [w("y", 1), r("x", 1)])).history()
    assert "G1c" in names(check_rw_register(h, "read-committed"))


def test_internal():
    h = Builder().txn(0, [w("x", 1), r("x", 2)]).history()
    assert check_rw_register(h).details["violations"] == ["internal"]


def test_stale_read_needs_an_assumption_to_be_seen():
    h = Builder().txn(0, [w("x", 1)]).txn(1, [w("x", 2)]).txn(2, [r("x", 1)]).history()
    # without an assumption the order of 1 and 2 is unknown, so reading 1 at the end is fine
    assert check_rw_register(h, "strict-serializable").valid is True
    verdict = check_rw_register(h, "strict-serializable", linearizable_keys=True)
    assert verdict.valid is False
    # as in Elle: real-time order says 1 < 2 < 1, so that source is left out and reported
    assert names(verdict) == {"cyclic-versions"}
    assert verdict.details["anomalies"]["cyclic-versions"][0]["sources"] == ["initial-state", "linearizable-keys"]
    assert verdict.details["version_sources"] == ["initial-state"]
    assert check_rw_register(h, "read-uncommitted", linearizable_keys=True).valid is False


def test_sequential_keys_uses_process_order():
    h = Builder().txn(0, [w("x", 1)]).txn(0, [w("x", 2)]).txn(0, [r("x", 1)]).history()
    assert check_rw_register(h, "strong-session-serializable").valid is True
    verdict = check_rw_register(h, "strong-session-serializable", sequential_keys=True)
    assert verdict.valid is False
    assert names(verdict) == {"cyclic-versions"}


def test_read_your_writes_with_sequential_keys():
    # Elle's case: a process writes x and then reads nil
    h = Builder().txn(0, [w("x", 1)]).txn(0, [r("x", None)]).history()
    verdict = check_rw_register(h, "strong-session-serializable", sequential_keys=True)
    assert names(verdict) == {"G-single-process", "cyclic-versions"}
    assert verdict.details["not"] == ["read-uncommitted"]


def test_repeated_value_is_an_error():
    h = Builder().txn(0, [w("x", 1)]).txn(1, [w("x", 1)]).history()
    with pytest.raises(HistoryError, match="unique"):
        check_rw_register(h)
