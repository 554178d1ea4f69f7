"""The write path against etcd 3.4, in one run: committed config changes through a broker vs etcd puts.

    python benchmarks/bench_write_path.py [--in-flight 64] [--seconds 5] [--runs 3] [--skip-etcd]

Ours: 3 controllers (voters) and 1 broker, separate `python -m node.runtime` processes on loopback,
each with its own data dir and real fsync (fdatasync of the log before an append counts on a
voter). The async admin client in this process sends IncrementalAlterConfigs SET (`retention.ms`
of one of 16 topics) to the broker, which forwards each one to the active controller in an Envelope
(KIP-590); a change is counted when its answer arrives, i.e. after it is committed (fsynced on a
majority) and applied.

etcd: 3 `etcd` 3.4 members on loopback (127.0.0.1), default settings (the WAL is fsynced before a
proposal counts), driven from this process through the v3 JSON gateway (`POST /v3/kv/put`) of the
leader, with the same number of requests in flight (one HTTP/1.1 keep-alive connection per
in-flight request), keys `bench-N/retention.ms` (16 keys) and values of the same size as ours.

The two clusters run side by side and are measured in turn, ours then etcd's, `--runs` times
(after one warm-up window each), so the ratio is taken pair by pair as the machine's load drifts.
CPU seconds of every server process (from /proc) and of this process are counted per window, and
printed per 1,000 writes: on a 2-core machine the throughput is bound by CPU, and CPU per write
moves far less than writes/s when other jobs share the machine.

etcd comes from Debian: `apt-get install etcd-server` (3.4.23 on bookworm). Without it the script
says so and exits 2 unless `--skip-etcd` is given.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.etcd_loopback import EtcdConnection, etcd_cluster, find_etcd
from harness import docs_tables
from node.client import AdminClient, AlterConfigOp, ConfigResource
from node.client import errors as E
from node.client.results import NewTopic
from node.runtime import event_loop
from node.runtime.local_cluster import NodeProcess, find_leader, kill_all, plan_cluster, wait_for

TOPICS = [f"bench-{i}" for i in range(16)]
SETTINGS = {"kchaos.test.append.enable": "false"}
TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class Window:
    """One measured window: writes acknowledged in it, and CPU seconds spent meanwhile (per server role)."""

    writes: int
    seconds: float
    server_cpu_s: dict[str, float]
    client_cpu_s: float
    errors: int
    p50_ms: float
    p99_ms: float

    @property
    def per_s(self) -> float:
        return self.writes / self.seconds

    def per_1000(self, cpu_s: float) -> float:
        """CPU ms per 1,000 acknowledged writes."""
        return cpu_s * 1000 / max(self.writes, 1) * 1000

    def cpu_ms_per_1000(self) -> tuple[float, float]:
        return self.per_1000(sum(self.server_cpu_s.values())), self.per_1000(self.client_cpu_s)

    def line(self, name: str) -> str:
        server, client = self.cpu_ms_per_1000()
        roles = ", ".join(f"{role} {self.per_1000(cpu):,.0f}" for role, cpu in self.server_cpu_s.items())
        errors = f", {self.errors} errors" if self.errors else ""
        return (
            f"{name}: {self.per_s:,.0f}/s (p50 {self.p50_ms:.1f} ms, p99 {self.p99_ms:.1f} ms; CPU per 1,000 writes: "
            f"servers {server:,.0f} ms [{roles}], client {client:,.0f} ms{errors})"
        )


def process_cpu_s(pids: list[int]) -> float:
    """utime + stime of these processes and their threads, in seconds."""
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
    return total / TICKS


def roles_cpu_s(pids: dict[str, list[int]]) -> dict[str, float]:
    return {role: process_cpu_s(group) for role, group in pids.items()}


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def measure(
    call: Callable[[int], Awaitable[None]], in_flight: int, seconds: float, pids: dict[str, list[int]]
) -> Window:
    """`in_flight` workers call `call(i)` back to back for `seconds`; what finishes inside is counted."""
    latencies: list[float] = []
    errors = 0
    counter = iter(range(1 << 62))
    end = time.monotonic() + seconds

    async def worker() -> None:
        nonlocal errors
        while (begun := time.monotonic()) < end:
            try:
                await call(next(counter))
            except (E.KafkaError, OSError, ValueError):
                errors += 1
                continue
            done = time.monotonic()
            if done <= end:
                latencies.append((done - begun) * 1000)

    cpu0, client0, t0 = roles_cpu_s(pids), time.process_time(), time.monotonic()
    await asyncio.gather(*(worker() for _ in range(in_flight)))
    elapsed = min(time.monotonic(), end) - t0
    cpu1 = roles_cpu_s(pids)
    return Window(
        len(latencies),
        elapsed,
        {role: cpu1[role] - cpu0[role] for role in pids},
        time.process_time() - client0,
        errors,
        pct(latencies, 0.5),
        pct(latencies, 0.99),
    )


# --- ours ------------------------------------------------------------------------------------------


@contextlib.contextmanager
def kraft_cluster(base: Path) -> Iterator[tuple[str, dict[str, list[int]]]]:
    """3 voters and 1 broker running; yields the broker's address and the PIDs by role (the leader at
    start-up as `active`)."""
    plan = plan_cluster(base, voters=3, observers=1, settings=SETTINGS)
    procs = {spec.node_id: NodeProcess(spec).start() for spec in plan.nodes}
    try:
        leader = wait_for(lambda: find_leader(plan.voters), 30, what="a leader")["node_id"]
        pids = {
            "active": [procs[leader].pid],
            "followers": [procs[s.node_id].pid for s in plan.voters if s.node_id != leader],
            "broker": [procs[s.node_id].pid for s in plan.brokers],
        }
        yield plan.brokers[0].address, pids
    finally:
        kill_all(procs.values())


async def kraft_client(address: str) -> tuple[AdminClient, Callable[[int], Awaitable[None]]]:
    client = AdminClient(address, request_timeout_ms=30_000)
    await client.__aenter__()
    deadline = time.monotonic() + 30
    while True:  # the broker must be registered and unfenced before it forwards
        try:
            await client.create_topics([NewTopic(t, 1, 1) for t in TOPICS])
            break
        except E.KafkaError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)

    async def alter(i: int) -> None:
        resource = ConfigResource.topic(TOPICS[i % len(TOPICS)])
        await client.incremental_alter_config(resource, [AlterConfigOp.set("retention.ms", str(60_000 + i))])

    return client, alter


# --- etcd ------------------------------------------------------------------------------------------


async def etcd_client(port: int, in_flight: int) -> tuple[list[EtcdConnection], Callable[[int], Awaitable[None]]]:
    connections = [EtcdConnection(port) for _ in range(in_flight)]
    for conn in connections:
        await conn.open()
    idle = list(connections)

    async def put(i: int) -> None:
        conn = idle.pop()
        try:
            await conn.put(f"{TOPICS[i % len(TOPICS)]}/retention.ms".encode(), str(60_000 + i).encode())
        finally:
            idle.append(conn)

    return connections, put


# --- the run ---------------------------------------------------------------------------------------


def spread(values: list[float], fmt: str = "{:,.0f}") -> str:
    low, mid, high = (fmt.format(v) for v in (min(values), statistics.median(values), max(values)))
    return f"min {low}, median {mid}, max {high}"


def write_docs(in_flight: int, ours: list[Window], theirs: list[Window], ratios: list[float], cpu: list[float]) -> None:
    """The write path's row of the speed table in docs/figures.md."""
    span = docs_tables.span
    now = (
        f"{span([w.per_s for w in ours])}/s (p50 {span([w.p50_ms for w in ours])} ms, "
        f"p99 {span([w.p99_ms for w in ours])} ms); etcd 3.4: {span([w.per_s for w in theirs])}/s; "
        f"ratio {span(ratios, '{:.2f}')}; CPU per write {span(cpu, '{:.2f}')}\u00d7 etcd's"
    )
    row = [
        f"committed config changes through a broker, 3 voters, fsync, {in_flight} in flight "
        "(`bench_write_path.py`, etcd in the same run)",
        "1,954\u20132,874/s",
        now,
        "≥ 5,000/s",
        "yes" if min(w.per_s for w in ours) >= 5000 else "no",
    ]
    docs_tables.write_table("speed-write-path", docs_tables.table(docs_tables.SPEED_HEADER, [row]))


