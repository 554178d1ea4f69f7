"""Committed appends/s and commit latency of a 3-voter quorum over loopback with real fsync.

The leader runs in this process (as the KIP-631 controller will: appends originate next to the
leader) and the two followers are separate `python -m node.runtime` processes on 127.0.0.3/4. The
in-process node gets a short election timeout so that it wins the first election.

Two measurements, each bounded in time and count:
- saturation: N concurrent appenders (default 64), each appending one record and awaiting its commit;
- fixed rate: one append every 1/R s (default 500/s), open loop; latency from the scheduled time.

    python benchmarks/bench_quorum.py [--appenders 64] [--rate 500] [--seconds 5] [--data-dir DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from node.runtime.local_cluster import NodeProcess, plan_cluster, status, wait_for
from node.runtime.server import NodeServer
from node.runtime.server_config import load_server_config

PAYLOAD = b"x" * 100


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


async def saturation(leader: NodeServer, appenders: int, seconds: float, max_records: int) -> dict:
    latencies: list[float] = []
    stop_at = time.perf_counter() + seconds

    async def worker() -> None:
        while time.perf_counter() < stop_at and len(latencies) < max_records:
            t0 = time.perf_counter()
            await leader.append([PAYLOAD])
            latencies.append((time.perf_counter() - t0) * 1000)

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(appenders)))
    elapsed = time.perf_counter() - start
    latencies.sort()
    return {
        "records": len(latencies),
        "per_s": len(latencies) / elapsed,
        "p50": percentile(latencies, 0.50),
        "p99": percentile(latencies, 0.99),
        "max": latencies[-1] if latencies else float("nan"),
    }


async def fixed_rate(leader: NodeServer, rate: float, seconds: float) -> dict:
    count = int(rate * seconds)
    latencies: list[float] = []
    start = time.perf_counter()

    async def one(scheduled: float) -> None:
        await leader.append([PAYLOAD])
        latencies.append((time.perf_counter() - scheduled) * 1000)

    tasks = []
    for i in range(count):
        scheduled = start + i / rate
        delay = scheduled - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(scheduled)))
    await asyncio.gather(*tasks)
    elapsed = time.perf_counter() - start
    latencies.sort()
    return {
        "records": count,
        "per_s": count / elapsed,
        "p50": percentile(latencies, 0.50),
        "p99": percentile(latencies, 0.99),
        "max": latencies[-1],
    }


async def run(args: argparse.Namespace, base: Path) -> None:
    plan = plan_cluster(base, voters=3, settings={"quorum.election.timeout.ms": "5000"})
    followers = [NodeProcess(spec).start() for spec in plan.nodes[1:]]
    leader: NodeServer | None = None
    try:
        for spec in plan.nodes[1:]:
            wait_for(lambda s=spec: status(s), 30, what=f"node {spec.node_id} to start")
        me = plan.nodes[0]
        me.config_path.write_text(plan.properties(me, {"quorum.election.timeout.ms": "100"}))
        leader = NodeServer(load_server_config(me.config_path))
        await leader.start()
        deadline = time.monotonic() + 30
        while leader.node.role.value != "leader":
            if time.monotonic() > deadline:
                raise SystemExit("the in-process node did not become leader; run again")
            await asyncio.sleep(0.05)
        await saturation(leader, args.appenders, 1.0, 10**9)  # warm-up
        sat = await saturation(leader, args.appenders, args.seconds, args.max_records)
        fixed = await fixed_rate(leader, args.rate, args.seconds)
        print(f"3 voters, loopback, fsync on each replica's log ({base})")
        print(
            f"saturation ({args.appenders} appenders): {sat['per_s']:,.0f} committed records/s "
            f"({sat['records']} in {args.seconds:g} s), latency p50 {sat['p50']:.1f} ms, "
            f"p99 {sat['p99']:.1f} ms, max {sat['max']:.1f} ms"
        )
        print(
            f"fixed rate {args.rate:g}/s: {fixed['per_s']:,.0f} records/s achieved, "
            f"latency p50 {fixed['p50']:.1f} ms, p99 {fixed['p99']:.1f} ms, max {fixed['max']:.1f} ms"
        )
        verdict = {True: "met", False: "MISSED"}
        print(
            f"targets: >= 5,000 records/s {verdict[sat['per_s'] >= 5000]}; "
            f"p99 <= 20 ms at {args.rate:g}/s {verdict[fixed['p99'] <= 20]}"
        )
    finally:
        if leader is not None:
            await leader.stop()
        for proc in followers:
            with contextlib.suppress(Exception):
                proc.signal(signal.SIGKILL)
                proc.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--appenders", type=int, default=64)
    parser.add_argument("--rate", type=float, default=500)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--max-records", type=int, default=200_000)
    parser.add_argument("--data-dir", help="where the data dirs go (default: a temp dir; fsync matters)")
    args = parser.parse_args()
    if args.data_dir:
        Path(args.data_dir).mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=args.data_dir) as tmp:
            asyncio.run(run(args, Path(tmp)))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            asyncio.run(run(args, Path(tmp)))


if __name__ == "__main__":
    main()
