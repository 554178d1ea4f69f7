"""Benchmark of the KRaft cluster: config changes, broker registrations and heartbeats, snapshot catch-up.

    python benchmarks/bench_controller.py [--only configs,heartbeats,inprocess,catchup]
        [--in-flight 64] [--seconds 5] [--brokers 1000] [--records 100000]

Real processes on loopback (node N on 127.0.0.(N+1)), 3 controllers with real fsync, driven by the
async admin client in this process:

- configs: IncrementalAlterConfigs SET through a broker (forwarded to the active controller in an
  Envelope) and directly at the controllers, `--in-flight` requests outstanding;
- heartbeats: `--brokers` simulated brokers register and get unfenced through the client's
  register_broker / broker_heartbeat, then heartbeat every broker.heartbeat.interval.ms for
  `--seconds` (does the controller keep them all unfenced?), then as fast as `--in-flight` allows;
- inprocess: the same registrations and heartbeats handed straight to a `NodeProcess` (quorum
  controller over a single-voter Raft core, no I/O): what the controller logic costs without the wire;
- catchup: a log of `--records` metadata records (topics of 1,000 partitions), a snapshot of it, and
  a new broker process started afterwards: the time until its image has replayed everything and
  until the controller lists it ONLINE; then the same with snapshots off (catch-up by log).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import random
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from node.broker.config import DEFAULT_FEATURES
from node.client import AdminClient, AlterConfigOp, ConfigResource
from node.client import errors as E
from node.client.results import NewTopic
from node.controller import ControllerConfig, QuorumController
from node.process.events import InboundRequest
from node.process.ports import RequestContext
from node.process.process import NodeProcess as Process
from node.protocol.broker_api import BrokerHeartbeatRequest, BrokerRegistrationRequest, Listener
from node.protocol.errors import ErrorCode
from node.raft.actions import Flush, Respond
from node.raft.config import RaftConfig
from node.raft.events import FlushCompleted, Start, Tick
from node.raft.node import RaftNode
from node.raft.storage import LoadedState
from node.runtime.local_cluster import (
    LocalCluster,
    NodeProcess,
    find_leader,
    kill_all,
    plan_cluster,
    status,
    wait_for,
)
from node.runtime.roles import SNAPSHOT_EVERY_KEY

SETTINGS = {
    "kchaos.test.append.enable": "false",
    "broker.heartbeat.interval.ms": "2000",  # Kafka's defaults
    "broker.session.timeout.ms": "9000",
}
SIM_BROKER_BASE = 1000  # simulated broker ids start here (the real nodes are 1..N)
CAUGHT_UP = 1 << 40  # a metadata offset past anything: the simulated broker claims to be caught up


# --- helpers --------------------------------------------------------------------------------------


@dataclass
class Sample:
    ok: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    latencies_ms: list[float] = field(default_factory=list)

    def fail(self, exc: E.KafkaError) -> None:
        self.errors[exc.name] = self.errors.get(exc.name, 0) + 1


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summary(name: str, sample: Sample, seconds: float) -> str:
    lat = sample.latencies_ms
    errors = f", errors {sample.errors}" if sample.errors else ""
    return (
        f"{name}: {sample.ok / seconds:,.0f}/s ({sample.ok:,} in {seconds:.1f} s; "
        f"p50 {pct(lat, 0.5):.1f} ms, p99 {pct(lat, 0.99):.1f} ms){errors}"
    )


@contextlib.contextmanager
def cluster(controllers: int, brokers: int, settings: dict[str, str], start_brokers: bool = True) -> Iterator:
    """A planned cluster with its controllers (and brokers) running; all stopped by PID at the end."""
    with tempfile.TemporaryDirectory(prefix="bench-controller-") as tmp:
        plan = plan_cluster(Path(tmp), voters=controllers, observers=brokers, settings={**SETTINGS, **settings})
        procs = {s.node_id: NodeProcess(s) for s in plan.nodes}
        for spec in plan.nodes:
            if spec.voter or start_brokers:
                procs[spec.node_id].start()
        try:
            wait_for(lambda: find_leader(plan.voters), 30, what="a leader")
            yield plan, procs
        finally:
            kill_all(procs.values())


async def cluster_id_of(client: AdminClient, timeout: float = 30) -> str:
    """The cluster id, once the active controller's image has it (right after an election it may not)."""
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(E.KafkaError):
            cluster_id = (await client.describe_cluster()).cluster_id
            if cluster_id:
                return cluster_id
        if time.monotonic() > deadline:
            raise TimeoutError(f"no cluster id after {timeout}s")
        await asyncio.sleep(0.1)


