"""The runner's own speed (printed figures, not a test).

python benchmarks/bench_runner.py [--seconds 5] [--concurrency 50] [--sim-time 60]

1. Ops recorded per second against an in-process no-op client (completes on the next loop turn),
   `concurrency` workers, no rate limit, every event written and flushed to a history.jsonl:
   the ceiling the harness puts on a real run (target >= 5,000 ops/s).
2. Per-op overhead: wall time per op of that run (generator, bookkeeping, two history lines).
3. Sim speed: a whole 5-node test (config-register, partition + kill, 60 s run phase) on the sim
   backend, from provisioning to the verdict: virtual seconds per wall second (target >= 20x).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from harness.driver import Driver
from harness.history_writer import HistoryWriter
from harness.runner import run_test
from harness.test_spec import Cluster, TestSpec
from vocab.generators import Op, clients, time_limit
from vocab.invocation import Completion, DoneFn
from vocab.schedulers import RealtimeScheduler
from workloads.config_register import op_maker


class NoOpClient:
    """Answers every op `ok` on the loop's next turn, as an instant server would."""

    def __init__(self, scheduler: RealtimeScheduler) -> None:
        self.loop = scheduler.loop

    def invoke(self, op: Op, done: DoneFn) -> None:
        self.loop.call_soon(done, Completion("ok", op.value))


def bench_driver(seconds: float, concurrency: int) -> tuple[int, float]:
    """(ops, wall seconds) of a no-op run of `seconds`."""
    with tempfile.TemporaryDirectory() as tmp:
        scheduler = RealtimeScheduler()
        writer = HistoryWriter(Path(tmp) / "history.jsonl")
        keys = [f"t{i}/retention.ms" for i in range(6)]
        try:
            driver = Driver(scheduler, NoOpClient(scheduler), None, concurrency=concurrency, sink=writer.write)
            start = time.perf_counter()
            stats = driver.run(clients(time_limit(seconds, op_maker(keys, 0.5))), seed=1)
            wall = time.perf_counter() - start
        finally:
            writer.close()
            scheduler.close()
    return sum(stats.completed.values()), wall


def bench_sim(sim_time: float) -> tuple[float, float, float, int]:
    """(virtual seconds of the run phases, their wall seconds, wall seconds of the whole test, events)."""
    spec = TestSpec(
        name="bench-sim",
        seed=1,
        backend="sim",
        cluster=Cluster(combined=5),
        nemesis=("partition", "kill"),
        nemesis_interval_s=5.0,
        nemesis_duration_s=5.0,
        time_limit_s=sim_time,
        concurrency=5,
        rate=50.0,
        recovery_s=5.0,
    )
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        result = run_test(spec, root=tmp, say=lambda _: None)
        wall = time.perf_counter() - start
        lines = (result.run.path / "history.jsonl").read_text().splitlines()
        if result.exit_code != 0:
            print(f"  (sim run verdict: {result.valid}, exit {result.exit_code}, {result.error or ''})")
    import json

    virtual = json.loads(lines[-1])["time"] / 1e9 if lines else 0.0
    return virtual, result.timings.get("run", 0.0), wall, len(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--sim-time", type=float, default=60.0)
    args = parser.parse_args()

    ops, wall = bench_driver(args.seconds, args.concurrency)
    print(f"no-op client, concurrency {args.concurrency}: {ops} ops in {wall:.2f} s")
    print(f"  ops recorded per second: {ops / wall:,.0f}  (target >= 5,000)")
    print(f"  per-op overhead: {wall / ops * 1e6:.1f} us  (2 history lines each)")

    virtual, run_wall, wall, events = bench_sim(args.sim_time)
    print(f"sim, 5 combined nodes, config-register, partition+kill, {args.sim_time:g} s run phase:")
    print(f"  {virtual:.1f} s of virtual time ({events} history events)")
    print(f"  run, heal, recover, final reads: {run_wall:.2f} s wall = {virtual / run_wall:.1f}x real time")
    print(
        f"  whole test (cluster start, run, dumps, checkers, plots, report): {wall:.2f} s wall = "
        f"{virtual / wall:.1f}x real time  (target >= 20x)"
    )


if __name__ == "__main__":
    main()
