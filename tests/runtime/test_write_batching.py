"""The batched write path for real: 3 controllers and 1 broker as OS processes on loopback.

A client writes a burst of config changes on one connection in one send. The broker hands the burst
to its process as one event and forwards it in order; the active controller gets the Envelopes in
bursts and joins their appends into Raft batches. The order of the burst must be the order in the
log, and every acknowledged change must survive a SIGKILL of every node at once (an acknowledgement
means fsync on a majority): after the restart, the image each node rebuilds from its own disk holds
every acknowledged item, in order.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
from pathlib import Path

from node.client import SyncAdminClient
from node.client import errors as E
from node.controller.config_catalog import split_list
from node.protocol.admin import IncrementalAlterConfigsResponse
from node.protocol.codec import BinaryCodec, FrameReader
from node.protocol.errors import ErrorCode
from node.runtime.local_cluster import (
    NodeProcess,
    NodeSpec,
    fetch_image,
    find_leader,
    kill_all,
    plan_cluster,
    wait_for,
)
from tests.controller.test_request_batches import KEY, TOPIC, append_item

CODEC = BinaryCodec()


def send_burst(broker: NodeSpec, items: list[str], first_cid: int) -> dict[int, int]:
    """All of `items` as APPENDs written in one send on one connection; the error code of each answer
    by correlation id."""
    frames = b"".join(CODEC.encode_request(first_cid + i, append_item(item)) for i, item in enumerate(items))
    answers: dict[int, int] = {}
    with socket.create_connection((broker.host, broker.port), timeout=30) as sock:
        sock.sendall(frames)
        reader = FrameReader()
        while len(answers) < len(items):
            data = sock.recv(1 << 16)
            assert data, f"the broker closed the connection after {len(answers)} answers"
            for raw in reader.feed(data):
                frame = CODEC.decode(raw)
                assert isinstance(frame.message, IncrementalAlterConfigsResponse)
                answers[frame.correlation_id] = frame.message.responses[0].error_code
    return answers


def items_at(spec: NodeSpec) -> list[str] | None:
    with contextlib.suppress(OSError, ValueError):
        for resource in fetch_image(spec)["image"]["configs"]:
            if resource.get("resource_name") == TOPIC:
                return split_list(resource.get("configs", {}).get(KEY, ""))
    return None


def test_a_burst_on_one_connection_keeps_its_order_and_survives_sigkill_of_every_node(tmp_path: Path) -> None:
    plan = plan_cluster(tmp_path / "cluster", voters=3, observers=1, settings={"kchaos.test.append.enable": "false"})
    procs = {spec.node_id: NodeProcess(spec).start() for spec in plan.nodes}
    broker = plan.brokers[0]
    try:
        wait_for(lambda: find_leader(plan.voters), 30, what="a leader")
        with SyncAdminClient(broker.address, request_timeout_ms=10_000) as admin:

            def created() -> bool:
                with contextlib.suppress(E.KafkaError):
                    admin.create_topic(TOPIC, 1, 1)  # through the broker, once it is online
                    return True
                return False

            wait_for(created, 30, interval=0.2, what="the topic")

        first = [f"{n}:1" for n in range(150)]
        answers = send_burst(broker, first, 1)
        assert answers == {cid: ErrorCode.NONE for cid in range(1, 151)}  # every one acknowledged

        for proc in procs.values():  # a power cut: everything at once, no clean shutdown
            proc.signal(signal.SIGKILL)
        for proc in procs.values():
            proc.wait(10)
        for proc in procs.values():
            proc.start()
        wait_for(lambda: find_leader(plan.voters), 30, what="a leader after the restart")
        for spec in plan.voters:  # each rebuilt its image from its own log on disk
            wait_for(lambda s=spec: items_at(s) == first, 30, interval=0.2, what=f"node {spec.node_id}'s items")

        with SyncAdminClient(broker.address, request_timeout_ms=10_000) as admin:

            def online() -> bool:
                with contextlib.suppress(E.KafkaError):
                    return any(b.broker_id == broker.node_id and not b.fenced for b in admin.list_brokers())
                return False

            wait_for(online, 30, interval=0.2, what="the broker online again")
        second = [f"{n}:2" for n in range(150)]
        assert send_burst(broker, second, 1000) == {cid: ErrorCode.NONE for cid in range(1000, 1150)}
        for spec in plan.nodes:
            wait_for(lambda s=spec: items_at(s) == first + second, 30, interval=0.2, what=f"node {spec.node_id}")
    finally:
        kill_all(procs.values())
        shutil.rmtree(plan.base_dir, ignore_errors=True)
