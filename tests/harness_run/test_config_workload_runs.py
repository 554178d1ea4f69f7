"""Whole config-append runs on the sim backend: valid and deterministic under partition + kill (also with
snapshots, where the log tap keeps every broker read checkable); deliberately wrong clients, and a
cluster that never comes back, make the run invalid with the right checker."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import harness.runner as runner
from harness.backends.sim import SimBackend, run_cluster_options
from harness.runner import run_test
from tests.harness_run.helpers import END_OF_RUN, history_lines, sim_spec
from vocab.errors import EXIT_INVALID, EXIT_VALID
from vocab.generators import Op
from vocab.invocation import Completion, DoneFn
from vocab.workload import Workload, register_workload, unregister_workload
from workloads.config_append import BROKER_READ, GENERATION, WORKLOAD, ConfigAppend

CHECKERS = {"elle-list-append", "committed-loss", "image-reads"} | END_OF_RUN


def _results(result: Any) -> dict[str, Any]:
    return json.loads((result.run.path / "results.json").read_text())


def test_config_append_under_partition_and_kill_is_valid_and_deterministic(tmp_path) -> None:
    first = run_test(sim_spec(seed=11, workload="config-append"), root=tmp_path / "a", say=lambda _: None)
    second = run_test(sim_spec(seed=11, workload="config-append"), root=tmp_path / "b", say=lambda _: None)
    assert first.exit_code == EXIT_VALID and first.valid is True, first.checker_lines
    assert (first.run.path / "history.jsonl").read_bytes() == (second.run.path / "history.jsonl").read_bytes()
    results = _results(first)
    assert set(results["checkers"]) == CHECKERS
    checkers = results["checkers"]
    assert checkers["elle-list-append"]["txns_by_type"]["ok"] > 50
    assert checkers["committed-loss"]["acknowledged_count"] > 50
    assert checkers["image-reads"]["verified"] == checkers["image-reads"]["reads"] > 5
    assert checkers["availability"]["writes_ok_after_heal"] > 0
    events = [json.loads(line) for line in history_lines(first.run.path)]
    fs = {e["f"] for e in events if isinstance(e["process"], int)}  # client processes (not nemesis or forger)
    assert fs == {"txn", BROKER_READ}
    assert {e["node"] for e in events if e["f"] == BROKER_READ and e["type"] == "ok"} == {"b1", "b2"}
    assert (first.run.path / "config-timeline.jsonl").is_file() and (first.run.path / "log-tap.jsonl").is_file()


@pytest.fixture
def with_snapshots(monkeypatch: pytest.MonkeyPatch) -> None:
    """Simulated clusters that snapshot every 25 records: final logs keep only the last few."""

    def backend(spec: Any, _run_dir: Any) -> SimBackend:
        c = spec.cluster
        options = {**run_cluster_options(spec.bugs), "snapshot_every_records": 25}  # SASL and the authorizer too
        return SimBackend(
            controllers=c.controllers, brokers=c.brokers, combined=c.combined, seed=spec.seed, cluster_options=options
        )

    monkeypatch.setattr(runner, "make_backend", backend)


def test_with_snapshots_every_broker_read_is_still_checked_against_the_log(tmp_path, with_snapshots) -> None:
    result = run_test(sim_spec(seed=12, workload="config-append"), root=tmp_path, say=lambda _: None)
    assert result.valid is True, result.checker_lines
    checkers = _results(result)["checkers"]
    assert checkers["image-reads"]["verified"] == checkers["image-reads"]["reads"] > 5
    dumps = [
        (result.run.path / "nodes" / n / "committed-log.jsonl").read_text() for n in ("c1", "c2", "c3", "b1", "b2")
    ]
    # a dump starts after the node's newest snapshot (empty when the snapshot covers the whole log)
    first_dumped = min(json.loads(d.splitlines()[0])["offset"] for d in dumps if d.strip())
    assert first_dumped > 100  # the final logs alone would have covered only the end of the run
    tap = [json.loads(line) for line in (result.run.path / "log-tap.jsonl").read_text().splitlines()]
    assert any("snapshot" in line for line in tap) or tap[0]["offset"] == 0


def _workload(name: str, wrap: Callable[[Any], Any]) -> Iterator[str]:
    class Wrapped(ConfigAppend):
        def client(self) -> Any:
            return wrap(super().client())

    register_workload(Workload(name, WORKLOAD.checkers, Wrapped, checker_options=WORKLOAD.checker_options))
    yield name
    unregister_workload(name)


class AcknowledgesUnsent:
    """A wrong client: every tenth append transaction is acknowledged without being sent."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.count = inner, 0

    def invoke(self, op: Op, done: DoneFn) -> None:
        if op.f == "txn" and op.value[0][0] == "append":
            self.count += 1
            if self.count % 10 == 0:
                done(Completion("ok", op.value, "b1"))
                return
        self.inner.invoke(op, done)


