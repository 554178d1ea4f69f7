"""Targeted simulator scenarios, shared by the scenario tests and the injected-bug tests.

Each function drives a `Simulation` through a fault sequence built with partitions, kills and
restarts at exact moments, and returns what the test needs to assert on. A stage the cluster does not
reach raises `InvariantViolated` when the simulator stopped at a broken invariant (what an injected-bug
test expects) and `NotReached` otherwise (a liveness failure of the core): two different verdicts, so a
test that expects one cannot pass on the other.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from node.protocol.messages import FetchRequest
from node.raft.events import Event, RequestReceived
from node.raft.quorum_state import Role
from node.sim.network import LinkModel
from node.sim.runner import converged, final_checks
from node.sim.world import NodeFactory, SimConfig, Simulation


def leader_among(sim: Simulation, ids: Iterable[int], above_epoch: int = 0) -> int | None:
    for n in ids:
        host = sim.nodes[n]
        if host.up and host.raft.role is Role.LEADER and host.raft.epoch > above_epoch:
            return n
    return None


class NotReached(AssertionError):
    """A stage the scenario waits for did not come, and no invariant broke."""


class InvariantViolated(AssertionError):
    """The simulator stopped at a broken invariant while the scenario waited."""

    def __init__(self, what: str, violation: str) -> None:
        super().__init__(f"{what}: stopped by a violation: {violation}")
        self.violation = violation


def wait(sim: Simulation, predicate: Any, timeout_ms: int, what: str) -> None:
    if sim.run_until_true(predicate, timeout_ms):
        return
    if sim.violation is not None:
        raise InvariantViolated(what, str(sim.violation))
    raise NotReached(f"{what}: not reached within {timeout_ms} ms")


def settle(sim: Simulation, timeout_ms: int = 60_000) -> None:
    """Heal everything, wait for a caught-up leader, run the end-to-end checks."""
    sim.heal_all()
    wait(sim, lambda: converged(sim), timeout_ms, "convergence after healing")
    problem = final_checks(sim)
    assert problem is None, problem


@dataclass
class Figure8Outcome:
    sim: Simulation
    x: int  # the contested offset
    old_epoch: int  # epoch of the entry first written at x (by the first leader)
    overwriting_epoch: int  # epoch of the entry a later leader wrote at x
    hwm_when_old_entry_on_majority: int  # the third leader's HWM once a majority held x@old_epoch
    append_handle: Any


def figure8(seed: int = 1, node_factory: NodeFactory | None = None) -> Figure8Outcome:
    """KIP-595's "extra condition on commitment", after Figure 8 of the Raft paper, with 5 voters.

    (a) Leader A (epoch e1) writes X at offset x; only B copies it (A, B cut off from the rest).
    (b) A dies; N wins epoch e2 among the other three and writes its LeaderChange at x; N dies
        before anyone copies it.
    (c) A restarts; A or B (L3) wins epoch e3 and re-replicates X: once a third node acknowledges
        x, X@e1 sits on a majority, but L3's own LeaderChange (x+1) does not yet. It must not count
        X as committed: an old-epoch entry commits only together with one of the leader's epoch.
    (d) L3 and its partner die before x+1 spreads; N returns and wins epoch e4 with the two
        stragglers (its x@e2 beats their x@e1), overwriting X everywhere. Had X been committed in
        (c), a committed entry would now be lost.
    Every node fetches one batch per request (fetch_max_bytes=1) and links have a fixed 5 ms delay,
    which makes the moment in (c) exact.
    """
    sim = Simulation(
        SimConfig(
            seed=seed,
            voters=5,
            raft={"fetch_max_bytes": 1},
            link=LinkModel(delay_min_ms=5, delay_max_ms=5),
            node_factory=node_factory,
        )
    )
    sim.start()
    wait(sim, lambda: converged(sim), 30_000, "a first leader")
    a = sim.leader()
    assert a is not None
    e1 = sim.raft(a).epoch
    b, *group2 = [n for n in sim.nodes if n != a]
    x = sim.raft(a).log_end_offset

    # (a)
    sim.isolate([[a, b], group2])
    handle = sim.submit_append(a, (b"X",))

    def b_has_x() -> bool:
        got = sim.node(b).disk.batch_at(x)
        return got is not None and got.epoch == e1 and got.records == (b"X",)

    wait(sim, b_has_x, 5_000, "B copying X")

    # (b)
    sim.kill(a)
    wait(sim, lambda: leader_among(sim, group2, e1) is not None, 30_000, "a leader among the other three")
    n = leader_among(sim, group2, e1)
    assert n is not None
    e2 = sim.raft(n).epoch
    sim.kill(n)  # at once: its LeaderChange at x is on its own disk only
    p, q = (m for m in group2 if m != n)

    # (c)
    sim.heal()
    sim.restart(a)
    wait(sim, lambda: leader_among(sim, (a, b), e2) is not None, 30_000, "A or B leading again")
    l3 = leader_among(sim, (a, b), e2)
    assert l3 is not None
    seen: dict[str, int] = {}

    def on_event(node_id: int, event: Event) -> None:
        if (
            node_id == l3
            and not seen
            and isinstance(event, RequestReceived)
            and isinstance(event.message, FetchRequest)
            and event.message.replica_id in (p, q)
            and event.message.fetch_offset == x + 1
        ):
            seen["hwm"] = sim.raft(l3).high_watermark  # a third voter just acknowledged x

    sim.event_hooks.append(on_event)
    wait(sim, lambda: bool(seen), 10_000, "a third voter acknowledging X")
    sim.event_hooks.remove(on_event)

    # (d): cut A and B off first so the answer carrying x+1 never arrives, then kill them
    sim.isolate([[n, p, q]])
    sim.kill(a)
    sim.kill(b)
    sim.restart(n)
    wait(sim, lambda: leader_among(sim, (n, p, q), e2) is not None, 30_000, "N's group electing a leader")
    wait(sim, lambda: sim.raft(n).high_watermark > x + 1, 10_000, "the new leader committing past x")
    return Figure8Outcome(sim, x, e1, e2, seen["hwm"], handle)


@dataclass
class ZombieOutcome:
    sim: Simulation
    old_leader: int
    old_epoch: int
    partitioned_at: int
    stepped_down_at: int
    old_hwm: int
    hwm_while_isolated: int
    new_leader: int
    append_handle: Any


def zombie_leader(seed: int = 1, node_factory: NodeFactory | None = None) -> ZombieOutcome:
    """Cut the leader off from both followers; it must resign leadership within the fetch timeout
    and never commit while isolated; the majority elects a new leader in a higher epoch."""
    sim = Simulation(SimConfig(seed=seed, voters=3, node_factory=node_factory))
    sim.start()
    wait(sim, lambda: converged(sim), 30_000, "a first leader")
    old = sim.leader()
    assert old is not None
    old_epoch = sim.raft(old).epoch
    old_hwm = sim.raft(old).high_watermark
    others = [n for n in sim.nodes if n != old]
    partitioned_at = sim.now
    sim.isolate([others])
    handle = sim.submit_append(old, (b"zombie",))
    wait(sim, lambda: sim.raft(old).role is not Role.LEADER, 20_000, "the old leader stepping down")
    stepped_down_at = sim.now
    hwm_while_isolated = sim.raft(old).high_watermark
    wait(sim, lambda: leader_among(sim, others, old_epoch) is not None, 30_000, "a new leader")
    new = leader_among(sim, others, old_epoch)
    assert new is not None
    sim.run_for(5_000)
    hwm_while_isolated = max(hwm_while_isolated, sim.raft(old).high_watermark)
    return ZombieOutcome(sim, old, old_epoch, partitioned_at, stepped_down_at, old_hwm, hwm_while_isolated, new, handle)


@dataclass
class BehindOutcome:
    sim: Simulation
    old_leader: int  # wrote X while cut off; the voter holding entries the next leader lacks
    x: int  # X's offset
    behind_leader: int  # elected without X, then isolated by `elected-behind`
    fired: list[dict[str, Any]]  # the targeted faults' listener calls (what, value)
    stalled_until: int  # the old leader's disk stall when `elected-behind` fired


def figure8_by_buggify(
    seed: int = 1,
    raft: dict[str, Any] | None = None,
    run_ms: int = 15_000,
    allowed: tuple[str, ...] = ("partition", "disk_stall"),
    before: Any = None,
) -> BehindOutcome:
    """Figure 8 on three voters, reached by the `elected-behind` targeted fault instead of by hand.

    The leader A writes X while cut off from both followers; they elect B, which lacks X: the targeted
    fault isolates B at once (its LeaderChange stays on its own log) and slows A's fsyncs. The nemesis
    partition heals: A, whose log is longer, leads again with C's vote and re-replicates X; C fetches X and
    A's LeaderChange while A's own copy of that LeaderChange waits for its disk. A correct leader commits
    nothing until its epoch's entry is durable on a majority; committing X earlier leaves B electable.
    `before(sim, buggify, a)` runs right after X is written (e.g. to start another targeted fault).
    """
    from node.sim.buggify import Buggify, BuggifyConfig

    sim = Simulation(SimConfig(seed=seed, voters=3, raft=dict(raft or {})))
    fired: list[dict[str, Any]] = []
    buggify = Buggify(
        sim,
        allowed,
        BuggifyConfig(probability={"elected-behind": 1.0}),
        listener=lambda what, value: fired.append({"what": what, "at": sim.now, **value}),
    )
    sim.start()
    wait(sim, lambda: converged(sim), 30_000, "a first leader")
    a = sim.leader()
    assert a is not None
    x = sim.raft(a).log_end_offset
    others = [n for n in sim.nodes if n != a]
    buggify.enable()
    sim.isolate([[a], others])
    sim.submit_append(a, (b"X",))
    if before is not None:
        before(sim, buggify, a)
    wait(sim, lambda: leader_among(sim, others) is not None, 30_000, "a leader without X")
    b = leader_among(sim, others)
    assert b is not None and any(f["trigger"] == "elected-behind" for f in fired if f["what"] == "start"), fired
    stalled_until = sim.nodes[a].disk_stalled_until
    sim.heal()
    sim.run_for(run_ms)
    return BehindOutcome(sim, a, x, b, fired, stalled_until)


@dataclass
class PartitionedVoterOutcome:
    sim: Simulation
    voter: int  # the voter cut off from every other node
    leader: int  # the leader when it was cut off
    epoch: int  # the leader's epoch then
    voter_epoch_at_heal: int  # the cut-off voter's epoch just before the partition healed
    leader_epoch_at_heal: int
    leader_after: int  # the leader once the cluster converged again
    epoch_after: int


def partitioned_voter(
    seed: int = 1, cut_ms: int = 60_000, pre_vote: bool = True, voters: int = 3
) -> PartitionedVoterOutcome:
    """KIP-996's case: one voter is cut off from everyone for `cut_ms`, then the partition heals.
    Without pre-vote it stands again and again (one epoch per election timeout) and its epoch, once
    back, unseats the healthy leader; with pre-vote it never gets a majority of pre-votes, keeps its
    epoch, and follows the leader again when it can reach it."""
    sim = Simulation(SimConfig(seed=seed, voters=voters, raft={"pre_vote": pre_vote}))
    sim.start()
    wait(sim, lambda: converged(sim), 30_000, "a first leader")
    leader = sim.leader()
    assert leader is not None
    epoch = sim.raft(leader).epoch
    voter = min(n for n in sim.nodes if n != leader)
    sim.isolate([[n for n in sim.nodes if n != voter]])
    assert sim.run_for(cut_ms), sim.violation
    voter_epoch, leader_epoch = sim.raft(voter).epoch, sim.raft(leader).epoch
    sim.heal()
    wait(sim, lambda: converged(sim), 60_000, "convergence after the partition healed")
    after = sim.leader()
    assert after is not None
    return PartitionedVoterOutcome(sim, voter, leader, epoch, voter_epoch, leader_epoch, after, sim.raft(after).epoch)
