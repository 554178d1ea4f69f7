"""Every figure of the Spark report equals the independent pure-Python computation in oracle.py."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from reports.per_run import run_figures
from tests.reports import oracle
from tests.reports.conftest import GAP_MS

pytestmark = pytest.mark.spark

REL = 1e-9  # both sides compute exact quantiles; only float rounding differs


@pytest.fixture(scope="module")
def runs(results_root: dict) -> list[oracle.Run]:
    return [oracle.load_run(Path(p)) for p in results_root["good"]]


def _close(a: float | None, b: float | None) -> bool:
    if a is None or (isinstance(a, float) and math.isnan(a)):
        return b is None or (isinstance(b, float) and math.isnan(b))
    return b is not None and math.isclose(a, b, rel_tol=REL, abs_tol=1e-9)


def test_every_good_run_is_included_and_nothing_else(report, runs) -> None:
    assert sorted(report.data.tables["runs"]["run_id"]) == sorted(r.run_id for r in runs)
    assert report.summary["runs"]["included"] == len(runs)


def test_latency_quantiles_match(report, runs) -> None:
    expected = oracle.latency_table(runs)
    table = report.data.tables["latency_quantiles"]
    got = {(r.workload, r.f, r.outcome, r.fault): r for r in table.itertuples(index=False)}
    assert set(got) == set(expected)
    assert {k[3] for k in got} >= {"calm", "kill", "partition", "pause", "lose_unsynced"}
    for key, want in expected.items():
        row = got[key]
        assert row.count == want["count"], key
        for name in ("p50_ms", "p90_ms", "p99_ms", "p999_ms", "max_ms"):
            assert _close(getattr(row, name), want[name]), (key, name, getattr(row, name), want[name])


def test_latency_is_higher_under_faults_in_the_synthetic_data(report) -> None:
    q = report.data.tables["latency_quantiles"]
    ok = q[(q["outcome"] == "ok") & (q["workload"] == "set") & (q["f"] == "add")].set_index("fault")
    assert ok.loc["pause", "p50_ms"] > ok.loc["calm", "p50_ms"]


def test_unavailability_windows_match(report, runs) -> None:
    expected = {(r.run_id, *w) for r in runs for w in oracle.unavailability(r, GAP_MS)}
    table = report.data.tables["unavailability"]
    got = set(zip(table["run_id"], table["f"], table["start_ns"], table["end_ns"]))
    assert got == expected
    assert len(expected) > 5  # the synthetic failovers do make windows


def test_failover_and_recovery_times_match(report, runs) -> None:
    expected = {(r.run_id, *row[:4]): row[4] for r in runs for row in oracle.recovery(r)}
    table = report.data.tables["recovery"]
    got = {
        (r.run_id, r.kind, r.event, r.event_ns, r.f): (None if pd.isna(r.next_ok_ns) else int(r.next_ok_ns))
        for r in table.itertuples(index=False)
    }
    assert got == expected
    delays = {k: (v - k[3]) / oracle.MS for k, v in expected.items() if v is not None}
    for r in table.dropna(subset=["delay_ms"]).itertuples(index=False):
        assert _close(r.delay_ms, delays[(r.run_id, r.kind, r.event, r.event_ns, r.f)])


def test_commit_loss_matches(report, runs) -> None:
    runs_table = report.data.tables["runs"].set_index("run_id")
    for r in runs:
        assert runs_table.loc[r.run_id, "lost_count"] == r.lost, r.run_id
    by_test = report.data.tables["loss_by_test"].set_index("test")
    for test in {r.name for r in runs}:
        mine = [r for r in runs if r.name == test]
        assert by_test.loc[test, "lost_writes"] == sum(r.lost for r in mine)
        assert by_test.loc[test, "runs_that_lost"].split() == sorted(r.run_id for r in mine if r.lost)
    by_nemesis = report.data.tables["loss_by_nemesis"].set_index("nemesis")
    for nemesis in {r.nemesis for r in runs}:
        assert by_nemesis.loc[nemesis, "lost_writes"] == sum(r.lost for r in runs if r.nemesis == nemesis)
    assert sum(r.lost for r in runs) > 0
    assert report.summary["commit_loss"]["lost_writes"] == sum(r.lost for r in runs)


def test_pass_rates_and_flaky_tests_match(report, runs) -> None:
    for table, key in (("pass_rate_by_test", lambda r: r.name), ("pass_rate_by_nemesis", lambda r: r.nemesis)):
        frame = report.data.tables[table]
        got = {row[0]: (row.runs, row.passed, row.pass_rate) for row in frame.itertuples(index=False)}
        want = oracle.pass_rates(runs, key)
        assert set(got) == set(want)
        for k, (n, passed, rate) in want.items():
            assert got[k][:2] == (n, passed) and _close(got[k][2], rate), k
    trend = report.data.tables["pass_rate_trend"]
    want = oracle.pass_rates(runs, lambda r: (r.name, r.date))
    assert {(t, d): (n, p) for t, d, n, p in zip(trend["test"], trend["date"], trend["runs"], trend["passed"])} == {
        k: v[:2] for k, v in want.items()
    }
    expected_flaky = oracle.flaky(runs)
    assert set(report.data.tables["flaky_tests"]["test"]) == expected_flaky
    assert set(report.summary["flaky_tests"]) == expected_flaky
    assert expected_flaky  # the fixture has tests with mixed verdicts ...
    assert {r.name for r in runs} - expected_flaky  # ... and tests without


def test_throughput_matches(report, runs, spark) -> None:
    table = spark.read.parquet(report.data.written["throughput"]).toPandas()
    got = {(r.run_id, r.second, r.f, r.outcome): r.ops for r in table.itertuples(index=False)}
    want = {(r.run_id, *k): v for r in runs for k, v in oracle.throughput(r).items()}
    assert got == want


def test_info_rates_and_p99_trend_match(report, runs) -> None:
    info = report.data.tables["info_rates"]
    for row in info.itertuples(index=False):
        ops = [op for r in runs if (r.name, r.nemesis) == (row.test, row.nemesis) for op in r.ops if op.f == row.f]
        assert (row.ops, row.info) == (len(ops), sum(op.outcome == "info" for op in ops))
    trend = report.data.tables["p99_trend"]
    for row in trend.itertuples(index=False):
        lat = [
            op.latency_ms
            for r in runs
            if (r.name, r.date) == (row.test, row.date)
            for op in r.ops
            if op.f == row.f and op.outcome == "ok"
        ]
        assert row.ops == len(lat) and _close(row.p99_ms, oracle.quantile(lat, 0.99))


def test_pass_rates_and_anomalies_by_workload_match(report, runs) -> None:
    workloads = {r.test["workload"] for r in runs}
    assert len(workloads) > 1
    table = report.data.tables["pass_rate_by_workload"]
    got = {row.workload: (row.runs, row.passed, row.failed, row.pass_rate) for row in table.itertuples(index=False)}
    want = oracle.pass_rates(runs, lambda r: r.test["workload"])
    assert set(got) == workloads
    for workload, (n, passed, rate) in want.items():
        failed = sum(r.verdict == "false" for r in runs if r.test["workload"] == workload)
        assert got[workload][:3] == (n, passed, failed) and _close(got[workload][3], rate), workload
    by_workload = report.data.tables["anomalies_by_workload"].set_index(["workload", "checker"])
    for workload in workloads:
        mine = [r for r in runs if r.test["workload"] == workload]
        for checker in {c for r in mine for c in r.results["checkers"]}:
            verdicts = [r.results["checkers"][checker]["valid"] for r in mine if checker in r.results["checkers"]]
            row = by_workload.loc[(workload, checker)]
            assert (row["runs"], row["invalid"]) == (len(verdicts), sum(v is False for v in verdicts)), checker
    loss = report.data.tables["loss_by_workload"].set_index("workload")
    assert loss["runs"].sum() == len(runs)
    summary = {row["workload"]: row for row in report.summary["pass_rate_by_workload"]}
    assert set(summary) == workloads and all(summary[w]["runs"] == want[w][0] for w in workloads)
    assert {(row["workload"], row["checker"]) for row in report.summary["anomalies_by_workload"]} == set(
        by_workload.index
    )


def test_anomalies_by_checker(report, runs) -> None:
    table = report.data.tables["anomalies_by_checker"].set_index("checker")
    for checker in ("set-full", "elle", "committed-loss"):
        verdicts = [r.results["checkers"][checker]["valid"] for r in runs if checker in r.results["checkers"]]
        assert table.loc[checker, "runs"] == len(verdicts)
        assert table.loc[checker, "invalid"] == sum(v is False for v in verdicts)
    lost = sum(r.results["checkers"]["set-full"]["lost-count"] for r in runs if "set-full" in r.results["checkers"])
    assert table.loc["set-full", "anomalies"] == lost


def test_per_run_figures_equal_the_spark_figures(report, results_root, spark) -> None:
    """The harness's per-run path and the Spark path share the metric definitions."""
    run_dir = results_root["good"][0]
    figures = run_figures(run_dir, gap_ms=GAP_MS)
    run_id = f"{run_dir.parent.name}/{run_dir.name}"
    spark_q = spark.read.parquet(report.data.written["latency_quantiles_by_run"]).where(f"run_id = '{run_id}'")
    got = {(r["f"], r["outcome"], r["fault"]): r for r in spark_q.toPandas().to_dict("records")}
    mine = {(r["f"], r["outcome"], r["fault"]): r for r in figures["latency_quantiles"]}
    assert set(got) == set(mine) and mine
    for key, row in mine.items():
        for name in ("count", "p50_ms", "p99_ms", "p999_ms", "max_ms"):
            assert _close(float(row[name]), float(got[key][name])), (key, name)
    windows = report.data.tables["unavailability"]
    assert len(figures["unavailability"]) == int((windows["run_id"] == run_id).sum())
    runs = report.data.tables["runs"].set_index("run_id")
    assert figures["ops"] == runs.loc[run_id, "ops"]
    assert figures["lost_count"] == runs.loc[run_id, "lost_count"]
    json.dumps(figures)  # JSON-able for the harness
