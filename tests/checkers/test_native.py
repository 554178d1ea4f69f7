"""The compiled search (checkers/_lincore.c) against the pure-Python reference: on every history of
these tests (generated good and bad ones, hard ones, Porcupine's) both must reach the same verdict
after the same number of configurations, with the same longest partial linearization and stuck ops."""

from __future__ import annotations

import csv
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from checkers import linearizable
from checkers.gen import cas_register_history, register_history
from checkers.history import load_history, pair, read_events
from checkers.linearizable import check, check_key
from checkers.linearizable import native as native_core
from checkers.models import KVModel, RegisterModel, get_model
from checkers.verdict import UNKNOWN
from tests.checkers.lin_helpers import drawn_register_history, history
from tests.checkers.test_linearizable import perturbed
from tests.checkers.test_porcupine_histories import PORCUPINE

MODEL = RegisterModel()

# `setup.sh test` (CI) builds the extension (pip install -e .) and sets KCHAOS_REQUIRE_NATIVE, so a
# failed build fails these tests there; elsewhere a tree without the build skips them.
needs_core = pytest.mark.skipif(
    native_core._lincore is None and not (os.environ.get("CI") or os.environ.get("KCHAOS_REQUIRE_NATIVE")),
    reason="checkers._lincore is not built",
)


def same(ops, model=MODEL, key=None, **kw) -> tuple:
    """Both searches on one key; they must agree on everything the verdict shows. Exactly with only
    state budgets (zones=False: no quick search cut by the clock), and in verdict with the zones."""
    fast = check_key(model, key, ops, zones=False, **kw)
    ref = check_key(model, key, ops, zones=False, native=False, **kw)
    shown = [(r.valid, r.reason, r.states, r.method, r.linearization, r.final_state, r.stuck) for r in (fast, ref)]
    assert shown[0] == shown[1]
    assert check_key(model, key, ops, **kw).valid == check_key(model, key, ops, native=False, **kw).valid
    return fast.valid, fast.states


@needs_core
@pytest.mark.parametrize("prune", [True, False])
def test_generated_histories_good_and_bad_agree(prune):
    verdicts = set()
    for seed in range(10):
        for kw in ({}, {"stale_reads": 1}, {"value_range": 3}, {"value_range": 4, "crash_rate": 0.3}):
            options = {"processes": 6, "crash_rate": 0.1, "fail_rate": 0.05, "seed": seed, **kw}
            h = pair(read_events(register_history(200, **options).events))
            valid, _ = same(h.ops, prune=prune, max_states=100_000)
            verdicts.add(valid)
    assert verdicts == {True, False}


@needs_core
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_tiny_perturbed_histories_agree(data):
    gen = drawn_register_history(data, max_ops=8, value_range=data.draw(st.sampled_from([3, None])))
    _events, h = perturbed(gen, data, range(3))
    for prune in (True, False):
        same(h.ops, prune=prune)


@needs_core
def test_budgets_end_both_at_the_same_configuration_count():
    h = pair(read_events(register_history(3000, processes=8, value_range=3, seed=2).events))
    fast = check_key(MODEL, None, h.ops, max_states=2000, zones=False)
    ref = check_key(MODEL, None, h.ops, max_states=2000, zones=False, native=False)  # (deterministic budgets)
    assert fast.valid == ref.valid == UNKNOWN and fast.reason == ref.reason == "state budget"
    assert fast.states == ref.states and fast.linearization == ref.linearization


@needs_core
def test_a_hard_single_key_history_agrees():
    for stale in (0, 1):
        gen = register_history(800, processes=30, crash_rate=0.1, fail_rate=0.01, stale_reads=stale, seed=5)
        valid, _ = same(pair(read_events(gen.events)).ops, max_states=200_000)
        assert valid is (not stale)


