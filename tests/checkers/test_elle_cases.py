"""Elle's published cases (its README, paper and documented examples), written here as small literal
histories, each with Elle's verdict and anomaly types; both verdicts for every anomaly class."""

from __future__ import annotations

import pytest

from checkers.elle import check_list_append, check_rw_register
from tests.checkers.txn_builder import Builder, append, r, w


def names(verdict) -> set[str]:
    return set(verdict.details["anomaly_types"])


def together(*txns) -> Builder:
    return Builder().concurrent(*((i, mops) for i, mops in enumerate(txns)))


# --- list-append -----------------------------------------------------------------------------------


def test_g0_write_cycle():
    h = together([append("x", 1), append("y", 1)], [append("x", 2), append("y", 2)]).txn(
        9, [r("x", [1, 2]), r("y", [2, 1])]
    )
    verdict = check_list_append(h.history(), "read-uncommitted")
    assert (verdict.valid, names(verdict), verdict.details["not"]) == (False, {"G0"}, ["read-uncommitted"])
    clean = together([append("x", 1), append("y", 1)], [append("x", 2), append("y", 2)]).txn(
        9, [r("x", [1, 2]), r("y", [1, 2])]
    )
    assert check_list_append(clean.history(), "strict-serializable").valid is True


def test_g1c_circular_information_flow():
    # Elle's: T1 appends x 1 and reads y = [1]; T2 appends x 2 and y 1; x is [1 2]
    h = together([append("x", 1), r("y", [1])], [append("x", 2), append("y", 1)]).txn(9, [r("x", [1, 2])])
    verdict = check_list_append(h.history(), "read-committed")
    assert (verdict.valid, names(verdict), verdict.details["not"]) == (False, {"G1c"}, ["read-committed"])
    assert check_list_append(h.history(), "read-uncommitted").valid is True


def test_g2_anti_dependency_cycle_and_snapshot_isolation():
    # Elle's: each reads the empty state of the key the other appends to
    h = together([r("x", []), append("y", 1)], [r("y", []), append("x", 1)]).txn(9, [r("x", [1]), r("y", [1])])
    verdict = check_list_append(h.history(), "serializable")
    assert (verdict.valid, names(verdict)) == (False, {"G2-item"})
    assert verdict.details["not"] == ["repeatable-read"]
    assert check_list_append(h.history(), "snapshot-isolation").valid is True


def test_g_single_read_skew():
    h = together([append("x", 1), append("y", 1)], [r("x", []), r("y", [1])])
    verdict = check_list_append(h.history(), "snapshot-isolation")
    assert (verdict.valid, names(verdict)) == (False, {"G-single"})
    assert verdict.details["not"] == ["consistent-view", "repeatable-read"]  # Elle's boundary for G-single
    assert check_list_append(h.history(), "read-committed").valid is True
    assert check_list_append(h.history(), "monotonic-atomic-view").valid is True


def test_g_nonadjacent_two_rw_edges_apart():
    # T1 -rw-> T2 -wr-> T3 -rw-> T4 -wr-> T1: two anti-dependencies, never adjacent
    h = together(
        [r("x", []), r("v", [1])],
        [append("x", 1), append("y", 1)],
        [r("y", [1]), r("z", [])],
        [append("z", 1), append("v", 1)],
    )
    verdict = check_list_append(h.history(), "snapshot-isolation")
    assert (verdict.valid, names(verdict)) == (False, {"G-nonadjacent"})
    example = verdict.details["anomalies"]["G-nonadjacent"][0]
    assert sorted(s["rel"] for s in example["steps"]) == ["rw", "rw", "wr", "wr"]
    assert check_list_append(h.history(), "read-committed").valid is True
    assert check_list_append(h.history(), "repeatable-read").valid is False  # a G2-item too


def test_g1a_aborted_read_and_dirty_update():
    h = Builder().txn(0, [append("x", 1)], kind="fail").txn(1, [append("x", 2)]).txn(2, [r("x", [1, 2])])
    verdict = check_list_append(h.history(), "read-committed")
    assert (verdict.valid, names(verdict)) == (False, {"G1a", "dirty-update"})
    text = verdict.details["anomalies"]["dirty-update"][0]["explanation"]
    assert "failed txn at index 0 appended 1" in text
    assert check_list_append(h.history(), "read-uncommitted").valid is True


