"""The redeliver fault in the simulator: the network copies quorum messages (a duplicate soon after the
original, or a stale copy seconds later), the world delivers the copies as requests and answers of their
own, the copies outlive connections, and a run under the fault stays deterministic."""

from __future__ import annotations

import random

import pytest

from node.protocol.messages import BeginQuorumEpochRequest, FetchRequest
from node.sim.faults import FaultConfig
from node.sim.network import DegradedLinks, LinkModel, Network
from node.sim.runner import RunConfig, run
from node.sim.world import SimConfig, Simulation
from vocab.faults.kinds import RedeliverFault


def network(fault: RedeliverFault | None, pairs: frozenset[tuple[int, int]] | None = None) -> Network:
    net = Network(random.Random(7), LinkModel(delay_min_ms=3, delay_max_ms=3))
    if fault is not None:
        net.set_redelivery(DegradedLinks(pairs, fault))
    return net


def test_no_copies_without_the_fault_nor_off_its_links_nor_to_clients():
    assert network(None).copies(1, 2, 3) == ()
    net = network(RedeliverFault("duplicate", 1.0, 10), frozenset({(1, 2)}))
    assert net.copies(2, 1, 3) == () and net.copies(1, 3, 3) == ()
    assert len(net.copies(1, 2, 3)) == 1
    every = network(RedeliverFault("duplicate", 1.0, 10))
    assert every.copies(-1, 2, 3) == () and every.copies(2, -1, 3) == ()  # clients are outside the cluster
    assert network(RedeliverFault("stale", 0.0, 10)).copies(1, 2, 3) == ()


def test_a_duplicate_arrives_soon_after_the_original_and_a_stale_copy_seconds_after_the_send():
    dup = network(RedeliverFault("duplicate", 1.0, 50))
    lags = [dup.copies(1, 2, 3)[0] for _ in range(200)]
    assert all(3 <= at <= 53 for at in lags) and len(set(lags)) > 10
    stale = network(RedeliverFault("stale", 1.0, 4_000))
    late = [stale.copies(1, 2, 3)[0] for _ in range(200)]
    assert all(3_000 <= at <= 5_000 for at in late) and len(set(late)) > 10
    assert dup.redelivered == 200 and stale.redelivered == 200


def test_the_probability_is_per_message():
    net = network(RedeliverFault("duplicate", 0.25, 0))
    copied = sum(bool(net.copies(1, 2, 3)) for _ in range(4_000))
    assert 800 < copied < 1_200 and net.redelivered == copied


def test_the_fault_draws_nothing_while_it_is_off():
    """A run that never turns it on keeps its random stream (and so every older seed its history)."""
    plain, healed = network(None), network(RedeliverFault("stale", 0.5, 1_000))
    assert healed.clear_redelivery() and not healed.clear_redelivery()
    for _ in range(100):
        assert plain.copies(1, 2, 3) == healed.copies(1, 2, 3) == ()
        assert plain.transit(1, 2) == healed.transit(1, 2)


def delivered(sim: Simulation, kind: type) -> list[tuple[int, int, int, object]]:
    seen: list[tuple[int, int, int, object]] = []
    sim.on_delivery = lambda src, dst, msg: seen.append((sim.now, src, dst, msg)) if isinstance(msg, kind) else None
    return seen


def test_the_world_delivers_each_copy_as_a_request_of_its_own():
    sim = Simulation(SimConfig(seed=4))
    sim.start()
    assert sim.run_until_true(lambda: sim.leader() is not None, 30_000)
    leader = sim.leader()
    fetches = delivered(sim, FetchRequest)
    start = sim.now
    sim.redeliver(None, RedeliverFault("duplicate", 1.0, 5))
    sim.run_for(2_000)
    sim.heal_redeliver()
    end = sim.now
    sim.run_for(2_000)
    # The copy carries the very message object of the original: count arrivals per object.
    during = [m for at, _, dst, m in fetches if dst == leader and start + 20 <= at <= end]
    assert len(during) > 10 and all(sum(m is o for *_, o in fetches) == 2 for m in during)  # every Fetch twice
    after = [m for at, _, dst, m in fetches if at > end + 20]
    assert after and all(sum(m is o for *_, o in fetches) == 1 for m in after)  # healed: once again
    assert sim.network.redelivered > 0 and sim.network.redelivery is None
    assert sim.leader() == leader and sim.violation is None  # the duplicates unsettle nothing


def test_a_stale_copy_outlives_its_sender_and_reaches_a_newer_epoch():
    """The copy is a datagram: its sender's death does not take it back, and it reaches whoever runs at
    the address when it lands — here a voter that has moved on to a newer epoch, which must refuse it."""
    sim = Simulation(SimConfig(seed=4))
    sim.start()
    sim.redeliver(None, RedeliverFault("stale", 1.0, 3_000))
    assert sim.run_until_true(lambda: sim.leader() is not None, 30_000)
    first = sim.leader()
    epoch = sim.raft(first).epoch
    sim.heal_redeliver()
    begins = delivered(sim, BeginQuorumEpochRequest)
    sim.kill(first)
    assert sim.run_until_true(lambda: sim.leader() not in (None, first), 30_000)
    sim.run_for(5_000)
    stale = [(dst, m) for _, src, dst, m in begins if src == first and m.leader_epoch == epoch]
    assert stale, begins  # the dead leader's BeginQuorumEpoch arrived after it died ...
    for dst, _ in stale:
        assert sim.raft(dst).epoch > epoch  # ... at voters of a newer epoch, which stayed there
    assert sim.violation is None


def test_same_seed_same_run_under_both_modes():
    def once(seed: int) -> str:
        options = {"redeliver": {"probability": 0.5}}
        faults = FaultConfig(kinds=("redeliver", "kill", "partition"), options=options)
        # 30 s: the nemesis draws its kinds at random, and 15 s of seed 4 drew no redeliver at all once
        # the failover changes moved its timing (the assertion below is the test's precondition).
        result = run(RunConfig(sim=SimConfig(seed=seed), faults=faults, duration_ms=30_000))
        assert result.valid, result.failure
        assert result.summary["messages"]["redelivered"] > 0
        return result.digest

    assert once(3) == once(3) != once(4)


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_the_correct_quorum_is_valid_under_copies_with_and_without_pre_vote(seed):
    options = {"redeliver": {"probability": [0.2, 1.0]}, "kill": {"modes": ["leader", "one"]}}
    faults = FaultConfig(kinds=("redeliver", "kill", "partition", "lose_unsynced"), options=options)
    raft = {"pre_vote": seed % 2 == 0}
    result = run(RunConfig(sim=SimConfig(seed=seed, observers=1, raft=raft), faults=faults, duration_ms=30_000))
    assert result.valid, result.failure
