"""A run's service-level measures, for the release gate: computed once per run (in the suite's worker,
beside its verdict) from results.json and the history, with the Spark pipeline's own per-run
definitions (`reports.metrics`: ops paired, each op's fault state at invocation, failover/recovery
per fault event), so a gate needs no Spark session.

Measures (None when the run has nothing to measure, e.g. no leader kill):
- `invalid_checkers`, `anomalies`: checkers whose verdict is false, and their anomalies counted as the
  reports count them (`metrics.checker_figures`);
- `lost`: acknowledged writes lost (`metrics.run_lost`: every checker's lost count);
- `availability_during_faults_pct`: client ops invoked while a fault window was open (`fault_state`
  not calm) that completed ok, in percent (the forger's ops are not client ops);
- `p99_outside_faults_ms`: p99 latency of the ok client ops invoked with no fault open (linear
  interpolation, as `metrics.latency_quantiles`);
- `failover_s`: the worst, over the kills of the leader (kill faults with mode `leader`), of the time
  from the kill to the completion of the first write invoked after it that committed
  (`metrics.recovery`, event `start`, write fs as the availability checker's); `failover_unrecovered`
  counts leader kills after which no write committed before the run ended;
- `recovery_after_heal_s`: the availability checker's time from the final heal to the first committed
  write (`time_to_recover_s`);
- `elections`, `split_votes`, `elections_per_leader_change`, `leaderless_after_kill_s`,
  `leaderless_after_resign_s`, `leaderless_unrecovered`: the elections checker's figures (epochs from
  the committed LeaderChange records and the nodes' last epochs; the time from a stop of the active
  controller, kill -9 or graceful, to the commit of the next leader's LeaderChange record).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from checkers.history import is_side_process
from reports import metrics
from reports.schema import CALM

MEASURES = (
    "anomalies",
    "lost",
    "availability_during_faults_pct",
    "p99_outside_faults_ms",
    "failover_s",
    "recovery_after_heal_s",
    "elections_per_leader_change",
    "split_votes",
    "leaderless_after_kill_s",
    "leaderless_after_resign_s",
)
# The elections checker's figures (checkers/elections.py) a run's measures carry over.
ELECTION_FIGURES = (
    "elections",
    "split_votes",
    "elections_per_leader_change",
    "leaderless_after_kill_s",
    "leaderless_after_resign_s",
    "leaderless_unrecovered",
)


def _read_events(run_dir: Path) -> pd.DataFrame:
    parquet = run_dir / "history.parquet"
    if parquet.exists():
        return metrics.read_history(str(parquet), "parquet")
    return metrics.read_history(str(run_dir / "history.jsonl"), "jsonl")


def _read_only_txns(events: pd.DataFrame) -> set[int]:
    """Invoke indices of `txn` ops that only read (the availability checker does not count them)."""
    txns = events[(events["f"] == "txn") & (events["type"] == "invoke")]
    out: set[int] = set()
    for index, value in zip(txns["index"].to_numpy(), txns["value"].to_numpy()):
        try:
            mops = json.loads(value) if isinstance(value, str) else value
        except ValueError:
            continue
        if isinstance(mops, list) and not any(isinstance(m, list) and m and m[0] != "r" for m in mops):
            out.add(int(index))
    return out


def _leader_kills(events: pd.DataFrame, faults: pd.DataFrame) -> pd.DataFrame:
    """Kill windows whose start asked for the leader (the start invoke's `mode`)."""
    kills = faults[faults["kind"] == "kill"]
    if kills.empty:
        return kills
    values = dict(zip(events["index"].to_numpy().tolist(), events["value"].to_numpy().tolist()))

    def mode(index: int) -> Any:
        try:
            value = json.loads(values.get(int(index)) or "null")
        except (TypeError, ValueError):
            return None
        return value.get("mode") if isinstance(value, dict) else None

    return kills[[mode(i) == "leader" for i in kills["start_index"]]]


def run_measures(run_dir: str | Path) -> dict[str, Any]:
    """The measures of one analysed run (see the module docstring)."""
    path = Path(run_dir)
    results = json.loads((path / "results.json").read_text(encoding="utf-8"))
    test = json.loads((path / "test.json").read_text(encoding="utf-8"))
    figures = metrics.checker_figures(results)
    out: dict[str, Any] = {
        "invalid_checkers": [c.checker for c in figures if c.valid == "false"],
        "anomalies": sum(c.anomaly_count for c in figures if c.valid == "false"),
        "lost": metrics.run_lost(figures),
    }
    availability = results.get("checkers", {}).get("availability", {})
    out["recovery_after_heal_s"] = availability.get("time_to_recover_s") if isinstance(availability, dict) else None

    elections = results.get("checkers", {}).get("elections", {})
    elections = elections if isinstance(elections, dict) else {}
    for key in ELECTION_FIGURES:
        out[key] = elections.get(key)

    events = _read_events(path)
    frames = metrics.derive(events)
    ops = frames.ops[~frames.ops["process"].map(is_side_process)]
    in_faults = ops[ops["fault_state"] != CALM]
    out["ops_during_faults"] = len(in_faults)
    out["availability_during_faults_pct"] = (
        100.0 * float((in_faults["outcome"] == "ok").mean()) if len(in_faults) else None
    )
    calm_ok = ops[(ops["fault_state"] == CALM) & (ops["outcome"] == "ok")]["latency_ms"].dropna()
    out["p99_outside_faults_ms"] = float(calm_ok.quantile(0.99, interpolation="linear")) if len(calm_ok) else None

    kills = _leader_kills(events, frames.faults)
    out["leader_kills"] = len(kills)
    out["failover_s"] = None
    out["failover_unrecovered"] = 0
    if len(kills):
        from harness.run_report import availability_write_fs  # lazy: run_report loads matplotlib

        fs = availability_write_fs(test)
        writes = ops[ops["f"].isin(fs) & ~ops["invoke_index"].isin(_read_only_txns(events))]
        recovered = metrics.recovery(writes, kills)
        starts = recovered[recovered["event"] == "start"]
        worst: list[float] = []
        for _, per_kill in starts.groupby("event_ns"):
            delays = per_kill["delay_ms"].dropna().to_numpy()
            if len(delays):
                worst.append(float(np.min(delays)) / 1000.0)
            else:
                out["failover_unrecovered"] += 1
        if len(starts) == 0:  # no write f ever committed
            out["failover_unrecovered"] = len(kills)
        out["failover_s"] = max(worst) if worst else None
    return out


__all__ = ["MEASURES", "run_measures"]
