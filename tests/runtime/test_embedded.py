"""The in-process embedding API: three `NodeServer`s in one event loop, real sockets and files."""

from __future__ import annotations

import asyncio

import pytest

from node.protocol.errors import ErrorCode
from node.runtime.append_error import AppendError
from node.runtime.local_cluster import plan_cluster
from node.runtime.server import NodeServer
from node.runtime.server_config import load_server_config


def test_embedded_nodes_elect_commit_and_refuse_appends_on_followers(tmp_path):
    plan = plan_cluster(tmp_path, voters=3, settings={"quorum.election.timeout.ms": "300"})

    async def scenario() -> None:
        servers = [NodeServer(load_server_config(spec.config_path)) for spec in plan.nodes]
        for server in servers:
            await server.start()
        try:
            async with asyncio.timeout(30):
                while not any(s.node.role.value == "leader" for s in servers):
                    await asyncio.sleep(0.02)
            leader = next(s for s in servers if s.node.role.value == "leader")
            results = await asyncio.gather(*(leader.append([f"r{i}".encode()]) for i in range(50)))
            offsets = sorted(base for base, _ in results)
            assert len(set(offsets)) == 50
            follower = next(s for s in servers if s is not leader)
            with pytest.raises(AppendError) as info:
                await follower.append([b"nope"])
            assert info.value.error == ErrorCode.NOT_LEADER_OR_FOLLOWER and info.value.definite
            async with asyncio.timeout(30):
                await follower.wait_for_high_watermark(offsets[-1] + 1)
            committed = {r for b in follower.node.read_committed(0) if not b.control for r in b.records}
            assert committed >= {f"r{i}".encode() for i in range(50)}
        finally:
            for server in servers:
                await server.stop()

    asyncio.run(scenario())
