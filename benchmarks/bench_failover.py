"""Failover against etcd 3.4, in one run: kill -9 of the leader -> the first write sent after the kill
that is acknowledged committed. Prints figures; asserts nothing.

    python benchmarks/bench_failover.py [--trials 20] [--interval-ms 10] [--in-flight 500] [--same-detection]

Ours: 3 controllers (voters, pre-vote on) and 1 broker, separate `python -m node.runtime` processes on
loopback with real fsync. A writer in this process sends IncrementalAlterConfigs SET through the
broker (which forwards each to the active controller) every `--interval-ms`, at most `--in-flight`
outstanding, all the time. A trial: the writer's writes flow, the active controller (the quorum
leader, by /v1/status) gets SIGKILL; the figure is the time from the kill to the acknowledgement of
the first write *sent after* the kill. The killed node is started again and the cluster is whole
(every voter caught up, the broker following the leader, writes committing) before the next trial.

etcd: 3 members, puts through the v3 JSON gateway of a member that survives (a follower), the same
writer, the leader killed the same way and started again the same way.

The two run side by side and their trials are interleaved pair by pair (ours, then etcd's), so the
machine's load drifts over both alike. For ours, the node logs time each phase: the survivors'
role lines (prospective = the fetch timeout fired and the pre-vote round began; candidate; leader;
controller active = the first entry of the new epoch committed and applied) and the broker's line
naming the new leader; for etcd, its info log's "became pre-candidate / candidate / leader" lines.
Log lines have millisecond stamps on this machine's wall clock.

Settings (Kafka's names; each row of the output says which it ran with):
- ours: controller.quorum.fetch.timeout.ms (a follower's failure detection: no successful Fetch for
  that long), controller.quorum.election.timeout.ms, controller.quorum.election.backoff.max.ms;
  by default the cluster tests' 1500/1000/500.
- etcd: its defaults, --election-timeout=1000 (a follower stands after a random 1000-2000 ms without
  the leader's heartbeat), --heartbeat-interval=100, and --pre-vote=true (ours always pre-votes).
`--same-detection` adds a second pair of rows where ours detects after 1000 ms
(controller.quorum.fetch.timeout.ms=1000), etcd's election timeout.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import os
import re
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.etcd_loopback import NAMES, EtcdCluster, EtcdConnection, etcd_cluster, find_etcd
from harness import docs_tables
from node.client import AdminClient, AlterConfigOp, ConfigResource
from node.client import errors as E
from node.client.results import NewTopic
from node.runtime.local_cluster import LocalCluster, NodeProcess, find_leader, kill_all, plan_cluster, status, wait_for

TOPIC = "failover"
FIRST_COMMIT_LIMIT_S = 30.0  # a trial with no committed write this long after the kill fails the run
WHOLE_LIMIT_S = 60.0  # for the restarted node to catch up
QUORUM = {  # the cluster tests' quorum timeouts (tests/runtime/test_kraft_cluster.py)
    "controller.quorum.fetch.timeout.ms": "1500",
    "controller.quorum.election.timeout.ms": "1000",
    "controller.quorum.election.backoff.max.ms": "500",
    "controller.quorum.request.timeout.ms": "1000",
}
OURS_SETTINGS = {
    "broker.heartbeat.interval.ms": "250",
    "broker.session.timeout.ms": "6000",
    "request.timeout.ms": "8000",  # how long the broker keeps a forwarded write looking for a controller
    "kchaos.test.append.enable": "false",
}
ETCD_FLAGS = ("--election-timeout=1000", "--heartbeat-interval=100", "--pre-vote=true", "--log-level=info")
# ours' phases, in the order they happen: the log line that ends each one
PHASES = ("prospective", "candidate", "leader", "active", "broker knows", "client ack")


class Writer:
    """Sends `call(i)` every `interval` s with at most `bound` outstanding, and keeps (sent, acked)
    monotonic times of every acknowledged one; failures are counted (a refusal is not retried: the
    next write goes out at the next tick anyway)."""

    def __init__(self, call: Callable[[int], Awaitable[None]], interval: float, bound: int) -> None:
        self.call = call
        self.interval = interval
        self.bound = bound
        self.acks: list[tuple[float, float]] = []
        self.errors = 0
        self.tasks: set[asyncio.Task[None]] = set()
        self.counter = 0
        self.ticker: asyncio.Task[None] | None = None

    async def _one(self, i: int) -> None:
        sent = time.monotonic()
        try:
            await self.call(i)
        except (E.KafkaError, OSError, ValueError, asyncio.IncompleteReadError):
            self.errors += 1
            return
        self.acks.append((sent, time.monotonic()))

    async def _tick(self) -> None:
        while True:
            if len(self.tasks) < self.bound:
                self.counter += 1
                task = asyncio.create_task(self._one(self.counter))
                self.tasks.add(task)
                task.add_done_callback(self.tasks.discard)
            await asyncio.sleep(self.interval)

    def start(self) -> None:
        self.acks.clear()
        self.ticker = asyncio.create_task(self._tick())

    async def stop(self) -> None:
        """Stop sending; what is outstanding gets a second to finish, then is cancelled (etcd holds a put
        forwarded to a dead leader for its request timeout, 7 s)."""
        if self.ticker is not None:
            self.ticker.cancel()
            await asyncio.gather(self.ticker, return_exceptions=True)  # a Ctrl-C cancelling us still raises
        if self.tasks:
            _, pending = await asyncio.wait(set(self.tasks), timeout=1)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

    async def flowing(self, limit: float = WHOLE_LIMIT_S) -> None:
        """Until a write sent from now on is acknowledged."""
        since = time.monotonic()
        await self.first_ack_after(since, limit)

    async def first_ack_after(self, since: float, limit: float) -> float:
        """Monotonic time of the first acknowledgement of a write sent at or after `since`."""
        while time.monotonic() - since < limit:
            done = [acked for sent, acked in self.acks if sent >= since]
            if done:
                return min(done)
            await asyncio.sleep(0.005)
        raise TimeoutError(f"no write sent after the kill was acknowledged within {limit:.0f} s")


# --- ours ------------------------------------------------------------------------------------------


@dataclass
class Ours:
    plan: LocalCluster
    procs: dict[int, NodeProcess]

    @property
    def broker(self) -> NodeProcess:
        return self.procs[self.plan.brokers[0].node_id]

    def leader(self) -> int | None:
        found = find_leader(self.plan.voters)
        return found["leader_id"] if found else None

    def kill(self, node_id: int) -> None:
        proc = self.procs[node_id]
        proc.signal(signal.SIGKILL)
        proc.wait(10)

    def restart(self, node_id: int) -> None:
        self.procs[node_id] = NodeProcess(self.plan.node(node_id)).start()

    def prepare(self, node_id: int) -> None:
        """The broker survives every kill: nothing to aim."""

    def phases(self, killed: int, kill_wall: float, took: float) -> dict[str, float]:
        return ours_phases(self, killed, kill_wall, took)

    def whole(self) -> bool:
        """A leader every node follows, each voter caught up to it."""
        leader = find_leader(self.plan.voters)
        if leader is None:
            return False
        for spec in self.plan.nodes:
            doc = status(spec)
            if doc is None or doc["leader_id"] != leader["leader_id"] or doc["epoch"] != leader["epoch"]:
                return False
            if spec.voter and doc["high_watermark"] < leader["high_watermark"]:
                return False
        return True


def start_ours(base: Path, quorum: dict[str, str]) -> Ours:
    plan = plan_cluster(base, voters=3, observers=1, settings={**quorum, **OURS_SETTINGS})
    return Ours(plan, {spec.node_id: NodeProcess(spec).start() for spec in plan.nodes})


async def ours_writer(ours: Ours, interval: float, bound: int) -> tuple[AdminClient, Writer]:
    client = AdminClient(ours.plan.brokers[0].address, request_timeout_ms=20_000)
    deadline = time.monotonic() + WHOLE_LIMIT_S
    while True:  # the broker must be registered and unfenced before it forwards
        try:
            await client.create_topics([NewTopic(TOPIC, 1, 1)])
            break
        except E.KafkaError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)
    resource = ConfigResource.topic(TOPIC)

    async def alter(i: int) -> None:
        await client.incremental_alter_config(resource, [AlterConfigOp.set("retention.ms", str(60_000 + i))])

    return client, Writer(alter, interval, bound)


LOG_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) INFO node (\d+): (.*)$")


def log_events(path: Path, since_wall: float) -> list[tuple[float, int, str]]:
    """(wall time, node, message) of the node's log lines stamped at or after `since_wall`."""
    out = []
    with contextlib.suppress(FileNotFoundError):
        for line in path.read_text(errors="replace").splitlines():
            m = LOG_LINE.match(line)
            if m is None:
                continue
            stamp = datetime.datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S,%f").timestamp()
            if stamp >= since_wall - 0.001:
                out.append((stamp, int(m[2]), m[3]))
    return out


