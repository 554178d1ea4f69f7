"""The simulation runtime: nodes on a simulated network and simulated disks, in virtual time.

`Simulation` is the library face of the simulator. Tests and the harness's `sim` backend build one,
then step it, run it to a time or a predicate, inject faults (partition, kill, pause, clock skew,
disk stall) and inspect the nodes. Every random choice comes from one `random.Random(seed)`; every
event goes through one queue ordered by (time, insertion order); every event a node handles is
appended to the trace and followed by the invariant checks of `node.sim.invariants`.

Two modes. By default every host runs a bare Raft core (the quorum simulator). With
`SimConfig(cluster=ClusterConfig(...))` every host runs a `NodeProcess` (`node.sim.cluster`): a
controller, a broker or both over the Raft core; inbound requests then carry a `RequestContext`,
the process may stop itself (`ShutDown`, a clean exit), its committed metadata image is checked
against every other node's (`ImageAgreement`), and admin clients (`node.sim.admin_client`) talk to it
over the simulated network. `host.raft` is the Raft core in both modes.
"""

from __future__ import annotations

import random
import traceback
import uuid
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from node.bugs import NO_BUGS
from node.process.actions import MetadataApplied, ShutDown
from node.process.events import BeginShutdown, InboundRequest
from node.process.ports import RequestContext
from node.protocol.errors import ErrorCode
from node.protocol.messages import REQUESTS as QUORUM_REQUESTS
from node.protocol.messages import RESPONSES as QUORUM_RESPONSES
from node.protocol.messages import EpochEndOffset, FetchResponse
from node.raft import actions as act
from node.raft.config import RaftConfig
from node.raft.events import (
    Append,
    Event,
    FlushCompleted,
    RequestFailed,
    RequestReceived,
    ResponseReceived,
    SnapshotWritten,
    Start,
    Tick,
)
from node.raft.node import RaftNode
from node.raft.quorum_state import Role
from node.raft.records import RecordBatch
from node.raft.storage import LoadedState, StorageError
from node.runtime.corruption import Corruption, corrupt_data_dir, restore_corruption
from node.runtime.file_storage import snapshot_name
from node.sim.clock import NodeClock
from node.sim.cluster import ClusterConfig, ComponentBuilder, Roles, inbound_context, incarnation_id
from node.sim.components import build_process
from node.sim.disk import SIM_SEGMENT_BYTES, SimDisk
from node.sim.invariants import ImageAgreement, InvariantChecker, InvariantViolation
from node.sim.network import DegradedLinks, LinkModel, Network
from node.sim.scheduler import EventQueue
from node.sim.trace import Trace, summarize
from node.sim.workload import AppendClient, WorkloadConfig
from vocab.faults.kinds import PacketFault, RedeliverFault

_LOG_ACTIONS = (act.AppendBatches, act.TruncateLog, act.DeleteLogBefore, act.ResetLog)
# Events one node may handle within one virtual millisecond before the run counts as a livelock (say a
# timer re-armed for a time already past): far above any burst a correct node sees, and it turns what
# would be a run that never ends into a violation naming the node and the event.
LIVELOCK_EVENTS = 100_000
NodeFactory = Callable[[RaftConfig, LoadedState, random.Random, Callable[[random.Random], str]], Any]


def random_cluster_id(rng: random.Random) -> str:
    """A clusterId drawn from the node's seeded RNG, so it is the same on every replay."""
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _diverging_to_follow(host: SimNode, event: Event) -> EpochEndOffset | None:
    """The DivergingEpoch a follower is about to act on (invariant 11): in the answer it waits for (not a
    stale or redelivered copy), from the leader it follows, of its epoch, without error or snapshot.
    Judged before the event: an answer that moves the node to a new epoch or leader is not acted on."""
    if not (isinstance(event, ResponseReceived) and isinstance(event.message, FetchResponse)):
        return None
    raft = host.raft
    cid = event.correlation_id if host.process is None else host.process.raft_correlation_id(event.correlation_id)
    if cid is None or not raft.awaits(event.source, cid):
        return None
    resp = event.message
    if resp.diverging_epoch is None or resp.error_code != ErrorCode.NONE or resp.snapshot_id is not None:
        return None
    following = raft.role is Role.FOLLOWER and raft.leader_id == event.source == resp.leader_id
    return resp.diverging_epoch if following and raft.epoch == resp.leader_epoch else None


@dataclass(frozen=True)
class SimConfig:
    seed: int = 0
    voters: int = 3
    observers: int = 0
    raft: Mapping[str, int] = field(default_factory=dict)  # RaftConfig field -> value, for every node
    node_raft: Mapping[int, Mapping[str, int]] = field(default_factory=dict)  # per-node overrides
    link: LinkModel = field(default_factory=LinkModel)
    disk_latency_ms: tuple[int, int] = (2, 15)  # fsync latency range
    refused_delay_ms: int = 1  # connection refused / reset reaches the sender after this
    start_stagger_ms: int = 50  # nodes start at random times within this window
    node_factory: NodeFactory | None = None  # default: RaftNode (tests inject buggy ones)
    disk_factory: Callable[[int], SimDisk] | None = None
    segment_bytes: int = SIM_SEGMENT_BYTES  # FileStorage segment size on the default disks
    trace_path: str | None = None
    # Run whole KRaft node processes; when given, it fixes `voters` and `observers` (the brokers).
    cluster: ClusterConfig | None = None
    components: ComponentBuilder | None = None  # default: node.sim.components (controller, broker)

    def __post_init__(self) -> None:
        if self.cluster is not None:
            object.__setattr__(self, "voters", self.cluster.voters)
            object.__setattr__(self, "observers", self.cluster.brokers)
        if self.voters < 1:
            raise ValueError("a quorum needs at least one voter")
        if self.observers < 0:
            raise ValueError("observers must be >= 0")
        lo, hi = self.disk_latency_ms
        if lo < 0 or hi < lo:
            raise ValueError(f"disk latency range {lo}:{hi} is not 0 <= min <= max")

    @property
    def voter_ids(self) -> tuple[int, ...]:
        return tuple(range(1, self.voters + 1))

    @property
    def observer_ids(self) -> tuple[int, ...]:
        return tuple(range(self.voters + 1, self.voters + self.observers + 1))

    @property
    def node_ids(self) -> tuple[int, ...]:
        return self.voter_ids + self.observer_ids


@dataclass(frozen=True, slots=True)
class Violation:
    seed: int
    time_ms: int
    event_index: int  # trace line number of the offending event
    node: int | str
    event: str
    message: str

    def __str__(self) -> str:
        return (
            f"invariant violated (seed {self.seed}, t={self.time_ms} ms, event #{self.event_index} on "
            f"node {self.node}: {self.event}): {self.message}"
        )


