"""The whole KRaft cluster for real: 3 controllers + 3 brokers as OS processes on 127.0.0.x.

Clients talk to the brokers' own listeners; the brokers forward admin writes to the active controller
in Envelopes (KIP-590). The chaos test kills the active controller with SIGKILL while forwarded
writes are in flight, restarts it, and then checks every node's image (over HTTP while they run, and
the dumps a clean stop leaves) and committed log. The security test turns SASL/PLAIN and the
authorizer on and shows that bad credentials and forged inter-node requests change nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from checkers.log_agreement import check_log_agreement
from node.client import AdminClient, AlterConfigOp, ConfigResource, SyncAdminClient
from node.client import errors as E
from node.client.results import PartitionChange
from node.controller.config_catalog import split_list
from node.protocol.admin import (
    AlterableConfig,
    ConfigOperation,
    ConfigResourceType,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResource,
)
from node.protocol.broker_api import EnvelopeRequest
from node.protocol.codec import BinaryCodec
from node.protocol.errors import ErrorCode
from node.runtime.local_cluster import (
    LocalCluster,
    NodeProcess,
    NodeSpec,
    fetch_committed_log,
    fetch_image,
    find_leader,
    kill_all,
    plan_cluster,
    read_dumps,
    sasl_settings,
    wait_for,
)
from tests.runtime.test_real_cluster import garbage_is_refused

REPO = Path(__file__).resolve().parents[2]
SETTINGS = {
    "quorum.fetch.timeout.ms": "1500",
    "quorum.election.timeout.ms": "1000",
    "quorum.election.backoff.max.ms": "500",
    "quorum.request.timeout.ms": "1000",
    "broker.heartbeat.interval.ms": "250",
    "broker.session.timeout.ms": "6000",
    "request.timeout.ms": "8000",  # how long a broker keeps a forwarded write looking for a controller
    "kchaos.test.append.enable": "false",  # raw appends would put non-metadata records in the log
}
TOPIC = "chaos"
KEY = "leader.replication.throttled.replicas"  # a list config: each write APPENDs one unique item
IN_FLIGHT_PER_BROKER = 4
ACKS_PER_PHASE = 60


# --- the cluster ---------------------------------------------------------------------------------


@contextlib.contextmanager
def running_cluster(base: Path, settings: dict[str, str]) -> Iterator[tuple[LocalCluster, dict[int, NodeProcess]]]:
    """3 controllers + 3 brokers; every process is SIGKILLed by PID and the directory removed at the end."""
    plan = plan_cluster(base / "cluster", voters=3, observers=3, settings={**SETTINGS, **settings})
    procs = {spec.node_id: NodeProcess(spec).start() for spec in plan.nodes}
    passed = False
    try:
        yield plan, procs
        passed = True
    finally:
        kill_all(procs.values())
        if not passed:  # pytest shows this with the failure
            for proc in procs.values():
                print(f"----- node {proc.spec.node_id} -----\n{proc.log_text()[-4000:]}")
        shutil.rmtree(plan.base_dir, ignore_errors=True)


def wait_online(admin: SyncAdminClient, count: int) -> dict[int, int]:
    """Wait for `count` unfenced brokers; their epochs by id."""

    def online() -> dict[int, int] | None:
        with contextlib.suppress(E.KafkaError):
            brokers = {b.broker_id: b.epoch for b in admin.list_brokers() if not b.fenced}
            return brokers if len(brokers) == count else None
        return None

    return wait_for(online, 30, interval=0.1, what=f"{count} brokers online")


def kchaos_admin(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness", "admin", *args], capture_output=True, text=True, cwd=REPO, timeout=60
    )


def stop_cleanly(plan: LocalCluster, procs: dict[int, NodeProcess]) -> None:
    """Brokers first (each does its controlled shutdown with a live controller), then controllers."""
    for spec in plan.brokers + plan.voters:
        assert procs[spec.node_id].stop(timeout=20) == 0, procs[spec.node_id].log_text()[-3000:]


def topic_config(image_doc: dict[str, Any], topic: str, key: str) -> str | None:
    for entry in image_doc["image"]["configs"]:
        if entry["resource_name"] == topic and int(entry["resource_type"]) == ConfigResourceType.TOPIC:
            return entry["configs"].get(key)
    return None


def items_of(image_doc: dict[str, Any]) -> set[str]:
    return set(split_list(topic_config(image_doc, TOPIC, KEY) or ""))


# --- the write stream ----------------------------------------------------------------------------


@dataclass
class Ledger:
    """What the writers learned about each item: acknowledged, certainly not applied, or unknown."""

    ok: set[str] = field(default_factory=set)
    failed: set[str] = field(default_factory=set)
    info: set[str] = field(default_factory=set)
    in_flight: int = 0
    errors: dict[str, int] = field(default_factory=dict)


async def write_stream(client: AdminClient, broker_id: int, seq: Iterator[int], ledger: Ledger, stop: asyncio.Event):
    while not stop.is_set():
        item = f"{next(seq)}:{broker_id}"
        ledger.in_flight += 1
        try:
            await client.incremental_alter_config(ConfigResource.topic(TOPIC), [AlterConfigOp.append(KEY, item)])
        except E.KafkaError as exc:
            (ledger.failed if exc.definite else ledger.info).add(item)
            ledger.errors[exc.name] = ledger.errors.get(exc.name, 0) + 1
            await asyncio.sleep(0.05)
        else:
            ledger.ok.add(item)
        finally:
            ledger.in_flight -= 1


async def until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.05)


async def chaos_stream(plan: LocalCluster, procs: dict[int, NodeProcess], ledger: Ledger) -> dict[str, Any]:
    """Forwarded writes through every broker; SIGKILL of the active controller mid-stream; restart."""
    seq = itertools.count()
    stop = asyncio.Event()
    clients = [AdminClient(b.address, request_timeout_ms=15_000) for b in plan.brokers]
    tasks = [
        asyncio.create_task(write_stream(client, broker.node_id, seq, ledger, stop))
        for client, broker in zip(clients, plan.brokers, strict=True)
        for _ in range(IN_FLIGHT_PER_BROKER)
    ]
    seen: dict[str, Any] = {}
    try:
        await until(lambda: len(ledger.ok) >= ACKS_PER_PHASE, 30, "acknowledged writes")
        leader = find_leader(plan.voters)
        assert leader is not None
        victim = procs[leader["node_id"]]
        seen["in_flight_at_kill"] = ledger.in_flight
        victim.signal(signal.SIGKILL)
        await asyncio.to_thread(victim.wait, 10)
        seen["killed"] = leader["node_id"]
        acked = len(ledger.ok)

        # A malformed frame to a broker listener: that connection closes, the broker keeps serving.
        broker = plan.brokers[0]
        assert await asyncio.to_thread(garbage_is_refused, broker, b"\x00\x00\x00\x05hello")
        assert await asyncio.to_thread(garbage_is_refused, broker, b"\x7f\xff\xff\xff" + os.urandom(64))

        await until(lambda: len(ledger.ok) >= acked + ACKS_PER_PHASE, 45, "writes acknowledged after the kill")
        survivors = [v for v in plan.voters if v.node_id != seen["killed"]]
        new_leader = find_leader(survivors)
        assert new_leader is not None and new_leader["epoch"] > leader["epoch"]
        seen["new_leader"] = new_leader["node_id"]
        victim.start()
        acked = len(ledger.ok)
        await until(lambda: len(ledger.ok) >= acked + ACKS_PER_PHASE, 30, "writes acknowledged after the restart")
    finally:
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        for client in clients:
            await client.close()
    return seen


def converged_images(specs: list[NodeSpec]) -> list[dict[str, Any]] | None:
    """Every node's image, once all are at the same position with the same state."""
    try:
        images = [fetch_image(spec) for spec in specs]
    except OSError:
        return None
    same = {(doc["last_offset"], doc["state_digest"]) for doc in images}
    return images if len(same) == 1 else None


