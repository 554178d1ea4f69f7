"""Whole runs on the sim backend: determinism, verdicts, exit codes, and the run directory's contents."""

from __future__ import annotations

import dataclasses
import itertools
import json
from typing import Any

import pytest

from harness.runner import run_test
from tests.harness_run.helpers import END_OF_RUN, history_lines, sim_spec
from vocab.errors import EXIT_INVALID, EXIT_VALID
from vocab.generators import Op
from vocab.invocation import Completion, DoneFn
from vocab.workload import Workload, register_workload, unregister_workload
from workloads.config_register import WORKLOAD as REGISTER
from workloads.config_register import ConfigRegister


def test_same_seed_gives_byte_identical_history(tmp_path):
    first = run_test(sim_spec(seed=7), root=tmp_path / "a", say=lambda _: None)
    second = run_test(sim_spec(seed=7), root=tmp_path / "b", say=lambda _: None)
    other = run_test(sim_spec(seed=8), root=tmp_path / "c", say=lambda _: None)
    a = (first.run.path / "history.jsonl").read_bytes()
    assert a == (second.run.path / "history.jsonl").read_bytes()
    assert a != (other.run.path / "history.jsonl").read_bytes()
    assert first.exit_code == EXIT_VALID and first.valid is True


def test_run_dir_holds_history_faults_dumps_and_verdict(tmp_path):
    result = run_test(sim_spec(seed=3), root=tmp_path, say=lambda _: None)
    run = result.run.path
    events = [json.loads(line) for line in history_lines(run)]
    assert [e["index"] for e in events] == list(range(len(events)))
    assert all(a["time"] <= b["time"] for a, b in itertools.pairwise(events))
    fs = {e["f"] for e in events if e["process"] == "nemesis"}
    assert {"start-partition", "stop-partition", "start-kill", "stop-kill"} <= fs
    client = [e for e in events if e["process"] != "nemesis" and not str(e["process"]).startswith("forger")]
    assert {e["f"] for e in client} == {"read", "write", "read-broker"} and all("key" in e for e in client)
    forged = {e["f"] for e in events if str(e["process"]).startswith("forger")}  # the forger side process
    assert len(forged) >= 2 and all(f.startswith("forge-") for f in forged)
    assert any(e["type"] == "ok" and e["f"] == "read" and e["value"] is not None for e in client)
    # every node's dumps are there, and the log-agreement checker ran on them
    for node in ("c1", "c2", "c3", "b1", "b2"):
        assert (run / "nodes" / node / "committed-log.jsonl").is_file()
    results = json.loads((run / "results.json").read_text())
    assert results["valid"] is True
    assert set(results["checkers"]) == {"linearizable", "committed-loss", "image-reads"} | END_OF_RUN
    assert results["checks"]["end_of_run"] == [
        "availability",
        "quorum-progress",
        "log-agreement",
        "image-replay",
        "at-most-once",
        "elections",
    ]
    assert (run / "commit-times.jsonl").is_file()  # the tap timed the committed log (quorum-progress)
    reads = results["checkers"]["image-reads"]
    assert reads["value_kind"] == "int" and reads["verified"] == reads["reads"] > 0
    test = json.loads((run / "test.json").read_text())
    assert test["seed"] == 3 and test["backend"] == "sim" and test["nodes"] == ["c1", "c2", "c3", "b1", "b2"]
    assert (run / "report.html").is_file() and (run.parent.parent / "latest").resolve() == run.resolve()


class StaleReads:
    """A deliberately wrong client: each key's reads answer the first value ever read for it."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.first: dict[str, Any] = {}

    def invoke(self, op: Op, done: DoneFn) -> None:
        if op.f != "read":
            self.inner.invoke(op, done)
            return

        def stale(c: Completion) -> None:
            if c.type == "ok":
                c = Completion("ok", self.first.setdefault(op.key, c.value), c.node, c.error)
            done(c)

        self.inner.invoke(op, stale)


class StaleRegister(ConfigRegister):
    def client(self) -> Any:
        return StaleReads(super().client())


@pytest.fixture
def stale_workload():
    name = "config-register-stale-reads"
    register_workload(Workload(name, ("linearizable",), StaleRegister, checker_options=REGISTER.checker_options))
    yield name
    unregister_workload(name)


def test_stale_reads_make_the_run_invalid(tmp_path, stale_workload):
    result = run_test(sim_spec(seed=5, workload=stale_workload), root=tmp_path, say=lambda _: None)
    assert result.valid is False
    assert result.exit_code == EXIT_INVALID
    results = json.loads((result.run.path / "results.json").read_text())
    assert results["checkers"]["linearizable"]["valid"] is False
    assert (result.run.path / "counterexample-linearizable.html").is_file()


def test_without_nemesis_history_has_no_fault_events(tmp_path):
    result = run_test(sim_spec(seed=2, nemesis=(), time_limit_s=3.0), root=tmp_path, say=lambda _: None)
    events = [json.loads(line) for line in history_lines(result.run.path)]
    assert events and not [e for e in events if e["process"] == "nemesis"]
    assert result.exit_code == EXIT_VALID


def test_a_recovery_tail_ends_the_window_soon_after_its_first_committed_write(tmp_path):
    """`recovery_tail_s`: the clients stop that long after the first write invoked after the heal
    committed, instead of running the whole window out. Up to that write the history is the same event
    for event, and the availability verdict with it."""
    spec = sim_spec(seed=5, recovery_s=30.0, final_reads=False)
    runs = {
        "full": run_test(spec, root=tmp_path / "full", say=lambda _: None),
        "tail": run_test(dataclasses.replace(spec, recovery_tail_s=2.0), root=tmp_path / "tail", say=lambda _: None),
    }
    seen: dict[str, Any] = {}
    for name, result in runs.items():
        events = [json.loads(line) for line in history_lines(result.run.path)]
        heal = max(e["time"] for e in events if e["process"] == "nemesis")
        client = [e for e in events if isinstance(e["process"], int)]
        last_invoke = max(e["time"] for e in client if e["type"] == "invoke")
        availability = json.loads((result.run.path / "results.json").read_text())["checkers"]["availability"]
        assert result.valid is True and availability["valid"] is True, (name, availability)
        seen[name] = (events, heal, last_invoke, availability["time_to_recover_s"])
    full_events, heal, full_last, ttr = seen["full"]
    tail_events, tail_heal, tail_last, tail_ttr = seen["tail"]
    assert full_last >= heal + 25e9  # the whole window, run out
    recovered_at = heal + ttr * 1e9
    assert tail_heal == heal and tail_ttr == ttr
    assert recovered_at < tail_last <= recovered_at + 2.1e9, (recovered_at, tail_last)
    shared = [e for e in full_events if e["time"] <= recovered_at]
    assert tail_events[: len(shared)] == shared
    test_json = [json.loads((r.run.path / "test.json").read_text()) for r in runs.values()]
    assert "recovery_tail_s" not in test_json[0] and test_json[1]["recovery_tail_s"] == 2.0