async def wait_online(client: AdminClient, broker_ids: set[int], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(E.KafkaError):
            online = {b.broker_id for b in await client.list_brokers() if not b.fenced}
            if broker_ids <= online:
                return
        if time.monotonic() > deadline:
            raise TimeoutError(f"brokers {sorted(broker_ids)} not online after {timeout}s")
        await asyncio.sleep(0.1)


async def saturate(call: Callable[[int], object], in_flight: int, seconds: float, warmup: float = 1.0) -> Sample:
    """Run `call(i)` (a coroutine factory) from `in_flight` tasks; count what finishes in the window
    that starts after `warmup`."""
    sample = Sample()
    counter = itertools.count()
    start = time.monotonic()
    measure_from, end = start + warmup, start + warmup + seconds

    async def worker() -> None:
        while (now := time.monotonic()) < end:
            begun = now
            try:
                await call(next(counter))  # type: ignore[misc]
            except E.KafkaError as exc:
                if begun >= measure_from:
                    sample.fail(exc)
                continue
            done = time.monotonic()
            if begun >= measure_from and done <= end:
                sample.ok += 1
                sample.latencies_ms.append((done - begun) * 1000)

    await asyncio.gather(*(worker() for _ in range(in_flight)))
    return sample


# --- config changes -------------------------------------------------------------------------------


async def bench_configs(plan: LocalCluster, in_flight: int, seconds: float) -> list[str]:
    topics = [f"bench-{i}" for i in range(16)]
    broker = plan.brokers[0]
    out = []
    async with AdminClient(broker.address, request_timeout_ms=30_000) as via_broker:
        await wait_online(via_broker, {broker.node_id})
        await via_broker.create_topics([NewTopic(t, 1, 1) for t in topics])

        async def alter(client: AdminClient, i: int) -> None:
            resource = ConfigResource.topic(topics[i % len(topics)])
            await client.incremental_alter_config(resource, [AlterConfigOp.set("retention.ms", str(60_000 + i))])

        sample = await saturate(lambda i: alter(via_broker, i), in_flight, seconds)
        out.append(summary(f"config changes through a broker (forwarded), {in_flight} in flight", sample, seconds))
    async with AdminClient(plan.controllers_bootstrap, request_timeout_ms=30_000) as direct:
        await direct.describe_cluster()
        sample = await saturate(lambda i: alter(direct, i), in_flight, seconds)
        out.append(summary(f"config changes at the active controller, {in_flight} in flight", sample, seconds))
    return out


# --- registrations and heartbeats over the wire ---------------------------------------------------


def sim_listener(broker_id: int) -> Listener:
    return Listener("BROKER", "127.0.0.200", 20_000 + broker_id % 40_000, 0)


async def bench_heartbeats(plan: LocalCluster, brokers: int, in_flight: int, seconds: float) -> list[str]:
    out = []
    interval_s = int(SETTINGS["broker.heartbeat.interval.ms"]) / 1000
    session_s = int(SETTINGS["broker.session.timeout.ms"]) / 1000
    async with AdminClient(plan.controllers_bootstrap, request_timeout_ms=30_000) as client:
        cluster_id = await cluster_id_of(client)
        ids = [SIM_BROKER_BASE + i for i in range(brokers)]
        epochs: dict[int, int] = {}

        async def register(i: int) -> None:
            broker_id = ids[i]
            epochs[broker_id] = await client.register_broker(
                broker_id, cluster_id, uuid.uuid4(), [sim_listener(broker_id)], features=DEFAULT_FEATURES
            )

        sample = Sample()
        started = time.monotonic()
        queue = iter(range(brokers))

        async def registrar() -> None:
            for i in queue:
                begun = time.monotonic()
                await register(i)
                sample.ok += 1
                sample.latencies_ms.append((time.monotonic() - begun) * 1000)

        await asyncio.gather(*(registrar() for _ in range(in_flight)))
        out.append(summary(f"broker registrations ({brokers:,} brokers)", sample, time.monotonic() - started))

        # First heartbeats: each broker claims to be caught up and is unfenced (one record each).
        started = time.monotonic()
        pending = list(ids)
        while pending:
            results = await asyncio.gather(
                *(client.broker_heartbeat(b, epochs[b], CAUGHT_UP) for b in pending), return_exceptions=True
            )
            pending = [b for b, r in zip(pending, results, strict=True) if isinstance(r, BaseException) or r.is_fenced]
        elapsed = time.monotonic() - started
        out.append(
            f"brokers unfenced by their first heartbeats: {brokers / elapsed:,.0f}/s ({brokers:,} in {elapsed:.2f} s)"
        )

        # Sustained: every broker heartbeats every broker.heartbeat.interval.ms, as real brokers do, for
        # longer than the session timeout; counted over a window that starts once every broker is beating.
        window = max(seconds, 2 * session_s)
        sustained = Sample()
        fenced: set[int] = set()
        window_start = time.monotonic() + interval_s
        window_end = window_start + window

        async def simulated_broker(broker_id: int) -> None:
            await asyncio.sleep(random.uniform(0, interval_s))
            while time.monotonic() < window_end:
                begun = time.monotonic()
                counted = window_start <= begun
                try:
                    result = await client.broker_heartbeat(broker_id, epochs[broker_id], CAUGHT_UP)
                except E.KafkaError as exc:
                    sustained.fail(exc)
                else:
                    if counted and time.monotonic() <= window_end:
                        sustained.ok += 1
                        sustained.latencies_ms.append((time.monotonic() - begun) * 1000)
                    if result.is_fenced:
                        fenced.add(broker_id)
                await asyncio.sleep(max(0.0, interval_s - (time.monotonic() - begun)))

        await asyncio.gather(*(simulated_broker(b) for b in ids))
        online = {b.broker_id for b in await client.list_brokers() if not b.fenced}
        lapsed = len(set(ids) - online)
        out.append(
            summary(
                f"heartbeats of {brokers:,} brokers every {interval_s:g} s (due: {brokers / interval_s:,.0f}/s)",
                sustained,
                window,
            )
            + f"; fenced meanwhile: {len(fenced)}, not online at the end: {lapsed}"
        )

        async def beat(i: int) -> None:
            broker_id = ids[i % brokers]
            await client.broker_heartbeat(broker_id, epochs[broker_id], CAUGHT_UP)

        sample = await saturate(beat, in_flight, seconds)
        out.append(summary(f"heartbeats at saturation, {in_flight} in flight", sample, seconds))
    return out


# --- the same calls in-process --------------------------------------------------------------------


class InProcessController:
    """A `NodeProcess` with a quorum controller over a single-voter Raft core; flushes complete at once."""

    CTX = RequestContext(principal="User:broker")

    def __init__(self) -> None:
        raft = RaftNode(RaftConfig(1, frozenset({1})), LoadedState(None, (), None), random.Random(0))
        self.proc = Process(raft, controller=lambda port: QuorumController(port, ControllerConfig()))
        self.t0 = time.monotonic()
        self.answers: dict[int, object] = {}
        self.cids = itertools.count(1)
        self.pump(self.proc.handle(0, Start()))
        self.pump(self.proc.handle(self.now(), Tick()))
        while self.proc.controller is None or not self.proc.controller.active:
            time.sleep(0.05)
            self.pump(self.proc.handle(self.now(), Tick()))

    def now(self) -> int:
        return 10_000 + int((time.monotonic() - self.t0) * 1000)

    def pump(self, actions: list[object]) -> None:
        queue = list(actions)
        while queue:
            action = queue.pop(0)
            if isinstance(action, Flush):
                queue += self.proc.handle(self.now(), FlushCompleted(action.end_offset))
            elif isinstance(action, Respond):
                self.answers[action.correlation_id] = action.message

    def call(self, message: object) -> object:
        cid = next(self.cids)
        self.pump(self.proc.handle(self.now(), InboundRequest("conn", cid, message, self.CTX)))
        return self.answers.pop(cid)


def bench_in_process(brokers: int, seconds: float) -> list[str]:
    node = InProcessController()
    cluster_id = node.proc.image.cluster_id
    assert cluster_id
    epochs = {}
    started = time.perf_counter()
    for i in range(brokers):
        broker_id = SIM_BROKER_BASE + i
        request = BrokerRegistrationRequest(
            broker_id, cluster_id, uuid.uuid4(), (sim_listener(broker_id),), DEFAULT_FEATURES
        )
        answer = node.call(request)
        assert answer.error_code == ErrorCode.NONE, answer  # type: ignore[attr-defined]
        epochs[broker_id] = answer.broker_epoch  # type: ignore[attr-defined]
    registered = time.perf_counter() - started
    out = [f"in-process registrations: {brokers / registered:,.0f}/s ({brokers:,} in {registered:.2f} s)"]
    count, fenced = 0, 0
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        broker_id = SIM_BROKER_BASE + count % brokers
        answer = node.call(BrokerHeartbeatRequest(broker_id, epochs[broker_id], CAUGHT_UP))
        assert answer.error_code == ErrorCode.NONE, answer  # type: ignore[attr-defined]
        fenced += answer.is_fenced and count >= brokers  # type: ignore[attr-defined]
        count += 1
    elapsed = time.perf_counter() - started
    out.append(
        f"in-process heartbeats: {count / elapsed:,.0f}/s ({count:,} in {elapsed:.1f} s, "
        f"{brokers:,} brokers, fenced answers after the first round: {fenced})"
    )
    return out


# --- catch-up of a new broker ---------------------------------------------------------------------


def snapshot_ends(data_dir: Path) -> list[int]:
    return sorted(int(p.name.split("-")[0]) for p in data_dir.glob("__cluster_metadata-0/*.checkpoint"))


async def fill_log(plan: LocalCluster, records: int) -> int:
    """Topics of 1,000 partitions on one simulated broker until the log holds `records` records;
    returns the high watermark reached."""
    async with AdminClient(plan.controllers_bootstrap, request_timeout_ms=60_000) as client:
        cluster_id = await cluster_id_of(client)
        broker_id = SIM_BROKER_BASE
        epoch = await client.register_broker(
            broker_id, cluster_id, uuid.uuid4(), [sim_listener(broker_id)], features=DEFAULT_FEATURES
        )
        stop = asyncio.Event()

        async def keep_alive() -> None:
            while not stop.is_set():
                with contextlib.suppress(E.KafkaError):
                    await client.broker_heartbeat(broker_id, epoch, CAUGHT_UP)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), 1.0)

        heart = asyncio.create_task(keep_alive())
        await wait_online(client, {broker_id})
        for i in range(-(-records // 1001)):
            await client.create_topic(f"bulk-{i}", 1000, 1)
        stop.set()
        await heart
    leader = find_leader(plan.voters)
    assert leader is not None
    return int(leader["high_watermark"])


def bench_catch_up(records: int, snapshot_every: int) -> list[str]:
    label = "from a snapshot" if snapshot_every else "by log (snapshots off)"
    # Heartbeats every 200 ms so that "ONLINE" is not mostly the wait for the next heartbeat.
    settings = {SNAPSHOT_EVERY_KEY: str(snapshot_every), "broker.heartbeat.interval.ms": "200"}
    with cluster(3, 1, settings, start_brokers=False) as (plan, procs):
        started = time.monotonic()
        end = asyncio.run(fill_log(plan, records))
        filled = time.monotonic() - started
        leader_spec = plan.node(find_leader(plan.voters)["node_id"])  # type: ignore[index]
        snapshot = ""
        if snapshot_every:
            ends = wait_for(
                lambda: (e := snapshot_ends(leader_spec.data_dir)) and e[-1] >= records and e,
                60,
                what=f"a snapshot of {records:,} records",
            )
            files = list(leader_spec.data_dir.glob("__cluster_metadata-0/*.checkpoint"))
            size = max(f.stat().st_size for f in files)
            snapshot = f"; snapshot at offset {ends[-1]:,} ({size / 1e6:.1f} MB)"
        broker = plan.brokers[0]
        started = time.monotonic()
        procs[broker.node_id].start()
        answering = wait_for(lambda: status(broker) and time.monotonic(), 60, interval=0.02, what="the broker")
        replayed = wait_for(
            lambda: (s := status(broker)) and s.get("metadata_offset", 0) >= end and time.monotonic(),
            300,
            interval=0.02,
            what="the new broker's image",
        )

        async def online() -> float:
            async with AdminClient(plan.controllers_bootstrap, request_timeout_ms=60_000) as client:
                await wait_online(client, {broker.node_id}, timeout=300)
            return time.monotonic()

        online_at = asyncio.run(online())
        fetched = snapshot_ends(broker.data_dir)
        how = f"it fetched the snapshot at {fetched[-1]:,}" if fetched else "it fetched no snapshot"
        return [
            f"catch-up {label}: log of {end:,} records (filled in {filled:.1f} s{snapshot}); new broker process "
            f"up after {answering - started:.2f} s, its image complete after {replayed - started:.2f} s, "
            f"ONLINE after {online_at - started:.2f} s ({how})"
        ]


# --- main -----------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="configs,heartbeats,inprocess,catchup")
    parser.add_argument("--in-flight", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--brokers", type=int, default=1000, help="simulated brokers")
    parser.add_argument("--records", type=int, default=100_000, help="metadata records before the new broker")
    args = parser.parse_args()
    parts = set(args.only.split(","))
    unknown = parts - {"configs", "heartbeats", "inprocess", "catchup"}
    if unknown:
        parser.error(f"--only: unknown part(s) {sorted(unknown)}")
    if "configs" in parts:
        with cluster(3, 1, {}) as (plan, _):
            for line in asyncio.run(bench_configs(plan, args.in_flight, args.seconds)):
                print(line, flush=True)
    if "heartbeats" in parts:
        with cluster(3, 0, {}) as (plan, _):
            for line in asyncio.run(bench_heartbeats(plan, args.brokers, args.in_flight, args.seconds)):
                print(line, flush=True)
    if "inprocess" in parts:
        for line in bench_in_process(args.brokers, args.seconds):
            print(line, flush=True)
    if "catchup" in parts:
        for line in bench_catch_up(args.records, args.records) + bench_catch_up(args.records, 0):
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