@needs_core
@pytest.mark.parametrize("values", [3, 30])
def test_cas_register_shapes_agree(values):
    """Jepsen's cas-register shape (repeated values, cas from the same value, crashed ops): the
    symmetry, the pruner's count of stretches of a value and the forgetting of values nobody can
    observe (most states, with 30 values) run in both searches alike."""
    verdicts = set()
    for seed in range(8):
        gen = cas_register_history(150, processes=8, values=values, crash_rate=0.02, duration_ms=(5, 30), seed=seed)
        if seed % 2:  # three reads made to see another value: mostly not linearizable any more
            reads = [e for e in gen.events if e["f"] == "read" and e["type"] == "ok" and e["index"] > 40]
            for read in reads[:3]:
                read["value"] = ((read["value"] or 0) + 1) % values
        valid, _ = same(pair(read_events(gen.events)).ops, max_states=50_000)
        verdicts.add(valid)
    assert verdicts == {True, False}


@needs_core
def test_every_porcupine_register_history_agrees():
    rows = [r for r in csv.DictReader((PORCUPINE / "MANIFEST.tsv").open(), delimiter="\t") if r["model"] == "register"]
    assert len(rows) == 52
    for row in rows:
        h = load_history(PORCUPINE / row["file"])
        for prune in (True, False):
            valid, _ = same(h.ops, prune=prune, max_states=200_000)
            assert valid is (row["expected"] == "linearizable")


def test_models_without_a_compiled_form_use_the_python_search():
    assert KVModel().native([], []) is None
    assert get_model("register").native([], []) is not None


def test_without_the_core_the_python_search_runs_with_a_one_line_notice(monkeypatch, capsys):
    h = pair(read_events(register_history(100, processes=3, seed=1).events))
    monkeypatch.setattr(native_core, "_lincore", None)
    monkeypatch.setattr(native_core, "_NOTICED", [])
    assert check(h).valid is True
    assert check(h).valid is True
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pure-Python search runs" in err and "pip install -e ." in err
    kv = history((0, 0, "invoke", "put", "a", "k"), (1, 0, "ok", "put", "a", "k"))
    monkeypatch.setattr(native_core, "_NOTICED", [])
    assert check(kv, "kv").valid is True  # no notice for a model the core does not know
    assert capsys.readouterr().err == ""


def test_doctor_reports_the_core(monkeypatch):
    import importlib.util

    from harness import doctor_cli
    from harness.backends.shell import BackendError

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(BackendError, match="not built"):
        doctor_cli._lincore_probe()
    row = doctor_cli._try("compiled checker core", False, doctor_cli.LINCORE_FIX, doctor_cli._lincore_probe)
    assert row.status == "WARN" and "pip install -e ." in row.fix


@needs_core
def test_the_compiled_key_preparation_matches_the_python_one(monkeypatch):
    """`prepare` (keep, split, order) and `RegisterModel.native`, compiled and in Python."""
    from checkers import models

    hs = [load_history(PORCUPINE / "etcd" / f"etcd_{i:03d}.jsonl") for i in (0, 2, 100)]
    for seed in range(4):
        for values in (None, 3):
            gen = register_history(300, processes=8, crash_rate=0.2, value_range=values, seed=seed)
            hs.append(pair(read_events(gen.events)))
    for h in hs:
        p = linearizable.prepare(MODEL, h.ops)
        fast = MODEL.native(p.ops, p.info)
        shuffled = list(reversed(h.ops))  # out of invoke order: the compiled split hands it back
        assert MODEL.split(h.ops) is not None and MODEL.split(shuffled) is None
        with monkeypatch.context() as m:
            m.setattr(models, "_lincore", None)
            assert MODEL.native(p.ops, p.info) == fast
            assert linearizable.prepare(MODEL, h.ops) == p
            back = linearizable.prepare(MODEL, shuffled)  # (ties in invoke time keep their input order)
            assert (back.inv, back.iinv) == (p.inv, p.iinv)
            assert sorted(o.id for o in back.ops) == sorted(o.id for o in p.ops)
    odd = history((0, 0, "invoke", "cas", [1, 2, 3]), (1, 0, "ok", "cas", [1, 2, 3]))
    with pytest.raises(ValueError, match=r"cas value must be \[from, to\], got \[1, 2, 3\] \(op 0\)"):
        MODEL.native(odd.ops, [])


