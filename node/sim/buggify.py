"""Targeted faults ("buggify", after FoundationDB): faults triggered by what a node just did.

Random fault timing almost never lands in the narrow windows where a quorum's hardest bugs live —
between granting a vote and the next write, between an append and its fsync, right after an
election. Here a hook on the simulator's action dispatch (`Simulation.action_hooks`) looks at what
each event made a node do and, with a small probability per trigger, strikes at that very moment:

- `vote-granted`: a voter just granted a vote → crash it (kill -9), restart it soon after;
- `quorum-state`: a node just persisted its quorum-state → crash it, restart it soon after;
- `leader-append`: a leader just appended, its fsync not done yet → crash it (a power loss when
  `lose_unsynced` is allowed), restart it soon after;
- `elected`: a node just became leader → isolate it for a while (a grudge layer of its own);
- `elected-behind`: a node just became leader although other voters hold entries it lacks that are
  not committed (written in an earlier epoch, not yet on a majority) → isolate it, far more often
  and for longer than `elected`, and slow the fsyncs of those voters for as long (when `disk_stall`
  is allowed). Its epoch's LeaderChange record stays on its own log while a voter holding the older
  entries may lead again and re-replicate them, its own LeaderChange waiting for its disk. This is
  Raft's Figure 8, the window KIP-595's "extra condition on commitment" protects: older entries on
  a majority are not committed while a voter that lacks them could still win an election;
- `established`: a leader just committed an entry of its own epoch (its controller is active) → cut
  it off from the other voters for a while (clients and brokers still reach it): it stays leader until
  its check-quorum timeout fires while the others elect a new one, the window in which a deposed leader
  that believes it leads may answer (KIP-595's Leader Progress Timeout; stale reads, stale answers).
  Once per leader epoch, short (just past the check-quorum timeout), drawn from the shared RNG;
- `candidate`: a node just became a candidate → restart it while it still is one;
- `leader-cut`: a leader just answered a Fetch → the same cut as `established`, at any moment of its
  leadership and for longer: several fetch timeouts (KAFKA-15489's partial partition: a leader that does not
  resign keeps the brokers on its log). A leader answers Fetches all the time, more under load, so
  its probability is per second of leadership (per occurrence: 1 - (1 - p) ** seconds since the
  previous one, at most 1 s), and it draws from an RNG of its own, so the other triggers fire exactly
  where they did before it existed (until a cut changes what the cluster does).

A trigger fires only when the fault it does is allowed (the run's fault kinds: `kill` or
`lose_unsynced` for crashes, `partition` for the isolations and the cut), at most one targeted fault
is active at a time, and none fires for `quiet_ms` after the previous one ended, so runs are not all
crashes (`elected-behind` excepted: it is rare, and mostly the aftermath of an earlier firing).
Choices come from an RNG of their own seeded by the simulation's seed: deterministic per seed.
Every firing and its end are in the trace (`nemesis buggify …`) and go to `listener`
("start"/"stop", value), which `kchaos run --backend sim` writes to the history.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from node.protocol.messages import FetchResponse, VoteResponse
from node.raft import actions as act
from node.raft.quorum_state import Role

TRIGGERS: dict[str, str] = {
    "vote-granted": "crash a voter right after it grants a vote",
    "quorum-state": "crash a node right after it persists its quorum-state",
    "leader-append": "crash a leader right after it appends, before its fsync completes",
    "elected": "isolate a leader right after its election",
    "elected-behind": "isolate a new leader that lacks uncommitted entries other voters hold; slow their disks",
    "established": "cut a leader off from the other voters once it has committed in its epoch",
    "candidate": "restart a node while it is still a candidate",
    "leader-cut": "cut a leader off from the other voters (observers still reach it) right after it answers a Fetch",
}
OWN_RNG = frozenset({"leader-cut"})  # triggers that draw from an RNG of their own (see the docstring)
PER_SECOND = frozenset({"leader-cut"})  # triggers whose probability is per second, not per occurrence
CUTS = frozenset({"established", "leader-cut"})  # a leader cut off from the other voters only
MAX_GAP_MS = 1_000  # a per-second trigger counts at most this long since its previous occurrence
LAYER = "buggify"  # the network grudge layer of the `elected` isolation

Listener = Callable[[str, dict[str, Any]], None]


@dataclass(frozen=True)
class BuggifyConfig:
    # per trigger: the probability that one occurrence fires (vote grants and elections are rare,
    # appends are every few ms)
    probability: Mapping[str, float] = field(
        default_factory=lambda: {
            "vote-granted": 0.25,
            "quorum-state": 0.05,
            "leader-append": 0.01,
            "elected": 0.2,
            "elected-behind": 1.0,
            "established": 0.6,
            "candidate": 0.25,
            "leader-cut": 0.15,  # per second of leadership
        }
    )
    restart_ms: tuple[int, int] = (1, 300)  # a crashed node starts again after this
    isolate_ms: tuple[int, int] = (500, 5_000)  # an isolated new leader is healed after this
    cut_ms: tuple[int, int] = (7_000, 11_000)  # a leader cut off from the voters is healed after this
    # ... and one elected behind another voter: long enough for the others to elect a leader of their
    # own (a fetch timeout, then an election) and for it to re-replicate the entries the isolated one lacks
    isolate_behind_ms: tuple[int, int] = (3_000, 8_000)
    # an established leader cut off from the voters is healed after this: past its check-quorum timeout
    # (at most twice quorum.fetch.timeout.ms), so a new leader is elected while it still believes it leads
    zombie_ms: tuple[int, int] = (3_000, 6_000)
    quiet_ms: int = 2_000  # no firing for this long after the previous one ended

    def __post_init__(self) -> None:
        for trigger, p in self.probability.items():
            if trigger not in TRIGGERS:
                raise ValueError(f"unknown buggify trigger {trigger!r} (known: {', '.join(TRIGGERS)})")
            if not 0.0 <= p <= 1.0:
                raise ValueError(f"buggify probability of {trigger} must be in [0, 1], got {p}")


@dataclass
class Firing:
    serial: int
    trigger: str
    fault: str  # kill | lose_unsynced | partition
    node: int
    incarnation: int  # the node's incarnation after a crash (its restart is ours only while it stays)
    stalled: tuple[int, ...] = ()  # nodes whose fsyncs are slowed for the firing (elected-behind)

    @property
    def nodes(self) -> list[int]:
        return [self.node, *self.stalled]


class Buggify:
    """The targeted faults of one simulation (see the module docstring)."""

    def __init__(
        self,
        sim: Any,
        allowed: Collection[str],
        config: BuggifyConfig | None = None,
        listener: Listener | None = None,
        name_of: Callable[[int], str] = str,
    ) -> None:
        self.sim = sim
        self.config = config or BuggifyConfig()
        self.listener = listener
        self.name_of = name_of
        self.rng = random.Random((sim.config.seed << 8) ^ 0xB066)
        self.own_rng = random.Random((sim.config.seed << 8) ^ 0xC07)
        self.stall = "disk_stall" in allowed
        crash = "lose_unsynced" if "lose_unsynced" in allowed else "kill" if "kill" in allowed else None
        faults = {
            "vote-granted": "kill" if "kill" in allowed else crash,
            "quorum-state": "kill" if "kill" in allowed else crash,
            "leader-append": crash,
            "elected": "partition" if "partition" in allowed else None,
            "elected-behind": "partition" if "partition" in allowed else None,
            "established": "partition" if "partition" in allowed else None,
            "candidate": "kill" if "kill" in allowed else crash,
            "leader-cut": "partition" if "partition" in allowed else None,
        }
        # trigger -> (its fault, its probability), for the triggers this run can fire
        self.triggers: dict[str, tuple[str, float]] = {
            t: (f, self.config.probability.get(t, 0.0))
            for t, f in faults.items()
            if f is not None and self.config.probability.get(t, 0.0) > 0
        }
        self.enabled = False
        self.active: Firing | None = None
        self.fired: dict[str, int] = {}
        self._serial = 0
        self._quiet_until = 0
        self._last_seen: dict[str, int] = {}  # per-second triggers: when each last occurred
        self._established: dict[int, int] = {}  # node -> the last leader epoch `established` drew for
        sim.action_hooks.append(self._on_actions)

    # -- switching on and off ----------------------------------------------------------------------------

    def enable(self) -> None:
        self.enabled = bool(self.triggers)

    def disable(self) -> list[int]:
        """No more firings; end the active one now (silently: the caller records it). The nodes it hit."""
        self.enabled = False
        firing, self.active = self.active, None
        if firing is None:
            return []
        self._undo(firing)
        return firing.nodes

    # -- the hook ----------------------------------------------------------------------------------------

    def _on_actions(self, host: Any, event: Any, actions: list[Any]) -> None:
        if self._on_elected_behind(host, actions):
            return
        if not self.enabled or self.active is not None or self.sim.now < self._quiet_until or not host.up:
            return
        trigger = self._trigger(host, actions)
        if trigger in (None, "leader-cut"):  # a commit in a new epoch is the rarer, more specific moment
            trigger = self._established_trigger(host, actions) or trigger
        if trigger is None or trigger not in self.triggers:
            return
        fault, probability = self.triggers[trigger]
        if trigger in PER_SECOND:
            now, last = self.sim.now, self._last_seen.get(trigger)
            self._last_seen[trigger] = now
            seconds = 0.0 if last is None else min(MAX_GAP_MS, now - last) / 1000
            probability = 1.0 - (1.0 - probability) ** seconds
        rng = self.own_rng if trigger in OWN_RNG else self.rng
        if rng.random() < probability:
            self._fire(trigger, fault, host, rng)

    def _on_elected_behind(self, host: Any, actions: list[Any]) -> bool:
        """Strike (`elected-behind`) at an election won by a node lacking uncommitted entries other voters
        hold; whether it was such an election (then no other trigger applies to it). Rare, and mostly the
        aftermath of an earlier fault: no quiet time, and it ends the fault in progress (a node that fault
        holds may be the one with the entries the leader lacks), unless that is an earlier
        `elected-behind`, whose re-elected leader is the one the Figure 8 waits for, or a cut
        (`established`, `leader-cut`): the leader it cut off appends what it can never commit, so every
        election it causes is won by a node "behind", and ending the cut would close the deposed
        leader's window each time it opens."""
        if not self.enabled or not host.up or self._trigger(host, actions) != "elected":
            return False
        holders = self._holders_of_missing(host)
        if not holders:
            return False
        active = self.active
        if (
            active is not None and active.trigger in ("elected-behind", *CUTS)
        ) or "elected-behind" not in self.triggers:
            return True  # a cut leader holds entries nobody else has by design: its window stays open
        fault, probability = self.triggers["elected-behind"]
        if self.rng.random() < probability:
            if active is not None:
                self._end(active.serial)
            self._fire("elected-behind", fault, host, self.rng, holders if self.stall else ())
        return True

    @staticmethod
    def _trigger(host: Any, actions: list[Any]) -> str | None:
        """The trigger these actions match, the most specific first. Role changes are read from the
        `LeaderChanged` the core announces them with, not from a persisted quorum-state, so a core
        that (wrongly) does not persist is struck at the same moment as one that does."""
        persisted = granted = appended = announced = elected = served = False
        me = host.config.node_id
        for action in actions:
            kind = type(action)
            if kind is act.PersistQuorumState:
                persisted = True
            elif kind is act.Respond:
                message = action.message
                granted = granted or (type(message) is VoteResponse and message.vote_granted)
                served = served or type(message) is FetchResponse
            elif kind is act.AppendBatches:
                appended = True
            elif kind is act.LeaderChanged:
                announced = True
                elected = elected or action.leader_id == me
        if not (persisted or granted or appended or announced or served):
            return None
        role = host.raft.role
        if elected and role is Role.LEADER:
            return "elected"
        if announced and role is Role.CANDIDATE:
            return "candidate"
        if granted and role is Role.VOTED:  # a pre-vote grant (KIP-996) persists and changes nothing
            return "vote-granted"
        if appended and role is Role.LEADER:
            return "leader-append"
        if persisted:
            return "quorum-state"
        return "leader-cut" if served and role is Role.LEADER else None

    def _holders_of_missing(self, host: Any) -> list[int]:
        """The other voters whose logs end in entries the new leader's log lacks, past the committed
        log's end (the simulator's view of what is committed: no node knows it)."""
        sim, mine = self.sim, host.disk
        committed = sim.checker.committed_end
        holders = []
        for voter in sim.config.voter_ids:
            last = sim.nodes[voter].disk.last_batch if voter != host.node_id else None
            if last is not None and last.next_offset > committed and mine.batch_at(last.base_offset) != last:
                holders.append(voter)
        return holders

    def _established_trigger(self, host: Any, actions: list[Any]) -> str | None:
        """`established` once per leader epoch: the first high-watermark advance past the epoch's start
        (the controller activates once its image reaches that start)."""
        raft = host.raft
        if raft.role is not Role.LEADER or self._established.get(host.node_id) == raft.epoch:
            return None
        if not any(type(a) is act.HighWatermarkAdvanced for a in actions):
            return None
        if raft.high_watermark <= raft.epoch_start_offset:
            return None
        self._established[host.node_id] = raft.epoch
        return "established"

    # -- firing and ending -----------------------------------------------------------------------------

    def _fire(self, trigger: str, fault: str, host: Any, rng: random.Random, stall: Sequence[int] = ()) -> None:
        sim, node = self.sim, host.node_id
        self._serial += 1
        self.fired[trigger] = self.fired.get(trigger, 0) + 1
        targets = [node, *stall]
        value: dict[str, Any] = {
            "kind": "buggify",
            "trigger": trigger,
            "fault": fault,
            "targets": [self.name_of(n) for n in targets],
        }
        if fault == "partition":
            if trigger in CUTS:
                after = rng.randint(*(self.config.cut_ms if trigger == "leader-cut" else self.config.zombie_ms))
                others = [v for v in sorted(host.raft.config.voter_ids) if v != node and v in sim.nodes]
                grudge = {node: others, **{v: [node] for v in others}}
                what = f"cut node {node} off from voters {others}"
                value["from"] = [self.name_of(m) for m in others]
            else:
                span = self.config.isolate_behind_ms if trigger == "elected-behind" else self.config.isolate_ms
                after = rng.randint(*span)
                grudge = {n: [m for m in sim.nodes if m != n] if n == node else [node] for n in sim.nodes}
                what = f"isolate node {node}"
            value["heal_after_ms"] = after
            value["grudge"] = {self.name_of(n): [self.name_of(m) for m in cut] for n, cut in grudge.items() if cut}
            sim.record_fault("buggify", f"{trigger}: {what} for {after} ms")
            sim.network.set_layer(LAYER, grudge)
            if stall:  # their fsyncs complete no earlier than the heal
                value["stalled"] = [self.name_of(n) for n in stall]
            for other in stall:
                sim.stall_disk(other, after)
        else:
            after = rng.randint(*self.config.restart_ms)
            value["restart_after_ms"] = after
            sim.record_fault("buggify", f"{trigger}: {fault} node {node}, restart in {after} ms")
            sim.kill(node, lose_unsynced=fault == "lose_unsynced")
        self.active = Firing(self._serial, trigger, fault, node, host.incarnation, tuple(stall))
        sim.queue.after(after, self._end, self._serial)
        if self.listener is not None:
            self.listener("start", value)

    def _end(self, serial: int) -> None:
        firing = self.active
        if firing is None or firing.serial != serial:
            return  # ended already (disabled)
        self.active = None
        self._undo(firing)
        self._quiet_until = self.sim.now + self.config.quiet_ms
        if self.listener is not None:
            self.listener("stop", {"kind": "buggify", "targets": [self.name_of(n) for n in firing.nodes]})

    def _undo(self, firing: Firing) -> None:
        sim = self.sim
        if firing.fault == "partition":
            if sim.network.clear_layer(LAYER):
                sim.record_fault("heal", f"buggify isolation of node {firing.node}")
            for node in firing.stalled:  # ended early (disabled): fsyncs from now on are not held back
                sim.nodes[node].disk_stalled_until = min(sim.nodes[node].disk_stalled_until, sim.now)
            return
        host = sim.nodes[firing.node]
        if not host.up and host.incarnation == firing.incarnation:  # nobody else restarted or killed it
            sim.restart(firing.node)