# What the redeliver fault copies: the KIP-595 quorum messages, which every voter must take twice or
# late (the protocol's epochs and correlation ids are there for it). The controller and broker APIs
# rely on their connection delivering each request once, as TCP does; a copy of a forwarded write
# would apply it twice, a fault of the network model, not of the node.
REDELIVERED = (*QUORUM_REQUESTS, *QUORUM_RESPONSES)


@dataclass(slots=True)
class _Request:
    src: int
    src_inc: int
    dst: int
    dst_inc: int
    correlation_id: int
    copy: bool = False  # a copy the redeliver fault sent: never answered with a connection failure


@dataclass
class Stats:
    elections: int = 0  # leaders elected (distinct epochs with a leader)
    leader_changes: int = 0  # LeaderChanged actions seen, over all nodes
    faults: dict[str, int] = field(default_factory=dict)
    crashes: int = 0
    lost_unsynced_writes: int = 0
    events: int = 0
    shutdowns: int = 0  # processes that stopped by themselves (ShutDown)
    fail_stops: int = 0  # processes that stopped on a disk error (disk_fail)
    refused_starts: int = 0  # starts refused on damaged files (corrupt)


class ClientEndpoint(Protocol):
    """Something outside the cluster that sends requests to nodes (`node.sim.admin_client`)."""

    def on_response(self, node_id: int, correlation_id: int, message: object) -> None: ...

    def on_connection_failed(self, node_id: int, correlation_id: int, sent: bool) -> None:
        """No answer will come: refused before sending (`sent=False`) or reset after sending."""


class SimNode:
    """One node's host: its disk and clock outlive crashes; its RaftNode core (and process) does not.

    `node_id` is the host's address on the simulated network; `config.node_id` is the id its process
    claims, which differs only for an impostor host added with `Simulation.add_host`."""

    def __init__(self, node_id: int, config: RaftConfig, disk: SimDisk, roles: Roles | None = None) -> None:
        self.node_id = node_id
        self.config = config
        self.disk = disk
        self.roles = roles  # None: a bare Raft core
        self.clock = NodeClock()
        self.raft: Any = None  # a RaftNode while up
        self.process: Any = None  # its NodeProcess while up (cluster mode)
        self.core: Any = None  # what handles events: the process, or the Raft core itself
        self.incarnation_id: uuid.UUID | None = None  # the broker incarnation of the running process
        self.exit_reason: str | None = None  # why the process last stopped by itself (ShutDown)
        self.exiting: ShutDown | None = None  # a ShutDown seen while handling the current event
        self.up = False
        self.paused = False
        self.incarnation = 0
        self.buffered: list[Event] = []  # events that arrived while paused
        self.timer_at: int | None = None  # virtual time of the earliest pending Tick
        self.timer_local: int | None = None  # the same deadline on the node's clock
        self.disk_free_at = 0  # flushes run one after another
        self.disk_stalled_until = 0
        self.started = False  # started at least once (later starts are restarts)
        self.disk_fault: Any = None  # the DiskFault set on this host (set_disk_fault), if any
        self.corruptions: list[Corruption] = []  # damage done to its files while down (corrupt_storage)
        self.busy_ms = -1  # the virtual millisecond of its latest events, and how many it handled then
        self.busy_events = 0

    @property
    def is_voter(self) -> bool:
        return self.config.is_voter

    def __repr__(self) -> str:
        state = "paused" if self.paused else "up" if self.up else "down"
        return f"SimNode({self.node_id}, {state}, inc={self.incarnation})"