def test_g1b_intermediate_read():
    h = Builder().txn(0, [append("x", 1), append("x", 2)]).txn(1, [r("x", [1])]).txn(2, [r("x", [1, 2])])
    verdict = check_list_append(h.history(), "read-committed")
    assert (verdict.valid, names(verdict)) == (False, {"G1b", "G-single"})  # T1 also missed T0's 2
    # reading one's own intermediate append is fine
    own = Builder().txn(0, [append("x", 1), r("x", [1]), append("x", 2)]).history()
    assert check_list_append(own, "serializable").details["violations"] == []


@pytest.mark.parametrize(
    "mops",
    [
        [r("x", [0, 1]), append("x", 1)],  # Elle's "future read external"
        [append("x", 1), r("x", [0, 1]), append("x", 0), append("x", 3)],  # Elle's "future read internal"
    ],
)
def test_future_read_of_own_later_append(mops):
    h = Builder().txn(1, [append("x", 0) if mops[0][0] == "r" else append("y", 0)]).txn(0, mops).history()
    verdict = check_list_append(h, "read-committed")
    assert verdict.valid is False and "future-read" in names(verdict)
    # G1c-class: read committed and up; one transaction alone makes no graph, so Elle says unknown
    assert check_list_append(h, "read-uncommitted").details["violations"] == []


def test_future_read_across_transactions_is_a_realtime_g1c():
    h = Builder().txn(0, [r("x", [1])]).txn(1, [append("x", 1)]).history()
    assert check_list_append(h, "read-committed").valid is True  # no real time in read committed
    assert "future-read-realtime" in names(check_list_append(h, "strong-read-committed"))
    assert check_list_append(h, "strong-read-committed").valid is False
    assert check_list_append(h, "strict-serializable").valid is False


def test_internal_is_forbidden_from_read_atomic_up():
    # Elle's "read-append-read" cases: the second read must be the first plus the append
    h = Builder().txn(0, [append("x", 1), append("x", 2)]).txn(1, [r("x", [1, 2]), append("x", 3), r("x", [1, 2])])
    verdict = check_list_append(h.history(), "serializable")
    assert verdict.valid is False and "internal" in names(verdict)
    assert verdict.details["anomalies"]["internal"][0]["expected"] == "[1 2 3]"
    assert check_list_append(h.history(), "read-committed").valid is True


def test_duplicate_elements_and_incompatible_orders():
    dup = Builder().txn(0, [append("x", 1)]).txn(1, [r("x", [1, 1])]).history()
    assert check_list_append(dup, "read-uncommitted").details["violations"] == ["duplicate-elements"]
    assert check_list_append(dup, "read-uncommitted").valid is False
    orders = together([append("x", 1)], [append("x", 2)]).txn(8, [r("x", [1, 2])]).txn(9, [r("x", [2, 1])])
    assert "incompatible-order" in names(check_list_append(orders.history(), "read-committed"))
    assert check_list_append(orders.history(), "read-committed").valid is False


def test_lost_update_list_append():
    h = (
        Builder()
        .txn(0, [append("x", 1)])
        .concurrent((1, [r("x", [1]), append("x", 2)]), (2, [r("x", [1]), append("x", 3)]))
    )
    h.txn(3, [r("x", [1, 2, 3])])
    verdict = check_list_append(h.history(), "cursor-stability")
    assert verdict.valid is False and "lost-update" in names(verdict)
    assert check_list_append(h.history(), "read-committed").valid is True


def test_realtime_and_process_variants():
    # Elle's README: a process does not see its own earlier append (G-single-process); across
    # processes the same pattern needs real time (G-single-realtime)
    own = Builder().txn(0, [append("x", 1)]).txn(0, [r("x", [])]).history()
    session = check_list_append(own, "strong-session-snapshot-isolation")
    assert (session.valid, names(session)) == (False, {"G-single-process"})
    assert session.details["not"] == ["strong-session-snapshot-isolation"]
    assert check_list_append(own, "snapshot-isolation").valid is True
    other = Builder().txn(0, [append("x", 1)]).txn(1, [r("x", [])]).history()
    strong = check_list_append(other, "strong-snapshot-isolation")
    assert (strong.valid, names(strong)) == (False, {"G-single-realtime"})
    assert check_list_append(other, "strong-session-snapshot-isolation").valid is True


def test_g0_process_with_strong_session_read_uncommitted():
    # process 0 appends x 2 after x 1 was appended by... itself, yet x reads [2 1]
    h = Builder().txn(0, [append("x", 1)]).txn(0, [append("x", 2)]).txn(1, [r("x", [2, 1])]).history()
    verdict = check_list_append(h, "strong-session-read-uncommitted")
    assert (verdict.valid, names(verdict)) == (False, {"G0-process"})
    assert check_list_append(h, "read-uncommitted").valid is True


