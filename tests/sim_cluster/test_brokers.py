"""Broker lifecycle scenarios of issue 4 in the simulator: fencing, duplicate ids, controlled shutdown."""

from __future__ import annotations

import pytest

from node.broker.lifecycle import BrokerState
from node.sim.admin_client import SimAdminClient, broker_endpoints
from node.sim.cluster_run import active_controller, broker_state, settled, supervised

from .helpers import cluster, create_topic, images, wait, wait_images_equal

BROKERS = (4, 5, 6)


def in_any_isr_or_leading(image, broker: int) -> list[str]:
    found = []
    for name, topic_id in image.topic_ids.items():
        for pid, p in image.partitions(topic_id).items():
            if broker in p.isr or p.leader == broker:
                found.append(f"{name}-{pid}")
    return found


@pytest.mark.parametrize("fault", ["pause", "partition"])
def test_a_silent_broker_is_fenced_after_its_session_and_leaves_every_isr(fault):
    sim = cluster(seed=2)
    client = SimAdminClient(sim, broker_endpoints(BROKERS))
    topic_id = create_topic(sim, client, partitions=6, rf=3)
    victim = 5
    assert in_any_isr_or_leading(images(sim)[1], victim)  # it had something to lose
    silent_from = sim.now
    if fault == "pause":
        sim.pause(victim)
    else:
        sim.isolate([[n for n in sim.nodes if n != victim]])
    wait(sim, lambda: sim.process(1).image.broker(victim).fenced, 20_000, "the broker fenced")
    session = sim.cluster.broker_session_timeout_ms
    assert sim.now - silent_from >= session  # not before its session lapsed
    wait(sim, lambda: not in_any_isr_or_leading(sim.process(1).image, victim), 10_000, "the broker out of every ISR")
    live = [n for n in sim.nodes if n != victim]
    for n in live:
        image = sim.process(n).image
        wait(sim, lambda image=image: image.broker(victim).fenced, 5_000, f"node {n} seeing the fence")
        assert not in_any_isr_or_leading(sim.process(n).image, victim)
    for pid, p in sim.process(1).image.partitions(topic_id).items():
        assert p.leader in p.isr and p.leader != victim, (pid, p)
    # Back: unfenced once caught up, and every image agrees again.
    sim.heal_all()
    wait(sim, lambda: settled(sim), 30_000, "the cluster settling after the fault")
    assert not sim.process(1).image.broker(victim).fenced
    assert broker_state(sim, victim) is BrokerState.ONLINE
    wait_images_equal(sim)
    assert sim.violation is None


def test_a_second_process_with_a_live_broker_id_is_refused_for_as_long_as_the_first_lives():
    sim = cluster(seed=3)
    original = sim.process(1).image.broker(5)
    assert original is not None and not original.fenced
    impostor = sim.add_host(100, node_id=5)
    sim.restart(100)
    broker = impostor.process.broker
    refused = lambda: broker.metrics()["broker.registration_failures_total"]  # noqa: E731
    wait(sim, lambda: refused() >= 3, 10_000, "the impostor refused, retrying")
    assert impostor.incarnation_id != sim.nodes[5].incarnation_id
    sim.run_for(sim.cluster.broker_session_timeout_ms * 3)
    assert impostor.up and broker.broker_epoch == -1 and refused() > 3  # it keeps asking, and is refused
    for n, image in images(sim).items():
        reg = image.broker(5)
        assert reg == original, n  # same incarnation, same epoch, still unfenced
        assert reg.incarnation_id == str(sim.nodes[5].incarnation_id)
    assert broker_state(sim, 5) is BrokerState.ONLINE
    assert sim.stats.shutdowns == 0 and sim.violation is None


def test_combined_nodes_all_killed_and_restarted_at_once_settle_again():
    """Regression (found by `kchaos run --nemesis kill` mode `all` on 3 combined nodes): every new
    incarnation is refused as a duplicate of its previous one until those sessions lapse. A broker
    that exited on that refusal took its controller along, the next active controller granted the
    old registrations fresh sessions, and the cluster never settled."""
    for seed in (1, 2):
        sim = cluster(seed=seed, controllers=0, brokers=0, combined=3)
        for n in list(sim.nodes):
            sim.kill(n)
        for n in list(sim.nodes):
            sim.restart(n)
        wait(sim, lambda s=sim: supervised(s) and settled(s), 30_000, f"seed {seed}: the cluster settling again")
        assert all(h.exit_reason is None for h in sim.nodes.values())


def test_a_restarted_broker_registers_again_once_its_old_session_lapsed():
    """A kill -9 and restart: the new incarnation is refused while the old session is alive (and
    retries), and accepted with a new broker epoch once it has lapsed."""
    sim = cluster(seed=4)
    old = sim.process(1).image.broker(6)
    sim.kill(6)
    sim.run_for(sim.cluster.broker_session_timeout_ms + 1_000)
    sim.restart(6)
    wait(sim, lambda: settled(sim), 20_000, "the broker back")
    new = sim.process(1).image.broker(6)
    assert new.incarnation_id != old.incarnation_id and new.broker_epoch > old.broker_epoch
    assert new.incarnation_id == str(sim.nodes[6].incarnation_id)


def test_controlled_shutdown_moves_every_leadership_away_before_the_broker_stops():
    sim = cluster(seed=5)
    client = SimAdminClient(sim, broker_endpoints(BROKERS))
    create_topic(sim, client, partitions=6, rf=3)
    controller = active_controller(sim)
    assert controller is not None
    victim = next(b for b in BROKERS if any(in_any_isr_or_leading(sim.process(1).image, b)))
    led = [
        (tid, pid)
        for tid in sim.process(1).image.topic_ids.values()
        for pid, p in sim.process(1).image.partitions(tid).items()
        if p.leader == victim
    ]
    assert led  # leaderships to move
    at_exit: dict[str, object] = {}

    def watch(node_id, event):
        host = sim.nodes[victim]
        if node_id == victim and host.exiting is not None and "image" not in at_exit:
            at_exit["image"] = sim.process(controller).image.copy()
            at_exit["state"] = host.process.broker.state

    sim.event_hooks.append(watch)
    sim.shutdown(victim)
    wait(sim, lambda: not sim.nodes[victim].up, 20_000, "the broker stopping")
    assert sim.nodes[victim].exit_reason == "controlled shutdown complete"
    image = at_exit["image"]
    for tid, pid in led:
        partition = image.partition(tid, pid)
        assert partition.leader != victim, (tid, pid, partition)
    assert not any(p.leader == victim for tid in image.topic_ids.values() for p in image.partitions(tid).values())
    assert at_exit["state"] is BrokerState.STOPPING
    assert sim.violation is None
