"""The cluster mode of the simulator itself: processes, contexts, exits, image agreement, the client."""

from __future__ import annotations

import pytest

from node.client.admin import Target
from node.client.errors import ClientTimeoutError, ConnectError, ConnectionLostError, NotControllerError
from node.controller import registration
from node.controller.controller import QuorumController
from node.metadata.image import MetadataImage
from node.metadata.records import ConfigRecord, encode_record
from node.process.events import InboundRequest
from node.protocol.admin import DescribeClusterRequest
from node.protocol.errors import ErrorCode
from node.protocol.messages import DescribeQuorumRequest
from node.raft.config import RaftConfig
from node.raft.quorum_state import Role
from node.raft.records import RecordBatch
from node.sim import world
from node.sim.admin_client import Endpoint, SimAdminClient, broker_endpoints, controller_endpoints
from node.sim.cluster import ClusterConfig
from node.sim.cluster_run import active_controller, settled, supervised
from node.sim.invariants import ImageAgreement, InvariantViolation
from node.sim.runner import converged
from node.sim.world import SimConfig, Simulation

from .helpers import call, call_to, cluster, set_config, wait


def test_bare_processes_replicate_and_every_image_agrees():
    sim = Simulation(SimConfig(seed=3, cluster=ClusterConfig(controllers=3, brokers=2, components=False)))
    sim.start()
    wait(sim, lambda: converged(sim), 20_000, "a leader")
    leader = sim.leader()
    for i in range(10):
        sim.submit_append(leader, (encode_record(ConfigRecord(4, "", "log.retention.ms", str(i))),))
    wait(sim, lambda: all(h.process.image.config(4, "", "log.retention.ms") == "9" for h in sim.nodes.values()),
         10_000, "every image applying the writes")  # fmt: skip
    assert sim.images.checks >= 5 and len(sim.images.fingerprints) >= 2
    assert {h.process.image.digest() for h in sim.nodes.values()} == {sim.process(1).image.digest()}
    assert not sim.raft(4).config.is_voter and sim.nodes[4].roles.label == "broker"


def test_image_agreement_catches_two_images_at_one_offset_that_differ():
    def image(value: str) -> MetadataImage:
        img = MetadataImage()
        img.apply_batch(RecordBatch(0, 1, (encode_record(ConfigRecord(4, "", "log.retention.ms", value)),)))
        return img

    check = ImageAgreement()
    check.on_applied(1, 1)
    check.after_event(1, image("1"), committed_end=1)
    check.on_applied(2, 1)
    check.after_event(2, image("1"), committed_end=1)  # equal: fine
    check.on_applied(3, 1)
    with pytest.raises(InvariantViolation, match="image agreement"):
        check.after_event(3, image("2"), committed_end=1)
    check.on_applied(4, 1)
    with pytest.raises(InvariantViolation, match="past the committed log"):
        check.after_event(4, image("1"), committed_end=0)


def test_node_requests_carry_the_inter_node_principal_and_the_right_listener():
    sim = cluster(seed=11)
    seen: dict[tuple[int, str], set[str]] = {}

    def hook(node_id, event):
        if isinstance(event, InboundRequest):
            seen.setdefault((node_id, type(event.message).__name__), set()).add(
                f"{event.context.principal}@{event.context.listener_name}"
            )

    sim.event_hooks.append(hook)
    sim.run_for(3_000)
    controller = active_controller(sim)
    assert seen[(controller, "BrokerHeartbeatRequest")] == {f"User:node-{b}@CONTROLLER" for b in (4, 5, 6)}
    fetches = seen[(controller, "FetchRequest")]
    assert {f"User:node-{n}@CONTROLLER" for n in (4, 5, 6)} <= fetches


