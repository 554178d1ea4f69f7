"""The real runtime: one node process (`NodeProcess`: the Raft core plus a controller and/or a broker)
driven by asyncio, TCP, files with real fsync and the process clock.

`NodeServer` feeds the process events stamped with the node's clock (`WallClock`: the wall clock in ms,
never going backwards, as Kafka reads `Time.milliseconds()`) and carries out the actions
it returns, in order, against `FileStorage`. fsync runs in a worker thread so appends keep arriving while
it runs; whatever arrives meanwhile is made durable by the next fsync (group commit). Only one fsync is
in flight at a time, and `FlushCompleted` reports the log end at the moment that fsync started.

It is also the in-process embedding API used by tests and benchmarks:

    server = NodeServer(load_server_config("server.properties"))
    await server.start()
    base, last = await server.append([b"record"])   # completes when committed
    await server.stop()                             # a leader resigns first
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import platform
import random
import time
from collections import deque
from collections.abc import Hashable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from node.bugs import warning_lines
from node.process.actions import MetadataApplied, ShutDown
from node.process.events import BeginShutdown, InboundRequest, InboundRequests, ResponsesReceived
from node.process.ports import RequestContext
from node.process.process import CONTROLLER_LISTENER, NodeProcess
from node.protocol.codec import BinaryCodec, EncodedResponse, FrameError, FrameKind, FrameReader
from node.protocol.errors import ErrorCode
from node.protocol.kafka_codec import KafkaCodec, KafkaHeader, looks_like_kafka
from node.protocol.messages import DescribeQuorumRequest, EndQuorumEpochRequest, Response
from node.protocol.registry import API_KEYS, BROKER_API_KEYS, CONTROLLER_API_KEYS
from node.protocol.session import SaslAuthenticateResponse, SaslHandshakeResponse
from node.raft import actions as A
from node.raft.events import (
    Append,
    Event,
    FlushCompleted,
    RequestFailed,
    Resign,
    ResponseReceived,
    SnapshotWritten,
    Start,
    Tick,
)
from node.raft.node import RaftNode
from node.raft.records import RecordBatch
from node.raft.storage import StorageError
from node.runtime.append_error import AppendError
from node.runtime.appends import AppendGroup, PendingAppend, group_appends
from node.runtime.dumps import write_dumps
from node.runtime.file_storage import FileStorage
from node.runtime.frame_writer import FrameWriter
from node.runtime.metrics import RuntimeMetrics
from node.runtime.peers import Backoff, PeerLink
from node.runtime.roles import build_process
from node.runtime.server_config import Listener, ServerConfig
from node.runtime.wall_clock import WallClock
from node.security.sasl import SaslServerSession, Verdict

log = logging.getLogger("kchaos.node")

MAX_INBOUND_WRITE_BYTES = 64 << 20
SHUTDOWN_GRACE_S = 0.5
FAILED_AUTHENTICATION_DELAY_S = 0.1  # Kafka's connection.failed.authentication.delay.ms default
CONTROLLED_SHUTDOWN_S = 5.0  # how long a stopping broker waits for the controller's SHUTDOWN answer
# The core's deadlines are on the wall clock, asyncio's timers on the monotonic one: a timer looks at
# the wall clock again at least this often, so a clock that jumps or runs fast or slow is noticed.
TIMER_RECHECK_MS = 50


def monotonic_ms() -> int:
    """The runtime's own measurements (event-loop busy time, fsync latency) are windowed on the real
    monotonic clock: a skewed or frozen node clock must not distort what they measure."""
    return time.monotonic_ns() // 1_000_000


class FatalError(Exception):
    """The node stopped because the core or its storage said it must."""


@dataclass(eq=False, slots=True)
class _Inbound:
    """An accepted connection; it is the `reply_to` token of the requests read from it."""

    writer: asyncio.StreamWriter
    peer: str
    codec: BinaryCodec
    session: SaslServerSession
    out: FrameWriter  # the responses of one loop turn leave in one send
    closed: bool = False
    kafka: _KafkaFraming | None = None  # set when the first frame is Kafka's (see _serve_inbound)


@dataclass(eq=False, slots=True)
class _KafkaFraming:
    """A connection speaking Kafka's framing. The core sees our own correlation ids (`next_id`), each
    mapped to the client's header; answers leave in request order, as a Kafka client expects."""

    codec: KafkaCodec
    next_id: itertools.count = field(default_factory=lambda: itertools.count(1))
    pending: dict[int, KafkaHeader] = field(default_factory=dict)
    order: deque[int] = field(default_factory=deque)  # our ids, oldest first
    ready: dict[int, bytes] = field(default_factory=dict)  # encoded answers waiting for older ones
    failed_authentication: bool = False  # close after FAILED_AUTHENTICATION_DELAY_S, as Kafka does


