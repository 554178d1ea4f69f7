"""How the Spark report's time grows with the operations it crunches: 1M, 10M and 30M ops.

Each size is a synthetic results root (reports.synth: Parquet histories, runs of a fixed size, so the
number of runs grows with the ops) generated under --data (default: a new folder in /tmp) and removed
again after its report unless --keep. For each size it prints the report job's wall time and the CPU
time of the whole process tree (this Python, the Spark JVM and its Python workers: less sensitive to
other jobs on a shared machine than wall time), per size, per million ops, and the marginal cost
between sizes (the slope: flat = linear growth above the job's fixed cost). A warm-up job on 20K ops
runs first and is not counted. With --store-at SIZE, at that size it then also times an incremental
report (`--store`): the whole root ingested into a store, then one new night of runs (a tenth of the
size) added and the report run again, which ingests only those and reports over everything.

--budget bounds the whole benchmark: a size whose time, extrapolated from the last size measured,
would not fit in what is left is not run, and the extrapolation is printed instead.

    python benchmarks/bench_report_scaling.py [--sizes 1M,10M,30M] [--ops-per-run 100K] [--budget 40m]
        [--store-at 10M] [--steps] [--data DIR] [--keep] [--conf spark.driver.memory=8g]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from harness.test_spec import _duration
from reports.job import JobOptions, run_job
from reports.spark_session import make_session, parse_conf
from reports.synth import CATALOGUE, RunSpec, synthesize, write_run

TICKS = os.sysconf("SC_CLK_TCK")


def _count(text: str) -> int:
    text = text.strip().upper()
    scale = {"K": 1_000, "M": 1_000_000}.get(text[-1], 1)
    return int(float(text.rstrip("KM")) * scale)


def tree_cpu_s(root: int | None = None) -> float:
    """User + system CPU seconds of a process and all its live descendants, plus what their reaped
    children used (/proc/PID/stat fields utime, stime, cutime, cstime)."""
    children: dict[int, list[int]] = {}
    cpu: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
        cpu[int(entry)] = sum(int(v) for v in fields[11:15])
    total, todo = 0, [root or os.getpid()]
    while todo:
        pid = todo.pop()
        total += cpu.get(pid, 0)
        todo.extend(children.get(pid, []))
    return total / TICKS


def timed_job(spark, options: JobOptions, steps: bool) -> tuple[float, float, dict]:
    last = [time.perf_counter()]

    def step(name: str) -> None:
        now = time.perf_counter()
        if steps:
            print(f"      +{now - last[0]:6.1f}s  then: {name}", flush=True)
        last[0] = now

    cpu0, wall0 = tree_cpu_s(), time.perf_counter()
    result = run_job(spark, options, step)
    return time.perf_counter() - wall0, tree_cpu_s() - cpu0, result.summary


def add_night(root: Path, runs: int, ops_per_run: int) -> None:
    """One more night of runs, after the synthetic ones (which start on 2026-11-01 and span 10 nights)."""
    night = datetime(2026, 11, 20, 1, 0, tzinfo=UTC)
    for i in range(runs):
        spec = RunSpec(CATALOGUE[i % len(CATALOGUE)], 900_000 + i, ops_per_run, night + timedelta(minutes=2 * i))
        write_run(root, spec, ("parquet",))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1M,10M,30M", help="total client ops per results root")
    parser.add_argument("--ops-per-run", default="100K", help="ops in each synthetic run (default 100K)")
    parser.add_argument("--budget", default="60m", help="stop starting sizes after this much time (e.g. 40m)")
    parser.add_argument("--data", help="where to generate (default: a new folder in /tmp)")
    parser.add_argument("--keep", action="store_true", help="keep the generated roots and reports")
    parser.add_argument("--store-at", metavar="SIZE", help="at this size, also time an incremental --store report")
    parser.add_argument("--steps", action="store_true", help="print the time of each pipeline step")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--conf", action="append", default=[], metavar="K=V")
    args = parser.parse_args(argv)
    sizes = [_count(s) for s in args.sizes.split(",")]
    per_run = _count(args.ops_per_run)
    deadline = time.monotonic() + _duration(args.budget, "--budget", positive=True)
    data = Path(args.data or tempfile.mkdtemp(prefix="kchaos-scaling-"))
    data.mkdir(parents=True, exist_ok=True)
    conf = {"spark.driver.memory": "8g", "spark.sql.shuffle.partitions": "8", **parse_conf(args.conf)}

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so `finally` removes the data
    started = time.perf_counter()
    spark = make_session(args.master, conf)
    print(f"Spark {spark.version} on {spark.sparkContext.master}, {conf}", flush=True)
    print(f"session start {time.perf_counter() - started:.1f}s; data under {data}", flush=True)
    try:
        warm = data / "warmup"
        synthesize(warm, runs=8, ops=20_000, nights=2, seed=3, formats=("parquet",))
        wall, cpu, _ = timed_job(spark, JobOptions(root=str(warm), out=str(data / "warmup-report")), False)
        print(f"warm-up job (8 runs, 20K ops, not counted): {wall:.1f}s wall, {cpu:.1f}s CPU", flush=True)
        shutil.rmtree(warm, ignore_errors=True)
        shutil.rmtree(data / "warmup-report", ignore_errors=True)

        rows: list[tuple[int, int, float, float, float]] = []  # ops, runs, gen s, wall s, cpu s
        for ops in sizes:
            runs = max(1, ops // per_run)
            left = deadline - time.monotonic()
            if rows:
                prev_ops, _, prev_gen, prev_wall, _ = rows[-1]
                guess = (prev_gen + prev_wall) * ops / prev_ops
                if guess > left:
                    wall_guess = prev_wall * ops / prev_ops
                    print(
                        f"{ops:>11,} ops: not run (about {guess:.0f}s with generation, {left:.0f}s of the budget "
                        f"left); extrapolated from {prev_ops:,}: ~{wall_guess:.0f}s wall",
                        flush=True,
                    )
                    continue
            root = data / f"ops{ops}"
            t0 = time.perf_counter()
            synthesize(root, runs=runs, ops=ops, nights=10, seed=5, formats=("parquet",))
            gen = time.perf_counter() - t0
            print(f"{ops:>11,} ops in {runs} runs generated in {gen:.1f}s", flush=True)
            out = data / f"report-ops{ops}"
            wall, cpu, summary = timed_job(spark, JobOptions(root=str(root), out=str(out)), args.steps)
            assert summary["runs"]["included"] == runs, summary["runs"]
            rows.append((ops, runs, gen, wall, cpu))
            print(
                f"{ops:>11,} ops: report {wall:.1f}s wall ({wall / (ops / 1e6):.2f}s per M ops), "
                f"{cpu:.1f}s CPU ({cpu / (ops / 1e6):.2f}s per M ops)",
                flush=True,
            )
            if args.store_at and _count(args.store_at) == ops:
                store = data / f"store-ops{ops}"
                first, _, s1 = timed_job(spark, JobOptions(root=str(root), out=str(out), store=str(store)), False)
                add_night(root, max(1, runs // 10), per_run)
                second, cpu2, s2 = timed_job(
                    spark, JobOptions(root=str(root), out=str(out), store=str(store)), args.steps
                )
                print(
                    f"{ops:>11,} ops, --store: first report (ingests {s1['store']['ingested']} runs) {first:.1f}s; "
                    f"next night (ingests {s2['store']['ingested']}, {s2['store']['unchanged']} already there, "
                    f"report over {s2['runs']['included']} runs) {second:.1f}s wall, {cpu2:.1f}s CPU",
                    flush=True,
                )
                if not args.keep:
                    shutil.rmtree(store, ignore_errors=True)
            if not args.keep:
                shutil.rmtree(root, ignore_errors=True)
                shutil.rmtree(out, ignore_errors=True)

        print(
            "\n| ops | runs | report wall s | wall s per M ops | CPU s | CPU s per M ops | marginal wall s per M ops |"
        )
        print("|---:|---:|---:|---:|---:|---:|---:|")
        previous = None
        for ops, runs, _gen, wall, cpu in rows:
            slope = "" if previous is None else f"{(wall - previous[1]) / ((ops - previous[0]) / 1e6):.2f}"
            print(
                f"| {ops / 1e6:g}M | {runs} | {wall:.1f} | {wall / (ops / 1e6):.2f} | {cpu:.1f} | "
                f"{cpu / (ops / 1e6):.2f} | {slope} |"
            )
            previous = (ops, wall)
    finally:
        spark.stop()
        if not args.keep and not args.data:
            shutil.rmtree(data, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
