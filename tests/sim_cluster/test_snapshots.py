"""KIP-630 in a whole cluster: a broker that joins late catches up from a snapshot, not the whole log."""

from __future__ import annotations

from node.broker.lifecycle import BrokerState
from node.protocol.admin import ConfigResourceType
from node.sim.admin_client import SimAdminClient, broker_endpoints
from node.sim.cluster_run import broker_state, settled

from .helpers import call, cluster, create_topic, set_config, wait, wait_images_equal


def test_a_new_broker_catches_up_from_a_snapshot():
    sim = cluster(seed=9, start=(1, 2, 3, 4, 5), snapshot_every_records=20)
    wait(sim, lambda: all(broker_state(sim, n) is BrokerState.ONLINE for n in (4, 5)), 30_000, "brokers 4, 5 up")
    client = SimAdminClient(sim, broker_endpoints((4, 5)))
    create_topic(sim, client, partitions=1, rf=2)
    for i in range(40):
        result = call(sim, client, set_config("t", "retention.ms", str(1000 + i)))
        assert result.ok and result.response.responses[0].error_code == 0
    leader = sim.leader()
    log_start = sim.raft(leader).log_start_offset
    assert log_start > 0 and sim.nodes[leader].disk.snapshot is not None  # the log before it is gone
    first_image: list[int] = []

    def watch(node_id, event):
        process = sim.nodes[6].process
        if node_id == 6 and process is not None and process.image.last_offset >= 0 and not first_image:
            first_image.append(process.image.last_offset + 1)

    sim.event_hooks.append(watch)
    sim.restart(6)
    wait(sim, lambda: settled(sim), 30_000, "the new broker online")
    assert first_image and first_image[0] >= log_start  # its first image came whole from a snapshot
    assert sim.nodes[6].disk.snapshot is not None and sim.raft(6).log_start_offset >= log_start
    wait_images_equal(sim)
    assert sim.process(6).image.config(ConfigResourceType.TOPIC, "t", "retention.ms") == "1039"
    assert sim.images.checks > 0 and sim.violation is None
