"""The played-broker workloads' observations through confluent-kafka (workloads/kafka_observer.py):
librdkafka's Metadata and DescribeCluster results as the history records them, which reads go through
it, and how its errors end an op. Real confluent-kafka objects; the runs are in test_kafka_netns_runs.py."""

from __future__ import annotations

import confluent_kafka.admin as ck
from confluent_kafka import KafkaError, KafkaException, Node

from vocab.generators import Rng
from workloads.fleet_gen import FleetGen, Params
from workloads.kafka_client import from_librdkafka
from workloads.kafka_observer import cluster_value, metadata_value
from workloads.played_brokers import broke


def cluster_metadata() -> ck.ClusterMetadata:
    md = ck.ClusterMetadata()
    md.controller_id, md.orig_broker_id = 5, 4
    for b in (4, 5, 1000, 1001):
        md.brokers[b] = ck.BrokerMetadata()
    for name, leader, isr in (("played-0", 1000, [1000, 1001]), ("other", 4, [4])):
        t = ck.TopicMetadata()
        t.topic = name
        p = ck.PartitionMetadata()
        p.id, p.leader, p.replicas, p.isrs = 0, leader, [*isr, 1002], isr
        t.partitions[0] = p
        md.topics[name] = t
    return md


def test_a_metadata_answer_is_recorded_with_its_brokers_and_the_played_partitions():
    value = metadata_value(cluster_metadata(), ["played-0"])
    assert value == {
        "brokers": [4, 5, 1000, 1001],
        "controller": 5,
        "answered_by": 4,
        "partitions": {"played-0/0": {"leader": 1000, "isr": [1000, 1001], "replicas": [1000, 1001, 1002]}},
    }
    assert "offset" not in value  # Kafka's answer has none: the offset-based rules never see it


def test_a_topic_with_an_error_is_left_out():
    md = cluster_metadata()
    md.topics["played-0"].error = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)
    assert metadata_value(md, ["played-0"])["partitions"] == {}


def test_a_describe_cluster_answer():
    result = ck.DescribeClusterResult(Node(5, "10.0.0.5", 9092), [Node(4, "h", 1), Node(5, "h", 2)], "cid")
    assert cluster_value(result) == {"brokers": [4, 5], "controller": 5}
    assert cluster_value(ck.DescribeClusterResult(None, [], "cid")) == {"brokers": [], "controller": -1}


def test_librdkafka_errors_end_a_read_by_the_config_workloads_table():
    """A timeout after sending is `info`, an authorization refusal `fail`; the error keeps librdkafka's name."""
    timed_out = from_librdkafka(KafkaException(KafkaError(KafkaError._TIMED_OUT, "Failed to get metadata")))
    done = broke({"node": "b1"}, timed_out, "b1")
    assert (done.type, done.value["error"]) == ("info", "librdkafka:_TIMED_OUT")
    refused = from_librdkafka(KafkaException(KafkaError(KafkaError.CLUSTER_AUTHORIZATION_FAILED)))
    done = broke({"node": "b1"}, refused, "b1")
    assert (done.type, done.value["error"]) == ("fail", "librdkafka:CLUSTER_AUTHORIZATION_FAILED")


def test_only_the_brokers_images_are_read_through_it():
    """Reads of b1/b2 become `kafka-*` ops; a controller's image (Kafka's controllers serve no
    Metadata to clients), DescribeQuorum and the barrier stay on our client."""
    params = Params(
        seed=1,
        session_ms=9_000,
        heartbeat_ms=2_000,
        slack_ms=1_000,
        nodes=("c1", "c2", "c3", "b1", "b2"),
        controllers=("c1", "c2", "c3"),
        mix=(("metadata", 1.0), ("describe-cluster", 1.0), ("quorum", 1.0), ("barrier", 1.0)),
        kafka_nodes=frozenset({"b1", "b2"}),
    )
    gen = FleetGen(params, (), (), needs_setup=False)
    seen: set[tuple[str, str | None]] = set()
    rng = Rng(7)
    for _ in range(400):
        op, _ = gen._mixed(rng, 0)
        seen.add((op.f, (op.value or {}).get("node")))
    kafka = {(f, n) for f, n in seen if f.startswith("kafka-")}
    assert kafka == {(f, n) for f in ("kafka-metadata", "kafka-describe-cluster") for n in ("b1", "b2")}
    assert all(n in ("c1", "c2", "c3") for f, n in seen if f in ("metadata", "describe-cluster"))
    assert {f for f, _ in seen} >= {"quorum", "barrier"}
