"""Benchmark the Spark reports pipeline against a single-process pandas computation.

For each case (total client ops across N runs) it generates a synthetic results root (Parquet
histories, written directly with pyarrow), then prints:
  - the wall time of the whole report job on local[2] (discovery, Spark jobs, tables, charts, HTML),
    plus the Spark session start-up separately;
  - the wall time of a single-process pandas computation of the same latency-quantile table
    (read every history, pair ops, exact quantiles by workload x f x outcome x fault);
  - their ratio, and seconds per million ops (flat or falling = growth no faster than linear).

    python benchmarks/bench_reports.py [--cases 1M:100,1M:1000,10M:100,10M:1000] [--data DIR]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from reports import metrics
from reports.ingest import Filters, discover
from reports.job import JobOptions, run_job
from reports.spark_session import make_session
from reports.synth import synthesize


def _count(text: str) -> int:
    text = text.strip().upper()
    scale = {"K": 1_000, "M": 1_000_000}.get(text[-1], 1)
    return int(float(text.rstrip("KM")) * scale)


def generate(data: Path, ops: int, runs: int) -> tuple[Path, float]:
    root = data / f"ops{ops}-runs{runs}"
    marker = root / ".complete"
    if marker.exists():
        return root, 0.0
    shutil.rmtree(root, ignore_errors=True)
    started = time.perf_counter()
    synthesize(root, runs=runs, ops=ops, nights=10, seed=5, formats=("parquet",))
    marker.write_text("ok\n")
    return root, time.perf_counter() - started


def pandas_quantiles(root: Path) -> tuple[pd.DataFrame, float]:
    """The latency-quantile table in one process with pandas: the baseline."""
    started = time.perf_counter()
    found = discover(root, Filters())
    parts = []
    for run in found.runs:
        ops = metrics.derive(metrics.read_history(run.history_path, run.history_format)).ops
        parts.append(ops.assign(workload=str(run.test.get("workload"))))
    table = metrics.latency_quantiles(pd.concat(parts, ignore_index=True), ["workload", "f", "outcome", "fault"])
    return table, time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="1M:100,1M:1000,10M:100,10M:1000", help="OPS:RUNS,...")
    parser.add_argument("--data", help="where to generate results roots (kept and reused)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--steps", action="store_true", help="print the time of each pipeline step")
    args = parser.parse_args(argv)
    data = Path(args.data or tempfile.mkdtemp(prefix="kchaos-bench-"))
    data.mkdir(parents=True, exist_ok=True)
    cases = [(_count(o), int(r)) for o, r in (c.split(":") for c in args.cases.split(","))]

    started = time.perf_counter()
    spark = make_session(args.master)
    session_s = time.perf_counter() - started
    print(f"Spark {spark.version} on {spark.sparkContext.master}: session start {session_s:.1f}s", flush=True)
    warm = data / "warmup"
    if not (warm / ".complete").exists():
        synthesize(warm, runs=8, ops=20_000, nights=2, seed=3, formats=("parquet",))
        (warm / ".complete").write_text("ok\n")
    started = time.perf_counter()
    run_job(spark, JobOptions(root=str(warm), out=str(data / "report-warmup")))
    print(f"warm-up job (8 runs, 20K ops, not counted): {time.perf_counter() - started:.1f}s", flush=True)
    header = f"{'ops':>10} {'runs':>6} {'gen s':>7} {'spark s':>8} {'pandas s':>9} {'ratio':>6} {'spark s/Mop':>11}"
    rows = []
    print(header, flush=True)
    for ops, runs in cases:
        root, gen_s = generate(data, ops, runs)
        out = data / f"report-ops{ops}-runs{runs}"
        t0 = time.perf_counter()
        last = [t0]

        def step(name: str, last: list[float] = last) -> None:
            now = time.perf_counter()
            if args.steps:
                print(f"    +{now - last[0]:6.1f}s  then: {name}", flush=True)
            last[0] = now

        result = run_job(spark, JobOptions(root=str(root), out=str(out)), step)
        spark_s = time.perf_counter() - t0
        baseline, pandas_s = pandas_quantiles(root)
        total_ops = int(result.data.tables["runs"]["ops"].sum())
        mine = result.data.tables["latency_quantiles"]
        agree = len(mine) == len(baseline) and (mine["count"].to_numpy() == baseline["count"].to_numpy()).all()
        row = (
            f"{total_ops:>10} {runs:>6} {gen_s:>7.1f} {spark_s:>8.1f} {pandas_s:>9.1f} "
            f"{spark_s / pandas_s:>6.2f} {spark_s / (total_ops / 1e6):>11.1f}"
        )
        rows.append(row + ("" if agree else "  (quantile tables differ!)"))
        print(rows[-1], flush=True)
    spark.stop()
    print("\n" + header)
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
