"""`kchaos quorum describe --status | --replication --bootstrap-server HOST:PORT[,HOST:PORT...]`.

Prints the fields and columns of KIP-595's `kafka-metadata-quorum.sh` examples from a DescribeQuorum
answered by the leader.

Finding the leader: DescribeQuorum is the leader's to answer, and a node that knows another leader
(a follower, or a broker on its client listener) asks it on the client's behalf, as Kafka's brokers
forward it to the active controller; so any one reachable address is enough. Like Kafka's
`bootstrap.servers`, `--bootstrap-server` takes a comma-separated list: each address is asked in turn
until an answer comes from a leader; while none can (an election is in progress), the list is tried
again after a short backoff until `--timeout-ms`. `--user`/`--password` log in with SASL/PLAIN first,
for a listener that requires it.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from dataclasses import dataclass

from node.client.cli_parsing import PASSWORD_ENV, login_from
from node.client.errors import code_name
from node.protocol.codec import BinaryCodec, FrameError, FrameKind, FrameReader
from node.protocol.errors import ErrorCode
from node.protocol.messages import DescribeQuorumRequest, DescribeQuorumResponse, ReplicaState
from node.runtime.peers import sasl_plain_login
from vocab.errors import UserError

RETRY_BACKOFF_S = 0.2


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("quorum", description="describe the metadata quorum (like kafka-metadata-quorum.sh)")
    sub = parser.add_subparsers(dest="quorum_command", metavar="ACTION", required=True)
    describe = sub.add_parser("describe", help="show the quorum's status or replication state")
    what = describe.add_mutually_exclusive_group(required=True)
    what.add_argument("--status", action="store_true", help="a short summary of the quorum")
    what.add_argument("--replication", action="store_true", help="each replica's replication progress")
    describe.add_argument(
        "--bootstrap-server",
        required=True,
        metavar="HOST:PORT[,HOST:PORT...]",
        help="quorum listener address(es); each is asked in turn until the leader answers",
    )
    describe.add_argument("--timeout-ms", type=int, default=10_000, help="give up after this long (default 10000)")
    describe.add_argument("--user", help="SASL/PLAIN username, for a listener that requires a login")
    describe.add_argument("--password", help=f"SASL/PLAIN password (default: ${PASSWORD_ENV})")
    describe.set_defaults(func=describe_command)


def parse_servers(value: str) -> list[tuple[str, int]]:
    servers = []
    for part in (p.strip() for p in value.split(",")):
        if not part:
            continue
        host, sep, port_text = part.rpartition(":")
        try:
            port = int(port_text)
        except ValueError:
            port = -1
        if not sep or not host or not 0 < port < 65536:
            raise UserError(f"--bootstrap-server: '{part}' is not HOST:PORT")
        servers.append((host.strip("[]"), port))
    if not servers:
        raise UserError("--bootstrap-server: no address given")
    return servers


async def ask(host: str, port: int, timeout_s: float, login: tuple[str, str] | None = None) -> DescribeQuorumResponse:
    """One DescribeQuorum round trip (after a SASL/PLAIN login when given); OSError/TimeoutError/
    FrameError when it cannot complete."""
    codec = BinaryCodec()
    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout_s)
    try:
        if login is not None:
            await asyncio.wait_for(sasl_plain_login(reader, writer, codec, *login), timeout_s)
        writer.write(codec.encode_request(100, DescribeQuorumRequest()))
        frames = FrameReader(codec.max_frame_bytes)
        while True:
            data = await asyncio.wait_for(reader.read(1 << 16), timeout_s)
            if not data:
                raise ConnectionError("connection closed before the answer")
            for raw in frames.feed(data):
                frame = codec.decode(raw)
                if frame.kind is FrameKind.RESPONSE and isinstance(frame.message, DescribeQuorumResponse):
                    return frame.message
    finally:
        writer.close()


@dataclass(slots=True)
class _Attempts:
    notes: dict[str, str]

    def summary(self) -> str:
        return "; ".join(f"{addr}: {note}" for addr, note in self.notes.items())


async def find_leader_answer(
    servers: list[tuple[str, int]], timeout_ms: int, login: tuple[str, str] | None = None
) -> DescribeQuorumResponse:
    deadline = time.monotonic() + timeout_ms / 1000
    attempts = _Attempts({})
    while True:
        for host, port in servers:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            addr = f"{host}:{port}"
            try:
                answer = await ask(host, port, min(remaining, 5.0), login)
            except (OSError, TimeoutError, FrameError) as exc:
                attempts.notes[addr] = f"unreachable ({exc or type(exc).__name__})"
                continue
            if answer.error_code == ErrorCode.NONE:
                return answer
            if answer.error_code != ErrorCode.NOT_LEADER_OR_FOLLOWER:
                hint = "; does this listener need --user and --password?" if login is None else ""
                attempts.notes[addr] = f"refused: {code_name(answer.error_code)}{hint}"
                continue
            leader = f"node {answer.leader_id}" if answer.leader_id >= 0 else "unknown"
            attempts.notes[addr] = f"not the leader (leader: {leader}, epoch {answer.leader_epoch})"
        if time.monotonic() + RETRY_BACKOFF_S >= deadline:
            raise UserError(
                f"no leader answered DescribeQuorum within {timeout_ms} ms ({attempts.summary()}); "
                "pass more addresses to --bootstrap-server (every voter's finds the leader)"
            )
        await asyncio.sleep(RETRY_BACKOFF_S)


@dataclass(frozen=True, slots=True)
class ReplicaRow:
    replica_id: int
    log_end_offset: int
    lag: int
    lag_time_ms: int
    status: str


def replication_rows(answer: DescribeQuorumResponse) -> list[ReplicaRow]:
    """Leader first, then the other voters, then observers (as kafka-metadata-quorum.sh lists them)."""
    leader = next((r for r in answer.current_voters if r.replica_id == answer.leader_id), None)
    leader_end = leader.log_end_offset if leader else answer.high_watermark

    def row(replica: ReplicaState, status: str) -> ReplicaRow:
        if status == "Leader":
            return ReplicaRow(replica.replica_id, replica.log_end_offset, 0, 0, status)
        lag = leader_end - max(replica.log_end_offset, 0)
        known = replica.last_caught_up_timestamp >= 0 and answer.leader_time_ms >= 0
        lag_time = max(0, answer.leader_time_ms - replica.last_caught_up_timestamp) if known else -1
        return ReplicaRow(replica.replica_id, replica.log_end_offset, lag, lag_time, status)

    rows = [row(leader, "Leader")] if leader else []
    rows += [row(r, "Follower") for r in sorted(answer.current_voters, key=lambda r: r.replica_id) if r is not leader]
    rows += [row(r, "Observer") for r in sorted(answer.observers, key=lambda r: r.replica_id)]
    return rows


def format_status(answer: DescribeQuorumResponse) -> str:
    followers = [r for r in replication_rows(answer) if r.status == "Follower"]
    fields = [
        ("ClusterId", answer.cluster_id or "unknown"),
        ("LeaderId", answer.leader_id),
        ("LeaderEpoch", answer.leader_epoch),
        ("HighWatermark", answer.high_watermark),
        ("MaxFollowerLag", max((r.lag for r in followers), default=0)),
        ("MaxFollowerLagTimeMs", max((r.lag_time_ms for r in followers), default=0)),
        ("CurrentVoters", "[" + ", ".join(str(r.replica_id) for r in answer.current_voters) + "]"),
    ]
    return "\n".join(f"{name + ':':<24}{value}" for name, value in fields)


def format_replication(answer: DescribeQuorumResponse) -> str:
    header = ("ReplicaId", "LogEndOffset", "Lag", "LagTimeMs", "Status")
    table = [header] + [
        (str(r.replica_id), str(r.log_end_offset), str(r.lag), str(r.lag_time_ms), r.status)
        for r in replication_rows(answer)
    ]
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in table)


def describe_command(args: argparse.Namespace) -> int:
    servers = parse_servers(args.bootstrap_server)
    if args.timeout_ms <= 0:
        raise UserError("--timeout-ms must be > 0")
    answer = asyncio.run(find_leader_answer(servers, args.timeout_ms, login_from(args)))
    print(format_status(answer) if args.status else format_replication(answer))
    return 0
