"""Simulator speed: simulated seconds per wall-clock second (issue 2 target: >= 100x real time for
3 voters with default timeouts). Prints figures; asserts nothing. CPU-time figures are printed too:
on a shared machine they are the steadier measure.

    python benchmarks/bench_sim.py [--duration 600] [--seed 1]
"""

from __future__ import annotations

import argparse
import time

from node.sim.faults import FaultConfig
from node.sim.runner import RunConfig, run
from node.sim.workload import WorkloadConfig
from node.sim.world import SimConfig

FAULTS = ("partition", "kill", "pause", "clock")


def case(name: str, seed: int, duration_s: int, interval_ms: int | None, faults: tuple[str, ...]) -> None:
    config = RunConfig(
        sim=SimConfig(seed=seed, voters=3),
        workload=WorkloadConfig(interval_ms=interval_ms) if interval_ms else None,
        faults=FaultConfig(kinds=faults),
        duration_ms=duration_s * 1000,
    )
    start, cpu_start = time.perf_counter(), time.process_time()
    result = run(config)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    s = result.summary
    sim_s = s["simulated_s"]
    print(
        f"{name:<34} {sim_s:>7.1f} {wall:>7.2f} {sim_s / wall:>8.1f}x {cpu:>7.2f} {sim_s / cpu:>8.1f}x "
        f"{s['events']:>8} {s['events'] / cpu:>10.0f} {s['appends']['ok']:>7} {s['verdict']:>8}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=int, default=600, help="simulated seconds per case")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    print(f"3 voters, default quorum.* timeouts, {args.duration} simulated seconds per case, seed {args.seed}")
    header = ("case", "sim s", "wall s", "x wall", "cpu s", "x cpu", "events", "events/cpu", "acked", "verdict")
    widths = (-34, 7, 7, 9, 7, 9, 8, 10, 7, 8)
    print(" ".join(f"{h:<{-w}}" if w < 0 else f"{h:>{w}}" for h, w in zip(header, widths)))
    case("idle (no client)", args.seed, args.duration, None, ())
    case("steady appends, 10/s", args.seed, args.duration, 100, ())
    case("steady appends, 50/s", args.seed, args.duration, 20, ())
    case("10/s + partition,kill,pause,clock", args.seed, args.duration, 100, FAULTS)
    case("50/s + partition,kill,pause,clock", args.seed, args.duration, 20, FAULTS)


if __name__ == "__main__":
    main()
