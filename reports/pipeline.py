"""The Spark jobs: derived tables (ops, faults, runs) and the report tables computed from them.

Histories are read inside executors, one run at a time, by the same pandas functions the per-run path
uses (reports.metrics): that pass writes the ops table and sends back each run's small facts (event
count, end, fault windows). Everything else, per run and across runs, is Spark over the ops table read
back from Parquet (a report's own, or an incremental store's: reports.store).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.accumulators import Accumulator, AccumulatorParam
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from reports import metrics
from reports.ingest import Discovery, RunSource, Skipped
from reports.schema import nemesis_label

Progress = Callable[[str], None]

OPS_SCHEMA = T.StructType(
    [
        T.StructField("run_id", T.StringType()),
        T.StructField("workload", T.StringType()),
        T.StructField("invoke_index", T.LongType()),
        T.StructField("process", T.StringType()),
        T.StructField("f", T.StringType()),
        T.StructField("key", T.StringType()),
        T.StructField("node", T.StringType()),
        T.StructField("outcome", T.StringType()),
        T.StructField("invoke_ns", T.LongType()),
        T.StructField("complete_ns", T.LongType()),
        T.StructField("latency_ms", T.DoubleType()),
        T.StructField("error", T.StringType()),
        T.StructField("fault_state", T.StringType()),
        T.StructField("test", T.StringType()),
        T.StructField("date", T.StringType()),
    ]
)
PARTITIONS = ["date", "test"]


@dataclass
class ReportData:
    """What the outputs (tables, charts, HTML, summary) are made from."""

    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    skipped: list[Skipped] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    written: dict[str, str] = field(default_factory=dict)  # big tables Spark wrote: name -> path


# ---------------------------------------------------------------------------------------------------
# Executor side: one run at a time


def _records(frame: pd.DataFrame) -> str:
    clean = frame.astype(object).where(frame.notna(), None)
    return json.dumps(clean.to_dict("records"), default=lambda v: v.item() if hasattr(v, "item") else str(v))


class _MergeDict(AccumulatorParam):
    """Per-run side results keyed by run_id: merging is idempotent, so a retried task is harmless."""

    def zero(self, value: dict) -> dict:
        return {}

    def addInPlace(self, value1: dict, value2: dict) -> dict:
        value1.update(value2)
        return value1


def _derive_runs(side: Accumulator) -> Callable[[Iterator[pd.DataFrame]], Iterator[pd.DataFrame]]:
    """Executor code: read each run's history once, emit its ops, and send its facts (event count, end,
    fault windows) or its read error back through the accumulator."""

    def derive(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for batch in batches:
            for run in batch.itertuples(index=False):
                try:
                    frames = metrics.derive(metrics.read_history(run.history_path, run.history_format))
                except Exception as exc:  # one damaged run must not fail the job
                    side.add({run.run_id: {"error": f"{type(exc).__name__}: {exc}"}})
                    continue
                facts = {"error": None, "events": frames.events, "end_ns": frames.end_ns}
                side.add({run.run_id: facts | {"faults": _records(frames.faults)}})
                ops = frames.ops.assign(run_id=run.run_id, workload=run.workload, test=run.test, date=run.date)
                yield ops[OPS_SCHEMA.fieldNames()]

    return derive


# ---------------------------------------------------------------------------------------------------
# Driver side


def _runs_frame(runs: list[RunSource]) -> pd.DataFrame:
    rows = []
    for run in runs:
        test = run.test
        figures = metrics.checker_figures(run.results)
        nodes = test.get("nodes")
        rows.append(
            {
                "run_id": run.run_id,
                "test": run.name,
                "date": run.date,
                "started_at": run.started_at.isoformat().replace("+00:00", "Z"),
                "run_dir": run.path,
                "workload": str(test.get("workload", "unknown")),
                "nemesis": nemesis_label(test.get("nemesis")),
                "backend": str(test.get("backend", "unknown")),
                "seed": None if test.get("seed") is None else str(test.get("seed")),
                "nodes": ",".join(map(str, nodes)) if isinstance(nodes, list) else None,
                "time_limit_s": _number(test.get("time_limit_s")),
                "concurrency": _number(test.get("concurrency")),
                "rate": _number(test.get("rate")),
                "valid": metrics.verdict_text(run.results.get("valid", "unknown")),
                "checkers": json.dumps({c.checker: c.valid for c in figures}, sort_keys=True),
                "lost_count": metrics.run_lost(figures),
                "anomaly_count": sum(c.anomaly_count for c in figures),
                "history_format": run.history_format,
            }
        )
    return pd.DataFrame(rows)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _checkers_frame(runs: list[RunSource]) -> pd.DataFrame:
    rows = [
        {
            "run_id": run.run_id,
            "test": run.name,
            "workload": str(run.test.get("workload", "unknown")),
            "date": run.date,
            "checker": c.checker,
            "valid": c.valid,
            "lost_count": c.lost_count,
            "anomaly_count": c.anomaly_count,
            "anomaly_types": ",".join(c.anomaly_types),
        }
        for run in runs
        for c in metrics.checker_figures(run.results)
    ]
    cols = ["run_id", "test", "workload", "date", "checker", "valid", "lost_count", "anomaly_count", "anomaly_types"]
    return pd.DataFrame(rows, columns=cols)


def _explode_json(scan: pd.DataFrame, column: str, columns: tuple[str, ...]) -> pd.DataFrame:
    parts = []
    for run_id, text in zip(scan["run_id"], scan[column]):
        records = json.loads(text)
        if records:
            parts.append(pd.DataFrame.from_records(records, columns=list(columns)).assign(run_id=run_id))
    if not parts:
        return pd.DataFrame(columns=["run_id", *columns])
    frame = pd.concat(parts, ignore_index=True)
    return frame[["run_id", *columns]]


def _write_spark(df: DataFrame, out: Path, name: str, partitioned: bool) -> str:
    """Parquet (partitioned by date and test when asked), then CSV with a header from the Parquet
    just written (so the job that made `df` runs once)."""
    parquet = out / "tables" / name
    writer = df.write.mode("overwrite")
    (writer.partitionBy(*PARTITIONS) if partitioned else writer).parquet(str(parquet))
    written = df.sparkSession.read.parquet(str(parquet))
    csv_writer = written.write.mode("overwrite").option("header", "true")
    (csv_writer.partitionBy(*PARTITIONS) if partitioned else csv_writer).csv(str(out / "csv" / name))
    return str(parquet)


def _write_partitioned(frame: pd.DataFrame, out: Path, name: str) -> str:
    """A small driver-side table: Parquet partitioned by date and test (the Hive layout Spark writes)
    and one CSV."""
    parquet = out / "tables" / name
    if parquet.exists():
        shutil.rmtree(parquet)
    parquet.mkdir(parents=True)
    if len(frame):
        pq.write_to_dataset(pa.Table.from_pandas(frame, preserve_index=False), parquet, partition_cols=PARTITIONS)
    (out / "csv").mkdir(parents=True, exist_ok=True)
    frame.to_csv(out / "csv" / f"{name}.csv", index=False)
    return str(parquet)


def _runs_input(spark: SparkSession, meta: pd.DataFrame) -> DataFrame:
    """The runs to read, in contiguous slices of (date, test) so each task writes few partitions;
    parallelize() keeps the order and needs no sampling job."""
    meta = meta.sort_values(["date", "test", "run_id"], kind="stable")
    slices = max(1, min(len(meta), spark.sparkContext.defaultParallelism * 3))
    rows = [tuple(r) for r in meta.itertuples(index=False)]
    schema = T.StructType([T.StructField(c, T.StringType()) for c in meta.columns])
    return spark.createDataFrame(spark.sparkContext.parallelize(rows, slices), schema)


def derive_ops(spark: SparkSession, runs: list[RunSource]) -> tuple[DataFrame, Accumulator]:
    """The ops of `runs` (OPS_SCHEMA), read in the executors when the DataFrame is written, and the
    accumulator their facts (or read errors) arrive in, keyed by run_id."""
    meta = pd.DataFrame(
        {
            "run_id": [r.run_id for r in runs],
            "history_path": [r.history_path for r in runs],
            "history_format": [r.history_format for r in runs],
            "workload": [str(r.test.get("workload", "unknown")) for r in runs],
            "test": [r.name for r in runs],
            "date": [r.date for r in runs],
        }
    )
    side = spark.sparkContext.accumulator({}, _MergeDict())
    return _runs_input(spark, meta).mapInPandas(_derive_runs(side), OPS_SCHEMA), side


def readable(runs: list[RunSource], facts: dict[str, dict[str, Any]]) -> tuple[list[RunSource], list[Skipped]]:
    """The runs whose history the executors read, and a Skipped for each of the others."""
    skipped: list[Skipped] = []
    for run in sorted(runs, key=lambda r: r.run_id):
        error = facts.get(run.run_id, {"error": "not read (task lost)"})["error"]
        if error:
            skipped.append(Skipped(run.path, f"history unreadable: {error}"))
    good = [r for r in runs if not facts.get(r.run_id, {"error": True})["error"]]
    return good, skipped


def run_pipeline(
    spark: SparkSession,
    discovery: Discovery,
    out: Path,
    gap_ms: float = metrics.DEFAULT_GAP_MS,
    progress: Progress = lambda _step: None,
) -> ReportData:
    """The report over freshly discovered runs: their ops are written under `out` and read back."""
    data = ReportData(skipped=list(discovery.skipped), warnings=list(discovery.warnings))
    runs = list(discovery.runs)
    out.mkdir(parents=True, exist_ok=True)
    if not runs:
        return data
    progress(f"reading {len(runs)} histories and pairing operations")
    derived, side = derive_ops(spark, runs)
    data.written["ops"] = _write_spark(derived, out, "ops", partitioned=True)
    facts: dict[str, dict[str, Any]] = side.value
    runs, skipped = readable(runs, facts)
    data.skipped.extend(skipped)
    if runs:
        report_tables(spark, data, runs, facts, spark.read.parquet(data.written["ops"]), out, gap_ms, progress)
    return data


FAULTS_SCHEMA = T.StructType(
    [
        T.StructField("run_id", T.StringType()),
        T.StructField("kind", T.StringType()),
        T.StructField("targets", T.StringType()),
        T.StructField("start_index", T.LongType()),
        T.StructField("start_ns", T.LongType()),
        T.StructField("end_ns", T.LongType()),
        T.StructField("healed", T.BooleanType()),
        T.StructField("duration_ms", T.DoubleType()),
    ]
)


# Stands for "no success after it" in next_ok_ns on the way to pandas: a nullable long column would
# arrive as float64, which cannot hold every nanosecond time exactly.
NO_OK = -(2**63)


def _spark_frame(spark: SparkSession, frame: pd.DataFrame, schema: T.StructType) -> DataFrame:
    if frame.empty:
        return spark.createDataFrame([], schema)
    return spark.createDataFrame(frame[schema.fieldNames()], schema)


def _per_run(counts: DataFrame, faults: DataFrame, facts: DataFrame) -> DataFrame:
    """Per run: ops by outcome, fault windows, events, duration and info rate (one row per run)."""
    outcomes = ("ops", "ok", "fail", "info")
    by_run = counts.groupBy("run_id").agg(*(F.sum(c).alias(c) for c in outcomes))
    windows = faults.groupBy("run_id").agg(F.count("*").alias("faults"))
    joined = facts.join(by_run, "run_id", "left").join(windows, "run_id", "left")
    ops = F.coalesce(F.col("ops"), F.lit(0)).cast("long")
    info = F.coalesce(F.col("info"), F.lit(0)).cast("long")
    return joined.select(
        "run_id",
        *(F.coalesce(F.col(c), F.lit(0)).cast("long").alias(c) for c in outcomes),
        "events",
        (F.col("end_ns") / F.lit(float(metrics.NS_PER_S))).alias("duration_s"),
        F.coalesce(F.col("faults"), F.lit(0)).cast("long").alias("faults"),
        F.when(ops > 0, info / ops).otherwise(F.lit(0.0)).alias("info_rate"),
    )


def report_tables(
    spark: SparkSession,
    data: ReportData,
    runs: list[RunSource],
    facts: dict[str, dict[str, Any]],
    ops: DataFrame,
    out: Path,
    gap_ms: float = metrics.DEFAULT_GAP_MS,
    progress: Progress = lambda _step: None,
) -> None:
    """Every report table over `ops` (the ops of exactly `runs`) and the runs' facts: per-run figures
    are Spark aggregates; only tables with a row per run, fault or window are finished on the driver."""
    test_of = {r.run_id: r.name for r in runs}
    date_of = {r.run_id: r.date for r in runs}
    scan = pd.DataFrame(
        [{"run_id": r.run_id, **facts[r.run_id]} for r in runs], columns=["run_id", "events", "end_ns", "faults"]
    )
    faults = _explode_json(scan, "faults", metrics.FAULT_COLUMNS)
    faults_df = _spark_frame(spark, faults, FAULTS_SCHEMA)
    facts_df = spark.createDataFrame(
        [(r, int(e), int(n)) for r, e, n in zip(scan["run_id"], scan["events"], scan["end_ns"])],
        "run_id string, events long, end_ns long",
    )

    # 3. Op counts per run and f, and the per-run figures from them (runs, info rates, the summary).
    progress("op counts, runs, verdicts and commit loss")
    counts_df = (
        ops.groupBy("run_id", "f")
        .agg(
            F.count("*").alias("ops"),
            F.sum((F.col("outcome") == "ok").cast("long")).alias("ok"),
            F.sum((F.col("outcome") == "fail").cast("long")).alias("fail"),
            F.sum((F.col("outcome") == "info").cast("long")).alias("info"),
        )
        .cache()
    )
    counts = counts_df.toPandas()
    per_run = _per_run(counts_df, faults_df, facts_df).toPandas()
    counts_df.unpersist()
    runs_pdf = _runs_frame(runs).merge(per_run, on="run_id", how="left")
    runs_pdf = runs_pdf.sort_values(["started_at", "run_id"], kind="stable").reset_index(drop=True)
    data.written["runs"] = _write_partitioned(runs_pdf, out, "runs")
    faults.insert(1, "test", faults["run_id"].map(test_of))
    faults.insert(2, "date", faults["run_id"].map(date_of))
    data.written["faults"] = _write_partitioned(faults, out, "faults")

    tables: dict[str, pd.DataFrame] = {"runs": runs_pdf, "faults": faults}
    checkers = _checkers_frame(runs)
    tables["checkers"] = checkers
    tables["pass_rate_by_test"] = metrics.pass_rates(runs_pdf, ["test"])
    tables["pass_rate_by_nemesis"] = metrics.pass_rates(runs_pdf, ["nemesis"])
    tables["pass_rate_by_workload"] = metrics.pass_rates(runs_pdf, ["workload"])
    tables["pass_rate_trend"] = metrics.pass_rates(runs_pdf, ["test", "date"])
    tables["flaky_tests"] = metrics.flaky_tests(runs_pdf)
    tables["loss_by_run"] = runs_pdf.loc[
        runs_pdf["lost_count"] > 0, ["run_id", "test", "nemesis", "date", "lost_count", "run_dir"]
    ].reset_index(drop=True)
    tables["loss_by_test"] = metrics.commit_loss(runs_pdf, ["test"])
    tables["loss_by_nemesis"] = metrics.commit_loss(runs_pdf, ["nemesis"])
    tables["loss_by_workload"] = metrics.commit_loss(runs_pdf, ["workload"])
    tables["anomalies_by_checker"] = metrics.anomalies_by_checker(checkers)
    tables["anomalies_by_workload"] = metrics.anomalies_by_workload(checkers)
    tables["anomaly_types"] = metrics.anomaly_types(checkers)
    counts = counts.merge(runs_pdf[["run_id", "test", "nemesis"]], on="run_id")
    tables["info_rates"] = metrics.info_rates(counts, ["test", "nemesis", "f"])

    # 4. Availability: unavailability windows and failover / recovery times, per run in Spark.
    progress("availability")
    availability = metrics.spark_availability(ops, faults_df, facts_df, gap_ms).cache()  # a few rows per run
    unavailable = metrics.spark_unavailability(availability, faults_df).toPandas()
    recovered = metrics.spark_recovery(availability).fillna({"next_ok_ns": NO_OK}).toPandas()
    availability.unpersist()
    for frame in (unavailable, recovered):
        frame.insert(1, "test", frame["run_id"].map(test_of))
        frame.insert(2, "date", frame["run_id"].map(date_of))
    unavailable = unavailable.astype({"start_ns": "int64", "end_ns": "int64", "duration_ms": "float64"})
    unavailable["open_ended"] = unavailable["open_ended"].astype(bool)
    missing = recovered["next_ok_ns"] == NO_OK
    recovered["next_ok_ns"] = recovered["next_ok_ns"].astype("Int64").mask(missing)
    recovered = recovered.astype({"event_ns": "int64", "delay_ms": "float64"})
    tables["unavailability"] = unavailable
    tables["unavailability_summary"] = metrics.unavailability_summary(unavailable)
    tables["recovery"] = recovered
    tables["recovery_summary"] = metrics.recovery_summary(recovered)
    tables["failover_trend"] = metrics.failover_trend(recovered)

    # 5. Latency (Spark, exact percentiles) over all ops.
    progress("latency quantiles")
    tables["latency_quantiles"] = metrics.spark_latency_quantiles(ops, ["workload", "f", "outcome", "fault"]).toPandas()
    by_run = metrics.spark_latency_quantiles(ops, ["run_id", "f", "outcome", "fault"])
    data.written["latency_quantiles_by_run"] = _write_spark(by_run, out, "latency_quantiles_by_run", False)
    ok_ops = ops.where(F.col("outcome") == "ok")
    tables["p99_trend"] = (
        metrics.spark_latency_quantiles(ok_ops, ["test", "date", "f"])
        .select("test", "date", "f", F.col("count").alias("ops"), "p99_ms")
        .toPandas()
    )

    # 6. Throughput over run time.
    progress("throughput")
    per_second = (
        ops.where(F.col("complete_ns").isNotNull())
        .withColumn("second", metrics.spark_second())
        .groupBy("run_id", "test", "second", "f", "outcome")
        .agg(F.count("*").alias("ops"))
    )
    data.written["throughput"] = _write_spark(per_second, out, "throughput", partitioned=False)
    runs_per_test = runs_pdf.groupby("test").size().rename("runs")
    by_test = (
        spark.read.parquet(data.written["throughput"])
        .groupBy("test", "second", "outcome")
        .agg(F.sum("ops").alias("ops"))
        .orderBy("test", "second", "outcome")
        .toPandas()
        .join(runs_per_test, on="test")
    )
    by_test["ops_per_s"] = by_test["ops"] / by_test["runs"] / metrics.THROUGHPUT_BUCKET_S
    tables["throughput_by_test"] = by_test
    data.tables = tables
