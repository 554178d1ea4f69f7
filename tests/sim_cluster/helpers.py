"""Shared steps of the cluster scenarios: build a settled cluster, wait, call, look at the images."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from node.metadata.records import PartitionChangeRecord
from node.protocol.admin import (
    AlterableConfig,
    ConfigOperation,
    ConfigResourceType,
    CreatableTopic,
    CreateTopicsRequest,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResource,
)
from node.protocol.errors import ErrorCode
from node.sim.admin_client import CallResult, SimAdminClient
from node.sim.cluster import ClusterConfig
from node.sim.cluster_run import committed_records, settled
from node.sim.world import SimConfig, Simulation


def wait(sim: Simulation, predicate: Callable[[], bool], timeout_ms: int, what: str) -> None:
    if not sim.run_until_true(predicate, timeout_ms):
        raise AssertionError(f"{what}: not reached within {timeout_ms} ms (violation: {sim.violation})")


def cluster(seed: int = 1, start: tuple[int, ...] | None = None, **options: Any) -> Simulation:
    """A started cluster (3 controllers + 3 brokers unless told otherwise), settled when all started."""
    shape = {"controllers": 3, "brokers": 3, **options}
    sim = Simulation(SimConfig(seed=seed, cluster=ClusterConfig(**shape)))
    sim.start(start)
    if start is None:
        wait(sim, lambda: settled(sim), 30_000, "the cluster settling")
    return sim


def call(sim: Simulation, client: SimAdminClient, request: Any, timeout_ms: int = 30_000, **kw: Any) -> CallResult:
    result = client.send(request, **kw)
    wait(sim, lambda: result.done, timeout_ms + 1_000, f"{type(request).__name__} completing")
    return result


def call_to(sim: Simulation, client: SimAdminClient, node: int, request: Any, **kw: Any) -> CallResult:
    result = client.send_to(node, request, **kw)
    wait(sim, lambda: result.done, 60_000, f"{type(request).__name__} completing")
    return result


def create_topic(sim: Simulation, client: SimAdminClient, name: str = "t", partitions: int = 3, rf: int = 3) -> str:
    result = call(sim, client, CreateTopicsRequest((CreatableTopic(name, partitions, rf),)))
    assert result.ok and result.response.topics[0].error_code == ErrorCode.NONE, result.error or result.response
    wait_images_equal(sim)
    return str(result.response.topics[0].topic_id)


def set_config(topic: str, name: str, value: str) -> IncrementalAlterConfigsRequest:
    change = AlterableConfig(name, ConfigOperation.SET, value)
    resource = IncrementalAlterConfigsResource(ConfigResourceType.TOPIC, topic, (change,))
    return IncrementalAlterConfigsRequest((resource,))


def images(sim: Simulation) -> dict[int, Any]:
    return {n: h.process.image for n, h in sim.nodes.items() if h.process is not None}


def wait_images_equal(sim: Simulation, timeout_ms: int = 10_000) -> None:
    def equal() -> bool:
        digests = {image.digest() for image in images(sim).values()}
        return len(digests) == 1

    wait(sim, equal, timeout_ms, "every image at the same state")


def partition_changes(sim: Simulation, topic_id: str, partition: int) -> list[PartitionChangeRecord]:
    return [
        r
        for _, r in committed_records(sim)
        if isinstance(r, PartitionChangeRecord) and (r.topic_id, r.partition_id) == (topic_id, partition)
    ]
