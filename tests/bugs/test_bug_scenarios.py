"""Targeted simulator scenarios: the fault that makes a planted bug visible, and the invariant that then
fails. They show that bugs the random matrix does not catch yet are real and catchable once a nemesis
produces the right moment (the nemesis, not the checker, is what they wait for)."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from node.bugs import Bugs
from node.process.process import CONTROLLER_LISTENER
from node.protocol.admin import ConfigResourceType, DescribeConfigsRequest, DescribeConfigsResource
from node.protocol.messages import BeginQuorumEpochRequest, VoteRequest
from node.raft.events import RequestReceived
from node.raft.node import RaftNode
from node.raft.quorum_state import NO_ID
from node.sim.admin_client import Endpoint, SimAdminClient, broker_endpoints
from node.sim.cluster import ClusterConfig
from node.sim.cluster_run import active_controller, settled
from node.sim.runner import converged
from node.sim.world import SimConfig, Simulation
from tests.sim.scenarios import InvariantViolated, figure8, figure8_by_buggify, wait
from tests.sim_cluster.helpers import call, call_to, create_topic, set_config


def bugged(*names: str):
    """A node factory whose Raft cores run with planted bugs (as `kchaos.bugs` would switch them on)."""
    on = Bugs(frozenset(names))

    def factory(config, loaded, rng: random.Random, cluster_id_factory):
        return RaftNode(replace(config, bugs=on), loaded, rng, cluster_id_factory)

    return factory


def test_figure8_catches_the_hwm_before_the_leader_change_is_committed_kafka_12619() -> None:
    """Raft's Figure 8 (5 voters, one batch per fetch): the third leader may not count the old entry
    committed. With the bug it does, and the fourth leader then overwrites a committed entry."""
    with pytest.raises(InvariantViolated) as stopped:
        figure8(node_factory=bugged("raft-hwm-before-leader-change-committed"))
    assert "commit safety" in stopped.value.violation, stopped.value.violation
    out = figure8()  # the correct core in the same scenario
    assert out.sim.violation is None


def test_figure8_on_three_voters_through_the_elected_behind_targeted_fault_kafka_12619() -> None:
    """The `elected-behind` targeted fault makes Figure 8 out of a leader cut off while it writes: with
    the bug the re-elected old leader commits X as soon as the third voter holds it, while the isolated
    leader of the epoch in between could still be elected without X (the commit-safety invariant)."""
    bugged_out = figure8_by_buggify(raft={"bugs": Bugs(frozenset({"raft-hwm-before-leader-change-committed"}))})
    violation = bugged_out.sim.violation
    assert violation is not None and "commit safety" in violation.message, violation
    assert f"node {bugged_out.behind_leader}, whose log lacks it" in violation.message
    assert figure8_by_buggify().sim.violation is None  # the correct core in the same scenario


def power_loss_of_a_leader_with_a_slow_disk(*names: str) -> Simulation:
    """3 voters. The leader's fsync stalls while both followers copy and fsync a new batch, which
    commits on them. The leader loses power (its unsynced tail is gone) and restarts at once."""
    sim = Simulation(SimConfig(seed=3, voters=3, raft={"bugs": Bugs(frozenset(names))}))
    sim.start()
    wait(sim, lambda: converged(sim), 30_000, "a first leader")
    leader = sim.leader()
    assert leader is not None
    end = sim.raft(leader).log_end_offset
    sim.stall_disk(leader, 10_000)
    sim.submit_append(leader, (b"x",))
    followers = [n for n in sim.nodes if n != leader]
    wait(sim, lambda: all(sim.raft(f).high_watermark > end for f in followers), 5_000, "the batch committed")
    sim.kill(leader, lose_unsynced=True, keep_unsynced=0)
    sim.restart(leader)
    sim.run_for(3_000)
    return sim


def test_a_leader_reelected_in_its_epoch_after_power_loss_breaks_log_matching_kafka_10527() -> None:
    sim = power_loss_of_a_leader_with_a_slow_disk("raft-leader-reelected-same-epoch")
    assert sim.violation is not None
    assert "log matching" in sim.violation.message or "committed entry changed" in sim.violation.message
    correct = power_loss_of_a_leader_with_a_slow_disk()
    assert correct.violation is None, correct.violation


def a_key_written_at_the_active_controller(
    seed: int, timeout_ms: int, names: tuple[str, ...]
) -> tuple[Simulation, SimAdminClient, int]:
    """3 controllers + 1 broker, settled, with topic t's retention.ms set to "1"; and the active controller."""
    sim = Simulation(SimConfig(seed=seed, cluster=ClusterConfig(controllers=3, brokers=1, bugs=Bugs(frozenset(names)))))
    sim.start()
    wait(sim, lambda: settled(sim), 30_000, "the cluster settling")
    admin = SimAdminClient(sim, broker_endpoints([4]), principal="User:admin", request_timeout_ms=timeout_ms)
    create_topic(sim, admin, "t", 1, 1)
    assert call(sim, admin, set_config("t", "retention.ms", "1")).ok
    old = active_controller(sim)
    assert old is not None
    return sim, admin, old