class Simulation:
    def __init__(self, config: SimConfig, workload: WorkloadConfig | None = None) -> None:
        self.config = config
        self.rng = random.Random(config.seed)
        self.queue = EventQueue()
        self.network = Network(self.rng, config.link)
        self.trace = Trace(config.trace_path)
        self.checker = InvariantChecker(config.voter_ids)
        self.images = ImageAgreement()
        self.stats = Stats()
        self.violation: Violation | None = None
        self.crash_traceback: str | None = None  # when a core raised instead of returning actions
        self.nodes: dict[int, SimNode] = {}
        self.cluster = config.cluster
        for node_id in config.node_ids:
            self._add_node(node_id, node_id)
        self._disks = {n: host.disk for n, host in self.nodes.items()}
        self.clients: dict[int, ClientEndpoint] = {}  # negative ids: outside the cluster
        self._requests: dict[int, _Request] = {}
        self._next_request = 0
        self._client_handles: dict[Hashable, int] = {}  # Append handle -> node it was sent to
        self.append_results: dict[Hashable, act.AppendCompleted | act.AppendFailed] = {}
        self.client = AppendClient(self.rng, config.voter_ids, self._client_send, workload or WorkloadConfig())
        self._workload_on = False
        self._dispatch = self._build_dispatch()
        # Called after every event a node handles (and its checks): (node id, event). For targeted
        # scenarios that must act at an exact moment, e.g. right after a node became leader.
        self.event_hooks: list[Callable[[int, Event], None]] = []
        # The same moment with what the node did: (host, event, its actions), e.g. for faults
        # triggered by a vote just granted (node.sim.buggify). A hook may kill or partition the node.
        self.action_hooks: list[Callable[[SimNode, Event, list[Any]], None]] = []
        # Called for every message the network delivers: (src, dst, message); to watch faults from outside.
        self.on_delivery: Callable[[int, int, Any], None] | None = None
        self._strobes: dict[int, int] = {}  # node -> serial of its running clock strobe
        self._strobe_serial = 0

    # ------------------------------------------------------------------ running
    @property
    def now(self) -> int:
        return self.queue.now

    def _add_node(self, host_id: int, node_id: int) -> SimNode:
        config = self.config
        params = {**config.raft, **config.node_raft.get(node_id, {})}
        if self.cluster is not None and self.cluster.bugs:
            params.setdefault("bugs", self.cluster.bugs)  # planted bugs reach the Raft core too
        raft_config = RaftConfig(node_id=node_id, voter_ids=frozenset(config.voter_ids), **params)
        if config.disk_factory is not None:
            disk = config.disk_factory(host_id)
        else:
            bugs = self.cluster.bugs if self.cluster is not None else NO_BUGS  # storage bugs run in the sim too
            disk = SimDisk(node_id, segment_bytes=config.segment_bytes, bugs=bugs)
        roles = self.cluster.roles(node_id) if self.cluster is not None else None
        host = self.nodes[host_id] = SimNode(host_id, raft_config, disk, roles)
        return host

    def add_host(self, host_id: int, node_id: int) -> SimNode:
        """A second host whose process claims `node_id` (a broker id): the duplicate-registration
        scenario. It gets its own address `host_id` and disk; start it with `restart(host_id)`."""
        if host_id in self.nodes or host_id <= 0:
            raise ValueError(f"host id {host_id} is taken or not positive")
        if node_id in self.config.voter_ids:
            raise ValueError(f"an impostor of voter {node_id} would break the quorum's assumptions")
        host = self._add_node(host_id, node_id)
        self._disks[host_id] = host.disk
        return host

    def start(self, node_ids: Iterable[int] | None = None) -> None:
        """Start the nodes (default: all) at random moments within the stagger window."""
        for node_id in self.config.node_ids if node_ids is None else node_ids:
            self.node(node_id)
            self.queue.after(self.rng.randint(0, self.config.start_stagger_ms), self.restart, node_id)

    def step(self) -> bool:
        """Run the next queued entry. False when nothing is queued or an invariant has failed."""
        if self.violation is not None or not len(self.queue):
            return False
        fn, args = self.queue.pop()
        fn(*args)
        return self.violation is None

    def run_until(self, time_ms: int) -> bool:
        """Run every entry due at or before `time_ms`, then move the clock there. False on violation."""
        queue = self.queue
        while self.violation is None:
            nxt = queue.next_time()
            if nxt is None or nxt > time_ms:
                break
            fn, args = queue.pop()
            fn(*args)
        if self.violation is None and queue.now < time_ms:
            queue.now = time_ms
        return self.violation is None

    def run_for(self, ms: int) -> bool:
        return self.run_until(self.now + ms)

    def run_until_true(self, predicate: Callable[[], bool], timeout_ms: int, poll_ms: int = 0) -> bool:
        """Run until `predicate()` holds (checked after every entry, or every `poll_ms` of virtual
        time when given). True when it held; False on timeout or violation."""
        deadline = self.now + timeout_ms
        if poll_ms:
            while self.violation is None and self.now < deadline:
                if predicate():
                    return True
                self.run_until(min(self.now + poll_ms, deadline))
            return self.violation is None and predicate()
        while self.violation is None:
            if predicate():
                return True
            nxt = self.queue.next_time()
            if nxt is None or nxt > deadline:
                self.run_until(deadline)
                return self.violation is None and predicate()
            self.step()
        return False

    # ------------------------------------------------------------------ inspecting
    def node(self, node_id: int) -> SimNode:
        try:
            return self.nodes[node_id]
        except KeyError:
            raise ValueError(f"no node {node_id} in this simulation") from None

    def raft(self, node_id: int) -> Any:
        return self.node(node_id).raft

    def process(self, node_id: int) -> Any:
        """The node's NodeProcess (cluster mode), None while it is down."""
        return self.node(node_id).process

    def leader(self) -> int | None:
        """The live leader with the highest epoch, or None."""
        best: tuple[int, int] | None = None
        for node_id, host in self.nodes.items():
            if host.up and host.raft.role is Role.LEADER and (best is None or host.raft.epoch > best[0]):
                best = (host.raft.epoch, node_id)
        return best[1] if best else None

    def live_nodes(self) -> list[int]:
        return [n for n, host in self.nodes.items() if host.up]

    def committed_log(self) -> list[RecordBatch]:
        """The committed log as the invariant checker recorded it (batches below the max HWM)."""
        return list(self.checker.committed)

    # ------------------------------------------------------------------ faults
    def _nemesis(self, kind: str, summary: str) -> None:
        self.stats.faults[kind] = self.stats.faults.get(kind, 0) + 1
        self.trace.record(self.now, "nemesis", kind, summary)

    def record_fault(self, kind: str, summary: str) -> None:
        """A fault done from outside this class (e.g. node.sim.buggify): counted and traced."""
        self._nemesis(kind, summary)

    def partition(self, grudge: Mapping[int, Iterable[int]]) -> None:
        """Replace the grudge: `grudge[n]` lists the nodes `n` cannot hear."""
        for n, cut in grudge.items():
            for m in (n, *cut):
                self.node(m)
        self.network.partition(grudge)
        self._nemesis("partition", repr(self.network.grudge))

    def isolate(self, groups: Iterable[Iterable[int]]) -> None:
        """Split the nodes into groups that hear only each other (nodes in no group: isolated)."""
        member: dict[int, int] = {}
        for i, group in enumerate(groups):
            for n in group:
                member[n] = i
        grudge = {n: [m for m in self.nodes if m != n and (member.get(m, -m) != member.get(n, -n))] for n in self.nodes}
        self.partition(grudge)

    def heal(self) -> None:
        self.network.heal()
        self._nemesis("heal", "network")

    def kill(self, node_id: int, lose_unsynced: bool = False, keep_unsynced: int | None = None) -> None:
        """kill -9; with `lose_unsynced`, a power loss: of the un-fsynced writes a random prefix
        survives (or exactly the first `keep_unsynced`)."""
        host = self.node(node_id)
        if not host.up:
            return
        lost = host.disk.crash(lose_unsynced, self.rng, keep_unsynced)
        self._nemesis("kill", f"node {node_id}" + (f" lose_unsynced lost={lost}" if lose_unsynced else ""))
        self.stats.crashes += 1
        self.stats.lost_unsynced_writes += lost
        self._take_down(host, f"kill node {node_id}")

    def _take_down(self, host: SimNode, what: str) -> None:
        """The process is gone (killed or exited): forget it, reset its connections."""
        node_id = host.node_id
        host.up = False
        host.paused = False
        host.raft = host.process = host.core = None
        host.exiting = None
        host.incarnation += 1
        host.buffered.clear()
        host.timer_at = host.timer_local = None
        self.images.on_stop(node_id)
        try:
            self._check_durable_loss(host)
        except InvariantViolation as exc:
            self._violated(self.trace.count, node_id, what, str(exc))
        # Connections to the dead process are reset; the peers hear of it if the network lets them.
        # (Not the redeliver fault's copies: datagrams to an address, which outlive any connection.)
        for rid, req in list(self._requests.items()):
            if (req.dst == node_id or req.src == node_id) and not req.copy:
                del self._requests[rid]
                if req.dst == node_id and self.network.can_hear(req.src, node_id):
                    self._fail_request_later(req)
        for handle, target in list(self._client_handles.items()):
            if target == node_id:
                del self._client_handles[handle]
                self.queue.after(self.config.refused_delay_ms, self._client_lost, handle)

    def restart(self, node_id: int) -> None:
        """Start the node's process again from what its disk holds (or for the first time)."""
        host = self.node(node_id)
        if host.up:
            return
        if host.started:
            self._nemesis("start", f"node {node_id}")
        host.started = True
        loaded = self._open_storage(host)
        if loaded is None:
            return  # the process exited at start-up (see _open_storage)
        host.paused = False
        host.exit_reason = None
        rng = random.Random(self.rng.getrandbits(64))
        factory = self.config.node_factory or RaftNode
        try:
            host.raft = host.core = factory(host.config, loaded, rng, random_cluster_id)
            if self.cluster is not None and host.roles is not None:
                host.incarnation_id = incarnation_id(rng)
                host.process = host.core = build_process(
                    self.cluster,
                    host.roles,
                    host.raft,
                    rng,
                    self.config.node_ids,
                    host.incarnation_id,
                    self.config.components,
                )
        except Exception as exc:  # the process dies at start-up on what its own disk holds
            host.raft = host.process = host.core = None
            detail = "".join(traceback.format_exception_only(exc)).strip()
            where = f"start node {node_id}"
            self._violated(self.trace.count, node_id, where, f"node {node_id} raised {detail} starting up")
            self.crash_traceback = traceback.format_exc()
            return
        host.up = True
        self.checker.on_restart(node_id)
        try:
            self._check_durable_loss(host)  # loading may have synced an earlier truncation
        except InvariantViolation as exc:
            self._violated(self.trace.count, node_id, f"start node {node_id}", str(exc))
        self._deliver(node_id, host.incarnation, Start())

    def shutdown(self, node_id: int) -> None:
        """SIGTERM: a graceful stop (a broker shuts down through the controller, a controller resigns);
        the process stops when it emits `ShutDown`. Cluster mode only."""
        host = self.node(node_id)
        if host.process is None:
            raise ValueError(f"node {node_id} runs no NodeProcess (down, or not in cluster mode)")
        self._nemesis("shutdown", f"node {node_id}")
        self._deliver(node_id, host.incarnation, BeginShutdown())

    def pause(self, node_id: int) -> None:
        host = self.node(node_id)
        if host.up and not host.paused:
            host.paused = True
            self._nemesis("pause", f"node {node_id}")

    def resume(self, node_id: int) -> None:
        host = self.node(node_id)
        if not (host.up and host.paused):
            return
        host.paused = False
        self._nemesis("resume", f"node {node_id} ({len(host.buffered)} queued events)")
        queued, host.buffered = host.buffered, []
        for event in self._thaw_order(queued):
            self.queue.after(0, self._deliver, node_id, host.incarnation, event)
        if host.timer_at is None and host.timer_local is not None:
            self._arm_timer(host, host.timer_local)  # it came due while paused

    def _thaw_order(self, queued: list[Event]) -> list[Event]:
        """The order a thawed process reads what queued up while it was stopped: each connection's
        bytes in the order they were sent (TCP), but the connections in whatever order its event loop
        polls them. A request that arrived after a peer's Fetch on another connection may well be
        handled before it, as on a real machine (the read barrier's bug after SIGSTOP was this)."""
        lanes: dict[Hashable, list[Event]] = {}
        for event in queued:
            lanes.setdefault(self._connection_of(event), []).append(event)
        heads = [lane[::-1] for lane in lanes.values()]
        ordered: list[Event] = []
        while heads:
            pick = self.rng.randrange(len(heads))
            ordered.append(heads[pick].pop())
            if not heads[pick]:
                heads.pop(pick)
        return ordered

    def _connection_of(self, event: Event) -> Hashable:
        reply_to = getattr(event, "reply_to", None)
        if reply_to is not None:
            req = self._requests.get(reply_to)  # type: ignore[call-overload]
            return ("from", req.src if req is not None else reply_to)
        for peer in ("source", "destination"):
            if hasattr(event, peer):
                return ("to", getattr(event, peer))
        return ("local",)  # the node's own disk and timer completions, the simulated clients' calls

    def skew(self, node_id: int, jump_ms: int = 0, rate: float | None = None) -> None:
        """Jump the node's clock (monotonic: a backward jump makes it stand still) and/or set its rate."""
        host = self.node(node_id)
        host.clock.set(self.now, jump_ms=jump_ms, rate=rate)
        self._nemesis("clock", f"node {node_id} jump={jump_ms} rate={host.clock.rate}")
        self._rearm(host)

    def wall_clock(self, node_id: int) -> int:
        """The node's wall clock now (skewed; it may be behind what its core last saw)."""
        return self.node(node_id).clock.wall(self.now)

    def reset_clock(self, node_id: int) -> None:
        """The node's clock back to the true time at normal speed; ends a strobe."""
        host = self.node(node_id)
        self._strobes.pop(node_id, None)
        host.clock.reset(self.now)
        self._nemesis("clock", f"node {node_id} reset")
        self._rearm(host)

    def strobe_clock(self, node_id: int, delta_ms: int, period_ms: int, duration_ms: int) -> None:
        """Flip the node's clock between +`delta_ms` and its current time every `period_ms`, for
        `duration_ms` (ending on the unflipped time). Replaces a running strobe of the node."""
        if period_ms <= 0 or duration_ms <= 0:
            raise ValueError("a clock strobe needs period_ms > 0 and duration_ms > 0")
        self.node(node_id)
        self._strobe_serial += 1
        serial = self._strobes[node_id] = self._strobe_serial
        self._nemesis("clock", f"node {node_id} strobe ±{delta_ms} every {period_ms} ms for {duration_ms} ms")
        self._strobe_flip(node_id, serial, delta_ms, period_ms, self.now + duration_ms, True)

    def _strobe_flip(self, node_id: int, serial: int, delta_ms: int, period_ms: int, end: int, ahead: bool) -> None:
        if self._strobes.get(node_id) != serial:
            return  # reset, replaced, or healed
        host = self.nodes[node_id]
        host.clock.set(self.now, jump_ms=delta_ms if ahead else -delta_ms)
        self.trace.record(self.now, "nemesis", "clock-flip", f"node {node_id} {'+' if ahead else '-'}{delta_ms}")
        self._rearm(host)
        if not ahead and self.now + period_ms > end:
            del self._strobes[node_id]
            return
        self.queue.after(period_ms, self._strobe_flip, node_id, serial, delta_ms, period_ms, end, not ahead)

    def _rearm(self, host: SimNode) -> None:
        """Re-place a pending timer after the node's clock changed."""
        if host.up and host.timer_local is not None:
            self._arm_timer(host, host.timer_local)

    def packet(self, links: Mapping[int, Iterable[int]] | None, loss: float, delay_ms: int, jitter_ms: int) -> None:
        """Replace the packet fault: messages to each key of `links` from the nodes it lists (None:
        every link between nodes) are lost with `loss`, else delayed `delay_ms` ± `jitter_ms` more."""
        pairs = self._link_pairs(links)
        self.network.set_packet_fault(DegradedLinks(pairs, PacketFault(loss, delay_ms, jitter_ms)))
        where = "all links" if pairs is None else " ".join(f"{s}->{d}" for s, d in sorted(pairs))
        self._nemesis("packet", f"loss={loss} delay={delay_ms}±{jitter_ms} ms on {where}")

    def _link_pairs(self, links: Mapping[int, Iterable[int]] | None) -> frozenset[tuple[int, int]] | None:
        """(src, dst) directions of `links` (dst -> its sources), checking every node exists."""
        if links is None:
            return None
        for n, srcs in links.items():
            for m in (n, *srcs):
                self.node(m)
        return frozenset((src, dst) for dst, srcs in links.items() for src in srcs)

    def heal_packet(self) -> None:
        if self.network.clear_packet_fault():
            self._nemesis("heal", "packet fault")

    def redeliver(self, links: Mapping[int, Iterable[int]] | None, fault: RedeliverFault) -> None:
        """Replace the redeliver fault: messages to each key of `links` from the nodes it lists (None:
        every link between nodes) are delivered again with `fault.probability` (network.py)."""
        pairs = self._link_pairs(links)
        self.network.set_redelivery(DegradedLinks(pairs, fault))
        where = "all links" if pairs is None else " ".join(f"{s}->{d}" for s, d in sorted(pairs))
        self._nemesis("redeliver", f"{fault.mode} p={fault.probability} lag={fault.lag_ms} ms on {where}")

    def heal_redeliver(self) -> None:
        if self.network.clear_redelivery():
            self._nemesis("heal", "redeliver fault")

    def stall_disk(self, node_id: int, ms: int) -> None:
        """Flushes on the node complete no earlier than `ms` from now."""
        host = self.node(node_id)
        host.disk_stalled_until = max(host.disk_stalled_until, self.now + ms)
        self._nemesis("disk_stall", f"node {node_id} for {ms} ms")

    def heal_all(self) -> None:
        """Undo every fault: heal the network (partitions, grudge layers, packet and redeliver faults, loss),
        resume, restart, clocks at normal speed and running (offsets stay), end clock strobes and
        disk stalls."""
        if self.network.partitioned:
            self.heal()
        for name in self.network.layer_names:
            self.network.clear_layer(name)
            self._nemesis("heal", f"network layer {name}")
        self.heal_packet()
        self.heal_redeliver()
        if self.network.lossy:
            self.network.stop_loss()
            self._nemesis("heal", "packet loss")
        self._strobes.clear()
        for node_id, host in self.nodes.items():
            if host.paused:
                self.resume(node_id)
            self._heal_storage(host)
            if not host.up:
                self.restart(node_id)
            if host.clock.rate != 1.0 or host.clock.frozen(self.now):
                # Normal speed from where the node's clock stands: one that stands still after a
                # backward jump runs again (a reset to the true time would keep it standing).
                host.clock.steady(self.now)
                self._nemesis("clock", f"node {node_id} steady")
                self._rearm(host)
            host.disk_stalled_until = 0

    # ------------------------------------------------------------------ client
    def submit_append(self, node_id: int, records: tuple[bytes, ...], handle: Hashable | None = None) -> Hashable:
        """Hand an Append straight to a node (no network); the outcome lands in `append_results`."""
        if handle is None:
            self._next_request += 1
            handle = ("direct", self._next_request)
        self._client_handles[handle] = node_id
        self._deliver(node_id, self.node(node_id).incarnation, Append(handle, records))
        return handle

    def start_workload(self) -> None:
        self._workload_on = True
        self.queue.after(0, self._workload_tick)

    def stop_workload(self) -> None:
        self._workload_on = False

    def _workload_tick(self) -> None:
        if not self._workload_on:
            return
        client = self.client
        if client.open_ops < client.config.concurrency:
            op = client.invoke(self.now)
            self.trace.record(self.now, "client", "invoke", f"append h={op.handle} -> node {op.target}")
            self.queue.after(client.config.timeout_ms, self._client_timeout, op.handle)
        self.queue.after(client.config.interval_ms, self._workload_tick)

    def _client_send(self, target: int, handle: int, records: tuple[bytes, ...]) -> None:
        host = self.node(target)
        if not host.up:
            self.queue.after(self.config.refused_delay_ms, self._client_refused, handle, target)
            return
        self._client_handles[handle] = target
        delay = self.config.link.sample_delay(self.rng)
        self.queue.after(delay, self._deliver, target, host.incarnation, Append(handle, records))

    def _client_refused(self, handle: int, target: int) -> None:
        if self.client.failed(self.now, handle, -1):
            self.trace.record(self.now, "client", "fail", f"append h={handle}: node {target} is down")

    def _client_timeout(self, handle: int) -> None:
        if self.client.lost(self.now, handle):
            self._client_handles.pop(handle, None)
            self.trace.record(self.now, "client", "info", f"append h={handle}: timed out")

    def _client_lost(self, handle: Hashable) -> None:
        if isinstance(handle, int) and self.client.lost(self.now, handle):
            self.trace.record(self.now, "client", "info", f"append h={handle}: connection reset")

    def _append_result(self, node_id: int, action: act.AppendCompleted | act.AppendFailed) -> None:
        handle = action.handle
        self._client_handles.pop(handle, None)
        self.append_results[handle] = action
        if not isinstance(handle, int):
            return
        delay = self.config.link.sample_delay(self.rng)
        if isinstance(action, act.AppendCompleted):
            self.queue.after(delay, self._client_completed, node_id, action)
        else:
            host = self.nodes[node_id]
            hint = host.raft.leader_id if host.up else -1
            self.queue.after(delay, self._client_failed, action, hint)

    def _client_completed(self, node_id: int, action: act.AppendCompleted) -> None:
        op = self.client.completed(self.now, action.handle, action.base_offset, action.last_offset)
        if op is not None:
            self.trace.record(
                self.now,
                "client",
                "ok",
                f"append h={op.handle} at [{action.base_offset}..{action.last_offset}] by node {node_id}",
            )

    def _client_failed(self, action: act.AppendFailed, hint: int) -> None:
        op = self.client.failed(self.now, action.handle, hint)
        if op is not None:
            self.trace.record(self.now, "client", "fail", f"append h={op.handle}: error {action.error}")

    # ------------------------------------------------------------------ event delivery
    def _deliver(self, node_id: int, incarnation: int, event: Event) -> None:
        host = self.nodes[node_id]
        if not host.up or host.incarnation != incarnation:
            return  # addressed to a process that no longer exists
        if host.paused:
            host.buffered.append(event)
            return
        self._handle(host, event)

    def _handle(self, host: SimNode, event: Event) -> None:
        now = self.now
        node_id = host.node_id
        kind = type(event).__name__
        desc = summarize(event)
        index = self.trace.count
        self.trace.record(now, node_id, kind, desc)
        self.stats.events += 1
        if host.busy_ms != now:
            host.busy_ms, host.busy_events = now, 0
        host.busy_events += 1
        try:
            if host.busy_events > LIVELOCK_EVENTS:
                raise InvariantViolation(
                    f"node {node_id} handled {LIVELOCK_EVENTS} events at t={now} ms without time moving on: "
                    "a livelock (a timer re-armed for a time already past?)"
                )
            diverging = _diverging_to_follow(host, event)
            actions = host.core.handle(host.clock.local(now), event)
            log_changed = False
            dispatch = self._dispatch
            for action in actions:
                handler = dispatch.get(type(action))
                if handler is None:
                    raise InvariantViolation(f"node {node_id} returned an unknown action {action!r}")
                if type(action) in _LOG_ACTIONS:
                    log_changed = True
                handler(host, action)
            self.checker.after_event(node_id, host.raft, host.disk, self._disks, log_changed)
            if diverging is not None:
                self.checker.after_diverging(node_id, host.raft, diverging.epoch, diverging.end_offset)
            if host.process is not None:
                self.images.after_event(node_id, host.process.image, self.checker.committed_end)
            for hook in self.event_hooks:
                hook(node_id, event)
            if self.action_hooks:
                for action_hook in self.action_hooks:
                    action_hook(host, event, actions)
            if host.exiting is not None:
                self._exit(host, host.exiting)
        except InvariantViolation as exc:
            self._violated(index, node_id, f"{kind} {desc}", str(exc))
        except Exception as exc:
            if isinstance(exc, OSError | StorageError) and self._injected_disk_error(host):
                try:
                    self.checker.on_fail_stop(node_id, host.raft, host.disk, self._disks)
                except InvariantViolation as violation:
                    self._violated(index, node_id, f"{kind} {desc}", str(violation))
                    return
                self._fail_stop(host, f"storage failure while handling {kind}: {exc}")
                return
            detail = "".join(traceback.format_exception_only(exc)).strip()
            self._violated(index, node_id, f"{kind} {desc}", f"node {node_id} raised {detail}")
            self.crash_traceback = traceback.format_exc()

    def _violated(self, index: int, node: int | str, event: str, message: str) -> None:
        if self.violation is None:
            self.violation = Violation(self.config.seed, self.now, index, node, event, message)
            self.trace.record(self.now, "checker", "violation", message)

    def _build_dispatch(self) -> dict[type, Callable[[SimNode, Any], None]]:
        return {
            act.SendRequest: self._do_send_request,
            act.Respond: self._do_respond,
            act.SetTimer: self._do_set_timer,
            act.AppendBatches: self._do_append,
            act.TruncateLog: self._do_truncate,
            act.Flush: self._do_flush,
            act.PersistQuorumState: self._do_persist_quorum_state,
            act.PersistClusterId: self._do_persist_cluster_id,
            act.AppendCompleted: self._do_append_result,
            act.AppendFailed: self._do_append_result,
            act.LeaderChanged: self._do_leader_changed,
            act.HighWatermarkAdvanced: self._do_nothing,  # the checker reads high_watermark itself
            act.Fatal: self._do_fatal,
            act.Warn: self._do_nothing,  # a warning for the operator; the trace shows the epochs anyway
            # A process consumes its own barriers; one passing through was asked by no one here.
            act.ReadBarrierCompleted: self._do_nothing,
            act.ReadBarrierFailed: self._do_nothing,
            act.WriteSnapshot: self._do_write_snapshot,
            act.DeleteLogBefore: self._do_delete_log_before,
            act.ResetLog: self._do_reset_log,
            act.LoadSnapshot: self._do_nothing,  # for the state machine above the core (the process)
            ShutDown: self._do_shut_down,
            MetadataApplied: self._do_metadata_applied,
        }

    def _do_send_request(self, host: SimNode, action: act.SendRequest) -> None:
        self._send_request(host, action.destination, action.correlation_id, action.message)

    # --- clients outside the cluster ---
    def add_client(self, client: ClientEndpoint) -> int:
        """Attach a client; returns its network address (negative: no node has it). Clients are in
        no partition the nemesis makes (`isolate` and the random faults cut node links only); cut
        one off explicitly with `network.add_grudge`."""
        client_id = -(len(self.clients) + 1)
        self.clients[client_id] = client
        return client_id

    def client_request(self, client_id: int, dst: int, correlation_id: int, message: Any, ctx: RequestContext) -> None:
        """Send a request from a client to node `dst` over the simulated network."""
        target = self.node(dst)
        req = _Request(client_id, 0, dst, target.incarnation, correlation_id)
        if not target.up:  # connection refused: certainly not sent
            if self.network.can_hear(client_id, dst):
                self.queue.after(self.config.refused_delay_ms, self._client_failed_request, req, False)
            return
        delay = self.network.transit(client_id, dst)
        if delay is None:
            return  # lost: the client's timeout deals with it
        self._next_request += 1
        rid = self._next_request
        self._requests[rid] = req
        self.queue.after(delay, self._arrive_request, rid, message, ctx)

    def _client_failed_request(self, req: _Request, sent: bool) -> None:
        self.clients[req.src].on_connection_failed(req.dst, req.correlation_id, sent)

    def _do_respond(self, host: SimNode, action: act.Respond) -> None:
        self._send_response(action.reply_to, action.message)

    def _do_set_timer(self, host: SimNode, action: act.SetTimer) -> None:
        self._arm_timer(host, action.deadline_ms)

    def _do_append(self, host: SimNode, action: act.AppendBatches) -> None:
        disk = host.disk
        prev = disk.last_batch
        start_epoch = disk.last_epoch if prev is None and disk.start_offset > 0 else None
        for batch in action.batches:
            self.checker.on_append(host.node_id, prev, batch, start_epoch)
            prev = batch
        disk.append(action.batches)

    def _do_truncate(self, host: SimNode, action: act.TruncateLog) -> None:
        self.checker.on_truncate(host.node_id, action.offset)
        host.disk.truncate(action.offset)

    def _do_flush(self, host: SimNode, action: act.Flush) -> None:
        self._flush(host, action.end_offset)

    def _do_write_snapshot(self, host: SimNode, action: act.WriteSnapshot) -> None:
        """Durable at once (as the real runtime's fsync thread makes it); only the SnapshotWritten report
        to the node waits for a flush of the disk, so a crash in between leaves a snapshot the node never saw."""
        self.checker.on_snapshot(host.node_id, action.snapshot_id.end_offset)
        host.disk.write_snapshot(action.snapshot_id, action.data)
        self._flush(host, -1, SnapshotWritten(action.snapshot_id))

    def _do_delete_log_before(self, host: SimNode, action: act.DeleteLogBefore) -> None:
        host.disk.delete_before(action.offset)

    def _do_reset_log(self, host: SimNode, action: act.ResetLog) -> None:
        self.checker.on_reset(host.node_id, action.offset)
        host.disk.reset(action.offset)

    def _do_persist_quorum_state(self, host: SimNode, action: act.PersistQuorumState) -> None:
        host.disk.write_quorum_state(action.state)

    def _do_persist_cluster_id(self, host: SimNode, action: act.PersistClusterId) -> None:
        host.disk.write_cluster_id(action.cluster_id)

    def _do_append_result(self, host: SimNode, action: act.AppendCompleted | act.AppendFailed) -> None:
        self._append_result(host.node_id, action)

    def _do_leader_changed(self, host: SimNode, action: act.LeaderChanged) -> None:
        self.stats.leader_changes += 1
        if action.leader_id == host.node_id:
            self.stats.elections += 1

    def _do_nothing(self, host: SimNode, action: Any) -> None:
        pass

    def _do_fatal(self, host: SimNode, action: act.Fatal) -> None:
        raise InvariantViolation(f"node {host.node_id} stopped with Fatal: {action.reason}")

    def _do_shut_down(self, host: SimNode, action: ShutDown) -> None:
        if host.exiting is None:
            host.exiting = action  # the rest of this event's actions still run, then the process exits

    def _do_metadata_applied(self, host: SimNode, action: MetadataApplied) -> None:
        self.images.on_applied(host.node_id, action.next_offset)

    def _exit(self, host: SimNode, action: ShutDown) -> None:
        """A clean exit: the log is closed (flushed) and the process is gone until `restart`."""
        self._nemesis("exit", f"node {host.node_id}: {action.reason}" + (" (requested)" if action.requested else ""))
        self.stats.shutdowns += 1
        try:
            host.disk.flush()
            host.disk.close()
        except (OSError, StorageError) as exc:
            if not self._injected_disk_error(host):
                raise
            self._fail_stop(host, f"final flush failed: {exc}")
            return
        self._take_down(host, f"exit of node {host.node_id}")
        host.exit_reason = action.reason

    # --- network ---
    def _send_request(self, host: SimNode, dst: int, cid: int, msg: Any) -> None:
        src = host.node_id
        target = self.nodes.get(dst)
        if target is None:
            raise InvariantViolation(f"node {src} sent a request to unknown node {dst}")
        req = _Request(src, host.incarnation, dst, target.incarnation, cid)
        if not target.up:  # connection refused, if the refusal can reach the sender: never sent
            if self.network.can_hear(src, dst):
                self._fail_request_later(req, sent=False)
            return
        delay = self.network.transit(src, dst)
        if delay is None:
            return  # lost: the core's request timeout deals with it
        ctx = None
        if self.cluster is not None and target.roles is not None:
            ctx = inbound_context(self.cluster, host.config.node_id, target.roles, msg)
        copies = self.network.copies(src, dst, delay) if isinstance(msg, REDELIVERED) else ()
        for at, copy in ((delay, False), *((d, True) for d in copies)):
            # A copy is a request of its own to the receiver (it answers it again), with the same
            # correlation id: the sender's core must tell the second answer from the first.
            self._next_request += 1
            rid = self._next_request
            self._requests[rid] = _Request(src, host.incarnation, dst, target.incarnation, cid, copy)
            if ctx is None:
                self.queue.after(at, self._arrive_request, rid, msg)
            else:
                self.queue.after(at, self._arrive_request, rid, msg, ctx)

    def _arrive_request(self, rid: int, msg: Any, ctx: RequestContext | None = None) -> None:
        req = self._requests.get(rid)
        if req is None:
            return
        dst = self.nodes[req.dst]
        if req.copy and dst.up:
            req.dst_inc = dst.incarnation  # a copy is a datagram to the address: whoever runs there now
        if not dst.up or dst.incarnation != req.dst_inc:
            del self._requests[rid]
            if self.network.can_hear(req.src, req.dst) and not req.copy:
                self._fail_request_later(req)
            return
        if not self.network.can_hear(req.dst, req.src):  # partitioned while in flight
            del self._requests[rid]
            return
        if self.on_delivery is not None:
            self.on_delivery(req.src, req.dst, msg)
        if ctx is None:
            self._deliver(req.dst, req.dst_inc, RequestReceived(rid, req.correlation_id, msg))
        else:
            self._deliver(req.dst, req.dst_inc, InboundRequest(rid, req.correlation_id, msg, ctx))

    def _send_response(self, rid: Hashable, msg: Any) -> None:
        req = self._requests.pop(rid, None)  # type: ignore[arg-type]
        if req is None:
            return  # the requester's connection is gone
        delay = self.network.transit(req.dst, req.src)
        if delay is not None:
            self.queue.after(delay, self._arrive_response, req, msg)
            for at in self.network.copies(req.dst, req.src, delay) if isinstance(msg, REDELIVERED) else ():
                self.queue.after(at, self._arrive_response, req, msg)

    def _arrive_response(self, req: _Request, msg: Any) -> None:
        if not self.network.can_hear(req.src, req.dst):
            return
        if self.on_delivery is not None:
            self.on_delivery(req.dst, req.src, msg)
        if req.src < 0:
            self.clients[req.src].on_response(req.dst, req.correlation_id, msg)
            return
        self._deliver(req.src, req.src_inc, ResponseReceived(req.dst, req.correlation_id, msg))

    def _fail_request_later(self, req: _Request, sent: bool = True) -> None:
        """Fail the request at its sender soon; `sent` False when it never left (connection refused).
        A request written to a connection that then broke was sent: the sender cannot tell whether
        it arrived, as a real one cannot."""
        if req.src < 0:  # a client's connection was reset after its request went out
            self.queue.after(self.config.refused_delay_ms, self._client_failed_request, req, True)
            return
        self.queue.after(
            self.config.refused_delay_ms,
            self._deliver,
            req.src,
            req.src_inc,
            RequestFailed(req.dst, req.correlation_id, sent),
        )

    # --- timers and disk ---
    def _arm_timer(self, host: SimNode, deadline_local: int) -> None:
        """The core always asks for its earliest deadline, so the newest SetTimer replaces the last."""
        at = host.clock.virtual_for(deadline_local, self.now)
        host.timer_local = deadline_local
        if at != host.timer_at:
            host.timer_at = at
            self.queue.schedule(at, self._fire_timer, host.node_id, host.incarnation, at)

    def _fire_timer(self, node_id: int, incarnation: int, at: int) -> None:
        host = self.nodes[node_id]
        if host.incarnation != incarnation or host.timer_at != at:
            return  # superseded by an earlier deadline, or the process is gone
        host.timer_at = None
        if host.paused:
            return  # resume() re-arms it: by then the node's clock may read another time (a jump)
        if host.timer_local is not None and host.clock.local(self.now) < host.timer_local:
            self._arm_timer(host, host.timer_local)  # not yet on the node's clock, as in the real runtime
            return
        host.timer_local = None
        self._deliver(node_id, incarnation, Tick())

    def _flush(self, host: SimNode, end_offset: int, report: Event | None = None) -> None:
        """fsync in the background; then deliver `report` (default: FlushCompleted(end_offset))."""
        token = host.disk.begin_flush()
        lo, hi = self.config.disk_latency_ms
        start = max(self.now, host.disk_free_at, host.disk_stalled_until)
        done = start + self.rng.randint(lo, hi) + self._stall_ms(host)
        host.disk_free_at = done
        if report is None:
            self.queue.schedule(done, self._flush_done, host.node_id, host.incarnation, token, end_offset)
        else:
            self.queue.schedule(done, self._flush_done, host.node_id, host.incarnation, token, end_offset, report)

    def _flush_done(
        self, node_id: int, incarnation: int, token: int, end_offset: int, report: Event | None = None
    ) -> None:
        host = self.nodes[node_id]
        if host.incarnation != incarnation:
            return  # the process died before fsync returned: the writes stay un-synced
        host.disk.complete_flush(token)
        try:
            self._check_durable_loss(host)
        except InvariantViolation as exc:
            self._violated(self.trace.count, node_id, f"flush done up to {end_offset}", str(exc))
            return
        self._deliver(node_id, incarnation, report or FlushCompleted(end_offset))

    def _check_durable_loss(self, host: SimNode) -> None:
        lost_from = host.disk.take_durable_truncation()
        if lost_from is not None and host.is_voter and lost_from < self.checker.committed_end:
            self.checker.on_durable_loss(self._disks, lost_from)

    # ------------------------------------------------------------------ storage: disk faults, corruption
    def set_disk_fault(self, node_id: int, fault: Any) -> None:
        """Replace the node's disk fault (a `vocab.faults.kinds.DiskFault`). A stall delays the
        completion of every flush by `delay_ms` (for "fsync" or "write": a flush waits for both; the
        synchronous writes of quorum-state and snapshots take no virtual time here). A failure makes
        the matching calls in the node's FileStorage raise OSError (EIO or ENOSPC, with `probability`);
        the node then fail-stops as the real one does, and stays down until restarted."""
        host = self.node(node_id)
        host.disk_fault = fault
        fs = host.disk.fs
        fs.fault = fault if fault.kind == "fail" else None
        fs.fault_rng = random.Random(self.rng.getrandbits(64))
        what = f"delay {fault.delay_ms} ms" if fault.kind == "stall" else f"{fault.errno} p={fault.probability}"
        self._nemesis(f"disk_{fault.kind}", f"node {node_id} {','.join(fault.ops)} {what}")

    def clear_disk_fault(self, node_id: int) -> None:
        """The node's disk healthy again (a no-op when it has no fault). A node that fail-stopped is
        not restarted here: `restart` does that."""
        host = self.node(node_id)
        if host.disk_fault is None:
            return
        host.disk_fault = None
        host.disk.fs.fault = None
        self._nemesis("disk_heal", f"node {node_id}")

    def _stall_ms(self, host: SimNode) -> int:
        fault = host.disk_fault
        return fault.delay_ms if fault is not None and fault.kind == "stall" else 0

    def corrupt_storage(self, node_id: int, mode: str, rng: random.Random | None = None) -> Corruption:
        """Damage a stopped node's log or snapshot where a correct node must notice (see
        `node.runtime.corruption`; NothingToCorrupt when the mode finds nothing). Its next start must
        refuse, or set a damaged snapshot aside; loading the damage is an invariant violation."""
        host = self.node(node_id)
        if host.up:
            raise ValueError(f"node {node_id} is running: kill it before corrupting its files")
        if rng is None:
            rng = random.Random(self.rng.getrandbits(64))
        corruption = corrupt_data_dir(host.disk.fs, host.disk.data_dir, mode, rng)
        host.corruptions.append(corruption)
        self._nemesis("corrupt", f"node {node_id} {corruption}")
        return corruption

    def uncorrupt_storage(self, node_id: int) -> int:
        """Put back the bytes `corrupt_storage` changed, newest damage first; returns how many files
        were restored (a file the node has set aside since stays as it is)."""
        host = self.node(node_id)
        restored = 0
        while host.corruptions:
            corruption = host.corruptions.pop()
            done = restore_corruption(host.disk.fs, corruption)
            restored += done
            self._nemesis("uncorrupt", f"node {node_id} {corruption.path} {'restored' if done else 'changed since'}")
        return restored

    def _heal_storage(self, host: SimNode) -> None:
        self.clear_disk_fault(host.node_id)
        self.uncorrupt_storage(host.node_id)

    def _injected_disk_error(self, host: SimNode) -> bool:
        return host.disk.fs.take_injected() is not None

    def _fail_stop(self, host: SimNode, reason: str) -> None:
        """The process exits on a disk error, as the real one does (exit 254). A failed fsync may have
        dropped the dirty pages, so the node's un-synced writes are forgotten."""
        self.trace.record(self.now, host.node_id, "fail-stop", reason)
        self.stats.fail_stops += 1
        self.stats.lost_unsynced_writes += host.disk.crash(lose_unsynced=True)
        self._take_down(host, f"fail-stop of node {host.node_id}")

    def _open_storage(self, host: SimNode) -> LoadedState | None:
        """Open and load the node's data dir as a starting process does; None when the process does
        not come up. A disk error or (after `corrupt_storage`) a refusal is what a real node does; any
        other refusal, a load that differs from what the disk kept, or damage loaded unnoticed is a
        violation."""
        node_id = host.node_id
        where = f"start node {node_id}"
        try:
            loaded = host.disk.load()
        except (OSError, StorageError) as exc:
            if self._injected_disk_error(host):
                self.trace.record(self.now, node_id, "fail-stop", f"disk error at start-up: {exc}")
                self.stats.fail_stops += 1
                self.stats.lost_unsynced_writes += host.disk.crash(lose_unsynced=True)
            elif isinstance(exc, StorageError) and host.corruptions:
                self.trace.record(self.now, node_id, "refused", str(exc))
                self.stats.refused_starts += 1
            else:
                self._violated(self.trace.count, node_id, where, f"node {node_id} cannot start on its own disk: {exc}")
            return None
        except Exception as exc:
            detail = "".join(traceback.format_exception_only(exc)).strip()
            self._violated(self.trace.count, node_id, where, f"node {node_id} raised {detail} loading its disk")
            self.crash_traceback = traceback.format_exc()
            return None
        problem = host.disk.load_mismatch(loaded) if not host.corruptions else None
        loaded_snapshot = "/" + snapshot_name(loaded.snapshot.snapshot_id) if loaded.snapshot is not None else None
        for corruption in host.corruptions:
            if corruption.is_log:
                problem = f"started on a damaged log without noticing ({corruption})"
            elif loaded_snapshot is not None and corruption.path.endswith(loaded_snapshot):
                problem = f"loaded a damaged snapshot ({corruption})"
        if problem is not None:
            self._violated(self.trace.count, node_id, where, f"node {node_id} {problem}")
        if loaded.recovered:
            self.trace.record(self.now, node_id, "recovered", loaded.recovered)
        return loaded
