"""An incremental results store: a year of nightly runs, read once each.

`kchaos report RESULTS_DIR --store PATH` ingests only the runs under RESULTS_DIR that the store does
not hold yet (or that changed since), then reports over everything the store holds. PATH is anything
Spark can write: a local directory, `hdfs://…`, `s3a://…`. Layout:

    PATH/ops/date=…/test=…/ingest=<batch>/part-*.parquet   the paired ops (pipeline.OPS_SCHEMA)
    PATH/runs/ingest=<batch>/part-*.parquet                 the manifest: a row per ingested run

A manifest row holds the run's id, its fingerprint (a hash of test.json and results.json and the size
and mtime of its history files), its metadata and its facts (events, end, fault windows). The newest
batch of a run id wins: a changed run is ingested again into a new batch and its older rows are no
longer read. The manifest is appended after the ops, so an ingest that dies half-way leaves ops rows no
manifest row points to; they are never read and their runs are ingested again next time.
"""

from __future__ import annotations

import fnmatch
import json
import secrets
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from reports.ingest import Filters, RunSource, discover
from reports.pipeline import Progress, ReportData, derive_ops, readable, report_tables

OPS = "ops"
MANIFEST = "runs"
OPS_PARTITIONS = ["date", "test", "ingest"]
MANIFEST_DDL = (
    "run_id string, fingerprint string, run_dir string, test_json string, results_json string, "
    "history_path string, history_format string, started_at string, warnings string, events long, "
    "end_ns long, faults string, ingested_at string"
)
MANIFEST_COLUMNS = [column.split()[0] for column in MANIFEST_DDL.split(", ")]


def store_path(text: str) -> str:
    """A URI (`s3a://…`, `hdfs://…`, `file:/…`) as given; a plain path made absolute."""
    return text.rstrip("/") if "://" in text or text.startswith("file:") else str(Path(text).resolve())


def new_batch() -> str:
    """A batch id that sorts by time and does not collide with a concurrent ingest's."""
    return "b" + datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ") + secrets.token_hex(3)


def _exists(spark: SparkSession, path: str) -> bool:
    jvm = spark.sparkContext._jvm
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
    return hadoop_path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()).exists(hadoop_path)


def read_manifest(spark: SparkSession, path: str) -> pd.DataFrame:
    """The current manifest row of every run id in the store (its newest batch), sorted by run id."""
    location = f"{path}/{MANIFEST}"
    if not _exists(spark, location):
        return pd.DataFrame(columns=[*MANIFEST_COLUMNS, "ingest"])
    rows = spark.read.parquet(location).toPandas()
    newest = rows.sort_values(["run_id", "ingest"], kind="stable").drop_duplicates("run_id", keep="last")
    return newest.sort_values("run_id", key=_run_order, kind="stable").reset_index(drop=True)


def _run_order(ids: pd.Series) -> pd.Series:
    """Discovery's order: by test folder, then run folder."""
    return ids.map(lambda run_id: tuple(run_id.split("/", 1)))


def append_manifest(
    spark: SparkSession, path: str, batch: str, runs: list[RunSource], facts: dict[str, dict[str, Any]]
) -> None:
    """Record `runs` (ingested in `batch`) in the manifest: the commit point of an ingest."""
    now = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    rows = [
        (
            run.run_id,
            run.fingerprint,
            run.path,
            json.dumps(run.test, sort_keys=True),
            json.dumps(run.results, sort_keys=True),
            run.history_path,
            run.history_format,
            run.started_at.isoformat(),
            json.dumps(run.warnings),
            int(facts[run.run_id]["events"]),
            int(facts[run.run_id]["end_ns"]),
            facts[run.run_id]["faults"],
            now,
        )
        for run in runs
    ]
    frame = spark.createDataFrame(rows, MANIFEST_DDL).withColumn("ingest", F.lit(batch))
    frame.coalesce(1).write.mode("append").partitionBy("ingest").parquet(f"{path}/{MANIFEST}")


def append_ops(ops: DataFrame, path: str, batch: str) -> None:
    ops.withColumn("ingest", F.lit(batch)).write.mode("append").partitionBy(*OPS_PARTITIONS).parquet(f"{path}/{OPS}")


