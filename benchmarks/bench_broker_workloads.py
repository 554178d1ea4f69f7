"""Speed and coverage of the played-broker workloads (printed figures, not a test).

python benchmarks/bench_broker_workloads.py [--sim-time 60] [--seeds 3] [--checker-ops 0]

1. For `registrations` and `isr-changes`: whole 5-node tests on the sim backend (partition + kill,
   the default schedule), from provisioning to the verdict: wall seconds per run, virtual seconds per
   wall second, ops per run, and what the checkers judged (probes, duplicates, AlterPartitions).
2. The checkers alone on the longest isr-changes history of those runs: seconds per checker.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from checkers.history import load_history
from checkers.partition_cas import check_partition_cas
from checkers.partition_state import check_partition_state
from checkers.registrations import check_registrations
from harness.runner import run_test
from harness.test_spec import Cluster, TestSpec


def run(workload: str, seed: int, seconds: float, root: Path) -> tuple[float, Path, dict]:
    spec = TestSpec(
        name=f"bench-{workload}",
        seed=seed,
        backend="sim",
        cluster=Cluster(controllers=3, brokers=2),
        workload=workload,
        nemesis=("partition", "kill"),
        time_limit_s=seconds,
    )
    start = time.perf_counter()
    result = run_test(spec, root=root, say=lambda _: None, progress=False)
    wall = time.perf_counter() - start
    if result.exit_code != 0:
        raise SystemExit(f"{workload} seed {seed}: exit {result.exit_code}: {result.checker_lines}")
    return wall, result.run.path, json.loads((result.run.path / "results.json").read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sim-time", type=float, default=60.0, help="run phase, virtual seconds")
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        longest: tuple[int, Path] | None = None
        for workload in ("registrations", "isr-changes"):
            walls, ops, judged, alters = [], [], [], []
            for seed in range(1, args.seeds + 1):
                wall, run_dir, results = run(workload, seed, args.sim_time, Path(tmp))
                n = sum(1 for line in (run_dir / "history.jsonl").open() if '"nemesis"' not in line) // 2
                walls.append(wall)
                ops.append(n)
                counts = results["checkers"]["registrations"]["counts"]
                judged.append((counts.get("probes_judged", 0), counts.get("probes", 0)))
                state = results["checkers"]["partition-state"].get("counts", {})
                alters.append((state.get("alters_changed", 0), state.get("alters", 0)))
                if workload == "isr-changes" and (longest is None or n > longest[0]):
                    longest = (n, run_dir)
            virtual = args.sim_time + 10  # plus the heal, recovery and final reads, about
            print(
                f"{workload}: {args.seeds} runs of {args.sim_time:g} s: wall {statistics.median(walls):.1f} s median "
                f"(~{virtual / statistics.median(walls):.0f}x real time), {statistics.median(ops):.0f} ops per run; "
                f"probes judged/not-caught-up heartbeats {judged}; AlterPartitions changed/sent {alters}"
            )
        assert longest is not None
        history = load_history(longest[1] / "history.jsonl")
        for name, check in (
            ("registrations", lambda h: check_registrations(h, longest[1])),
            ("partition-state", lambda h: check_partition_state(h, longest[1])),
            ("partition-cas", check_partition_cas),
        ):
            start = time.perf_counter()
            verdict = check(history)
            print(f"checker {name}: {time.perf_counter() - start:.2f} s on {longest[0]} ops ({verdict.valid})")


if __name__ == "__main__":
    main()