# --- rw-register -----------------------------------------------------------------------------------


def test_rw_register_g0_under_read_uncommitted_with_sequential_keys():
    # x: process 0 wrote 1 then read 2; y: process 1 wrote 1 then read 2 -> T0 < T1 < T0 on ww alone
    h = (
        Builder()
        .concurrent((0, [w("x", 1), w("y", 2)]), (1, [w("x", 2), w("y", 1)]))
        .concurrent((0, [r("x", 2)]), (1, [r("y", 2)]))
        .history()
    )
    verdict = check_rw_register(h, "read-uncommitted", sequential_keys=True)
    assert (verdict.valid, names(verdict)) == (False, {"G0"})
    assert check_rw_register(h, "read-uncommitted").valid is True


def test_rw_register_wfr_keys():
    # each read the other's value and then overwrote its own key... a G1c needs no assumption
    h = together([w("x", 1), r("y", 1)], [w("y", 1), r("x", 1)]).history()
    assert "G1c" in names(check_rw_register(h, "read-committed"))
    skew = (
        Builder()
        .txn(0, [w("x", 1), w("y", 1)])
        .concurrent((1, [r("x", 1), w("x", 2), w("y", 2)]), (2, [r("x", 1), r("y", 2)]))
    )
    assert check_rw_register(skew.history(), "snapshot-isolation").valid is True
    verdict = check_rw_register(skew.history(), "snapshot-isolation", wfr_keys=True)
    assert (verdict.valid, names(verdict)) == (False, {"G-single"})
    assert "assuming wfr-keys" in verdict.details["anomalies"]["G-single"][0]["explanation"]


def test_rw_register_linearizable_keys_orders_writes_in_real_time():
    # Elle's "linearizable keys" case: 1 then 2 in real time, and a concurrent reader saw 2 then 1
    h = Builder().txn(0, [w("x", 1)]).txn(1, [w("x", 2)]).txn(2, [r("x", 2), w("y", 1)]).txn(3, [r("y", 1), r("x", 1)])
    verdict = check_rw_register(h.history(), "serializable", linearizable_keys=True)
    assert verdict.valid is False
    assert check_rw_register(h.history(), "serializable").valid is True


def test_rw_register_g1a_g1b():
    h = Builder().txn(0, [w("x", 1)], kind="fail").txn(1, [w("y", 1), w("y", 2)]).txn(2, [r("x", 1), r("y", 1)])
    verdict = check_rw_register(h.history(), "read-committed")
    assert (verdict.valid, names(verdict)) == (False, {"G1a", "G1b"})
    assert check_rw_register(h.history(), "read-uncommitted").valid is True


def test_an_info_transaction_may_take_effect_after_later_ones():
    # the append's outcome is unknown at index 1; a reader after that misses it, a later one sees it
    b = Builder()
    b.invoke(0, [append("x", 1)])
    b.complete(0, "info")
    b.txn(1, [r("x", [])]).txn(2, [r("x", [1])])
    verdict = check_list_append(b.history(), "strict-serializable")
    assert verdict.valid is True, verdict.details["anomaly_types"]
    rw = Builder()
    rw.invoke(0, [w("x", 1)])
    rw.complete(0, "info")
    rw.txn(1, [r("x", None)]).txn(2, [r("x", 1)])
    assert check_rw_register(rw.history(), "strict-serializable", linearizable_keys=True).valid is True


def test_an_unread_append_of_an_info_transaction_that_happened_still_counts():
    # the info transaction's y append was seen, so it happened, and its x append with it
    b = Builder()
    b.invoke(0, [append("x", 1), append("y", 1)])
    b.complete(0, "info")
    b.txn(1, [r("x", []), r("y", [1])])
    verdict = check_list_append(b.history(), "serializable")
    assert (verdict.valid, names(verdict)) == (False, {"G-single"})
    assert "outcome unknown" in verdict.details["anomalies"]["G-single"][0]["explanation"]


# --- rw-register: Elle's checker cases ---------------------------------------------------------------


def test_rw_register_read_then_read_what_was_written_has_cyclic_versions():
    # w x 1, then r x 2, then r x 1, one after another: real time says 1 < 2 < 1
    h = Builder().txn(0, [w("x", 1)]).txn(0, [r("x", 2)]).txn(0, [r("x", 1)]).history()
    verdict = check_rw_register(h, "strict-serializable", linearizable_keys=True)
    assert verdict.valid is False and verdict.details["violations"] == ["cyclic-versions"]
    assert verdict.details["not"] == ["read-uncommitted"]
    assert verdict.details["anomalies"]["cyclic-versions"][0]["sources"] == ["initial-state", "linearizable-keys"]