@dataclass
class Selected:
    """The store's runs a report covers, with their facts, and how many the filters left out."""

    runs: list[RunSource] = field(default_factory=list)
    facts: dict[str, dict[str, Any]] = field(default_factory=dict)
    ingests: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=["run_id", "ingest"]))
    warnings: list[str] = field(default_factory=list)
    filtered_out: int = 0


def select(manifest: pd.DataFrame, filters: Filters) -> Selected:
    """The manifest's runs that pass the report's filters, as RunSources (in discovery's order)."""
    chosen = Selected()
    keep = []
    for row in manifest.itertuples(index=False):
        test = json.loads(row.test_json)
        run = RunSource(
            row.run_id,
            row.run_dir,
            test,
            json.loads(row.results_json),
            row.history_path,
            row.history_format,
            datetime.fromisoformat(row.started_at),
            json.loads(row.warnings),
            row.fingerprint,
        )
        if (
            (filters.runs_glob and not fnmatch.fnmatchcase(run.run_id, filters.runs_glob))
            or (filters.tests and not any(fnmatch.fnmatchcase(run.name, t) for t in filters.tests))
            or (filters.since and run.started_at < filters.since)
        ):
            chosen.filtered_out += 1
            continue
        chosen.runs.append(run)
        chosen.warnings.extend(run.warnings)
        chosen.facts[run.run_id] = {"error": None, "events": row.events, "end_ns": row.end_ns, "faults": row.faults}
        keep.append((row.run_id, row.ingest))
    chosen.ingests = pd.DataFrame(keep, columns=["run_id", "ingest"])
    return chosen


def read_ops(spark: SparkSession, path: str, ingests: pd.DataFrame) -> DataFrame:
    """The store's ops of exactly the chosen (run id, batch) pairs, in the report's ops columns."""
    ops = spark.read.parquet(f"{path}/{OPS}")
    chosen = spark.createDataFrame(list(ingests.itertuples(index=False, name=None)), "run_id string, ingest string")
    columns = [c for c in ops.columns if c != "ingest"]
    return ops.join(F.broadcast(chosen), ["run_id", "ingest"], "left_semi").select(*columns)


@dataclass
class Ingest:
    """What one `--store` report did to the store (goes into summary.json as `store`)."""

    path: str
    batch: str | None
    ingested: int
    changed: int
    unchanged: int
    runs_in_store: int

    def as_dict(self) -> dict[str, Any]:
        return dict(vars(self))


def report_incremental(
    spark: SparkSession,
    root: str,
    path: str,
    filters: Filters,
    out: Path,
    gap_ms: float,
    progress: Progress,
) -> tuple[ReportData, int, Ingest]:
    """Ingest what is new or changed under `root` into the store at `path`, then run the report over
    every stored run that passes `filters`. Returns the report data, how many runs the filters left
    out, and what was ingested."""
    progress("reading the store's manifest")
    manifest = read_manifest(spark, path)
    known = dict(zip(manifest["run_id"], manifest["fingerprint"]))
    progress("discovering new and changed runs")
    found = discover(root, filters, exclude=str(out), known=known)
    data = ReportData(skipped=list(found.skipped))
    batch = new_batch()
    good: list[RunSource] = []
    failed: list[RunSource] = []
    if found.runs:
        progress(f"ingesting {len(found.runs)} new or changed runs into {path} (batch {batch})")
        derived, side = derive_ops(spark, found.runs)
        append_ops(derived, path, batch)
        facts: dict[str, dict[str, Any]] = side.value
        good, skipped = readable(found.runs, facts)
        data.skipped.extend(skipped)
        failed = [r for r in found.runs if r not in good]
        if good:
            append_manifest(spark, path, batch, good, facts)
            manifest = read_manifest(spark, path)
    chosen = select(manifest, filters)
    order = sorted([*chosen.runs, *failed], key=lambda r: tuple(r.run_id.split("/", 1)))
    data.warnings = [w for run in order for w in run.warnings]
    out.mkdir(parents=True, exist_ok=True)
    if chosen.runs:
        ops = read_ops(spark, path, chosen.ingests)
        data.written["ops"] = f"{path}/{OPS}"
        report_tables(spark, data, chosen.runs, chosen.facts, ops, out, gap_ms, progress)
    changed = sum(r.run_id in known for r in good)
    done = Ingest(path, batch if good else None, len(good), changed, len(found.unchanged), len(manifest))
    return data, found.filtered_out + chosen.filtered_out, done
