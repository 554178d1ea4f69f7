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


def test_lost_update_is_g2_item():
    # both read 0 and each wrote over it: each read a version the other overwrote
    h = Builder().txn(0, [w("x", 0)]).concurrent((1, [r("x", 0), w("x", 1)]), (2, [r("x", 0), w("x", 2)])).history()
    verdict = check_rw_register(h, "serializable")
    assert verdict.valid is False
    assert names(verdict) == {"G2-item"}
    assert check_rw_register(h, "read-committed").valid is True


def test_read_skew_is_g_single():
    h = (
        Builder()
        .txn(0, [w("x", 1), w("y", 1)])
        .concurrent((1, [r("x", 1), w("x", 2), w("y", 2)]), (2, [r("x", 1), r("y", 2)]))
        .history()
    )
    verdict = check_rw_register(h, "serializable")
    assert verdict.valid is False
    assert "G-single" in names(verdict)
    text = verdict.details["anomalies"]["G-single"][0]["explanation"]
    assert "read x = 1, which" in text and "write of 2 overwrote" in text
    assert check_rw_register(h, "read-committed").valid is True


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
    assert names(verdict) == {"G1a", "G1b", "garbage-read"}


def test_g1c():
    h = Builder().concurrent((0, [w("x", 1), r("y", 1)]), (1, [w("y", 1), r("x", 1)])).history()
    assert "G1c" in names(check_rw_register(h, "read-committed"))


def test_internal():
    h = Builder().txn(0, [w("x", 1), r("x", 2)]).history()
    assert names(check_rw_register(h)) == {"internal"}


def test_stale_read_needs_an_assumption_to_be_seen():
    h = Builder().txn(0, [w("x", 1)]).txn(1, [w("x", 2)]).txn(2, [r("x", 1)]).history()
    # without an assumption the order of 1 and 2 is unknown, so reading 1 at the end is fine
    assert check_rw_register(h, "strict-serializable").valid is True
    verdict = check_rw_register(h, "strict-serializable", linearizable_keys=True)
    assert verdict.valid is False
    assert names(verdict) == {"G-single-realtime"}
    assert "assuming linearizable-keys" in verdict.details["anomalies"]["G-single-realtime"][0]["explanation"]


def test_sequential_keys_uses_process_order():
    h = Builder().txn(0, [w("x", 1)]).txn(0, [w("x", 2)]).txn(0, [r("x", 1)]).history()
    assert check_rw_register(h, "strong-session-serializable").valid is True
    verdict = check_rw_register(h, "strong-session-serializable", sequential_keys=True)
    assert verdict.valid is False
    assert names(verdict) == {"G-single-process"}


def test_repeated_value_is_an_error():
    h = Builder().txn(0, [w("x", 1)]).txn(1, [w("x", 1)]).history()
    with pytest.raises(HistoryError, match="unique"):
        check_rw_register(h)
