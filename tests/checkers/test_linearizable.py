"""The linearizability checker on hand-built histories and on generated ones (hypothesis)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from checkers.gen import register_history
from checkers.history import pair, read_events
from checkers.linearizable import check, check_key
from checkers.models import ILLEGAL, KVModel, Model, RegisterModel, get_model, register_model
from checkers.verdict import UNKNOWN
from tests.checkers import oracle
from tests.checkers.lin_helpers import drawn_register_history, history


def only_key(verdict):
    [result] = verdict.details["results"]
    return result


def test_sequential_register_history_is_valid_and_a_wrong_read_is_not():
    ok = history(
        (0, 0, "invoke", "write", 1), (1, 0, "ok", "write", 1), (2, 0, "invoke", "read", None), (3, 0, "ok", "read", 1)
    )
    bad = history(
        (0, 0, "invoke", "write", 1), (1, 0, "ok", "write", 1), (2, 0, "invoke", "read", None), (3, 0, "ok", "read", 2)
    )
    assert check(ok).valid is True
    verdict = check(bad)
    assert verdict.valid is False
    result = only_key(verdict)
    assert result["linearization"] == [0]  # the write; then the read cannot follow
    assert result["stuck"][0]["id"] == 2
    assert result["stuck"][0]["needs"] == "state == 2"
    assert result["final_state"] == "1"
    json.dumps(verdict.to_json())  # serialisable


def test_initial_state_is_nil():
    assert check(history((0, 0, "invoke", "read", None), (1, 0, "ok", "read", None))).valid is True
    assert check(history((0, 0, "invoke", "read", None), (1, 0, "ok", "read", 0))).valid is False


def test_linearizable_only_because_an_info_write_took_effect_late():
    # write 2 crashes (info) before the read of 1 and the read of 2 run; it must take effect after
    # the read of 1, i.e. after its own info event.
    h = history(
        (0, 0, "invoke", "write", 1),
        (1, 0, "ok", "write", 1),
        (2, 1, "invoke", "write", 2),
        (3, 1, "info", "write", 2),
        (4, 2, "invoke", "read", None),
        (5, 2, "ok", "read", 1),
        (6, 2, "invoke", "read", None),
        (7, 2, "ok", "read", 2),
    )
    assert check(h).valid is True
    # Closing the info write at its info event (an ok at time 3) makes the same history invalid.
    closed = history(
        (0, 0, "invoke", "write", 1),
        (1, 0, "ok", "write", 1),
        (2, 1, "invoke", "write", 2),
        (3, 1, "ok", "write", 2),
        (4, 2, "invoke", "read", None),
        (5, 2, "ok", "read", 1),
        (6, 2, "invoke", "read", None),
        (7, 2, "ok", "read", 2),
    )
    assert check(closed).valid is False


def test_an_info_write_may_also_never_happen():
    h = history(
        (0, 0, "invoke", "write", 1),
        (1, 0, "ok", "write", 1),
        (2, 1, "invoke", "write", 2),
        (3, 1, "info", "write", 2),
        (4, 2, "invoke", "read", None),
        (5, 2, "ok", "read", 1),
    )
    assert check(h).valid is True


def test_a_failed_write_did_not_happen():
    rows = [
        (0, 0, "invoke", "write", 1),
        (1, 0, "ok", "write", 1),
        (2, 1, "invoke", "write", 2),
        (3, 1, "fail", "write", 2),
        (4, 2, "invoke", "read", None),
        (5, 2, "ok", "read", 1),
    ]
    assert check(history(*rows)).valid is True
    # Treated as having happened (ok), the write of 2 precedes the read, which then sees a stale 1.
    happened = [r if r[2] != "fail" else (3, 1, "ok", "write", 2) for r in rows]
    assert check(history(*happened)).valid is False


def test_failed_cas_means_the_compare_failed():
    # state is 1; "cas 1->3 failed" is impossible when nothing else can change the state.
    rows = [
        (0, 0, "invoke", "write", 1),
        (1, 0, "ok", "write", 1),
        (2, 1, "invoke", "cas", [1, 3]),
        (3, 1, "fail", "cas", [1, 3]),
    ]
    assert check(history(*rows)).valid is False
    # A concurrent write of 2 lets the compare fail.
    rows2 = [
        *rows[:2],
        (2, 1, "invoke", "cas", [1, 3]),
        (3, 2, "invoke", "write", 2),
        (4, 2, "ok", "write", 2),
        (5, 1, "fail", "cas", [1, 3]),
    ]
    assert check(history(*rows2)).valid is True
    ok_cas = [
        *rows[:2],
        (2, 1, "invoke", "cas", [1, 3]),
        (3, 1, "ok", "cas", [1, 3]),
        (4, 1, "invoke", "read", None),
        (5, 1, "ok", "read", 3),
    ]
    assert check(history(*ok_cas)).valid is True


def test_rewriting_the_current_value_is_not_a_free_move():
    # The write of 1 is a no-op while the state is 1, but it must go after the write of 2 here.
    h = history(
        (0, 0, "invoke", "write", 1),
        (1, 0, "ok", "write", 1),
        (2, 1, "invoke", "write", 1),
        (3, 2, "invoke", "write", 2),
        (4, 1, "ok", "write", 1),
        (5, 2, "ok", "write", 2),
        (6, 3, "invoke", "read", None),
        (7, 3, "ok", "read", 1),
    )
    assert check(h).valid is True


def test_kv_model_appends_and_keys_are_independent():
    rows = [
        (0, 0, "invoke", "append", "a", "k1"),
        (1, 1, "invoke", "append", "b", "k1"),
        (2, 0, "ok", "append", "a", "k1"),
        (3, 1, "ok", "append", "b", "k1"),
        (4, 2, "invoke", "get", None, "k1"),
        (5, 2, "ok", "get", "ba", "k1"),
        (6, 2, "invoke", "put", "z", "k2"),
        (7, 2, "ok", "put", "z", "k2"),
        (8, 2, "invoke", "get", None, "k2"),
        (9, 2, "ok", "get", "z", "k2"),
    ]
    verdict = check(history(*rows), "kv")
    assert verdict.valid is True and verdict.details["keys"] == 2
    bad = [*rows[:5], (5, 2, "ok", "get", "bb", "k1"), *rows[6:]]
    verdict = check(history(*bad), "kv", all_keys=True)
    assert verdict.valid is False
    assert verdict.details["invalid_keys"] == ["k1"]
    assert {r["key"]: r["valid"] for r in verdict.details["results"]} == {"k1": False, "k2": True}


def test_kv_put_resets_and_a_get_may_see_an_empty_value():
    rows = [
        (0, 0, "invoke", "get", None, "k"),
        (1, 0, "ok", "get", "", "k"),
        (2, 0, "invoke", "append", "x", "k"),
        (3, 0, "ok", "append", "x", "k"),
        (4, 1, "invoke", "put", "p", "k"),
        (5, 2, "invoke", "get", None, "k"),
        (6, 1, "ok", "put", "p", "k"),
        (7, 0, "invoke", "append", "q", "k"),
        (8, 0, "ok", "append", "q", "k"),
        (9, 2, "ok", "get", "pq", "k"),
    ]
    assert check(history(*rows), "kv").valid is True
    wrong = [*rows[:9], (9, 2, "ok", "get", "xq", "k")]
    assert check(history(*wrong), "kv").valid is False


def test_stops_at_the_first_bad_key_unless_asked_for_all():
    gen = register_history(600, keys=6, processes=6, stale_reads=3, seed=4)
    h = pair(read_events(gen.events))
    every = check(h, all_keys=True)
    assert every.valid is False
    assert all(r["valid"] in (True, False) for r in every.details["results"])
    first = check(h)
    assert first.valid is False
    assert len(first.details["invalid_keys"]) >= 1
    assert set(first.details["invalid_keys"]) <= set(every.details["invalid_keys"])


def test_parallel_keys_give_the_same_verdicts():
    gen = register_history(800, keys=8, processes=8, crash_rate=0.05, stale_reads=2, seed=9)
    h = pair(read_events(gen.events))
    one = check(h, all_keys=True, jobs=1)
    two = check(h, all_keys=True, jobs=2)
    assert one.valid is False
    strip = lambda v: [(r["key"], r["valid"]) for r in v.details["results"]]  # noqa: E731
    assert strip(one) == strip(two)


def test_state_budget_gives_unknown_with_a_partial_linearization():
    gen = register_history(3000, keys=1, processes=8, value_range=3, crash_rate=0.02, seed=2)
    h = pair(read_events(gen.events))
    verdict = check(h, max_states=10)
    assert verdict.valid == UNKNOWN
    result = only_key(verdict)
    assert result["reason"] == "state budget"
    assert 0 < len(result["linearization"]) < result["ops"]
    assert verdict.details["unknown_keys"] == [None]


def test_timeout_gives_unknown():
    gen = register_history(3000, keys=1, processes=8, crash_rate=0.02, seed=2)
    h = pair(read_events(gen.events))
    verdict = check(h, timeout=0)
    assert verdict.valid == UNKNOWN
    assert only_key(verdict)["reason"] == "timeout"


def test_a_new_model_plugs_in():
    @register_model
    class Counter(Model):
        name = "test-counter"

        def init(self):
            return 0

        def step(self, state, op):
            if op.f == "add":
                return True, state + op.invoke_value
            return state == op.value, state

    h = history(
        (0, 0, "invoke", "add", 2),
        (1, 1, "invoke", "add", 3),
        (2, 0, "ok", "add", 2),
        (3, 1, "ok", "add", 3),
        (4, 0, "invoke", "read", None),
        (5, 0, "ok", "read", 5),
    )
    assert check(h, "test-counter").valid is True
    h2 = history(
        (0, 0, "invoke", "add", 2), (1, 0, "ok", "add", 2), (2, 0, "invoke", "read", None), (3, 0, "ok", "read", 5)
    )
    assert check(h2, get_model("test-counter")).valid is False


def test_unknown_model_names_the_choices():
    with pytest.raises(ValueError, match="register"):
        get_model("nope")


def test_models_compile_to_step_functions():
    reg, kv = RegisterModel(), KVModel()
    h = history((0, 0, "invoke", "cas", [1, 2]), (1, 0, "ok", "cas", [1, 2]))
    fn = reg.compile(h.ops[0])
    assert fn(1) == 2 and fn(3) is ILLEGAL
    h2 = history((0, 0, "invoke", "append", "y", "k"), (1, 0, "ok", "append", "y", "k"))
    assert kv.compile(h2.ops[0])("x") == "xy"


# --- property tests: histories of a real atomic register -----------------------------------------

gen_args = st.fixed_dictionaries(
    {
        "n_ops": st.integers(1, 150),
        "keys": st.integers(1, 3),
        "processes": st.integers(1, 6),
        "crash_rate": st.sampled_from([0.0, 0.05, 0.2]),
        "fail_rate": st.sampled_from([0.0, 0.1]),
        "latency": st.integers(1, 50),
        "think": st.integers(0, 50),
        "seed": st.integers(0, 2**32),
    }
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gen_args, st.sampled_from([None, 3]))
def test_histories_of_an_atomic_register_are_linearizable(args, value_range):
    gen = register_history(value_range=value_range, **args)
    assert check(pair(read_events(gen.events)), all_keys=True).valid is True


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gen_args)
def test_one_stale_read_is_caught_and_named(args):
    gen = register_history(stale_reads=1, **{**args, "n_ops": args["n_ops"] + 30})
    if not gen.stale_reads:
        return  # no read had an overwritten value to go back to
    [stale] = gen.stale_reads
    h = pair(read_events(gen.events))
    verdict = check(h, all_keys=True)
    assert verdict.valid is False
    [bad] = [r for r in verdict.details["results"] if r["valid"] is False]
    assert stale in [s["id"] for s in bad["stuck"] if not s["legal"]]


def test_check_key_reports_counts():
    gen = register_history(200, processes=4, crash_rate=0.1, seed=1)
    h = pair(read_events(gen.events))
    res = check_key(RegisterModel(), None, h.ops)
    assert res.valid is True
    assert res.ops <= len(h.ops) and res.info_ops == sum(1 for o in h.ops if o.type == "info" and o.f != "read")


# --- differential tests: the search against an independent brute-force oracle on tiny histories -------


def perturbed(gen, data, domain):
    """Replace some read results / cas outcomes at random so that some histories are not linearizable.
    Returns the events (for the independent oracle) and the history the checker reads from them."""
    events = [dict(e) for e in gen.events]
    for e in events:
        if e["type"] == "ok" and e["f"] == "read" and data.draw(st.booleans()):
            e["value"] = data.draw(st.sampled_from([None, *domain]))
        elif e["type"] in ("ok", "fail") and e["f"] == "cas" and data.draw(st.booleans()):
            e["type"] = "fail" if e["type"] == "ok" else "ok"
    return events, pair(read_events(events))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_register_search_agrees_with_brute_force(data):
    gen = drawn_register_history(data, value_range=3)
    events, h = perturbed(gen, data, range(3))
    model = RegisterModel()
    expected = oracle.linearizable(events, oracle.register_step)
    assert check_key(model, None, h.ops).valid is expected
    assert check_key(model, None, h.ops, prune=False).valid is expected


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_kv_search_agrees_with_brute_force(data):
    n = data.draw(st.integers(1, 6))
    rows = []
    t = 0
    pending = {}
    for p in range(n):
        f = data.draw(st.sampled_from(["get", "put", "append"]))
        value = None if f == "get" else data.draw(st.sampled_from(["a", "b", "ab"]))
        start = data.draw(st.integers(0, 10))
        length = data.draw(st.integers(1, 10))
        outcome = data.draw(st.sampled_from(["ok", "ok", "ok", "info"]))
        result = data.draw(st.sampled_from(["", "a", "b", "ab", "ba", "aab"])) if f == "get" else value
        pending[p] = (start, start + length, f, value, outcome, result)
    events = []
    for p, (a, b, f, value, outcome, result) in pending.items():
        events.append({"time": 2 * a, "process": p, "type": "invoke", "f": f, "value": value, "key": "k"})
        events.append({"time": 2 * b + 1, "process": p, "type": outcome, "f": f, "value": result, "key": "k"})
    events.sort(key=lambda e: e["time"])
    del rows, t
    h = pair(read_events(events))
    model = KVModel()
    expected = oracle.linearizable(events, oracle.kv_step, init="")
    assert check_key(model, "k", h.ops).valid is expected
    assert check_key(model, "k", h.ops, prune=False).valid is expected
