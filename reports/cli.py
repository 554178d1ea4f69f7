"""`kchaos report RESULTS_DIR`: crunch a results root into tables, charts, report.html, summary.json."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from reports import ingest, metrics
from vocab.errors import EXIT_VALID, UserError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "report",
        description="Crunch a results root with Spark into Parquet/CSV tables, PNG charts, "
        "report.html and summary.json.",
    )
    add_arguments(parser)
    parser.set_defaults(func=run)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results_dir", metavar="RESULTS_DIR", help="results root (<test>/<timestamp>/ runs)")
    parser.add_argument("--out", help="output directory (default RESULTS_DIR/_report)")
    parser.add_argument("--master", help="Spark master URL (default local[*], or what spark-submit set)")
    parser.add_argument("--conf", action="append", default=[], metavar="K=V", help="Spark configuration, repeatable")
    parser.add_argument(
        "--store",
        metavar="PATH",
        help="incremental store (local dir, hdfs://, s3a://): ingest only new or changed runs, report over all",
    )
    parser.add_argument("--since", help="only runs started at/after: ISO date or date-time, or 7d / 12h")
    parser.add_argument("--test", action="append", default=[], metavar="NAME", help="only this test (glob)")
    parser.add_argument("--runs", metavar="GLOB", help="only runs whose <test>/<timestamp> matches")
    parser.add_argument(
        "--gap-ms",
        type=float,
        default=metrics.DEFAULT_GAP_MS,
        help="no success of an f for longer than this is an unavailability window (default %(default)s)",
    )


def options_from(args: argparse.Namespace):  # -> JobOptions
    from reports.job import JobOptions

    if not Path(args.results_dir).is_dir():
        raise UserError(f"results root {args.results_dir}: not a directory")
    if args.gap_ms <= 0:
        raise UserError(f"--gap-ms {args.gap_ms}: must be positive")
    filters = ingest.Filters(
        since=ingest.parse_since(args.since) if args.since else None,
        tests=list(args.test),
        runs_glob=args.runs,
    )
    store = getattr(args, "store", None)
    if store is not None and "://" not in store and Path(store).exists() and not Path(store).is_dir():
        raise UserError(f"--store {store}: not a directory")
    return JobOptions(root=args.results_dir, out=args.out, filters=filters, gap_ms=args.gap_ms, store=store)


def run(args: argparse.Namespace) -> int:
    from reports.job import run_job
    from reports.spark_session import make_session, parse_conf

    console = Console(stderr=True, log_path=False)
    options = options_from(args)
    conf = parse_conf(args.conf)
    started = time.monotonic()
    from pyspark.sql import SparkSession

    # Inside a pyspark shell or notebook, use (and leave running) the session already there.
    owned = SparkSession.getActiveSession() is None
    with console.status("starting Spark") as status:
        spark = make_session(args.master, conf)
        console.log(f"Spark {spark.version} on {spark.sparkContext.master}")
        last = [time.monotonic()]

        def progress(step: str) -> None:
            now = time.monotonic()
            console.log(f"{step}  [dim](+{now - last[0]:.1f}s)[/dim]")
            last[0] = now
            status.update(step)

        try:
            result = run_job(spark, options, progress)
        finally:
            if owned:
                spark.stop()
    _print_summary(console, result.summary, result.report, time.monotonic() - started)
    return EXIT_VALID


def _print_summary(console: Console, summary: dict, report: Path, elapsed: float) -> None:
    runs = summary["runs"]
    table = Table(title="kchaos report", show_header=False)
    table.add_row("runs", str(runs["included"]))
    table.add_row("passed / failed / unknown", f"{runs['passed']} / {runs['failed']} / {runs['unknown']}")
    rate = summary["pass_rate"]
    table.add_row("pass rate", "-" if rate is None else f"{rate:.1%}")
    table.add_row("lost writes", str(summary["commit_loss"]["lost_writes"]))
    table.add_row("flaky tests", ", ".join(summary["flaky_tests"]) or "none")
    table.add_row("skipped", str(runs["skipped"]))
    if "store" in summary:
        store = summary["store"]
        table.add_row(
            "store",
            f"{store['path']}: ingested {store['ingested']} ({store['changed']} changed), "
            f"{store['unchanged']} already there, {store['runs_in_store']} runs in all",
        )
    table.add_row("report", str(report))
    table.add_row("wall time", f"{elapsed:.1f}s")
    console.print(table)
    for skipped in summary["skipped"]:
        console.print(f"[yellow]skipped[/yellow] {skipped['path']}: {skipped['reason']}")
    for warning in summary["warnings"]:
        console.print(f"[yellow]warning[/yellow] {warning}")
