"""The runtime's pieces on their own: metrics windows and exposition, the HTTP endpoint, the quorum
tool's output, peer backoff."""

from __future__ import annotations

import asyncio

import pytest
import uvloop

from node.protocol.codec import BinaryCodec
from node.protocol.errors import ErrorCode
from node.protocol.messages import DescribeQuorumRequest, DescribeQuorumResponse, ReplicaState
from node.raft.records import MAX_BATCH_BYTES
from node.runtime.append_error import AppendError
from node.runtime.appends import AppendGroup, PendingAppend, group_appends
from node.runtime.http_endpoint import HttpEndpoint, HttpResponse
from node.runtime.local_cluster import plan_cluster, unused_address
from node.runtime.metrics import RuntimeMetrics, Window, parse_prometheus, render_prometheus
from node.runtime.peers import Backoff, PeerLink
from node.runtime.quorum_cli import format_replication, format_status, parse_servers, replication_rows
from vocab.errors import UserError


def test_window_forgets_samples_older_than_the_window():
    window = Window(1000)
    window.record(0, 10)
    window.record(500, 30)
    assert (window.total(900), window.avg(900), window.max(900)) == (40, 20, 30)
    assert (window.total(1200), window.max(1200)) == (30, 30)  # the sample at 0 left the window
    assert window.total(5000) == 0 and window.avg(5000) == 0


def test_poll_idle_ratio_is_the_unbusy_share_of_the_window():
    metrics = RuntimeMetrics(window_ms=10_000, start_ms=0)
    metrics.busy.record(900, 200)
    metrics.busy.record(1000, 50)
    assert metrics.snapshot(1000)["poll-idle-ratio-avg"] == pytest.approx(0.75)
    assert metrics.snapshot(20_000)["poll-idle-ratio-avg"] == 1.0  # the busy spell left the window


def test_prometheus_exposition_uses_kip_names_with_a_node_label():
    text = render_prometheus(3, {"high-watermark": 42, "current-state": "follower", "commit-latency-avg": 1.5})
    assert 'kafka_raft_manager_high_watermark{node_id="3"} 42' in text
    assert 'kafka_raft_manager_commit_latency_avg{node_id="3"} 1.5' in text
    assert 'kafka_raft_manager_current_state{node_id="3",state="follower"} 1' in text
    assert 'kafka_raft_manager_current_state{node_id="3",state="leader"} 0' in text
    assert "# TYPE kafka_raft_manager_high_watermark gauge" in text
    assert parse_prometheus(text) == {"high-watermark": 42, "current-state": "follower", "commit-latency-avg": 1.5}