@needs_core
def test_the_pure_python_search_keeps_a_smaller_default_budget(monkeypatch):
    """The default budget is sized for the compiled memo; the Python search's configurations cost
    about 2.5 times as much, so with the default it stops at its own smaller one."""
    from checkers.linearizable import keys

    monkeypatch.setattr(keys, "PURE_PYTHON_MAX_STATES", 50)
    ops = pair(read_events(cas_register_history(2000, processes=30, values=10, seed=1).events)).ops
    slow = check_key(MODEL, None, ops, zones=False, native=False)
    assert slow.valid == UNKNOWN and slow.reason == "state budget" and slow.states < 5_000
    fast = check_key(MODEL, None, ops, zones=False)
    assert fast.valid is True and fast.states > 5_000


@needs_core
def test_the_compiled_grouping_and_split_match_the_python_ones_refused_cas_included(monkeypatch):
    """`group_by_key` (Model.partition) and `register_split` dropping a cas refused before sending,
    compiled, compiled as an older build (no `compare_failed` argument, no grouping) and in Python."""
    import types

    from checkers import models

    events = [
        {"time": 0, "process": 0, "type": "invoke", "f": "write", "value": 1, "key": "k"},
        {"time": 1, "process": 0, "type": "ok", "f": "write", "value": 1, "key": "k"},
        # refused before it was sent: it observed nothing. Taken for a failed compare it would be
        # impossible (the value is 1), and the key invalid.
        {"time": 2, "process": 1, "type": "invoke", "f": "cas", "value": [1, 3], "key": "k"},
        {"time": 3, "process": 1, "type": "fail", "f": "cas", "value": [1, 3], "key": "k", "error": "refused"},
        {"time": 4, "process": 2, "type": "invoke", "f": "cas", "value": [5, 6], "key": "k"},
        {"time": 5, "process": 2, "type": "fail", "f": "cas", "value": [5, 6], "key": "k", "error": "Compare failed"},
        {"time": 6, "process": 3, "type": "invoke", "f": "read", "value": None, "key": 7},
        {"time": 7, "process": 3, "type": "ok", "f": "read", "value": None, "key": 7},
        {"time": 8, "process": 4, "type": "invoke", "f": "read", "value": None},
        {"time": 9, "process": 4, "type": "ok", "f": "read", "value": None},
    ]
    ops = pair(read_events(events)).ops
    gen = pair(read_events(register_history(400, keys=5, processes=8, crash_rate=0.1, fail_rate=0.1, seed=3).events))
    real = models._lincore
    newer = ("group_by_key", "SPLIT_TAKES_COMPARE_FAILED", "register_split")
    older = types.SimpleNamespace(**{n: getattr(real, n) for n in dir(real) if n not in newer and n[0] != "_"})
    older.register_split = lambda ops: real.register_split(ops)  # as before: it keeps every failed cas
    seen = []
    for core in (real, older, None):
        with monkeypatch.context() as m:
            m.setattr(models, "_lincore", core)
            parts = MODEL.partition(ops)
            p = linearizable.prepare(MODEL, parts["k"])
            seen.append((list(parts.items()), list(MODEL.partition(gen.ops).items()), p, check(ops).valid))
    assert seen[0] == seen[1] == seen[2]
    (parts, _, p, valid), _, _ = seen
    assert [key for key, _ in parts] == ["k", 7, None] and valid is True
    assert [(o.f, o.invoke_value) for o in p.ops] == [("write", 1), ("cas", [5, 6])]  # the refused cas dropped
    assert real.group_by_key([types.SimpleNamespace(key=1)]) is None  # not the loader's ops: Python groups them
    assert MODEL.partition([types.SimpleNamespace(key=1)]) == {1: [types.SimpleNamespace(key=1)]}


@needs_core
def test_the_documented_rebuild_of_the_core_compiles_it(tmp_path):
    """docs/concepts/checkers.md: after editing the C, `python setup.py build_ext --inplace` rebuilds
    it. Built here into a temp dir (the tree's build is left alone); the venv's setuptools must read
    pyproject.toml (its SPDX license needs setuptools 77, which setup.sh installs)."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    argv = [sys.executable, "setup.py", "build_ext", "--build-lib", str(tmp_path / "lib")]
    done = subprocess.run(
        [*argv, "--build-temp", str(tmp_path / "tmp")], cwd=root, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert list((tmp_path / "lib" / "checkers").glob("_lincore*.so"))
