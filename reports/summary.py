"""summary.json: the machine-readable digest of a report (the release gate reads it)."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from reports.pipeline import ReportData
from reports.schema import SCHEMA_VERSION


def _clean(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    if hasattr(value, "item"):
        return _clean(value.item())
    return value


def _records(frame: pd.DataFrame | None, columns: list[str]) -> list[dict[str, Any]]:
    if frame is None or frame.empty:
        return []
    return [{k: _clean(v) for k, v in row.items()} for row in frame[columns].to_dict("records")]


def build_summary(data: ReportData, root: str, out: Path, filters: dict[str, Any], filtered_out: int) -> dict:
    t = data.tables
    runs = t.get("runs", pd.DataFrame(columns=["valid", "run_id", "lost_count"]))
    verdicts = runs["valid"].value_counts().to_dict() if len(runs) else {}
    failing = runs[runs["valid"] == "false"] if len(runs) else runs
    q = t.get("latency_quantiles")
    rec = t.get("recovery_summary")
    return {
        "schema_version": SCHEMA_VERSION,
        "generated_at": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
        "results_root": str(root),
        "out_dir": str(out),
        "filters": filters,
        "runs": {
            "included": len(runs),
            "skipped": len(data.skipped),
            "filtered_out": filtered_out,
            "passed": int(verdicts.get("true", 0)),
            "failed": int(verdicts.get("false", 0)),
            "unknown": int(verdicts.get("unknown", 0)),
        },
        "pass_rate": (verdicts.get("true", 0) / len(runs)) if len(runs) else None,
        "failing_runs": _records(
            failing, ["run_id", "test", "nemesis", "valid", "lost_count", "anomaly_count", "run_dir"]
        ),
        "flaky_tests": sorted(t["flaky_tests"]["test"]) if "flaky_tests" in t else [],
        "pass_rate_by_test": _records(t.get("pass_rate_by_test"), ["test", "runs", "passed", "pass_rate"]),
        "pass_rate_by_nemesis": _records(t.get("pass_rate_by_nemesis"), ["nemesis", "runs", "passed", "pass_rate"]),
        "pass_rate_by_workload": _records(
            t.get("pass_rate_by_workload"), ["workload", "runs", "passed", "failed", "unknown", "pass_rate"]
        ),
        "commit_loss": {
            "lost_writes": int(runs["lost_count"].sum()) if len(runs) else 0,
            "runs_that_lost": sorted(runs.loc[runs["lost_count"] > 0, "run_id"]) if len(runs) else [],
        },
        "anomalies_by_checker": _records(
            t.get("anomalies_by_checker"), ["checker", "runs", "invalid", "unknown", "anomalies"]
        ),
        "anomalies_by_workload": _records(
            t.get("anomalies_by_workload"),
            ["workload", "checker", "runs", "invalid", "unknown", "anomalies", "lost_writes", "anomaly_types"],
        ),
        "latency_ok_ms": _records(
            None if q is None else q[q["outcome"] == "ok"],
            ["workload", "f", "fault", "count", "p50_ms", "p99_ms", "p999_ms", "max_ms"],
        ),
        "failover_and_recovery_ms": _records(rec, ["kind", "event", "f", "events", "recovered", "p50_ms", "max_ms"]),
        "info_rate": (float(runs["info"].sum() / runs["ops"].sum()) if len(runs) and runs["ops"].sum() else None),
        "skipped": [{"path": s.path, "reason": s.reason} for s in data.skipped],
        "warnings": list(data.warnings),
    }


def write_summary(summary: dict, out: Path) -> Path:
    path = out / "summary.json"
    path.write_text(json.dumps(summary, indent=1, sort_keys=False) + "\n")
    return path