def stale_read_from_a_slow_clocked_controller(*names: str):
    """The active controller's clock runs at a tenth of real speed and it is cut off from the other
    controllers (a client still reaches it). The others elect a new controller and a config write
    commits there; then the client reads the key at the old controller."""
    sim, admin, old = a_key_written_at_the_active_controller(5, 5_000, names)
    sim.skew(old, rate=0.1)
    sim.isolate([[n for n in sim.nodes if n != old]])  # the old controller alone; clients reach everyone
    wait(sim, lambda: active_controller(sim) not in (None, old), 30_000, "a new active controller")
    new = active_controller(sim)
    assert call_to(sim, admin, Endpoint(new, CONTROLLER_LISTENER), set_config("t", "retention.ms", "2")).ok
    read = DescribeConfigsRequest((DescribeConfigsResource(ConfigResourceType.TOPIC, "t", ("retention.ms",)),))
    result = call_to(sim, admin, Endpoint(old, CONTROLLER_LISTENER), read, timeout_ms=2_000)
    if not result.ok:
        return None
    return result.response.results[0].configs[0].value


def test_a_read_without_barrier_at_a_deposed_controller_is_stale_under_clock_skew() -> None:
    """With the bug the old controller answers the value before the committed write (1, not 2): a
    linearizability violation any register checker flags. The correct controller's read barrier
    cannot complete without a majority, so it answers nothing stale."""
    assert stale_read_from_a_slow_clocked_controller("ctl-read-without-barrier") == "1"
    assert stale_read_from_a_slow_clocked_controller() in (None, "2")


def read_at_a_thawed_controller(seed: int, *names: str) -> str | None:
    """3 controllers + 1 broker. The active controller is frozen (SIGSTOP); the others elect a new one
    and a config write commits there; a client then reads the key at the frozen controller, and it
    thaws with the read and its followers' old Fetches in its sockets, read in whatever order its
    event loop polls them (the simulator's thaw order: per connection FIFO, connections shuffled)."""
    sim, admin, old = a_key_written_at_the_active_controller(seed, 30_000, names)
    sim.pause(old)

    def new_controller() -> int | None:
        return next((c for c in (1, 2, 3) if c != old and sim.process(c).controller.active), None)

    wait(sim, lambda: new_controller() is not None, 30_000, "a new active controller")
    new = new_controller()
    assert call_to(sim, admin, Endpoint(new, CONTROLLER_LISTENER), set_config("t", "retention.ms", "2")).ok
    read = DescribeConfigsRequest((DescribeConfigsResource(ConfigResourceType.TOPIC, "t", ("retention.ms",)),))
    result = admin.send_to(Endpoint(old, CONTROLLER_LISTENER), read, timeout_ms=20_000)
    sim.run_for(100)
    sim.resume(old)
    wait(sim, lambda: result.done, 30_000, "the read completing")
    return result.response.results[0].configs[0].value if result.ok else None


def test_a_thawed_leader_confirms_a_read_with_fetches_sent_before_it_froze() -> None:
    """The finding of the docker all-kinds run, made deterministic: with the bug the thawed controller
    answers the value before the committed write ("1") in some seeds; the correct read barrier waits
    for an entry appended after the read, which the deposed leader cannot commit, in every seed."""
    seeds = range(1, 9)
    assert "1" in [read_at_a_thawed_controller(s, "raft-read-barrier-counts-late-fetches") for s in seeds]
    assert all(read_at_a_thawed_controller(s) in (None, "2") for s in seeds)