def ours_phases(ours: Ours, killed: int, kill_wall: float, took: float) -> dict[str, float]:
    """Seconds from the kill to the end of each phase (the first survivor to get there), from the logs."""
    marks: dict[str, float] = {}

    def mark(name: str, stamp: float) -> None:
        marks[name] = min(marks.get(name, stamp), stamp - kill_wall)

    new_leader = None
    for spec in ours.plan.voters:
        if spec.node_id == killed:
            continue
        for stamp, _, message in log_events(spec.log_path, kill_wall):
            for role in ("prospective", "candidate"):
                if message.startswith(f"{role} in epoch"):
                    mark(role, stamp)
            if message.startswith("leader in epoch"):
                mark("active" if message.endswith("controller active") else "leader", stamp)
                new_leader = spec.node_id
    if new_leader is not None:
        for stamp, _, message in log_events(ours.plan.brokers[0].log_path, kill_wall):
            if message.endswith(f"leader {new_leader}"):
                mark("broker knows", stamp)
    marks["client ack"] = took
    return marks


# --- etcd ------------------------------------------------------------------------------------------

ETCD_PHASES = {"became pre-candidate": "prospective", "became candidate": "candidate", "became leader": "leader"}


def etcd_phases(etcd: EtcdCluster, killed: str, kill_wall: float, took: float) -> dict[str, float]:
    """Seconds from the kill to each election step of the survivors (etcd's info log, zap JSON)."""
    marks: dict[str, float] = {}
    for name in NAMES:
        if name == killed:
            continue
        with contextlib.suppress(FileNotFoundError):
            for line in (etcd.base / f"{name}.log").read_text(errors="replace").splitlines():
                if '"msg"' not in line or "became " not in line:
                    continue
                with contextlib.suppress(ValueError):
                    doc = json.loads(line)
                    stamp = datetime.datetime.fromisoformat(doc["ts"].replace("Z", "+00:00")).timestamp() - kill_wall
                    for words, phase in ETCD_PHASES.items():
                        if words in doc["msg"] and stamp >= 0:
                            marks[phase] = min(marks.get(phase, stamp), stamp)
    marks["client ack"] = took
    return marks


