"""The admin client against a real controller process (one voter on loopback): the client plays a broker
(registers, heartbeats until unfenced), then creates a topic, alters and reads its configs
linearizably, and the CLI lists the broker."""

from __future__ import annotations

import uuid

import pytest

from node.client import AlterConfigOp, ConfigResource, SyncAdminClient
from node.client import errors as E
from node.protocol.broker_api import BrokerRegistrationFeature, Listener
from node.runtime.local_cluster import NodeProcess, find_leader, plan_cluster, wait_for
from tests.client.test_cli import kchaos


@pytest.fixture
def controller(tmp_path):
    cluster = plan_cluster(tmp_path, voters=1)
    process = NodeProcess(cluster.nodes[0]).start()
    try:
        wait_for(lambda: find_leader(cluster.nodes), 30, what="a leader")
        yield cluster.nodes[0].address
    finally:
        process.stop()


def registered_broker(admin: SyncAdminClient, broker_id: int) -> int:
    cluster = wait_for(lambda: (c := admin.describe_cluster()).cluster_id and c, 10, what="a cluster id")
    features = [BrokerRegistrationFeature("metadata.version", 1, 1)]
    listener = Listener("BROKER", "127.0.0.20", 9092, 0)
    epoch = admin.register_broker(broker_id, cluster.cluster_id, uuid.uuid4(), [listener], features=features)
    wait_for(lambda: not admin.broker_heartbeat(broker_id, epoch, 1 << 40).is_fenced, 10, what="unfenced")
    return epoch


def test_client_drives_a_real_controller(controller, capsys):
    with SyncAdminClient(controller, request_timeout_ms=5_000) as admin:
        epoch = registered_broker(admin, 10)
        topic_id = admin.create_topic("t", 1, 1)
        with pytest.raises(E.TopicAlreadyExistsError) as caught:
            admin.create_topic("t", 1, 1)
        assert caught.value.definite
        resource = ConfigResource.topic("t")
        admin.incremental_alter_config(resource, [AlterConfigOp.set("cleanup.policy", "compact")])
        admin.incremental_alter_config(resource, [AlterConfigOp.append("cleanup.policy", "delete")])
        assert admin.describe_config(resource, linearizable=True)["cleanup.policy"] == "compact,delete"
        [partition] = admin.describe_topics(["t"])["t"].partitions
        assert admin.describe_topics(["t"])["t"].topic_id == topic_id
        assert (partition.leader, partition.isr) == (10, (10,))
        with pytest.raises(E.StaleBrokerEpochError):
            admin.broker_heartbeat(10, epoch - 1, 0)
    assert kchaos(["admin", "--bootstrap-server", controller, "brokers", "list"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[1].split()[0] == "10" and rows[1].split()[-1] == str(epoch)
