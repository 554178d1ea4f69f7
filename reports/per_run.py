"""The figures of a single run, for the harness's per-run report: no Spark, same metric definitions.

from reports.per_run import run_figures
figures = run_figures("results/set-kill/20261123T101500Z", charts_dir="results/.../plots")
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from reports import charts, metrics
from reports.ingest import vet_run
from vocab.errors import UserError


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    clean = frame.astype(object).where(frame.notna(), None)
    return [{k: (v.item() if hasattr(v, "item") else v) for k, v in r.items()} for r in clean.to_dict("records")]


@dataclass
class RunTables:
    """One run's per-run tables plus what its results.json says."""

    run_id: str
    valid: str
    end_ns: int
    events: int
    checkers: list[metrics.CheckerFigures]
    tables: dict[str, pd.DataFrame]


def run_tables(run_dir: str | Path, gap_ms: float = metrics.DEFAULT_GAP_MS) -> RunTables:
    """ops, faults, latency_quantiles, throughput, unavailability and recovery of one run."""
    path = Path(run_dir)
    vetted = vet_run(path, f"{path.parent.name}/{path.name}")
    if isinstance(vetted, str):
        raise UserError(f"run {run_dir}: {vetted}")
    try:
        events = metrics.read_history(vetted.history_path, vetted.history_format)
    except metrics.HistoryError as exc:
        raise UserError(f"run {run_dir}: {exc}") from None
    frames = metrics.derive(events)
    tables = {
        "ops": frames.ops,
        "faults": frames.faults,
        "latency_quantiles": metrics.latency_quantiles(frames.ops, ["f", "outcome", "fault"]),
        "throughput": metrics.throughput(frames.ops),
        "unavailability": metrics.unavailability(frames.ops, frames.faults, frames.end_ns, gap_ms),
        "recovery": metrics.recovery(frames.ops, frames.faults),
    }
    valid = metrics.verdict_text(vetted.results.get("valid", "unknown"))
    figures = metrics.checker_figures(vetted.results)
    return RunTables(vetted.run_id, valid, frames.end_ns, frames.events, figures, tables)


def run_figures(
    run_dir: str | Path, gap_ms: float = metrics.DEFAULT_GAP_MS, charts_dir: str | Path | None = None
) -> dict[str, Any]:
    """One run's figures as plain JSON-able data; with `charts_dir`, also its latency and throughput
    charts (PNG)."""
    run = run_tables(run_dir, gap_ms)
    t = run.tables
    ops = t["ops"]
    figures: dict[str, Any] = {
        "run_id": run.run_id,
        "valid": run.valid,
        "events": run.events,
        "duration_s": run.end_ns / metrics.NS_PER_S,
        "ops": len(ops),
        "outcomes": {str(k): int(v) for k, v in ops["outcome"].value_counts().items()},
        "info_rate": metrics.info_rate(ops),
        "lost_count": metrics.run_lost(run.checkers),
        "checkers": [vars(c) for c in run.checkers],
        **{name: _records(t[name]) for name in ("faults", "latency_quantiles", "unavailability", "recovery")},
        "throughput": _records(t["throughput"]),
    }
    if charts_dir is not None:
        by_second = t["throughput"].groupby(["second", "outcome"])["ops"].sum().reset_index()
        tables = {
            "latency_quantiles": t["latency_quantiles"].assign(workload=""),
            "throughput_by_test": by_second.assign(test=run.run_id, ops_per_s=by_second["ops"]),
        }
        out = Path(charts_dir)
        out.mkdir(parents=True, exist_ok=True)
        drawn = {
            "latency_by_fault": charts.latency_by_fault(tables, out / "latency_by_fault.png"),
            "throughput": charts.throughput(tables, out / "throughput.png"),
        }
        figures["charts"] = {k: str(v) for k, v in drawn.items() if v is not None}
    return figures
