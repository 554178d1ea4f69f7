"""Elle-style checker speed: large list-append and rw-register histories (figures, not a test).

python benchmarks/bench_elle.py [--txns 100000] [--processes 10] [--model strict-serializable]
                                [--stale-rate 0.0] [--workload list-append|rw-register|both]

Each history is generated, written to a temporary history.jsonl, loaded, and checked; the load and
the check are timed separately (the check in wall-clock and process CPU time, the figure to quote on
a shared machine), with the peak resident memory of the process after each check.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from txn_histories import transactional_events

from checkers.elle import check_list_append, check_rw_register
from checkers.history import load_history


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def bench(workload: str, args: argparse.Namespace, directory: Path) -> None:
    path = directory / f"{workload}.jsonl"
    start = time.perf_counter()
    with path.open("w") as out:
        for event in transactional_events(
            workload, args.txns, processes=args.processes, stale_rate=args.stale_rate, seed=args.seed
        ):
            out.write(json.dumps(event) + "\n")
    generated = time.perf_counter() - start
    start = time.perf_counter()
    history = load_history(path)
    loaded = time.perf_counter() - start
    check = check_list_append if workload == "list-append" else check_rw_register
    start, cpu = time.perf_counter(), time.process_time()
    verdict = check(history, args.model)
    checked, checked_cpu = time.perf_counter() - start, time.process_time() - cpu
    graph = verdict.details["graph"]
    print(
        f"{workload:12} {args.txns:>8} txns  {args.processes} processes  model {args.model}: "
        f"valid={verdict.valid}  check {checked:6.2f} s wall, {checked_cpu:6.2f} s CPU  "
        f"(load {loaded:.2f} s, generate {generated:.2f} s)  "
        f"peak RSS {peak_rss_mb():.0f} MB  graph {graph['nodes']} nodes / {graph['edges']} edges"
    )
    if verdict.details["anomaly_counts"]:
        print(f"{'':12} anomalies: {verdict.details['anomaly_counts']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--txns", type=int, default=100_000)
    parser.add_argument("--processes", type=int, default=10)
    parser.add_argument("--model", default="strict-serializable")
    parser.add_argument("--stale-rate", type=float, default=0.0, help="fraction of reads made stale")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workload", choices=("list-append", "rw-register", "both"), default="both")
    args = parser.parse_args()
    workloads = ("list-append", "rw-register") if args.workload == "both" else (args.workload,)
    with tempfile.TemporaryDirectory(prefix="bench-elle-") as tmp:
        for workload in workloads:
            bench(workload, args, Path(tmp))


if __name__ == "__main__":
    main()