async def _http(port: int, raw: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(raw)
    data = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    return data


def test_http_endpoint_routes_and_refuses_bad_requests():
    async def scenario() -> list[bytes]:
        async def hello(body: bytes) -> HttpResponse:
            return HttpResponse(200, b"hello " + body)

        endpoint = HttpEndpoint("127.0.0.1", 0, {("POST", "/hi"): hello})
        await endpoint.start()
        try:
            return [
                await _http(endpoint.port, b"POST /hi HTTP/1.1\r\nContent-Length: 3\r\nConnection: close\r\n\r\nbob"),
                await _http(endpoint.port, b"GET /hi HTTP/1.1\r\nConnection: close\r\n\r\n"),
                await _http(endpoint.port, b"GET /nope HTTP/1.0\r\n\r\n"),
                await _http(endpoint.port, b"garbage\r\n\r\n"),
            ]
        finally:
            await endpoint.close()

    ok, wrong_method, missing, garbage = asyncio.run(scenario())
    assert ok.startswith(b"HTTP/1.1 200") and ok.endswith(b"hello bob")
    assert wrong_method.startswith(b"HTTP/1.1 405")
    assert missing.startswith(b"HTTP/1.1 404")
    assert garbage.startswith(b"HTTP/1.1 400")


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_http_endpoint_closed_while_a_handler_runs_answers_nothing_and_raises_nothing(loop):
    """A node that stops (a fatal fsync error) closes its connections while a status request is being
    answered. uvloop raises on a write to a closed transport where asyncio only counts it: the raise
    landed in the loop's exception handler and its traceback after the node's one-line error."""
    errors: list[dict] = []

    async def scenario() -> bytes:
        asyncio.get_running_loop().set_exception_handler(lambda _loop, context: errors.append(context))
        entered = asyncio.Event()
        release = asyncio.Event()

        async def slow(body: bytes) -> HttpResponse:
            entered.set()
            await release.wait()
            return HttpResponse(200, b"late")

        endpoint = HttpEndpoint("127.0.0.1", 0, {("GET", "/slow"): slow})
        await endpoint.start()
        answer = asyncio.create_task(_http(endpoint.port, b"GET /slow HTTP/1.1\r\n\r\n"))
        await asyncio.wait_for(entered.wait(), 5)
        await endpoint.close()
        release.set()
        data = await answer
        for _ in range(3):  # let the handler's task finish and report
            await asyncio.sleep(0.01)
        return data

    factory = uvloop.new_event_loop if loop == "uvloop" else None
    with asyncio.Runner(loop_factory=factory) as runner:
        data = runner.run(scenario())
    assert data == b""  # the connection closed; the late answer was not written
    assert errors == []


def test_clusters_planned_at_once_share_no_address(tmp_path):
    """Parallel test workers plan clusters at the same moment: in one /24 of 127.0.0.0/8 all of them
    picked the same addresses, and a port `free_port` had just handed one was bound by the other's node
    first (the first node's start failed with EADDRINUSE and the test lost its quorum)."""
    plans = [plan_cluster(tmp_path / str(i), voters=3, observers=2) for i in range(20)]
    subnets = [{spec.host.rsplit(".", 1)[0] for spec in plan.nodes} for plan in plans]
    assert all(len(one) == 1 for one in subnets)  # one cluster, one /24
    assert all(not subnet.startswith("127.0.0.") for (subnet,) in subnets)
    assert len({subnet for (subnet,) in subnets}) > 1  # 20 clusters in one /24: the old plan


# `kafka-metadata-quorum.sh describe --status` in KIP-595's "Tooling Support", in order.
KIP_STATUS_FIELDS = [
    "ClusterId",
    "LeaderId",
    "LeaderEpoch",
    "HighWatermark",
    "MaxFollowerLag",
    "MaxFollowerLagTimeMs",
    "CurrentVoters",
]

ANSWER = DescribeQuorumResponse(
    error_code=ErrorCode.NONE,
    leader_id=2,
    leader_epoch=15,
    high_watermark=234130,
    current_voters=(
        ReplicaState(1, 234100, 1000, 985),
        ReplicaState(2, 234134, 1000, 1000),
        ReplicaState(3, 234130, 995, 990),
    ),
    observers=(ReplicaState(4, 234124, 990, 988), ReplicaState(5, -1)),
    cluster_id="SomeClusterId",
    leader_time_ms=1000,
)


def test_describe_status_prints_the_kip_fields():
    lines = format_status(ANSWER).splitlines()
    fields = {line.split(":")[0]: line.split(":", 1)[1].strip() for line in lines}
    assert list(fields) == KIP_STATUS_FIELDS
    assert fields == {
        "ClusterId": "SomeClusterId",
        "LeaderId": "2",
        "LeaderEpoch": "15",
        "HighWatermark": "234130",
        "MaxFollowerLag": "34",  # node 1: 234134 - 234100
        "MaxFollowerLagTimeMs": "15",  # node 1 last caught up at 985, the leader's clock says 1000
        "CurrentVoters": "[1, 2, 3]",
    }


def test_describe_replication_lists_leader_followers_observers():
    rows = [line.split() for line in format_replication(ANSWER).splitlines()]
    assert rows[0] == ["ReplicaId", "LogEndOffset", "Lag", "LagTimeMs", "Status"]
    assert rows[1:] == [
        ["2", "234134", "0", "0", "Leader"],
        ["1", "234100", "34", "15", "Follower"],
        ["3", "234130", "4", "10", "Follower"],
        ["4", "234124", "10", "12", "Observer"],
        ["5", "-1", "234134", "-1", "Observer"],  # never fetched: all of the log behind, time unknown
    ]
    assert [r.status for r in replication_rows(ANSWER)].count("Leader") == 1


def test_bootstrap_server_list_is_checked():
    assert parse_servers("127.0.0.2:9093, 127.0.0.3:9093") == [("127.0.0.2", 9093), ("127.0.0.3", 9093)]
    with pytest.raises(UserError, match="'localhost' is not HOST:PORT"):
        parse_servers("localhost")


def test_reconnect_backoff_doubles_up_to_the_max():
    backoff = Backoff(base_ms=20, max_ms=1000)
    assert [backoff.delay_ms(n) for n in range(8)] == [0, 20, 40, 80, 160, 320, 640, 1000]


def _link(
    port: int, failed: list, answered: list, backoff_ms: int = 200, timeout_ms: int = 2000, host: str = "127.0.0.1"
) -> PeerLink:
    return PeerLink(
        7,
        host,
        port,
        BinaryCodec(),
        Backoff(backoff_ms, backoff_ms * 4),
        timeout_ms,
        on_response=lambda source, cid, msg: answered.append((source, cid, msg)),
        on_failed=lambda dest, cid, sent: failed.append((dest, cid, sent)),
    )


def test_peer_link_fails_requests_it_cannot_deliver_and_backs_off():
    async def scenario() -> tuple[list, list, bool]:
        host, port = unused_address()  # nothing listens there
        failed: list = []
        link = _link(port, failed, [], host=host)
        link.send(1, DescribeQuorumRequest())
        assert failed == []  # never reported inside send(): the core is still handling its event
        await asyncio.sleep(0.1)
        first = list(failed)
        link.send(2, DescribeQuorumRequest())  # within the backoff: fails without a connect attempt
        await asyncio.sleep(0)
        connecting_during_backoff = link._connecting is not None
        await asyncio.sleep(0.01)
        await link.close()
        return first, failed, connecting_during_backoff

    first, failed, connecting = asyncio.run(scenario())
    assert first == [(7, 1, False)]  # connection refused: never written, so certainly without effect
    assert failed == [(7, 1, False), (7, 2, False)]
    assert not connecting


def test_peer_link_fails_in_flight_requests_when_the_connection_breaks_or_times_out():
    async def scenario() -> tuple[list, list]:
        codec = BinaryCodec()
        seen: list[bytes] = []

        async def peer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            data = await reader.read(1 << 16)
            seen.append(data)
            if len(seen) == 1:  # first connection: answer request 1, then hang up
                writer.write(codec.encode_response(1, ANSWER))
                await writer.drain()
                writer.close()
            # second connection: read and never answer (a paused peer)

        server = await asyncio.start_server(peer, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        failed: list = []
        answered: list = []
        link = _link(port, failed, answered, backoff_ms=10, timeout_ms=300)
        link.send(1, DescribeQuorumRequest())
        await asyncio.sleep(0.05)
        link.send(2, DescribeQuorumRequest())  # on a fresh connection (or the old one, if slow to break)
        await asyncio.sleep(0.05)
        link.send(3, DescribeQuorumRequest())
        for _ in range(1000):  # request 3 can only fail by the 300 ms request timeout (or a break)
            if len(failed) == 2:
                break
            await asyncio.sleep(0.01)
        await link.close()
        server.close()
        return answered, failed

    answered, failed = asyncio.run(scenario())
    assert [(source, cid) for source, cid, _ in answered] == [(7, 1)]
    assert answered[0][2] == ANSWER
    assert sorted((dest, cid) for dest, cid, _ in failed) == [(7, 2), (7, 3)]
    assert dict((cid, sent) for _, cid, sent in failed)[3] is True  # written, never answered: ambiguous


def test_appends_of_one_loop_turn_share_a_batch_and_get_their_own_offsets():
    async def scenario() -> list:
        loop = asyncio.get_running_loop()
        pending = [PendingAppend((b"a",) * n, loop.create_future()) for n in (2, 3, 4, 1)]
        groups = group_appends(pending, max_records=6)
        assert [[len(m.records) for m in g.members] for g in groups] == [[2, 3], [4, 1]]
        groups[0].complete(10, 14)
        groups[1].fail(AppendError(ErrorCode.NOT_LEADER_OR_FOLLOWER, "lost", definite=True))
        with pytest.raises(ValueError, match="group of 5 records"):
            AppendGroup(pending[:2], count=5).complete(0, 1)
        return [p.future.result() if not p.future.exception() else p.future.exception() for p in pending]

    first, second, third, fourth = asyncio.run(scenario())
    assert (first, second) == ((10, 11), (12, 14))
    assert isinstance(third, AppendError) and third.definite and third is fourth


def test_an_oversized_append_gets_a_group_of_its_own():
    async def scenario() -> list[int]:
        loop = asyncio.get_running_loop()
        big = PendingAppend((b"x" * (MAX_BATCH_BYTES - 10),), loop.create_future())
        small = PendingAppend((b"y",), loop.create_future())
        return [len(g.members) for g in group_appends([small, big, small], max_records=100)]

    assert asyncio.run(scenario()) == [1, 1, 1]