def test_client_failures_say_whether_the_request_may_have_happened():
    sim = cluster(seed=12)
    client = SimAdminClient(sim, broker_endpoints((4,)), request_timeout_ms=2_000)
    # Down before sending: refused, definite.
    sim.kill(4)
    refused = call(sim, client, set_config("t", "retention.ms", "1"))
    assert isinstance(refused.error, ConnectError) and refused.error.definite and refused.status == "fail"
    sim.restart(4)
    wait(sim, lambda: supervised(sim) and settled(sim), 20_000, "broker 4 back")
    # Killed after the request went out: connection lost, indefinite (and a write is not retried).
    killer = lambda node_id, event: node_id == 4 and isinstance(event, InboundRequest) and sim.kill(4)  # noqa: E731
    sim.event_hooks.append(killer)
    lost = call(sim, client, set_config("t", "retention.ms", "2"))
    sim.event_hooks.remove(killer)
    assert isinstance(lost.error, ConnectionLostError) and not lost.error.definite and lost.status == "info"
    assert lost.attempts == 1
    sim.restart(4)
    wait(sim, lambda: supervised(sim) and settled(sim), 20_000, "broker 4 back")
    # Cut off from the client: no answer before the deadline, indefinite.
    sim.network.add_grudge({4: [client.address]})
    timed_out = call(sim, client, DescribeClusterRequest())
    assert isinstance(timed_out.error, ClientTimeoutError) and not timed_out.error.definite
    sim.heal()
    ok = call(sim, client, DescribeClusterRequest())
    assert ok.ok and ok.response.error_code == 0 and ok.server == Endpoint(4)
    assert sim.violation is None


def test_the_client_finds_the_active_controller_among_the_controller_endpoints():
    sim = cluster(seed=13)
    active = active_controller(sim)
    others = [n for n in (1, 2, 3) if n != active]
    client = SimAdminClient(sim, controller_endpoints([*others, active]))
    result = call(sim, client, set_config("nope", "retention.ms", "1"), target=Target.CONTROLLER)
    assert result.ok and result.server == Endpoint(active, "CONTROLLER") and result.attempts == 3
    # Only non-active controllers: every one says NOT_CONTROLLER until the deadline, definitely.
    stuck = SimAdminClient(sim, controller_endpoints(others), request_timeout_ms=1_500)
    refused = call(sim, stuck, set_config("nope", "retention.ms", "1"), target=Target.CONTROLLER)
    assert isinstance(refused.error, NotControllerError) and refused.error.definite


def test_a_graceful_stop_of_a_controller_resigns_and_exits_and_it_can_start_again():
    sim = cluster(seed=14)
    leader = sim.leader()
    incarnation = sim.nodes[leader].incarnation_id
    sim.shutdown(leader)
    wait(sim, lambda: not sim.nodes[leader].up, 5_000, "the controller exiting")
    assert sim.nodes[leader].exit_reason == "resigned" and sim.stats.shutdowns == 1
    wait(sim, lambda: active_controller(sim) not in (None, leader), 10_000, "a new active controller")
    sim.restart(leader)
    wait(sim, lambda: settled(sim), 20_000, "the cluster settled again")
    assert sim.nodes[leader].incarnation_id != incarnation


def test_combined_nodes_serve_brokers_and_controllers_in_one_process():
    sim = cluster(seed=15, controllers=0, combined=3, brokers=1)
    assert [sim.nodes[n].roles.label for n in (1, 2, 3, 4)] == ["combined"] * 3 + ["broker"]
    client = SimAdminClient(sim, broker_endpoints((1, 2, 3, 4)))
    result = call_to(sim, client, 2, set_config("nope", "retention.ms", "1"))
    assert result.ok and result.response.responses[0].error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION, forwarded
    assert sim.violation is None


def test_raft_only_mode_has_no_processes():
    sim = Simulation(SimConfig(seed=1, voters=3))
    sim.start()
    wait(sim, lambda: converged(sim), 20_000, "a leader")
    assert all(h.process is None and h.roles is None for h in sim.nodes.values())
    assert sim.images.checks == 0


def test_a_node_that_keeps_time_from_moving_on_ends_the_run_with_a_livelock_violation(monkeypatch):
    """A run must never hang: a controller whose session timer fires again and again at one virtual
    millisecond (re-armed for a time already past, here with fencing switched off so the lapsed broker
    stays lapsed) is a violation naming the node, not a simulation that never ends."""

    def rearm_in_the_past(self, now_ms):
        deadline = self.sessions.next_deadline(self.working)
        if deadline is not None:
            self.arm_session_timer(deadline)

    monkeypatch.setattr(world, "LIVELOCK_EVENTS", 2_000)
    monkeypatch.setattr(QuorumController, "_arm_session_timer", rearm_in_the_past)
    monkeypatch.setattr(registration, "fence_expired", lambda ctl, now_ms: None)
    sim = cluster(seed=2)
    sim.pause(5)
    assert not sim.run_for(60_000)
    assert sim.violation is not None and "livelock" in sim.violation.message, sim.violation
    assert sim.violation.node == active_controller(sim)


