"""The node's HTTP endpoint: Prometheus metrics, a status document, and a test-only append.

- `GET /metrics`: KIP-595's raft-manager metrics in Prometheus text format (see `metrics`).
- `GET /v1/status`: the node's quorum view as JSON (role, epoch, leader, high watermark, ...) and
  `metadata_offset`, the offset its metadata image has replayed up to.
- `GET /v1/image`, `GET /v1/committed-log`: the node's metadata image and committed log as
  `node.metadata.dump` renders them (the same documents a clean stop writes beside the data), so a
  harness can compare nodes while they run.
- `GET /v1/dump`: the image, the snapshot the log starts after, and the committed log with each
  record's bytes, taken at one instant (JSON; `node.metadata.dump.node_dump`): what a harness needs
  to replay a running node's log and compare the result with its image.
- `POST /v1/append` (only with `kchaos.test.append.enable=true`): append the body's lines as
  records, answer once they are committed. The metadata quorum has no client API of its own (the
  controller of KIP-631 will be the writer); tests and benchmarks of the bare quorum need one, so it
  lives here, off the quorum protocol, and is off by default.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Protocol

from node.metadata.dump import committed_log_jsonl, image_dump_json, node_dump
from node.process.process import NodeProcess
from node.protocol.errors import ErrorCode
from node.raft.node import RaftNode
from node.runtime.append_error import AppendError
from node.runtime.http_endpoint import HttpEndpoint, HttpResponse
from node.runtime.metrics import render_prometheus
from node.runtime.server_config import ServerConfig
from node.runtime.wall_clock import WallClock


class AdminTarget(Protocol):
    """What the admin endpoint reads of a running node (`NodeServer` implements it): passed in, so this
    module does not import the server that starts it."""

    node_id: int
    config: ServerConfig
    node: RaftNode | None
    process: NodeProcess | None
    clock: WallClock

    def metric_values(self) -> dict[str, float | int | str]: ...

    async def append(self, records: Sequence[bytes]) -> tuple[int, int]: ...


PROMETHEUS_TYPE = "text/plain; version=0.0.4; charset=utf-8"
JSON_TYPE = "application/json"
JSON_LINES_TYPE = "application/jsonl"


def _json(status: int, doc: object) -> HttpResponse:
    return HttpResponse(status, (json.dumps(doc) + "\n").encode(), JSON_TYPE)


async def start_admin_endpoint(server: AdminTarget, host: str, port: int) -> HttpEndpoint:
    async def metrics(_body: bytes) -> HttpResponse:
        return HttpResponse(200, render_prometheus(server.node_id, server.metric_values()).encode(), PROMETHEUS_TYPE)

    async def status(_body: bytes) -> HttpResponse:
        node = server.node
        assert node is not None
        return _json(
            200,
            {
                "node_id": server.node_id,
                "voter": server.config.is_voter,
                "role": node.role.value,
                "epoch": node.epoch,
                "leader_id": node.leader_id,
                "voted_id": node.voted_id,
                "high_watermark": node.high_watermark,
                "log_end_offset": node.log_end_offset,
                "last_epoch": node.last_epoch,
                "cluster_id": node.cluster_id,
                # how far the metadata image has replayed the committed log (its next offset)
                "metadata_offset": server.process.image.last_offset + 1 if server.process is not None else 0,
                # the process's wall clock (skewed under clock faults) and the node's never-backwards clock
                "wall_clock_ms": server.clock.wall_ms(),
                "clock_ms": server.clock.now_ms(),
                # KIP-630: snapshots this node copied from the leader (catch-up) and wrote of its own state
                "snapshots_fetched": node.metrics_state.snapshots_fetched_total,
                "snapshots_written": node.metrics_state.snapshots_written_total,
            },
        )

    async def image(_body: bytes) -> HttpResponse:
        process = server.process
        if process is None:
            return _json(503, {"error": "BROKER_NOT_AVAILABLE", "message": "the node has not started"})
        return HttpResponse(200, image_dump_json(process.image).encode(), JSON_TYPE)

    async def committed_log(_body: bytes) -> HttpResponse:
        process = server.process
        if process is None:
            return _json(503, {"error": "BROKER_NOT_AVAILABLE", "message": "the node has not started"})
        text = committed_log_jsonl(process.committed_batches(), with_records=True)
        return HttpResponse(200, text.encode(), JSON_LINES_TYPE)

    async def dump(_body: bytes) -> HttpResponse:
        process = server.process
        if process is None:
            return _json(503, {"error": "BROKER_NOT_AVAILABLE", "message": "the node has not started"})
        return _json(200, node_dump(process.image, process.raft.snapshot, process.committed_batches()))

    async def append(body: bytes) -> HttpResponse:
        records = body.split(b"\n")
        if records and records[-1] == b"":
            records.pop()
        if not records:
            return _json(400, {"error": "INVALID_REQUEST", "message": "no records in the body"})
        try:
            base, last = await server.append(records)
        except AppendError as exc:
            return _json(
                503,
                {
                    "error": ErrorCode(exc.error).name if exc.error in ErrorCode._value2member_map_ else exc.error,
                    "message": str(exc),
                    "definite": exc.definite,
                    "leader_id": exc.leader_id,
                },
            )
        return _json(200, {"base_offset": base, "last_offset": last})

    routes = {
        ("GET", "/metrics"): metrics,
        ("GET", "/v1/status"): status,
        ("GET", "/v1/image"): image,
        ("GET", "/v1/committed-log"): committed_log,
        ("GET", "/v1/dump"): dump,
    }
    if server.config.test_append:
        routes[("POST", "/v1/append")] = append
    endpoint = HttpEndpoint(host, port, routes)
    await endpoint.start()
    return endpoint
