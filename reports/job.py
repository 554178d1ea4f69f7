"""A whole report job: discover runs, run the Spark pipeline, write tables, charts, HTML and summary."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reports import charts, html_report, ingest, metrics, summary
from reports.pipeline import Progress, ReportData, run_pipeline


@dataclass
class JobOptions:
    root: str
    out: str | None = None
    filters: ingest.Filters = field(default_factory=ingest.Filters)
    gap_ms: float = metrics.DEFAULT_GAP_MS
    store: str | None = None  # an incremental store (reports.store): ingest new runs, report over it

    @property
    def out_dir(self) -> Path:
        return Path(self.out) if self.out else Path(self.root) / "_report"


@dataclass
class JobResult:
    out: Path
    summary: dict[str, Any]
    report: Path
    data: ReportData


def _write_small_tables(data: ReportData, out: Path) -> None:
    (out / "tables").mkdir(parents=True, exist_ok=True)
    (out / "csv").mkdir(parents=True, exist_ok=True)
    for name, frame in data.tables.items():
        if name in data.written:
            continue
        frame.to_parquet(out / "tables" / f"{name}.parquet", index=False)
        frame.to_csv(out / "csv" / f"{name}.csv", index=False)
        data.written[name] = str(out / "tables" / f"{name}.parquet")


def run_job(spark, options: JobOptions, progress: Progress = lambda _step: None) -> JobResult:
    """Run the report over `options.root` with an existing SparkSession (one per job)."""
    out = options.out_dir
    ingested = None
    if options.store:
        from reports.store import report_incremental, store_path

        data, filtered_out, ingested = report_incremental(
            spark, options.root, store_path(options.store), options.filters, out, options.gap_ms, progress
        )
    else:
        progress("discovering runs")
        found = ingest.discover(options.root, options.filters, exclude=str(out))
        data = run_pipeline(spark, found, out, options.gap_ms, progress)
        filtered_out = found.filtered_out
    progress("writing tables and charts")
    _write_small_tables(data, out)
    drawn = charts.draw_all(data.tables, out / "charts")
    filters = {
        "since": options.filters.since.isoformat() if options.filters.since else None,
        "tests": options.filters.tests,
        "runs": options.filters.runs_glob,
        "gap_ms": options.gap_ms,
    }
    digest = summary.build_summary(data, options.root, out, filters, filtered_out)
    if ingested is not None:
        digest["store"] = ingested.as_dict()
    digest["tables"] = data.written
    digest["charts"] = {k: str(v) for k, v in drawn.items()}
    summary.write_summary(digest, out)
    report = html_report.render(digest, data.tables, drawn, out)
    return JobResult(out, digest, report, data)