class EtcdWrites:
    """Puts to one member through a pool of keep-alive connections (one per outstanding put)."""

    def __init__(self) -> None:
        self.port = 0
        self.idle: list[EtcdConnection] = []
        self.all: list[EtcdConnection] = []

    def aim(self, port: int) -> None:
        """Talk to this member from now on."""
        self.close()
        self.port = port

    async def put(self, i: int) -> None:
        conn = self.idle.pop() if self.idle else None
        if conn is None or conn.port != self.port:
            conn = EtcdConnection(self.port)
            self.all.append(conn)
            await conn.open()
        try:
            await conn.put(f"{TOPIC}/retention.ms".encode(), str(60_000 + i).encode())
        except BaseException:
            conn.close()  # a failed exchange leaves the connection in an unknown place
            raise
        self.idle.append(conn)

    def close(self) -> None:
        for conn in self.all:
            conn.close()
        self.all, self.idle = [], []


@dataclass
class EtcdSide:
    """The etcd cluster as a trial sees it: the writes go to a member that survives the kill."""

    etcd: EtcdCluster
    writes: EtcdWrites

    def leader(self) -> str | None:
        return self.etcd.leader()

    def prepare(self, leader: str) -> None:
        self.writes.aim(self.etcd.client_ports[next(n for n in NAMES if n != leader)])

    def kill(self, leader: str) -> None:
        self.etcd.kill(leader)

    def restart(self, leader: str) -> None:
        self.etcd.start(leader)

    def whole(self) -> bool:
        return self.etcd.whole()

    def phases(self, killed: str, kill_wall: float, took: float) -> dict[str, float]:
        return etcd_phases(self.etcd, killed, kill_wall, took)


# --- the run ---------------------------------------------------------------------------------------


@dataclass
class Series:
    """One system's trials under one setting."""

    name: str
    settings: str
    failovers: list[float] = field(default_factory=list)
    phases: list[dict[str, float]] = field(default_factory=list)

    def figures(self) -> tuple[float, float, float, float]:
        """p50, p90, max, min in seconds."""
        v = sorted(self.failovers)
        return statistics.median(v), v[min(len(v) - 1, int(0.9 * len(v)))], v[-1], v[0]

    def line(self) -> str:
        p50, p90, high, low = self.figures()
        return (
            f"{self.name:5} p50 {p50:5.2f} s  p90 {p90:5.2f} s  max {high:5.2f} s  min {low:5.2f} s  "
            f"({len(self.failovers)} trials; {self.settings})"
        )