def test_a_timeout_blames_the_server_that_kept_the_request_longest():
    """A leader that held a request and resigned, then quick refusals, then the deadline while the last
    attempt is on its way: the silence belongs to the first server, not to the last one tried."""
    from node.sim.admin_client import CallResult, _Call

    call = _Call(CallResult(1, None, 0), Target.CONTROLLER, True, 2_000, None, ())
    a, b = Endpoint(1, "CONTROLLER"), Endpoint(2, "CONTROLLER")
    call.sent_to, call.sent_ms = a, 0
    call.attempt_ended(1_650)  # held 1.65 s, then NOT_CONTROLLER
    call.sent_to, call.sent_ms = b, 1_652
    call.attempt_ended(1_654)  # refused at once
    call.sent_to, call.sent_ms = b, 1_995
    call.attempt_ended(2_000)  # the deadline, 5 ms after the last send
    assert call.kept == (1_650, a)


def _handover_ms(seed: int, bugs: tuple[str, ...] = ()) -> int:
    """Virtual time from a graceful stop of the active controller to the next one."""
    sim = cluster(seed=seed, bugs=bugs)
    leader = sim.leader()
    start = sim.now
    sim.shutdown(leader)
    wait(sim, lambda: active_controller(sim) not in (None, leader), 20_000, "a new active controller")
    return sim.now - start


def test_a_graceful_stop_hands_over_before_any_fetch_timeout_and_the_planted_bug_does_not():
    """The stopping controller waits for its EndQuorumEpoch to be answered before it exits (the sim
    resets a dead process's connections, which used to drop the request): the first preferred
    successor stands at once. A voter that ignores EndQuorumEpoch waits for its fetch timeout."""
    fetch_timeout = RaftConfig.__dataclass_fields__["fetch_timeout_ms"].default
    for seed in (1, 2, 3):
        assert _handover_ms(seed) < fetch_timeout
        assert _handover_ms(seed, ("raft-end-quorum-epoch-ignored",)) >= fetch_timeout


def _epochs_after_leader_kill(seed: int, bugs: tuple[str, ...] = ()) -> int:
    """Epochs the two surviving controllers go through in 5 s (virtual) after the leader's kill -9."""
    sim = cluster(seed=seed, bugs=bugs)
    leader = sim.leader()
    before = sim.raft(leader).epoch
    sim.kill(leader)
    sim.run_until(sim.now + 5_000)
    return max(sim.raft(n).epoch for n in (1, 2, 3) if n != leader) - before


def test_two_survivors_elect_one_leader_and_a_candidate_that_outbids_live_locks():
    """After the leader's kill the survivors elect within an epoch or two; with the planted bug the two
    candidates outbid each other's epochs forever (a live-lock the elections measure gates on)."""
    for seed in (1, 2):
        assert _epochs_after_leader_kill(seed) <= 2
        assert _epochs_after_leader_kill(seed, ("raft-candidate-outbids-higher-epoch",)) > 100


def test_a_voter_that_lost_its_leader_refuses_describe_quorum_at_once():
    """Issue 24: a voter whose fetch timed out (prospective, still naming the old leader) used to
    forward DescribeQuorum to that leader and hold the client's request until the forward timed out;
    cut off from the quorum it must refuse at once, as KIP-595 has a non-leader do. A follower that
    hears its leader still forwards."""

    sim = cluster(seed=15, brokers=0)
    leader = active_controller(sim)
    follower = next(n for n in (1, 2, 3) if n != leader)
    healthy = SimAdminClient(sim, controller_endpoints([follower]), request_timeout_ms=1_000)
    forwarded = call(sim, healthy, DescribeQuorumRequest())
    assert forwarded.ok and forwarded.response.leader_id == leader  # forwarded to the leader, answered
    sim.isolate([[n for n in (1, 2, 3) if n != follower]])
    wait(sim, lambda: sim.raft(follower).role is Role.PROSPECTIVE, 10_000, f"node {follower} prospective")
    assert sim.raft(follower).leader_id == leader  # it still names the leader it can no longer reach
    cut_off = SimAdminClient(sim, controller_endpoints([follower]), request_timeout_ms=1_000)  # < R (2 s)
    refused = call(sim, cut_off, DescribeQuorumRequest())
    assert not isinstance(refused.error, ClientTimeoutError), refused.error
    assert refused.ok and refused.response.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