def check_items(images: list[dict[str, Any]], ledger: Ledger, where: str) -> None:
    """Every acknowledged item is everywhere, no definitely failed one anywhere, each unknown one on
    every node or on none, and nothing that was never written."""
    for doc in images:
        items = items_of(doc)
        assert ledger.ok <= items, f"{where}: acknowledged items missing: {sorted(ledger.ok - items)[:10]}"
        assert not (ledger.failed & items), f"{where}: failed items applied: {sorted(ledger.failed & items)[:10]}"
        assert items <= ledger.ok | ledger.info, f"{where}: items never written: {sorted(items - ledger.ok)[:10]}"
    for item in ledger.info:
        holders = [item in items_of(doc) for doc in images]
        assert all(holders) or not any(holders), f"{where}: unknown write {item} is on some nodes only"


def test_forwarded_writes_survive_a_sigkilled_controller(tmp_path):
    with running_cluster(tmp_path, {}) as (plan, procs):
        wait_for(lambda: find_leader(plan.voters), 30, what="a leader")
        with SyncAdminClient(plan.brokers_bootstrap, request_timeout_ms=10_000) as admin:
            epochs = wait_online(admin, 3)
            assert set(epochs) == {b.node_id for b in plan.brokers}

            listed = kchaos_admin("--bootstrap-server", plan.brokers_bootstrap, "brokers", "list")
            assert listed.returncode == 0, listed.stderr
            header, *rows = listed.stdout.splitlines()
            assert header.split() == ["ID", "HOST", "PORT", "RACK", "STATE", "EPOCH"]
            assert {int(r.split()[0]): (r.split()[-2], int(r.split()[-1])) for r in rows} == {
                broker_id: ("ONLINE", epoch) for broker_id, epoch in epochs.items()
            }

            topic_id = admin.create_topic(TOPIC, 3, 3)  # through a broker, forwarded
            for broker in plan.brokers:  # a broker answers from its image, which follows the log
                with SyncAdminClient(broker.address, request_timeout_ms=10_000) as one:
                    wait_for(lambda c=one: c.describe_topics([TOPIC])[TOPIC].topic_id == topic_id, 10, what="topic")

        ledger = Ledger()
        seen = asyncio.run(chaos_stream(plan, procs, ledger))
        assert seen["in_flight_at_kill"] > 0  # the kill really hit writes in flight
        assert len(ledger.ok) >= 3 * ACKS_PER_PHASE

        images = wait_for(lambda: converged_images(plan.nodes), 30, interval=0.2, what="all images to agree")
        check_items(images, ledger, "running images")
        applied = len(ledger.info & items_of(images[0]))
        print(f"acknowledged {len(ledger.ok)}, failed {len(ledger.failed)}, unknown {len(ledger.info)} "
              f"({applied} of them applied); {seen}; errors {ledger.errors}")  # fmt: skip
        killed_spec = plan.node(seen["killed"])
        assert fetch_image(killed_spec)["last_offset"] == images[0]["last_offset"]  # the restarted one caught up

        running_logs = {str(spec.node_id): fetch_committed_log(spec) for spec in plan.nodes}
        assert check_log_agreement(running_logs).valid is True

        stop_cleanly(plan, procs)
        dumps = {spec.node_id: read_dumps(spec) for spec in plan.nodes}
        check_items([image for image, _ in dumps.values()], ledger, "dumped images")
        logs = {str(node_id): log for node_id, (_, log) in dumps.items()}
        verdict = check_log_agreement(logs)
        assert verdict.valid is True, verdict.details
        by_offset = [{e["offset"]: (e["epoch"], e["digest"]) for e in log} for log in logs.values()]
        common = set.intersection(*(set(entries) for entries in by_offset))
        assert len(common) > len(ledger.ok)  # every acknowledged write is a record in every log
        for offset in common:
            assert len({entries[offset] for entries in by_offset}) == 1, f"logs differ at offset {offset}"


