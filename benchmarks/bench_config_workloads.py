"""The config workloads end to end on the sim backend: wall time per phase, the checks, the run directory.

    python benchmarks/bench_config_workloads.py [--workload config-append] [--time-limit 60] [--seed 9]

Runs the default test (3 controllers + 2 brokers, partition + kill, 50 ops/s, 10 s recovery window)
for each workload and prints where the time goes, how long each checker took on a re-analysis, and
how big the run directory is. The machine's load average is printed too: figures on a shared machine
vary with it.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from checkers.history import load_history
from checkers.registry import get_checker
from harness import store
from harness.run_report import checker_args, checker_names, run_options
from harness.runner import run_test
from harness.test_spec import Cluster, TestSpec


def size_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 1e6


def bench(workload: str, time_limit: float, seed: int) -> None:
    spec = TestSpec(
        name=f"bench-{workload}",
        seed=seed,
        backend="sim",
        cluster=Cluster(controllers=3, brokers=2),
        workload=workload,
        time_limit_s=time_limit,
    )
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        result = run_test(spec, root=tmp, say=lambda _: None)
        wall = time.perf_counter() - start
        phases = ", ".join(f"{k} {v:.1f} s" for k, v in result.timings.items())
        print(f"{workload}: verdict {result.valid} in {wall:.1f} s wall ({phases})")
        test = store.read_test(result.run)
        history = load_history(result.run.history_jsonl)
        args = checker_args(result.run, run_options(test))
        timed = {}
        for name in checker_names(test, result.run):
            began = time.perf_counter()
            get_checker(name)(history, args)
            timed[name] = time.perf_counter() - began
        print("  checkers: " + ", ".join(f"{name} {seconds:.2f} s" for name, seconds in timed.items()))
        print(f"  run directory {size_mb(result.run.path):.1f} MB; load average {os.getloadavg()[0]:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", action="append", help="config-register and/or config-append (default both)")
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=9)
    args = parser.parse_args()
    for workload in args.workload or ["config-register", "config-append"]:
        bench(workload, args.time_limit, args.seed)


if __name__ == "__main__":
    main()