def brokers_behind_a_zombie_leader(*names: str) -> tuple[int, list[int]]:
    """3 controllers + 2 brokers. The active controller is cut off from the other two controllers but
    not from the brokers (a partial partition). The other two elect a leader and commit a config
    write; 15 s later, how far is the committed log, and how far is each broker's image?"""
    sim = Simulation(SimConfig(seed=7, cluster=ClusterConfig(controllers=3, brokers=2, bugs=Bugs(frozenset(names)))))
    sim.start()
    wait(sim, lambda: settled(sim), 30_000, "the cluster settling")
    admin = SimAdminClient(sim, broker_endpoints([4, 5]), principal="User:admin", request_timeout_ms=5_000)
    create_topic(sim, admin, "t", 1, 1)
    old = active_controller(sim)
    assert old is not None
    others = [c for c in (1, 2, 3) if c != old]
    sim.partition({old: others, **{c: [old] for c in others}})
    wait(sim, lambda: any(sim.raft(c).role.value == "leader" for c in others), 30_000, "a leader among the others")
    new = next(c for c in others if sim.raft(c).role.value == "leader")
    wait(sim, lambda: active_controller(sim) == new or sim.process(new).controller.active, 10_000, "it activating")
    assert call_to(sim, admin, Endpoint(new, CONTROLLER_LISTENER), set_config("t", "retention.ms", "7")).ok
    sim.run_for(15_000)
    committed = sim.raft(new).high_watermark
    return committed, [sim.process(b).image.last_offset + 1 for b in (4, 5)]


def test_brokers_follow_a_zombie_leader_that_never_resigns_kafka_15489() -> None:
    """What a client sees: with the bug, brokers that still reach the old leader keep fetching from it,
    so their images (every read they answer) stay behind the committed log for the whole partition;
    the correct old leader resigns within quorum.fetch.timeout.ms and the brokers find the new one."""
    committed, brokers = brokers_behind_a_zombie_leader("raft-leader-never-resigns")
    assert all(offset < committed for offset in brokers), (committed, brokers)
    committed, brokers = brokers_behind_a_zombie_leader()
    assert all(offset == committed for offset in brokers), (committed, brokers)


def after_a_failover(*names: str) -> tuple[Simulation, int, int, int]:
    """3 voters: the first leader is killed and the other two elect one of their own. Returns the
    simulation, the dead leader, its epoch and the surviving follower."""
    sim = Simulation(SimConfig(seed=1, voters=3, raft={"bugs": Bugs(frozenset(names))}))
    sim.start()
    wait(sim, lambda: converged(sim), 30_000, "a first leader")
    old, old_epoch = sim.leader(), sim.raft(sim.leader()).epoch
    sim.kill(old)
    wait(sim, lambda: sim.leader() not in (None, old), 30_000, "a leader of a later epoch")
    (follower,) = (n for n in sim.nodes if n not in (old, sim.leader()))
    wait(sim, lambda: sim.raft(follower).leader_id == sim.leader(), 30_000, "the follower following it")
    return sim, old, old_epoch, follower


def deliver_late(sim: Simulation, node: int, message: object) -> None:
    """A request the network held past the epoch it was sent in (its answer goes nowhere)."""
    sim._deliver(node, sim.nodes[node].incarnation, RequestReceived(("late", node), 1, message))
    sim.run_for(500)


def test_a_deposed_leaders_late_begin_quorum_epoch_moves_a_voter_back_an_epoch() -> None:
    """The epoch invariant states the rule; what no nemesis produces yet is the late delivery."""

    def run(*names: str) -> Simulation:
        sim, old, old_epoch, follower = after_a_failover(*names)
        assert sim.raft(follower).epoch > old_epoch
        deliver_late(sim, follower, BeginQuorumEpochRequest(sim.raft(follower).cluster_id, old, old_epoch))
        return sim

    assert run().violation is None
    violation = run("raft-begin-epoch-accepts-older-epoch").violation
    assert violation is not None and "epoch went back" in violation.message, violation


def test_a_late_vote_request_of_an_older_epoch_moves_an_unattached_voter_back() -> None:
    """A stale candidate's Vote of the next epoch leaves the follower unattached without a vote there;
    then a Vote of the epoch before, from an earlier candidacy, arrives late."""

    def run(*names: str) -> Simulation:
        sim, old, _, follower = after_a_failover(*names)
        raft = sim.raft(follower)
        epoch, cluster = raft.epoch, raft.cluster_id
        deliver_late(sim, follower, VoteRequest(cluster, epoch + 1, old, 0, 0))  # refused: its log is behind
        assert sim.raft(follower).epoch == epoch + 1 and sim.raft(follower).voted_id == NO_ID
        deliver_late(sim, follower, VoteRequest(cluster, epoch, old, epoch, 10**6))
        return sim

    assert run().violation is None
    violation = run("raft-vote-older-epoch-granted").violation
    assert violation is not None and "epoch went back" in violation.message, violation
