"""The event loop a node runs on: uvloop when installed, asyncio's own with KCHAOS_EVENT_LOOP=asyncio or
without uvloop, and a one-line error for any other value. Real processes: a quorum with a broker
commits a forwarded write on either loop, and the loop it runs on is the one asked for (uvloop's
library is mapped into the node's memory, or it is not)."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
from pathlib import Path

import pytest
import uvloop

from node.client import AlterConfigOp, ConfigResource, SyncAdminClient
from node.client import errors as E
from node.runtime import event_loop
from node.runtime.local_cluster import NodeProcess, fetch_image, find_leader, kill_all, plan_cluster, wait_for


def test_uvloop_when_installed_and_not_turned_off(monkeypatch):
    monkeypatch.delenv(event_loop.ENV, raising=False)
    assert event_loop.loop_factory() is uvloop.new_event_loop
    monkeypatch.setenv(event_loop.ENV, "uvloop")
    assert event_loop.loop_factory() is uvloop.new_event_loop
    monkeypatch.setenv(event_loop.ENV, "asyncio")
    assert event_loop.loop_factory() is None
    assert event_loop.loop_name() == "asyncio"


def test_without_uvloop_the_plain_loop_runs_and_asking_for_uvloop_is_an_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "uvloop", None)  # `import uvloop` raises ImportError
    monkeypatch.delenv(event_loop.ENV, raising=False)
    assert event_loop.loop_factory() is None

    async def which() -> str:
        return type(asyncio.get_running_loop()).__module__

    assert event_loop.run(which()).startswith("asyncio")
    monkeypatch.setenv(event_loop.ENV, "uvloop")
    with pytest.raises(ValueError, match="KCHAOS_EVENT_LOOP=uvloop but uvloop is not installed"):
        event_loop.loop_factory()


def test_an_unknown_loop_stops_the_node_with_a_one_line_error(tmp_path):
    plan = plan_cluster(tmp_path, voters=1)
    env = {"KCHAOS_EVENT_LOOP": "tokio", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-m", "node.runtime", "node", "start", "--config", str(plan.nodes[0].config_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert "KCHAOS_EVENT_LOOP='tokio': expected one of auto, uvloop, asyncio" in done.stderr


def maps_uvloop(pid: int) -> bool:
    return "uvloop" in Path(f"/proc/{pid}/maps").read_text()


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_forwarded_write_commits_on_either_loop(tmp_path, monkeypatch, loop):
    monkeypatch.setenv(event_loop.ENV, loop)
    plan = plan_cluster(tmp_path, voters=3, observers=1, settings={"kchaos.test.append.enable": "false"})
    procs = [NodeProcess(spec).start() for spec in plan.nodes]
    try:
        wait_for(lambda: find_leader(plan.voters), 30, what="a leader")
        assert {maps_uvloop(p.pid) for p in procs} == {loop == "uvloop"}
        with SyncAdminClient(plan.brokers[0].address, request_timeout_ms=10_000) as admin:

            def created() -> bool:
                with contextlib.suppress(E.KafkaError):
                    admin.create_topic("t", 1, 1)
                    return True
                return False

            wait_for(created, 30, interval=0.2, what="the topic, through the broker")
            admin.incremental_alter_config(ConfigResource.topic("t"), [AlterConfigOp.set("retention.ms", "1234")])

        def applied() -> bool:
            for resource in fetch_image(plan.voters[0])["image"]["configs"]:
                if resource.get("resource_name") == "t":
                    return resource.get("configs", {}).get("retention.ms") == "1234"
            return False

        wait_for(applied, 10, what="the change in a voter's image")
    finally:
        kill_all(procs)