def in_thread(fn: Callable[[], object]) -> Awaitable[object]:
    return asyncio.to_thread(fn)


class System(Protocol):
    """What a trial does to either cluster."""

    def leader(self) -> object | None: ...
    def prepare(self, leader: object) -> None: ...  # before the writes flow (etcd: aim at a survivor)
    def kill(self, leader: object) -> None: ...
    def restart(self, leader: object) -> None: ...
    def whole(self) -> bool: ...
    def phases(self, killed: object, kill_wall: float, took: float) -> dict[str, float]: ...


async def trial(system: System, writer: Writer, series: Series) -> None:
    """One failover: kill the leader, time the first write sent after it to its acknowledgement,
    start the killed node again and wait until the cluster is whole."""
    leader = await in_thread(system.leader)
    if leader is None:
        raise RuntimeError(f"{series.name}: no leader before the kill")
    system.prepare(leader)
    await writer.flowing()
    kill_wall, t0 = time.time(), time.monotonic()
    system.kill(leader)
    took = await writer.first_ack_after(t0, FIRST_COMMIT_LIMIT_S) - t0
    series.failovers.append(took)
    system.restart(leader)
    await in_thread(lambda: wait_for(system.whole, WHOLE_LIMIT_S, interval=0.1, what=f"{series.name} whole again"))
    series.phases.append(system.phases(leader, kill_wall, took))


def describe(quorum: dict[str, str]) -> str:
    short = {k.removeprefix("controller.quorum.").removesuffix(".ms"): v for k, v in quorum.items()}
    return (
        f"pre-vote on, fetch.timeout {short['fetch.timeout']} ms, election.timeout {short['election.timeout']} ms, "
        f"election.backoff.max {short['election.backoff.max']} ms"
    )


ETCD_SETTINGS = "pre-vote on, election-timeout 1000 ms (randomized 1000-2000), heartbeat 100 ms"