def test_rw_register_g0_needs_sequential_keys():
    # Elle's: T1 writes x 1 y 2, T2 writes x 2 y 1, then each process reads the other's final value
    h = (
        Builder()
        .txn(0, [w("x", 1), w("y", 2)])
        .txn(1, [w("x", 2), w("y", 1)])
        .txn(0, [r("x", 2)])
        .txn(1, [r("y", 2)])
        .history()
    )
    assert check_rw_register(h, "read-uncommitted").valid is True  # nothing orders the versions
    verdict = check_rw_register(h, "read-uncommitted", sequential_keys=True)
    assert (verdict.valid, verdict.details["violations"], verdict.details["not"]) == (
        False,
        ["G0"],
        ["read-uncommitted"],
    )


def test_rw_register_g1c():
    h = Builder().txn(0, [w("x", 1), r("y", 1)]).txn(0, [w("y", 1), r("x", 1)]).history()
    assert check_rw_register(h, "read-uncommitted").valid is True
    for model in ("read-committed", "serializable"):
        verdict = check_rw_register(h, model)
        assert (verdict.valid, verdict.details["violations"], verdict.details["not"]) == (
            False,
            ["G1c"],
            ["read-committed"],
        )


def test_rw_register_g2_item_with_linearizable_keys_over_an_unwritten_initial_state():
    # x = y = 1 before the history (nobody writes 1); two transactions each read one and write the other
    b = Builder().txn(0, [r("x", 1), r("y", 1)])
    b.invoke(1, [r("x", 1), w("y", 2)])
    b.invoke(2, [r("y", 1), w("x", 2)])
    b.complete(2)
    b.complete(1)
    h = b.history()
    assert check_rw_register(h, "read-committed", linearizable_keys=True).valid is True
    verdict = check_rw_register(h, "serializable", linearizable_keys=True)
    assert verdict.valid is False and verdict.details["violations"] == ["G2-item"]
    assert "unwritten-read" in verdict.details["anomaly_types"]  # reported, forbidden by no model


def test_rw_register_internal():
    h = Builder().txn(0, [r("x", 1), r("x", 2)]).history()
    verdict = check_rw_register(h, "serializable")
    assert verdict.valid is False and verdict.details["violations"] == ["internal"]
    assert verdict.details["not"] == ["read-atomic"]


def test_rw_register_initial_state_precedes_every_version():
    # T1 reads x = nil and y = 1, concurrently T2 writes y 1 and x 2: T1 saw T2's y, not its x
    b = Builder()
    b.invoke(0, [r("x", None), r("y", 1)])
    b.invoke(1, [w("y", 1), w("x", 2)])
    b.complete(1)
    b.complete(0)
    verdict = check_rw_register(b.history(), "serializable")
    assert verdict.valid is False and verdict.details["violations"] == ["G-single"]


def test_rw_register_wfr_keys_case():
    # T1 reads y 1 and writes x 1 and y 2; T2 reads x 1 (from T1) and y 1 (before T1's write)
    h = Builder().txn(0, [r("y", 1), w("x", 1), w("y", 2)]).txn(0, [r("x", 1), r("y", 1)]).history()
    assert check_rw_register(h, "serializable").valid is True
    verdict = check_rw_register(h, "serializable", wfr_keys=True)
    assert verdict.valid is False and verdict.details["violations"] == ["G-single"]


def test_rw_register_lost_update_under_the_default_model():
    h = Builder().concurrent((0, [r("x", 0), w("x", 1)]), (1, [r("x", 0), w("x", 2)])).history()
    verdict = check_rw_register(h)
    assert verdict.valid is False and verdict.details["violations"] == ["lost-update"]
    assert verdict.details["not"] == ["ROLA", "cursor-stability"]


# --- list-append: Elle's checker cases ---------------------------------------------------------------


def violations(verdict) -> list[str]:
    return verdict.details["violations"]


def test_list_append_g_single_from_the_initial_state():
    # T1 appends x 1 and y 1; T2 appends x 2 but read y empty; x is [1 2]: T2 after T1 on x, before on y
    h = Builder().txn(0, [append("x", 1), append("y", 1)]).txn(1, [append("x", 2), r("y", [])])
    h = h.txn(2, [r("x", [1, 2])]).history()
    verdict = check_list_append(h, "serializable")
    assert violations(verdict) == ["G-single"] and verdict.details["not"] == ["consistent-view", "repeatable-read"]
    assert check_list_append(h, "read-committed").valid is True