@dataclass(slots=True)
class _FlushState:
    future: Future[float] | None = None  # the fsync running in the worker thread (its duration, ms)
    started_end: int = 0  # log end when it started
    cap: int | None = None  # a truncation below started_end while it ran
    wanted: bool = False  # a Flush arrived while one was running
    log_end: int = 0  # the log end as the runtime last changed it
    # Batches appended while an fsync runs wait here, so the storage is never used from two threads
    # at once; they are written just before the next fsync (group commit). Losing them in a crash is
    # the same as losing un-fsynced bytes.
    pending: list[RecordBatch] = field(default_factory=list)


@dataclass(slots=True)
class _Waiters:
    appends: dict[Hashable, AppendGroup] = field(default_factory=dict)  # by Append handle
    arriving: list[PendingAppend] = field(default_factory=list)  # this loop turn's appends
    high_watermark: list[tuple[int, asyncio.Future[int]]] = field(default_factory=list)


class NodeServer:
    def __init__(self, config: ServerConfig, *, rng: random.Random | None = None) -> None:
        self.config = config
        self.node_id = config.node_id
        # Each listener serves only its endpoint's APIs: any other frame is refused like a malformed one.
        self.controller_codec = BinaryCodec(config.max_frame_bytes, api_keys=CONTROLLER_API_KEYS)
        broker_keys = BROKER_API_KEYS | {API_KEYS[DescribeQuorumRequest]}
        self.broker_codec = BinaryCodec(config.max_frame_bytes, api_keys=broker_keys)
        self.codec = BinaryCodec(config.max_frame_bytes)  # outbound: whatever the peer answers
        # Kafka's own framing, for the admin APIs of each kind of listener (docs/internals/kafka-protocol.md)
        voters = [(v.node_id, v.host, v.port) for v in config.voters]
        self.controller_kafka_codec = KafkaCodec(CONTROLLER_API_KEYS, config.node_id, controllers=voters)
        self.broker_kafka_codec = KafkaCodec(broker_keys, config.node_id)
        self.rng = rng or random.Random()
        self.storage: FileStorage | None = None
        self.node: RaftNode | None = None
        self.process: NodeProcess | None = None
        self.shutdown_reason: str | None = None
        self.clock = WallClock()
        self.metrics = RuntimeMetrics(config.metrics_window_ms, monotonic_ms())
        self.fatal: str | None = None
        self.listen_port: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._servers: list[asyncio.Server] = []
        self.listen_ports: dict[str, int] = {}
        self._inbound: set[_Inbound] = set()
        self._peers: dict[int, PeerLink] = {}
        self._voter_ids = frozenset(v.node_id for v in config.voters)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"fsync-{config.node_id}")
        self._flush = _FlushState()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_deadline: int | None = None
        self._events: deque[Event | InboundRequest | InboundRequests | ResponsesReceived | BeginShutdown] = deque()
        self._processing = False
        self._handles = itertools.count(1)
        self._waiters = _Waiters()
        self._started = False  # Start was fed to the core
        self._stop_requested = False
        self._stopping = False  # closing down: no more events for the core
        self._role_seen: tuple[str, bool] | None = None  # (Raft role, controller active) last logged
        self._closed = False
        self._stopped = asyncio.Event()
        self._endpoints: list[object] = []  # extra servers to close (metrics)

    # --- lifecycle ---------------------------------------------------------------------------------

    async def start(self) -> None:
        """Load the data dir (StorageError if it cannot be trusted), listen, and start the core."""
        self._loop = asyncio.get_running_loop()
        for line in warning_lines(self.config.bugs, self.node_id):
            log.warning("%s", line)
        self.storage = FileStorage(
            self.config.data_dir,
            self.node_id,
            self.config.cluster_id,
            segment_bytes=self.config.segment_bytes,
            bugs=self.config.bugs,
        )
        try:
            loaded = self.storage.load()
        except BaseException:
            self.storage.close()
            raise
        if loaded.recovered:
            log.warning("node %d: start-up recovery: %s", self.node_id, loaded.recovered)
        qs = loaded.quorum_state
        log.info(
            "node %d: loaded %s; log end offset %d; cluster id %s",
            self.node_id,
            f"quorum-state epoch {qs.leader_epoch} leader {qs.leader_id} voted {qs.voted_id}"
            if qs
            else "no quorum-state",
            loaded.batches[-1].next_offset if loaded.batches else 0,
            loaded.cluster_id or "not yet known",
        )
        try:
            self.node = RaftNode(self.config.raft, loaded, self.rng)
        except BaseException:
            self.storage.close()
            raise
        self._flush.log_end = self.node.log_end_offset
        self.process = build_process(self.config, self.node, self.rng)
        for voter in self.config.voters:
            if voter.node_id != self.node_id:
                self._add_peer(voter.node_id, voter.host, voter.port, self.config.controller_security_protocol)
        for listener, controller_side in self._served_listeners():
            server = await asyncio.start_server(
                lambda r, w, lsn=listener, c=controller_side: self._serve_inbound(r, w, lsn, c),
                listener.host,
                listener.port,
            )
            self._servers.append(server)
            self.listen_ports[listener.name] = server.sockets[0].getsockname()[1]
        listener = self.config.listener
        if listener is not None:
            self.listen_port = self.listen_ports.get(listener.name)
        if self.config.metrics_address is not None:
            from node.runtime.admin_http import start_admin_endpoint

            self._endpoints.append(await start_admin_endpoint(self, *self.config.metrics_address))
        role = "+".join(sorted(self.config.roles)) + (" (voter)" if self.config.is_voter else " (observer)")
        where = ", ".join(f"{name}={port}" for name, port in self.listen_ports.items()) or "no listener"
        log.info(
            "node %d starting as %s on %s, data dir %s, host %s (%s %s)",
            self.node_id,
            role,
            where,
            self.config.data_dir,
            platform.node(),
            platform.system(),
            platform.release(),
        )
        if self._stop_requested:
            return  # a signal arrived while starting; stop() is closing down
        self._started = True
        self._enqueue(Start())

    def _served_listeners(self) -> list[tuple[Listener, bool]]:
        """(listener, is it the controller listener): a voter's controller listener, then the broker's
        (the config keeps the two sets apart, and a node that is not a controller is a broker)."""
        out = [(self.config.listener, True)] if self.config.is_voter and self.config.listener is not None else []
        return out + [(lsn, False) for lsn in self.config.broker_listeners]

    def _add_peer(self, node_id: int, host: str, port: int, security_protocol: str) -> PeerLink:
        login = self.config.sasl_login if security_protocol == "SASL_PLAINTEXT" else None
        peer = PeerLink(
            node_id,
            host,
            port,
            self.codec,
            Backoff(self.config.raft.retry_backoff_ms, self.config.raft.retry_backoff_max_ms),
            self.config.raft.request_timeout_ms,
            self._on_response,
            self._on_request_failed,
            login=login,
            on_responses=self._on_responses,
        )
        self._peers[node_id] = peer
        return peer

    def _peer_for(self, node_id: int) -> PeerLink | None:
        """Voters are known from the config; brokers from their registrations in the metadata image."""
        peer = self._peers.get(node_id)
        if node_id in self._voter_ids:
            return peer  # a controller (combined or not) is reached on its controller listener
        assert self.process is not None
        endpoint = self.process.address_book_entry(node_id)
        if endpoint is None:
            return peer
        host, port, protocol = endpoint
        if peer is not None and (peer.host, peer.port) == (host, port):
            return peer
        if peer is not None:  # re-registered elsewhere: the old link goes
            assert self._loop is not None
            self._loop.create_task(peer.close())
        return self._add_peer(node_id, host, port, protocol)

    async def serve_forever(self) -> int:
        """Run until stopped; 0 after a clean stop, 1 after a fatal error."""
        if self._loop is None:
            await self.start()
        await self._stopped.wait()
        return 1 if self.fatal else 0

    async def stop(self, grace_s: float = SHUTDOWN_GRACE_S) -> None:
        """Resign (a leader sends EndQuorumEpoch), let that go out for up to `grace_s`, flush, close."""
        if self._stop_requested or self._stopping:
            await self._stopped.wait()
            return
        self._stop_requested = True
        if self._started and self.fatal is None and "broker" in self.config.roles and self.shutdown_reason is None:
            log.info("node %d shutting down: controlled shutdown through the controller", self.node_id)
            self._enqueue(BeginShutdown())
            deadline = time.monotonic() + CONTROLLED_SHUTDOWN_S
            while time.monotonic() < deadline and self.shutdown_reason is None and self.fatal is None:
                await asyncio.sleep(0.02)
        if self._started and self.fatal is None:
            log.info("node %d shutting down: resigning (epoch %d)", self.node_id, self.node.epoch)
            self._enqueue(Resign())
            deadline = time.monotonic() + grace_s
            while time.monotonic() < deadline and any(p.awaiting_answers for p in self._peers.values()):
                await asyncio.sleep(0.01)
        self._stopping = True
        await self._close()

    async def _close(self) -> None:
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
        for server in self._servers:
            server.close()
        for conn in list(self._inbound):
            conn.closed = True
            conn.out.close()
        for peer in self._peers.values():
            await peer.close()
        for endpoint in self._endpoints:
            await endpoint.close()  # type: ignore[attr-defined]
        if self._flush.future is not None:
            with contextlib.suppress(Exception):
                await asyncio.wrap_future(self._flush.future)
        if self.storage is not None and self.fatal is None and self.node is not None:
            try:
                if self._flush.pending:
                    self.storage.append(tuple(self._flush.pending))
                    self._flush.pending.clear()
                self.storage.flush()
            except (OSError, StorageError) as exc:
                log.error("node %d: final flush failed: %s", self.node_id, exc)
        if self.process is not None:
            try:
                write_dumps(self.config.data_dir, self.process)
            except OSError as exc:
                log.error("node %d: cannot write the image and committed-log dumps: %s", self.node_id, exc)
        if self.storage is not None:
            self.storage.close()
        self._executor.shutdown(wait=True)
        for group in self._waiters.appends.values():
            group.fail(AppendError(ErrorCode.BROKER_NOT_AVAILABLE, "node stopped", definite=False))
        self._waiters.appends.clear()
        for _, fut in self._waiters.high_watermark:
            if not fut.done():
                fut.set_exception(FatalError(self.fatal or "node stopped"))
        self._stopped.set()
        log.info("node %d stopped", self.node_id)

    def _die(self, reason: str) -> None:
        if self.fatal is not None or self._stopping:
            return
        self.fatal = reason
        self._stopping = True
        log.error("node %d: fatal: %s", self.node_id, reason)
        assert self._loop is not None
        self._loop.create_task(self._close())

    # --- embedding API ------------------------------------------------------------------------------

    async def append(self, records: Sequence[bytes]) -> tuple[int, int]:
        """Append to the leader; returns (base, last) offsets once committed, else AppendError."""
        if self._stop_requested or self._stopping or self._loop is None:
            raise AppendError(ErrorCode.BROKER_NOT_AVAILABLE, "node is not running", definite=True)
        if not records:
            raise AppendError(ErrorCode.INVALID_REQUEST, "no records", definite=True)
        fut: asyncio.Future[tuple[int, int]] = self._loop.create_future()
        if not self._waiters.arriving:
            self._loop.call_soon(self._submit_appends)
        self._waiters.arriving.append(PendingAppend(tuple(records), fut))
        return await fut

    def _submit_appends(self) -> None:
        arriving, self._waiters.arriving = self._waiters.arriving, []
        for group in group_appends(arriving, self.config.raft.append_max_records):
            if self._closed:
                group.fail(AppendError(ErrorCode.BROKER_NOT_AVAILABLE, "node stopped", definite=True))
                continue
            handle = next(self._handles)
            self._waiters.appends[handle] = group
            self._enqueue(Append(handle, group.records))

    async def wait_for_high_watermark(self, offset: int) -> int:
        """Wait until this node's high watermark reaches `offset`; returns it."""
        assert self.node is not None and self._loop is not None
        if self.node.high_watermark >= offset:
            return self.node.high_watermark
        fut: asyncio.Future[int] = self._loop.create_future()
        self._waiters.high_watermark.append((offset, fut))
        return await fut

    def metric_values(self) -> dict[str, float | int | str]:
        """KIP-595 metric values: the core's where it reports them, the runtime's measurements else."""
        node = self.node
        assert node is not None
        now = self.clock.now_ms()
        state = node.role.value if self.config.is_voter else "observer"
        values: dict[str, float | int | str] = {
            "current-leader": node.leader_id,
            "current-epoch": node.epoch,
            "current-vote": node.voted_id,
            "log-end-offset": node.log_end_offset,
            "log-end-epoch": node.last_epoch,
            "high-watermark": node.high_watermark,
            "current-state": state,
            "number-unknown-voter-connections": 0,  # voters are static: every address is known
            "wall-clock-ms": self.clock.wall_ms(),
            "node-clock-ms": now,
            **self.metrics.snapshot(monotonic_ms()),
        }
        with contextlib.suppress(NotImplementedError):
            values.update(node.metrics(now))
        process = self.process
        if process is not None and process.broker is not None:
            values.update(process.broker.metrics())  # type: ignore[attr-defined]
        if not self.config.is_voter:
            values["current-state"] = "observer"
        return values

    # --- driving the core ---------------------------------------------------------------------------

    def _enqueue(self, event: Event | InboundRequest | InboundRequests | ResponsesReceived | BeginShutdown) -> None:
        """Feed an event; events raised while actions are carried out wait their turn (no re-entry)."""
        if self._closed:
            return
        self._events.append(event)
        if self._processing:
            return
        self._processing = True
        try:
            while self._events and self.fatal is None:
                self._handle(self._events.popleft())
        finally:
            self._processing = False
            if self.fatal is not None:
                self._events.clear()

    def _handle(self, event: Event | InboundRequest | InboundRequests | ResponsesReceived | BeginShutdown) -> None:
        assert self.node is not None and self.process is not None
        started = time.perf_counter()
        now = self.clock.now_ms()
        try:
            actions = self.process.handle(now, event)
            for action in actions:
                self._carry_out(now, action)
                if self.fatal is not None:
                    return
        except (OSError, StorageError) as exc:
            self._die(f"storage failure: {exc}")
            return
        except Exception as exc:  # a bug: state may be inconsistent, so stop rather than limp on
            log.exception("node %d: error handling %s", self.node_id, type(event).__name__)
            self._die(f"internal error handling {type(event).__name__}: {exc!r}")
            return
        if self._waiters.high_watermark:
            self._wake_high_watermark(self.node.high_watermark)
        self._log_role()
        self.metrics.busy.record(monotonic_ms(), (time.perf_counter() - started) * 1000)

    def _log_role(self) -> None:
        """One line per change of Raft role or controller activation, so a failover can be timed phase
        by phase from the logs (prospective: pre-vote round; candidate; leader; controller active:
        the first entry of its epoch is committed and applied)."""
        assert self.node is not None and self.process is not None
        controller = self.process.controller
        seen = (self.node.role.value, controller is not None and controller.active)
        if seen != self._role_seen:
            self._role_seen = seen
            active = ", controller active" if seen[1] else ""
            log.info("node %d: %s in epoch %d%s", self.node_id, seen[0], self.node.epoch, active)

    def _carry_out(self, now: int, action: object) -> None:
        storage = self.storage
        assert storage is not None
        match action:
            case A.SendRequest(destination, correlation_id, message):
                peer = self._peer_for(destination)
                if peer is None:
                    log.error("node %d: no address for node %d", self.node_id, destination)
                    assert self._loop is not None
                    self._loop.call_soon(self._on_request_failed, destination, correlation_id, False)
                else:
                    peer.send(correlation_id, message)
            case A.Respond(reply_to, correlation_id, message):
                self._respond(reply_to, correlation_id, message)
            case A.AppendBatches(batches):
                if self._flush.future is not None:
                    self._flush.pending.extend(batches)
                else:
                    storage.append(batches)
                if batches:
                    self._flush.log_end = batches[-1].next_offset
            case A.TruncateLog(offset):
                self._truncate(offset)
            case A.Flush():
                self._request_flush()
            case A.PersistQuorumState(state):
                storage.write_quorum_state(state)
            case A.PersistClusterId(cluster_id):
                storage.write_cluster_id(cluster_id)
                log.info("node %d: cluster id %s", self.node_id, cluster_id)
            case A.SetTimer(deadline):
                self._set_timer(deadline)
            case A.AppendCompleted(handle, base_offset, last_offset):
                group = self._waiters.appends.pop(handle, None)
                if group is not None:
                    group.complete(base_offset, last_offset)
            case A.AppendFailed(handle, error, message):
                group = self._waiters.appends.pop(handle, None)
                if group is not None:
                    leader = self.node.leader_id if self.node is not None else -1
                    group.fail(AppendError(error, message, definite=True, leader_id=leader))
            case A.HighWatermarkAdvanced(high_watermark):
                self._wake_high_watermark(high_watermark)
            case A.LeaderChanged(epoch, leader_id):
                log.info(
                    "node %d: epoch %d, leader %s", self.node_id, epoch, leader_id if leader_id >= 0 else "unknown"
                )
            case A.Fatal(reason):
                self._die(reason)
            case A.Warn(message):
                log.warning("%s", message)
            case MetadataApplied() | A.LoadSnapshot():
                pass  # the process has already applied them to its image
            case A.WriteSnapshot(snapshot_id, data):
                self._write_snapshot(snapshot_id, data)
            case A.DeleteLogBefore(offset):
                self._wait_for_flush()
                storage.delete_before(offset)
            case A.ResetLog(offset):
                self._wait_for_flush()
                self._flush.pending.clear()
                storage.reset(offset)
                self._flush.log_end = offset
            case ShutDown(reason, requested):
                self.shutdown_reason = reason
                if not requested and not self._stop_requested:
                    log.error("node %d: shutting down: %s", self.node_id, reason)
                    self.fatal = reason
                    assert self._loop is not None
                    self._loop.create_task(self.stop())
            case _:
                raise TypeError(f"unknown action {action!r}")

    def _wake_high_watermark(self, high_watermark: int) -> None:
        keep = []
        for offset, fut in self._waiters.high_watermark:
            if fut.done():
                continue
            if high_watermark >= offset:
                fut.set_result(high_watermark)
            else:
                keep.append((offset, fut))
        self._waiters.high_watermark = keep

    # --- timers -------------------------------------------------------------------------------------

    def _set_timer(self, deadline: int) -> None:
        """One timer, replaced by each SetTimer: the core re-announces its earliest deadline whenever
        it changes (and only then), so a later SetTimer supersedes an earlier one."""
        if self._timer is not None and self._timer_deadline == deadline:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_deadline = deadline
        self._arm_timer(deadline)

    def _arm_timer(self, deadline: int) -> None:
        assert self._loop is not None
        # +1 ms: the loop may fire a hair early, and the core compares whole milliseconds.
        wait_ms = min(max(deadline - self.clock.now_ms(), 0) + 1, TIMER_RECHECK_MS)
        self._timer = self._loop.call_later(wait_ms / 1000, self._on_timer)

    def _on_timer(self) -> None:
        deadline = self._timer_deadline
        if deadline is not None and self.clock.now_ms() < deadline:
            self._arm_timer(deadline)  # not yet on the node's clock (it ran slow, or was set back)
            return
        self._timer = None
        self._timer_deadline = None
        self._enqueue(Tick())

    # --- the log's durability -----------------------------------------------------------------------

    def _request_flush(self) -> None:
        if self._flush.future is not None:
            self._flush.wanted = True
            return
        self._start_flush()

    def _start_flush(self) -> None:
        assert self.storage is not None and self._loop is not None
        state = self._flush
        state.wanted = False
        if state.pending:
            self.storage.append(tuple(state.pending))
            state.pending.clear()
        state.started_end = state.log_end
        state.cap = None
        state.future = self._executor.submit(self._timed_flush)
        asyncio.wrap_future(state.future, loop=self._loop).add_done_callback(self._flush_done)

    def _timed_flush(self) -> float:
        """The fsync (in the worker thread); returns how long it took, in ms."""
        assert self.storage is not None
        started = time.perf_counter()
        self.storage.flush()
        return (time.perf_counter() - started) * 1000

    def _flush_done(self, fut: asyncio.Future[float]) -> None:
        state = self._flush
        state.future = None
        if self._closed:
            return
        exc = fut.exception()
        if exc is not None:
            self._die(f"fsync failed: {exc}")
            return
        self.metrics.record_fsync(monotonic_ms(), fut.result())
        end = state.started_end if state.cap is None else min(state.started_end, state.cap)
        if state.wanted or state.pending:
            try:
                self._start_flush()
            except (OSError, StorageError) as write_exc:
                self._die(f"storage failure: {write_exc}")
                return
        self._enqueue(FlushCompleted(end))

    def _wait_for_flush(self) -> None:
        """Storage is single-threaded: a running fsync (milliseconds) finishes before the log changes."""
        if self._flush.future is not None:
            self._flush.future.result()

    def _write_snapshot(self, snapshot_id: object, data: bytes) -> None:
        """Written and fsynced in the fsync thread (so appends keep arriving), then reported back."""
        assert self.storage is not None and self._loop is not None
        self._wait_for_flush()
        storage = self.storage
        started = time.monotonic()

        def write() -> None:
            storage.write_snapshot(snapshot_id, data)  # type: ignore[arg-type]

        def done(fut: asyncio.Future[None]) -> None:
            if self._closed:
                return
            exc = fut.exception()
            if exc is not None:
                self._die(f"cannot write snapshot {snapshot_id}: {exc}")
                return
            log.info(
                "node %d: snapshot %s written (%d bytes, %.0f ms)",
                self.node_id,
                snapshot_id,
                len(data),
                (time.monotonic() - started) * 1000,
            )
            self._enqueue(SnapshotWritten(snapshot_id))  # type: ignore[arg-type]

        future = self._executor.submit(write)
        asyncio.wrap_future(future, loop=self._loop).add_done_callback(done)

    def _truncate(self, offset: int) -> None:
        assert self.storage is not None
        state = self._flush
        if state.future is not None:
            state.future.result()  # never truncate under a running fsync; it takes milliseconds
            state.cap = offset if state.cap is None else min(state.cap, offset)
        survivors = [b for b in state.pending if b.base_offset < offset]
        state.pending.clear()
        if survivors:
            self.storage.append(tuple(survivors))
        self.storage.truncate(offset)
        state.log_end = min(state.log_end, offset)

    # --- network ------------------------------------------------------------------------------------

    def _on_response(self, source: int, correlation_id: int, message: Response) -> None:
        self._enqueue(ResponseReceived(source, correlation_id, message))

    def _on_responses(self, source: int, answers: list[tuple[int, Response]]) -> None:
        self._enqueue(ResponsesReceived(tuple(ResponseReceived(source, cid, message) for cid, message in answers)))

    def _on_request_failed(self, destination: int, correlation_id: int, sent: bool) -> None:
        if not self._stopping:
            self._enqueue(RequestFailed(destination, correlation_id, sent))

    def _respond(self, reply_to: Hashable, correlation_id: int, message: Response) -> None:
        if not isinstance(reply_to, _Inbound) or reply_to.closed:
            return  # the requester hung up; it will retry
        if reply_to.kafka is not None:
            self._respond_kafka(reply_to, correlation_id, message)
            return
        try:
            if type(message) is EncodedResponse:
                frame = message.frame
            else:
                frame = reply_to.codec.encode_response(correlation_id, message)
        except (ValueError, TypeError) as exc:
            log.error("node %d: cannot encode %s: %s", self.node_id, type(message).__name__, exc)
            self._close_inbound(reply_to)
            return
        if reply_to.out.buffered_bytes > MAX_INBOUND_WRITE_BYTES:
            log.warning("node %d: %s is not reading its responses; closing", self.node_id, reply_to.peer)
            self._close_inbound(reply_to)
            return
        reply_to.out.write(frame)

    def _respond_kafka(self, conn: _Inbound, our_id: int, message: Response | bytes) -> None:
        """Encode the core's answer in the client's version; send it and any younger ones now due."""
        kafka = conn.kafka
        assert kafka is not None
        header = kafka.pending.pop(our_id, None)
        if header is None and not isinstance(message, bytes):
            return
        if kafka.codec.closes_instead(message):  # a broker not serving clients yet (kafka_codec.py)
            self._close_inbound(conn)
            return
        try:
            frame = message if isinstance(message, bytes) else kafka.codec.encode_response(header, message)
        except Exception as exc:  # an answer this framing cannot carry must not stop the node: drop the client
            log.error("node %d: cannot encode %s for %s: %r", self.node_id, type(message).__name__, conn.peer, exc)
            self._close_inbound(conn)
            return
        kafka.ready[our_id] = frame
        while kafka.order and kafka.order[0] in kafka.ready:
            reply_to_frame = kafka.ready.pop(kafka.order.popleft())
            if conn.out.buffered_bytes > MAX_INBOUND_WRITE_BYTES:
                log.warning("node %d: %s is not reading its responses; closing", self.node_id, conn.peer)
                self._close_inbound(conn)
                return
            conn.out.write(reply_to_frame)

    def _enqueue_requests(self, batch: list[InboundRequest]) -> None:
        """Hand over (and forget) the requests read so far: one alone as itself, several as one event."""
        if len(batch) == 1:
            self._enqueue(batch[0])
        elif batch:
            self._enqueue(InboundRequests(tuple(batch)))
        batch.clear()

    def _close_inbound(self, conn: _Inbound) -> None:
        conn.closed = True
        self._inbound.discard(conn)
        conn.out.close()

    def _read_kafka(
        self, conn: _Inbound, raw: bytes, batch: list[InboundRequest], host: str, listener: Listener, name: str
    ) -> bool:
        """One Kafka-framed request: answered here (ApiVersions) or added to `batch` for the core under
        an id of ours. False when the connection must close (FrameError closes it too)."""
        kafka = conn.kafka
        assert kafka is not None
        request = kafka.codec.decode_request(raw)
        our_id = next(kafka.next_id)
        kafka.order.append(our_id)
        if request.answer is not None:
            self._respond_kafka(conn, our_id, request.answer)
            return True
        kafka.pending[our_id] = request.header
        step = conn.session.receive(request.message)
        if step.verdict is not Verdict.PASS:
            self._enqueue_requests(batch)  # what was read before it is handed over first
            if isinstance(step.response, (SaslHandshakeResponse, SaslAuthenticateResponse)):
                self._respond_kafka(conn, our_id, step.response)  # type: ignore[arg-type]
            if step.verdict is Verdict.REFUSE:  # Kafka closes such a connection without an answer
                log.warning("node %d: refusing %s: %s", self.node_id, conn.peer, step.reason)
                kafka.failed_authentication = isinstance(step.response, SaslAuthenticateResponse)
                return False
            return True
        if self._stopping:
            return False
        ctx = RequestContext(
            principal=step.principal,
            client_host=host,
            listener_name=name,
            security_protocol=listener.security_protocol,
            frame=None,  # a forwarding broker re-encodes it in our framing for the Envelope
        )
        batch.append(InboundRequest(conn, our_id, request.message, ctx))
        return True

    async def _serve_inbound(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, listener: Listener, controller_side: bool
    ) -> None:
        codec = self.controller_codec if controller_side else self.broker_codec
        peername = writer.get_extra_info("peername")
        host = peername[0] if peername else "?"
        users = self.config.sasl_users if listener.security_protocol == "SASL_PLAINTEXT" else None
        session = SaslServerSession(users)
        conn = _Inbound(writer, f"{host}:{peername[1]}" if peername else "?", codec, session, FrameWriter(writer))
        self._inbound.add(conn)
        frames = FrameReader(codec.max_frame_bytes)
        listener_name = CONTROLLER_LISTENER if controller_side else listener.name
        first = True  # the first frame tells Kafka's framing from ours
        try:
            while not conn.closed and (data := await reader.read(1 << 16)):
                # The requests of one read are handed over together (the process may join their
                # appends into one Raft batch), always before anything answered here on the spot.
                batch: list[InboundRequest] = []
                try:
                    for raw in frames.feed(data):
                        if conn.kafka is None and first and looks_like_kafka(raw):
                            kafka_codec = self.controller_kafka_codec if controller_side else self.broker_kafka_codec
                            conn.kafka = _KafkaFraming(kafka_codec)
                        first = False
                        if conn.kafka is not None:
                            if not self._read_kafka(conn, raw, batch, host, listener, listener_name):
                                return
                            continue
                        frame = codec.decode(raw)
                        if frame.kind is not FrameKind.REQUEST:
                            raise FrameError("a response frame arrived on an inbound connection")
                        step = session.receive(frame.message)
                        if step.verdict is not Verdict.PASS:
                            self._enqueue_requests(batch)
                            if step.response is not None:
                                self._respond(conn, frame.correlation_id, step.response)  # type: ignore[arg-type]
                            if step.verdict is Verdict.REFUSE:
                                log.warning("node %d: refusing %s: %s", self.node_id, conn.peer, step.reason)
                                return
                            continue
                        if isinstance(frame.message, EndQuorumEpochRequest):
                            log.info(
                                "node %d: EndQuorumEpoch from leader %d of epoch %d",
                                self.node_id,
                                frame.message.leader_id,
                                frame.message.leader_epoch,
                            )
                        if self._stopping:
                            return
                        ctx = RequestContext(
                            principal=step.principal,
                            client_host=host,
                            listener_name=listener_name,
                            security_protocol=listener.security_protocol,
                            frame=raw,
                        )
                        batch.append(InboundRequest(conn, frame.correlation_id, frame.message, ctx))
                finally:
                    self._enqueue_requests(batch)
                if conn.closed:
                    return
        except FrameError as exc:
            log.warning("node %d: closing connection from %s: %s", self.node_id, conn.peer, exc)
        except (ConnectionError, OSError):
            pass
        except Exception as exc:  # a decoder bug must not take the node down with it
            log.error("node %d: closing connection from %s: %r", self.node_id, conn.peer, exc)
        finally:
            if conn.kafka is not None and conn.kafka.failed_authentication and not self._stopping:
                # Kafka's connection.failed.authentication.delay.ms: the client reads the SASL answer
                # before it sees the connection close (some treat the close as the only news)
                await asyncio.sleep(FAILED_AUTHENTICATION_DELAY_S)
            self._close_inbound(conn)
