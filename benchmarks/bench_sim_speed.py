"""The simulator rows of issue 16's speed table, as a user meets them. Prints figures; asserts nothing.

    python benchmarks/bench_sim_speed.py [--seeds 5] [--runs 3] [--write-docs]

1. The quorum simulator (`kchaos sim`): 3 voters, default `quorum.*` timeouts, partition, kill, pause
   and clock faults, a client appending every 20 ms (50/s), 300 simulated seconds, one run per seed,
   in this process. Target >= 100x real time.
2. Whole simulated chaos tests, each a fresh `kchaos run --backend sim` process timed from its start to
   its exit (interpreter start, imports, cluster start, run, heal, recovery, final reads, dumps,
   checkers, plots, report): the default test (3 controllers + 2 brokers, config-register, partition +
   kill, 60 s) and 3 combined nodes under partition, kill, pause and clock for 300 s. Virtual time is
   the last history event's time. Target >= 20x real time.

Wall time is what a user waits; CPU time (user + system of the process, or of the child) is the steadier
figure on a shared machine: the ratio to it is what the code itself achieves.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import docs_tables
from node.sim.faults import FaultConfig
from node.sim.runner import RunConfig, run
from node.sim.workload import WorkloadConfig
from node.sim.world import SimConfig

FAULTS = ("partition", "kill", "pause", "clock")
ROOT = Path(__file__).resolve().parent.parent


def spread(values: list[float]) -> str:
    return f"{min(values):7.0f}x {statistics.median(values):7.0f}x {max(values):7.0f}x"


def quorum_simulator(seeds: int) -> list[float]:
    print("1. quorum simulator: 3 voters, partition,kill,pause,clock, 50 appends/s, 300 s simulated")
    print(f"   {'seed':>4} {'events':>7} {'acked':>6} {'wall s':>7} {'cpu s':>6} {'x wall':>8} {'x cpu':>8}")
    walls, cpus = [], []
    for seed in range(1, seeds + 1):
        config = RunConfig(
            sim=SimConfig(seed=seed, voters=3),
            workload=WorkloadConfig(interval_ms=20),
            faults=FaultConfig(kinds=FAULTS),
            duration_ms=300_000,
        )
        start, cpu_start = time.perf_counter(), time.process_time()
        summary = run(config).summary
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
        simulated = summary["simulated_s"]
        walls.append(simulated / wall)
        cpus.append(simulated / cpu)
        print(
            f"   {seed:>4} {summary['events']:>7} {summary['appends']['ok']:>6} {wall:>7.2f} {cpu:>6.2f} "
            f"{walls[-1]:>7.0f}x {cpus[-1]:>7.0f}x"
        )
    print(f"   x real time, min / median / max: wall {spread(walls)}   cpu {spread(cpus)}   (target >= 100x)")
    return walls


def whole_test(name: str, flags: list[str], runs: int) -> list[float]:
    print(f"2. whole test, {name}: kchaos run --backend sim {' '.join(flags)}")
    walls, cpus = [], []
    for seed in range(1, runs + 1):
        with tempfile.TemporaryDirectory() as results:
            command = [sys.executable, "-m", "harness.cli", "run", "--backend", "sim", "--seed", str(seed)]
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            done = subprocess.run(
                [*command, *flags, "--results", results], cwd=ROOT, capture_output=True, text=True, check=False
            )
            wall = time.perf_counter() - start
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            histories = list(Path(results).glob("*/*/history.jsonl"))
            if done.returncode not in (0, 1, 2) or not histories:
                print(f"   seed {seed}: exit {done.returncode}: {done.stderr.strip().splitlines()[-1:]}")
                continue
            last = histories[0].read_text().splitlines()[-1]
            virtual = json.loads(last)["time"] / 1e9
        walls.append(virtual / wall)
        cpus.append(virtual / cpu)
        print(
            f"   seed {seed}: {virtual:6.1f} s virtual, {wall:5.2f} s wall, {cpu:5.2f} s cpu, exit {done.returncode}: "
            f"{walls[-1]:5.1f}x wall, {cpus[-1]:5.1f}x cpu"
        )
    if walls:
        print(f"   x real time, min / median / max: wall {spread(walls)}   cpu {spread(cpus)}   (target >= 20x)")
    return walls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5, help="quorum-simulator runs (seeds 1..N)")
    parser.add_argument("--runs", type=int, default=3, help="whole tests of each shape (seeds 1..N)")
    docs_tables.add_option(parser, "the simulator rows of the speed table")
    args = parser.parse_args()
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    quorum = quorum_simulator(args.seeds)
    default = whole_test("the default test", [], args.runs)
    long = whole_test(
        "3 combined nodes, partition,kill,pause,clock, 300 s",
        ["--nodes", "3", "--nemesis", "partition,kill,pause,clock", "--time-limit", "300"],
        args.runs,
    )
    if args.write_docs:
        if not (quorum and default and long):
            raise SystemExit("bench_sim_speed: a run failed; docs/figures.md left as it was")
        x = "{:.0f}"
        rows = [
            [
                "simulator, 3 voters, partition/kill/pause/clock, 50 appends/s, 300 s simulated (`bench_sim_speed.py`)",
                "33\u201338\u00d7",
                f"{docs_tables.span(quorum, x)}\u00d7 real time (seeds 1\u2013{args.seeds})",
                "≥ 100\u00d7",
                "yes" if min(quorum) >= 100 else "no",
            ],
            [
                "whole simulated chaos test, the default `kchaos run --backend sim`, a fresh process "
                "(`bench_sim_speed.py`)",
                "14.5\u00d7",
                f"{docs_tables.span(default, x)}\u00d7 (seeds 1\u2013{args.runs}); "
                f"300 s tests {docs_tables.span(long, x)}\u00d7",
                "≥ 20\u00d7",
                "yes" if min(default) >= 20 else "no",
            ],
        ]
        docs_tables.write_table("speed-simulator", docs_tables.table(docs_tables.SPEED_HEADER, rows))


if __name__ == "__main__":
    main()