class StaleBrokerOffsets:
    """A wrong client: broker reads claim an offset 3 below the one their answer reflects."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def invoke(self, op: Op, done: DoneFn) -> None:
        def lie(c: Completion) -> None:
            if c.type == "ok" and op.f == BROKER_READ:
                c = Completion("ok", {**c.value, "metadata_offset": c.value["metadata_offset"] - 3}, c.node)
            done(c)

        self.inner.invoke(op, lie)


class DownAfterTheHeal:
    """A cluster that never comes back, as the clients see it: no write succeeds after the main phase
    (the recovery window's generator numbers its elements from GENERATION on)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def invoke(self, op: Op, done: DoneFn) -> None:
        appends = [m for m in op.value if m[0] == "append"] if op.f == "txn" else []
        if appends and int(appends[0][2].split(":")[0]) >= GENERATION:
            done(Completion("info", error="timeout: no answer"))
            return
        self.inner.invoke(op, done)


@pytest.fixture
def lying_acks() -> Iterator[str]:
    yield from _workload("config-append-acks-unsent", AcknowledgesUnsent)


@pytest.fixture
def lying_offsets() -> Iterator[str]:
    yield from _workload("config-append-stale-offsets", StaleBrokerOffsets)


@pytest.fixture
def never_recovers() -> Iterator[str]:
    yield from _workload("config-append-never-recovers", DownAfterTheHeal)


def test_acknowledged_appends_that_were_never_sent_make_the_run_invalid(tmp_path, lying_acks) -> None:
    result = run_test(sim_spec(seed=13, workload=lying_acks), root=tmp_path, say=lambda _: None)
    assert result.valid is False and result.exit_code == EXIT_INVALID
    checkers = _results(result)["checkers"]
    assert checkers["committed-loss"]["valid"] is False and checkers["committed-loss"]["lost-count"] > 0
    assert checkers["elle-list-append"]["valid"] is False
    assert checkers["image-reads"]["valid"] is True and checkers["image-replay"]["valid"] is True


def test_broker_reads_that_misreport_their_offset_make_the_run_invalid(tmp_path, lying_offsets) -> None:
    result = run_test(sim_spec(seed=14, workload=lying_offsets), root=tmp_path, say=lambda _: None)
    assert result.valid is False and result.exit_code == EXIT_INVALID
    checkers = _results(result)["checkers"]
    assert checkers["image-reads"]["valid"] is False
    assert "image-mismatch" in checkers["image-reads"]["anomaly_types"]
    assert checkers["elle-list-append"]["valid"] is True  # the controller path is fine


def test_a_cluster_that_never_comes_back_after_the_heal_fails_the_run(tmp_path, never_recovers) -> None:
    result = run_test(sim_spec(seed=15, workload=never_recovers), root=tmp_path, say=lambda _: None)
    assert result.valid is False and result.exit_code == EXIT_INVALID
    availability = _results(result)["checkers"]["availability"]
    assert availability["valid"] is False and availability["time_to_recover_s"] is None
    assert availability["writes_after_heal"] > 0 and "no write committed within 10 s" in availability["reason"]