async def run_pair(args: argparse.Namespace, base: Path, etcd_bin: str, quorum: dict[str, str]) -> list[Series]:
    ours_series = Series("ours", describe(quorum))
    etcd_series = Series("etcd", ETCD_SETTINGS)
    interval = args.interval_ms / 1000
    ours = start_ours(base / "kraft", quorum)
    client = None
    writes = EtcdWrites()
    try:
        with etcd_cluster(base / "etcd", etcd_bin, ETCD_FLAGS) as etcd:
            await in_thread(lambda: wait_for(ours.whole, WHOLE_LIMIT_S, what="ours whole"))
            client, ours_w = await ours_writer(ours, interval, args.in_flight)
            etcd_w = Writer(writes.put, interval, args.in_flight)
            for number in range(1, args.trials + 1):
                for system, writer, series in (
                    (ours, ours_w, ours_series),
                    (EtcdSide(etcd, writes), etcd_w, etcd_series),
                ):
                    writer.start()
                    try:
                        await trial(system, writer, series)
                    finally:
                        await writer.stop()
                phases = ", ".join(f"{k} {v:.2f}" for k, v in ours_series.phases[-1].items())
                print(
                    f"trial {number}: ours {ours_series.failovers[-1]:.2f} s ({phases}); "
                    f"etcd {etcd_series.failovers[-1]:.2f} s; load {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
    except Exception:  # not on Ctrl-C: the logs say why a trial failed
        for proc in ours.procs.values():
            print(f"----- node {proc.spec.node_id} -----\n{proc.log_text()[-2000:]}", file=sys.stderr)
        raise
    finally:
        writes.close()
        if client is not None:
            await client.close()
        kill_all(ours.procs.values())
    return [ours_series, etcd_series]


def phase_medians(series: Series) -> list[tuple[str, float, float]]:
    """(phase, median seconds from the kill to its end, median seconds since the previous phase's end)
    over the trials, for the phases every trial saw. A negative length: it ended before the previous
    one (the broker can follow the new leader before its controller is active)."""
    present = [p for p in PHASES if series.phases and all(p in t for t in series.phases)]
    out = []
    for i, name in enumerate(present):
        at = statistics.median(t[name] for t in series.phases)
        length = statistics.median(t[name] - (t[present[i - 1]] if i else 0.0) for t in series.phases)
        out.append((name, at, length))
    return out


def breakdown(series: Series) -> list[str]:
    lines = [f"{series.name}, median time from the kill to the end of each phase ({len(series.phases)} trials):"]
    for name, at, length in phase_medians(series):
        lines.append(f"  {name:13} at {at:5.2f} s   (since the previous: {length * 1000:6.0f} ms)")
    return lines


PHASE_NOTES = {
    "prospective": "the fetch timeout fired on a follower: it asks for pre-votes",
    "candidate": "a majority granted the pre-vote: it bumps the epoch and asks for votes",
    "leader": "a majority voted: it writes the LeaderChange record",
    "active": "that record is committed (fsynced on a majority) and applied: the controller takes writes",
    "broker knows": "the broker follows the new leader (it forwards there)",
    "client ack": "the first write sent after the kill is acknowledged",
}


def write_docs(rows: list[tuple[Series, Series]]) -> None:
    header = ["settings", "ours p50 / p90 / max", "etcd 3.4 p50 / p90 / max", "ratio of medians", "trials"]
    body = []
    for ours, etcd in rows:
        o, e = ours.figures(), etcd.figures()
        body.append(
            [
                f"ours: {ours.settings}; etcd: {etcd.settings}",
                f"{o[0]:.2f} / {o[1]:.2f} / {o[2]:.2f} s",
                f"{e[0]:.2f} / {e[1]:.2f} / {e[2]:.2f} s",
                f"{o[0] / e[0]:.2f}",
                f"{len(ours.failovers)} + {len(etcd.failovers)}",
            ]
        )
    text = docs_tables.table(header, body)
    ours = rows[0][0]
    phase_rows = [
        [name, PHASE_NOTES[name], f"{at:.2f} s", f"{length * 1000:.0f} ms"] for name, at, length in phase_medians(ours)
    ]
    text += "\nOurs, phase by phase (first row's settings; medians over the trials, from the nodes' logs):\n\n"
    text += docs_tables.table(["phase ends", "when", "at (from the kill)", "phase length"], phase_rows)
    docs_tables.write_table("failover", text)


async def run(args: argparse.Namespace, etcd_bin: str) -> None:
    settings = [QUORUM]
    if args.same_detection:
        settings.append({**QUORUM, "controller.quorum.fetch.timeout.ms": "1000"})
    print(
        f"failover: kill -9 of the leader -> first write sent after the kill acknowledged committed; "
        f"{args.trials} trials per system and setting, interleaved; a write every {args.interval_ms} ms, "
        f"at most {args.in_flight} outstanding; load average {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    rows: list[tuple[Series, Series]] = []
    for i, quorum in enumerate(settings):
        with contextlib.ExitStack() as stack:
            if args.dir is None:
                base = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-failover-")))
            else:
                base = args.dir / f"row-{i + 1}"
            ours, etcd = await run_pair(args, base, etcd_bin, quorum)
        rows.append((ours, etcd))
        print(f"\nrow {i + 1}:\n{ours.line()}\n{etcd.line()}")
        print(f"ratio of medians ours/etcd: {ours.figures()[0] / etcd.figures()[0]:.2f}")
        print("\n".join(breakdown(ours) + breakdown(etcd)), flush=True)
    print(f"\nload average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    if args.write_docs:
        write_docs(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=20, help="failovers per system (and per setting)")
    parser.add_argument("--interval-ms", type=int, default=10, help="a new write this often (both systems)")
    parser.add_argument(
        "--in-flight",
        type=int,
        default=500,
        help="at most this many writes outstanding (etcd holds the puts it forwarded to the dead leader 7 s: "
        "the bound must outlast the failover at --interval-ms)",
    )
    parser.add_argument(
        "--same-detection",
        action="store_true",
        help="also run ours with controller.quorum.fetch.timeout.ms=1000 (etcd's election timeout)",
    )
    parser.add_argument("--dir", type=Path, help="keep the clusters' data and logs here (default: a temporary dir)")
    docs_tables.add_option(parser, "the failover table")
    args = parser.parse_args()
    if args.trials < 1 or args.interval_ms < 1 or args.in_flight < 1:
        print("bench_failover: --trials, --interval-ms and --in-flight must be positive", file=sys.stderr)
        return 2
    etcd_bin = find_etcd("bench_failover")
    if etcd_bin is None:
        return 2
    try:
        asyncio.run(run(args, etcd_bin))
    except KeyboardInterrupt:
        print("bench_failover: interrupted; every process started was killed", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