def test_list_append_pure_anti_dependency_cycle():
    h = together([append("x", 1), r("y", [])], [append("y", 1), r("x", [])]).history()
    assert check_list_append(h, "read-committed").valid is True
    for model in ("serializable", "repeatable-read"):
        verdict = check_list_append(h, model)
        assert violations(verdict) == ["G2-item"] and verdict.details["not"] == ["repeatable-read"]


def test_list_append_strong_snapshot_isolation_violation():
    # x 1 and then x 2 are appended one after the other; a later read sees [1], a still later [1 2]
    h = (
        Builder()
        .txn(0, [append("x", 1)])
        .txn(1, [append("x", 2)])
        .txn(2, [r("x", [1])])
        .txn(3, [r("x", [1, 2])])
        .history()
    )
    assert check_list_append(h, "serializable").valid is True
    verdict = check_list_append(h, "strict-serializable")
    assert violations(verdict) == ["G-single-realtime"]
    assert verdict.details["not"] == ["strong-snapshot-isolation"]


def test_list_append_strong_session_snapshot_isolation_violation():
    # the same, with the append of 2 and the stale read on one process
    h = (
        Builder()
        .txn(0, [append("x", 1)])
        .txn(1, [append("x", 2)])
        .txn(1, [r("x", [1])])
        .txn(2, [r("x", [1, 2])])
        .history()
    )
    assert check_list_append(h, "serializable").valid is True
    verdict = check_list_append(h, "strong-session-snapshot-isolation")
    assert violations(verdict) == ["G-single-process"]
    assert verdict.details["not"] == ["strong-session-snapshot-isolation"]


def test_list_append_g_nonadjacent_through_process_order():
    # Elle issue 17: T0 sees z's append but not x's; T1 appends x then (same process) T2 misses z's append
    h = (
        Builder()
        .txn(0, [r("x", []), r("z", [1])])
        .txn(1, [append("x", 1)])
        .txn(1, [r("z", [])])
        .txn(2, [append("z", 1)])
        .history()
    )
    assert check_list_append(h, "serializable").valid is True
    verdict = check_list_append(h, "strong-session-snapshot-isolation")
    assert violations(verdict) == ["G-nonadjacent-process"]
    assert verdict.details["not"] == ["strong-session-snapshot-isolation"]
    steps = [s["rel"] for s in verdict.details["anomalies"]["G-nonadjacent-process"][0]["steps"]]
    assert sorted(steps) == ["process", "rw", "rw", "wr"]


def test_list_append_contradictory_read_orders():
    h = (
        Builder()
        .txn(0, [append("x", 1), r("y", [1])])
        .txn(0, [append("x", 2)])
        .txn(0, [append("x", 3), append("y", 1)])
        .txn(0, [r("x", [1, 3])])
        .txn(0, [r("x", [1, 2, 3])])
        .history()
    )
    verdict = check_list_append(h, "read-committed")
    assert violations(verdict) == ["G1c", "incompatible-order"]
    assert verdict.details["not"] == ["read-committed"]


def test_every_example_of_every_anomaly_carries_an_explanation_and_a_meaning():
    b = Builder().txn(0, [append("x", 1)], kind="fail").txn(1, [append("x", 2)]).txn(2, [r("x", [1, 2])])
    b.txn(3, [append("d", 1)]).txn(4, [r("d", [1, 1])]).txn(5, [r("g", [7])])
    b.concurrent((6, [append("o", 1)]), (7, [append("o", 2)])).txn(8, [r("o", [1, 2])]).txn(9, [r("o", [2, 1])])
    b.txn(10, [r("f", [5]), append("f", 5)]).txn(11, [append("i", 1), r("i", [])])
    b.concurrent((12, [r("s", []), append("t", 1)]), (13, [r("t", []), append("s", 1)]))
    b.concurrent((14, [r("l", [1, 2]), append("l", 3)]), (15, [r("l", [1, 2]), append("l", 4)]))
    verdict = check_list_append(b.history(), "strict-serializable")
    found = set(verdict.details["anomaly_types"])
    assert {"G1a", "dirty-update", "duplicate-elements", "garbage-read", "incompatible-order"} <= found
    assert {"future-read", "internal", "G2-item", "lost-update"} <= found
    for name, examples in verdict.details["anomalies"].items():
        assert verdict.details["meanings"][name] != name, name
        for example in examples:
            assert example["explanation"], name