async def run(args: argparse.Namespace, etcd: str | None) -> None:
    with contextlib.ExitStack() as stack:
        base = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-write-path-")))
        (base / "kraft").mkdir()
        broker, kraft_pids = stack.enter_context(kraft_cluster(base / "kraft"))
        client, alter = await kraft_client(broker)
        etcd_put = None
        etcd_pids: dict[str, list[int]] = {}
        connections: list[EtcdConnection] = []
        if etcd is not None:
            (base / "etcd").mkdir()
            members = stack.enter_context(etcd_cluster(base / "etcd", etcd))
            leader_port = wait_for(members.leader_port, 30, what="an etcd leader")
            etcd_pids = members.pids_by_role()
            connections, etcd_put = await etcd_client(leader_port, args.in_flight)
        try:
            print(
                f"client concurrency: {args.in_flight} requests in flight; fsync on (ours: fdatasync of the log "
                f"on each voter before it counts; etcd: its WAL fsync); {args.seconds:g} s windows, "
                f"{args.runs} runs after a warm-up; event loop: {event_loop.loop_name()}",
                flush=True,
            )
            await measure(alter, args.in_flight, min(args.seconds, 2), kraft_pids)
            if etcd_put is not None:
                await measure(etcd_put, args.in_flight, min(args.seconds, 2), etcd_pids)
            ours: list[Window] = []
            theirs: list[Window] = []
            for r in range(1, args.runs + 1):
                ours.append(await measure(alter, args.in_flight, args.seconds, kraft_pids))
                print(ours[-1].line(f"run {r} ours (config changes through a broker, forwarded)"), flush=True)
                if etcd_put is not None:
                    theirs.append(await measure(etcd_put, args.in_flight, args.seconds, etcd_pids))
                    print(theirs[-1].line(f"run {r} etcd 3.4 (puts at the leader)"), flush=True)
                    print(f"run {r} ratio ours/etcd: {ours[-1].per_s / theirs[-1].per_s:.2f}", flush=True)
            print(f"ours/s: {spread([w.per_s for w in ours])}")
            if theirs:
                print(f"etcd/s: {spread([w.per_s for w in theirs])}")
                ratios = [a.per_s / b.per_s for a, b in zip(ours, theirs, strict=True)]
                print(f"ratio ours/etcd (pair by pair): {spread(ratios, '{:.2f}')}")
                # CPU per write moves far less with the machine's load than writes/s do.
                cpu = [sum(a.cpu_ms_per_1000()) / sum(b.cpu_ms_per_1000()) for a, b in zip(ours, theirs, strict=True)]
                print(f"CPU per write (servers + client) ours/etcd: {spread(cpu, '{:.2f}')}")
                if args.write_docs:
                    write_docs(args.in_flight, ours, theirs, ratios, cpu)
        finally:
            await client.__aexit__(None, None, None)
            for conn in connections:
                conn.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--in-flight", type=int, default=64, help="requests in flight (both systems)")
    parser.add_argument("--seconds", type=float, default=5.0, help="length of each measured window")
    parser.add_argument("--runs", type=int, default=3, help="measured windows per system")
    parser.add_argument("--skip-etcd", action="store_true", help="measure ours only (no ratio)")
    docs_tables.add_option(parser, "the write path's row of the speed table (needs etcd)")
    args = parser.parse_args()
    if args.write_docs and args.skip_etcd:
        print("bench_write_path: --write-docs needs etcd (the row compares with it); drop --skip-etcd", file=sys.stderr)
        return 2
    if args.in_flight < 1 or args.seconds <= 0 or args.runs < 1:
        print("bench_write_path: --in-flight, --seconds and --runs must be positive", file=sys.stderr)
        return 2
    etcd = None
    if not args.skip_etcd:
        etcd = find_etcd("bench_write_path", " or pass --skip-etcd")
        if etcd is None:
            return 2
    event_loop.run(run(args, etcd))
    return 0


if __name__ == "__main__":
    sys.exit(main())
