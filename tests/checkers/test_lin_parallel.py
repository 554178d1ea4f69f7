"""Keys decided by forked workers (`checkers.linearizable.parallel`): the job reaches them by fork, a
worker's failure reaches the caller, and no worker outlives the check."""

from __future__ import annotations

import multiprocessing

import pytest

from checkers.history import Op
from checkers.linearizable import check
from checkers.models import KVModel
from tests.checkers.lin_helpers import history

# Four keys: "good" ones linearizable, "bad" with a read of a value never written.
ROWS = [
    row
    for i, key in enumerate(["a", "b", "c", "bad"])
    for row in (
        (10 * i, i, "invoke", "put", "x", key),
        (10 * i + 1, i, "ok", "put", "x", key),
        (10 * i + 2, i, "invoke", "get", None, key),
        (10 * i + 3, i, "ok", "get", "y" if key == "bad" else "x", key),
    )
]


class _Exploding(KVModel):
    """A model that fails on one key's ops, made in this test only (a worker gets it by fork)."""

    def compile(self, op: Op):  # type: ignore[override]
        if op.key == "c":
            raise ValueError("cannot compile key c")
        return super().compile(op)


def test_a_worker_that_fails_names_the_key_and_leaves_no_worker_behind():
    with pytest.raises(RuntimeError, match=r"(?s)worker failed on key 'c'.*ValueError: cannot compile key c"):
        check(history(*ROWS), _Exploding(), jobs=2, all_keys=True)
    assert multiprocessing.active_children() == []


def test_workers_decide_the_same_as_one_process_and_stop_with_the_check():
    one = check(history(*ROWS), "kv", jobs=1, all_keys=True)
    two = check(history(*ROWS), "kv", jobs=2, all_keys=True)
    first_bad = check(history(*ROWS), "kv", jobs=2)
    verdicts = lambda v: {r["key"]: r["valid"] for r in v.details["results"]}  # noqa: E731
    assert verdicts(one) == verdicts(two) == {"a": True, "b": True, "c": True, "bad": False}
    assert first_bad.valid is False and "bad" in first_bad.details["invalid_keys"]
    assert multiprocessing.active_children() == []
