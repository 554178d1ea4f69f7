"""A history small enough to work out by hand (conftest.HAND_EVENTS): the answers are written here,
and both the per-run path (pandas, no Spark) and the Spark report must give them."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from reports.per_run import run_figures
from tests.reports.conftest import GAP_MS, HAND_RUN

MS = 1_000_000

# f, start ms, end ms, open_ended, overlapping faults
WINDOWS = {
    ("write", 10, 1620, False, "partition"),
    ("read", 8, 1110, False, "partition"),
    ("read", 1110, 2210, False, "kill+partition"),
}
# kind, event, event ms, f -> delay ms (None: no success after it)
RECOVERY = {
    ("partition", "start", 25, "write"): 1595.0,
    ("partition", "start", 25, "read"): 1085.0,
    ("partition", "heal", 1505, "write"): 115.0,
    ("partition", "heal", 1505, "read"): 705.0,
    ("kill", "start", 2002, "write"): None,
    ("kill", "start", 2002, "read"): 208.0,
}
# f, outcome, fault -> (count, p50, p90, max)
QUANTILES = {
    ("write", "ok", "calm"): (2, 15.0, 19.0, 20.0),
    ("read", "ok", "calm"): (1, 3.0, 3.0, 3.0),
    ("write", "fail", "partition"): (1, 500.0, 500.0, 500.0),
    ("read", "info", "partition"): (1, 1000.0, 1000.0, 1000.0),
    ("read", "ok", "partition"): (1, 10.0, 10.0, 10.0),
    ("read", "ok", "kill"): (1, 10.0, 10.0, 10.0),
}


def _check_windows(rows: list[dict]) -> None:
    got = {(r["f"], r["start_ns"] / MS, r["end_ns"] / MS, bool(r["open_ended"]), r["overlapping_faults"]) for r in rows}
    assert got == WINDOWS


def _check_recovery(rows: list[dict]) -> None:
    got = {}
    for r in rows:
        delay = r["delay_ms"]
        got[(r["kind"], r["event"], r["event_ns"] / MS, r["f"])] = (
            None if delay is None or (isinstance(delay, float) and math.isnan(delay)) else delay
        )
    assert got == RECOVERY


def _check_quantiles(rows: list[dict]) -> None:
    got = {(r["f"], r["outcome"], r["fault"]): r for r in rows}
    assert set(got) == set(QUANTILES)
    for key, (count, p50, p90, top) in QUANTILES.items():
        row = got[key]
        assert row["count"] == count
        assert math.isclose(row["p50_ms"], p50) and math.isclose(row["p90_ms"], p90)
        assert math.isclose(row["max_ms"], top)
    assert math.isclose(got[("write", "ok", "calm")]["p99_ms"], 19.9)


def test_per_run_path_gives_the_hand_answers(results_root: dict) -> None:
    figures = run_figures(results_root["hand"], gap_ms=GAP_MS)
    assert figures["ops"] == 8
    assert figures["outcomes"] == {"ok": 5, "info": 2, "fail": 1}  # the write at 2100 never completed
    assert figures["info_rate"] == 2 / 8
    assert figures["lost_count"] == 2
    assert [(f["kind"], f["start_ns"] / MS, f["end_ns"] / MS, f["healed"]) for f in figures["faults"]] == [
        ("partition", 25, 1505, True),
        ("kill", 2002, 2210, False),
    ]
    _check_windows(figures["unavailability"])
    _check_recovery(figures["recovery"])
    _check_quantiles(figures["latency_quantiles"])


def test_per_run_threshold_changes_the_windows(results_root: dict) -> None:
    assert run_figures(results_root["hand"], gap_ms=1200)["unavailability"] == [
        {
            "f": "write",
            "start_ns": 10 * MS,
            "end_ns": 1620 * MS,
            "duration_ms": 1610.0,
            "open_ended": False,
            "overlapping_faults": "partition",
        }
    ]


@pytest.mark.spark
def test_spark_report_gives_the_hand_answers(report, spark) -> None:
    t = report.data.tables
    _check_windows(t["unavailability"][t["unavailability"]["run_id"] == HAND_RUN].to_dict("records"))
    rec = t["recovery"][t["recovery"]["run_id"] == HAND_RUN]
    _check_recovery(rec.astype(object).where(rec.notna(), None).to_dict("records"))
    by_run = spark.read.parquet(report.data.written["latency_quantiles_by_run"]).where(f"run_id = '{HAND_RUN}'")
    _check_quantiles(by_run.toPandas().to_dict("records"))
    run = t["runs"].set_index("run_id").loc[HAND_RUN]
    assert (run["ops"], run["ok"], run["fail"], run["info"]) == (8, 5, 1, 2)
    assert (run["lost_count"], run["anomaly_count"], run["valid"]) == (2, 3, "false")
    assert run["history_format"] == "jsonl"
    ops = spark.read.parquet(report.data.written["ops"]).where(f"run_id = '{HAND_RUN}'").toPandas()
    states = dict(zip(ops["invoke_ns"] // MS, ops["fault_state"]))
    assert states == {0: "calm", 5: "calm", 30: "partition", 40: "partition", 1100: "partition"} | {
        1600: "calm",
        2100: "kill",
        2200: "kill",
    }
    never = ops[ops["invoke_ns"] == 2100 * MS].iloc[0]
    assert never["outcome"] == "info" and pd.isna(never["complete_ns"]) and pd.isna(never["latency_ms"])
    # The ops table is partitioned by date and test on disk.
    assert (report.out / "tables" / "ops" / "date=2026-11-05" / "test=hand-made").is_dir()
