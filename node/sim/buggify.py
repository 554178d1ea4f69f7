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
- `established`: a leader just committed an entry of its own epoch (its controller is active) → cut
  it off from the other voters for a while (clients and brokers still reach it): it stays leader until
  its check-quorum timeout fires while the others elect a new one, the window in which a deposed leader
  that believes it leads may answer (KIP-595's Leader Progress Timeout; stale reads, stale answers);
- `candidate`: a node just became a candidate → restart it while it still is one.

A trigger fires only when the fault it does is allowed (the run's fault kinds: `kill` or
`lose_unsynced` for crashes, `partition` for the isolations), at most one targeted fault is active at
a time, and none fires for `quiet_ms` after the previous one ended, so runs are not all crashes.
Choices come from an RNG of their own seeded by the simulation's seed: deterministic per seed.
Every firing and its end are in the trace (`nemesis buggify …`) and go to `listener`
("start"/"stop", value), which `kchaos run --backend sim` writes to the history.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from node.protocol.messages import VoteResponse
from node.raft import actions as act
from node.raft.quorum_state import Role

TRIGGERS: dict[str, str] = {
    "vote-granted": "crash a voter right after it grants a vote",
    "quorum-state": "crash a node right after it persists its quorum-state",
    "leader-append": "crash a leader right after it appends, before its fsync completes",
    "elected": "isolate a leader right after its election",
    "established": "cut a leader off from the other voters once it has committed in its epoch",
    "candidate": "restart a node while it is still a candidate",
}
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
            "established": 0.6,
            "candidate": 0.25,
        }
    )
    restart_ms: tuple[int, int] = (1, 300)  # a crashed node starts again after this
    isolate_ms: tuple[int, int] = (500, 5_000)  # an isolated new leader is healed after this
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
        crash = "lose_unsynced" if "lose_unsynced" in allowed else "kill" if "kill" in allowed else None
        faults = {
            "vote-granted": "kill" if "kill" in allowed else crash,
            "quorum-state": "kill" if "kill" in allowed else crash,
            "leader-append": crash,
            "elected": "partition" if "partition" in allowed else None,
            "established": "partition" if "partition" in allowed else None,
            "candidate": "kill" if "kill" in allowed else crash,
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
        return [firing.node]

    # -- the hook ----------------------------------------------------------------------------------------

    def _on_actions(self, host: Any, event: Any, actions: list[Any]) -> None:
        if not self.enabled or self.active is not None or self.sim.now < self._quiet_until or not host.up:
            return
        trigger = self._trigger(host, actions) or self._established_trigger(host, actions)
        if trigger is None or trigger not in self.triggers:
            return
        fault, probability = self.triggers[trigger]
        if self.rng.random() < probability:
            self._fire(trigger, fault, host)

    @staticmethod
    def _trigger(host: Any, actions: list[Any]) -> str | None:
        """The trigger these actions match, the most specific first. Role changes are read from the
        `LeaderChanged` the core announces them with, not from a persisted quorum-state, so a core
        that (wrongly) does not persist is struck at the same moment as one that does."""
        persisted = granted = appended = announced = elected = False
        me = host.config.node_id
        for action in actions:
            kind = type(action)
            if kind is act.PersistQuorumState:
                persisted = True
            elif kind is act.Respond:
                message = action.message
                granted = granted or (type(message) is VoteResponse and message.vote_granted)
            elif kind is act.AppendBatches:
                appended = True
            elif kind is act.LeaderChanged:
                announced = True
                elected = elected or action.leader_id == me
        if not (persisted or granted or appended or announced):
            return None
        role = host.raft.role
        if elected and role is Role.LEADER:
            return "elected"
        if announced and role is Role.CANDIDATE:
            return "candidate"
        if granted:
            return "vote-granted"
        if appended and role is Role.LEADER:
            return "leader-append"
        return "quorum-state" if persisted else None

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

    def _fire(self, trigger: str, fault: str, host: Any) -> None:
        sim, node = self.sim, host.node_id
        self._serial += 1
        self.fired[trigger] = self.fired.get(trigger, 0) + 1
        value: dict[str, Any] = {"kind": "buggify", "trigger": trigger, "fault": fault, "targets": [self.name_of(node)]}
        if fault == "partition":
            zombie = trigger == "established"
            after = self.rng.randint(*(self.config.zombie_ms if zombie else self.config.isolate_ms))
            value["heal_after_ms"] = after
            peers = [m for m in (host.raft.config.voter_ids if zombie else sim.nodes) if m != node]
            if zombie:
                value["from"] = [self.name_of(m) for m in sorted(peers)]
            whom = f" from {sorted(peers)}" if zombie else ""
            sim.record_fault("buggify", f"{trigger}: isolate node {node}{whom} for {after} ms")
            sim.network.set_layer(LAYER, {node: peers, **{m: [node] for m in peers}})
        else:
            after = self.rng.randint(*self.config.restart_ms)
            value["restart_after_ms"] = after
            sim.record_fault("buggify", f"{trigger}: {fault} node {node}, restart in {after} ms")
            sim.kill(node, lose_unsynced=fault == "lose_unsynced")
        self.active = Firing(self._serial, trigger, fault, node, host.incarnation)
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
            self.listener("stop", {"kind": "buggify", "targets": [self.name_of(firing.node)]})

    def _undo(self, firing: Firing) -> None:
        sim = self.sim
        if firing.fault == "partition":
            if sim.network.clear_layer(LAYER):
                sim.record_fault("heal", f"buggify isolation of node {firing.node}")
            return
        host = sim.nodes[firing.node]
        if not host.up and host.incarnation == firing.incarnation:  # nobody else restarted or killed it
            sim.restart(firing.node)