# --- security --------------------------------------------------------------------------------------

USERS = {"admin": "admin-secret", "mallory": "mallory-secret"}


def forged_envelope(correlation_id: int, principal: str, value: str) -> EnvelopeRequest:
    """An Envelope claiming a broker forwards `principal`'s config write: what only brokers may send."""
    inner = IncrementalAlterConfigsRequest(
        (
            IncrementalAlterConfigsResource(
                ConfigResourceType.TOPIC, TOPIC, (AlterableConfig("retention.ms", ConfigOperation.SET, value),)
            ),
        )
    )
    frame = BinaryCodec().encode_request(correlation_id, inner)
    return EnvelopeRequest(frame, principal, "127.0.0.1", "BROKER", "SASL_PLAINTEXT")


def test_sasl_refuses_bad_logins_and_forged_inter_node_requests(tmp_path):
    with running_cluster(tmp_path, sasl_settings(USERS, login="admin")) as (plan, procs):
        wait_for(lambda: find_leader(plan.voters), 30, what="a leader")
        controllers = plan.controllers_bootstrap
        with SyncAdminClient(plan.brokers_bootstrap, username="admin", password=USERS["admin"]) as admin:
            wait_online(admin, 3)
            topic_id = admin.create_topic(TOPIC, 1, 3)
            [partition] = wait_for(lambda: admin.describe_topics([TOPIC])[TOPIC].partitions, 10, what="the topic")
            broker_epoch = {b.broker_id: b.epoch for b in admin.list_brokers()}[partition.leader]

        # A wrong password is refused, at a broker and at a controller, definitely, before any request.
        for servers in (plan.brokers_bootstrap, controllers):
            with SyncAdminClient(servers, username="admin", password="wrong", request_timeout_ms=5_000) as bad:
                with pytest.raises(E.AuthenticationError) as caught:
                    bad.list_brokers()
                assert caught.value.definite
        refused = kchaos_admin("--bootstrap-server", plan.brokers_bootstrap, "--user", "admin", "--password", "x",
                               "brokers", "list")  # fmt: skip
        assert refused.returncode == 254 and "Traceback" not in refused.stderr

        with SyncAdminClient(controllers, username="mallory", password=USERS["mallory"], request_timeout_ms=5_000) as m:
            # mallory logs in fine but holds no ClusterAction: a forged Envelope (claiming to forward
            # the super user's write) and a forged AlterPartition from the partition's leader are refused.
            answer = m.send(forged_envelope(7, "User:admin", "4242"), idempotent=False)
            assert answer.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            shrink = PartitionChange(
                topic_id, 0, partition.leader_epoch, (partition.leader,), partition.partition_epoch
            )
            with pytest.raises(E.AuthorizationError) as caught:
                m.alter_partition(partition.leader, broker_epoch, [shrink])
            assert caught.value.code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED and caught.value.definite
            # Her own config write, forwarded by a broker, is refused by the authorizer as well.
        with (
            SyncAdminClient(plan.brokers_bootstrap, username="mallory", password=USERS["mallory"]) as m,
            pytest.raises(E.AuthorizationError),
        ):
            m.incremental_alter_config(ConfigResource.topic(TOPIC), [AlterConfigOp.set("retention.ms", "4343")])

        with SyncAdminClient(controllers, username="admin", password=USERS["admin"]) as admin:
            # Nothing of it was applied (a linearizable read at the active controller) ...
            values = admin.describe_config(ConfigResource.topic(TOPIC), linearizable=True)
            assert values["retention.ms"] not in ("4242", "4343")
            [after] = admin.describe_topics([TOPIC])[TOPIC].partitions
            assert (after.isr, after.partition_epoch) == (partition.isr, partition.partition_epoch)
            assert len(after.isr) == 3
            # ... while the same Envelope from a principal holding ClusterAction is applied: the refusal
            # was the authorizer's, not a malformed request's.
            answer = admin.send(forged_envelope(8, "User:admin", "4242"), idempotent=False)
            assert answer.error_code == ErrorCode.NONE
            assert admin.describe_config(ConfigResource.topic(TOPIC), linearizable=True)["retention.ms"] == "4242"
        for image in wait_for(lambda: converged_images(plan.nodes), 30, interval=0.2, what="all images to agree"):
            assert topic_config(image, TOPIC, "retention.ms") == "4242"
            assert [p["isr"] for t in image["image"]["topics"] for p in t["partitions"]] == [list(partition.isr)]
        stop_cleanly(plan, procs)
