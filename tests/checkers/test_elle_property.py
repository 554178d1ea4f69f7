"""Property tests: histories produced by a real serial store are valid; one stale read breaks them.

Random transactions run one at a time against an in-memory store, each at its own point in time;
its invoke / complete interval is drawn around that point, so the history is strictly serializable by
construction while intervals overlap. `info` transactions take effect or not at random; `fail` ones
never do. A last transaction reads every key after all others completed.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from checkers.elle import check_list_append, check_rw_register
from checkers.history import History, pair, read_events

KEYS = ("x", "y", "z")
STEP = st.tuples(st.sampled_from(("write", "r")), st.sampled_from(KEYS))
TXN = st.tuples(
    st.lists(STEP, min_size=1, max_size=4),
    st.sampled_from(("ok", "ok", "ok", "ok", "info", "fail")),
    st.booleans(),  # whether an info transaction took effect
    st.integers(0, 40),  # how long before its point it was invoked
    st.integers(0, 40),  # how long after its point it completed
)
RUNS = st.tuples(st.lists(TXN, min_size=1, max_size=25), st.integers(1, 5))
PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def serial_history(run: tuple[list[Any], int], workload: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Events of the run, and the store's final state."""
    txns, processes = run
    store: dict[str, Any] = {k: [] for k in KEYS} if workload == "list-append" else dict.fromkeys(KEYS)
    write_f = "append" if workload == "list-append" else "w"
    free_at = [-1] * processes
    ids = list(range(processes))
    point, counter = 0, 0
    timed: list[tuple[int, int, dict[str, Any]]] = []
    first = [(("write", "x"),), "ok", True, 0, 0]  # at least one acknowledged write
    for steps, kind, took_effect, lead, lag in [first, *txns]:
        thread = min(range(processes), key=free_at.__getitem__)
        point = max(point + 10, free_at[thread] + 1)
        invoke = max(free_at[thread] + 1, point - lead)
        complete = point + lag
        free_at[thread] = complete
        applied = kind == "ok" or (kind == "info" and took_effect)
        before = {k: list(v) if isinstance(v, list) else v for k, v in store.items()}
        mops = []
        for f, k in steps:
            if f == "write":
                counter += 1
                mops.append([write_f, k, counter])
                if workload == "list-append":
                    store[k].append(counter)
                else:
                    store[k] = counter
            else:
                mops.append(["r", k, list(store[k]) if workload == "list-append" else store[k]])
        if not applied:
            store = before
        invocation = [[f, k, None if f == "r" else v] for f, k, v in mops]
        process = ids[thread]
        timed.append((invoke, 0, {"process": process, "type": "invoke", "f": "txn", "value": invocation}))
        timed.append(
            (complete, 1, {"process": process, "type": kind, "f": "txn", "value": mops if kind == "ok" else invocation})
        )
        if kind == "info":
            ids[thread] += processes
    end = max(t for t, _, _ in timed) + 1
    final = [["r", k, list(store[k]) if workload == "list-append" else store[k]] for k in KEYS]
    timed.append((end, 0, {"process": "final", "type": "invoke", "f": "txn", "value": [["r", k, None] for k in KEYS]}))
    timed.append((end + 1, 1, {"process": "final", "type": "ok", "f": "txn", "value": final}))
    timed.sort(key=lambda e: (e[0], e[1]))
    return [{"time": t, **event} for t, _, event in timed], store


def load(events: list[dict[str, Any]]) -> History:
    return pair(read_events(events))


@PROPERTY
@given(RUNS)
def test_serial_list_append_histories_are_strict_serializable(run):
    events, _ = serial_history(run, "list-append")
    verdict = check_list_append(load(events), "strict-serializable")
    assert verdict.valid is True, verdict.details


@PROPERTY
@given(RUNS, st.data())
def test_a_stale_final_read_is_caught(run, data):
    events, _ = serial_history(run, "list-append")
    acknowledged = {
        v for e in events if e["type"] == "ok" and e["process"] != "final" for f, _, v in e["value"] if f == "append"
    }
    final = events[-1]["value"]
    # drop, from one key of the final read, an element that an acknowledged transaction appended
    choices = [(i, j) for i, (_, _, seen) in enumerate(final) for j, v in enumerate(seen) if v in acknowledged]
    i, j = data.draw(st.sampled_from(choices))
    final[i][2] = final[i][2][:j]
    verdict = check_list_append(load(events), "strict-serializable")
    assert verdict.valid is False
    # the stale read is one of the transactions named in the cycle
    cycles = [ex for name in verdict.details["violations"] for ex in verdict.details["anomalies"][name]]
    assert any(c["process"] == "final" for ex in cycles for c in ex.get("cycle", ()))


@PROPERTY
@given(RUNS)
def test_serial_rw_register_histories_are_strict_serializable(run):
    events, _ = serial_history(run, "rw-register")
    verdict = check_rw_register(load(events), "strict-serializable", linearizable_keys=True, sequential_keys=True)
    assert verdict.valid is True, verdict.details
