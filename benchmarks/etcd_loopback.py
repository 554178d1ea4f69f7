"""A 3-member etcd 3.4 cluster on 127.0.0.1 for the benchmarks that compare with it (bench_write_path,
bench_failover), and a keep-alive HTTP/1.1 client of its v3 JSON gateway (`POST /v3/kv/put`).

Members are started as separate `etcd` processes, each with its own data dir and log file under one
base directory, and are only ever signalled by their own PID; a killed member is started again with
the same command line (its data dir makes it rejoin). etcd comes from Debian: `apt-get install
etcd-server` (3.4.23 on bookworm).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from node.runtime.local_cluster import free_port, wait_for

NAMES = ("e1", "e2", "e3")


def find_etcd(program: str, skip_hint: str = "") -> str | None:
    """The etcd binary, or None after one line on stderr saying how to install it."""
    etcd = shutil.which("etcd")
    if etcd is None:
        print(
            f"{program}: etcd not found on PATH; install it with `apt-get install etcd-server` "
            f"(Debian, 3.4){skip_hint}",
            file=sys.stderr,
        )
    return etcd


class EtcdCluster:
    """Three members on 127.0.0.1: their client ports, and kill -9 / start again of one of them."""

    def __init__(self, base: Path, etcd: str, flags: tuple[str, ...] = ()) -> None:
        self.base = base
        self.etcd = etcd
        self.flags = flags
        self.client_ports = {n: free_port("127.0.0.1") for n in NAMES}
        self.peer_ports = {n: free_port("127.0.0.1") for n in NAMES}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def argv(self, name: str) -> list[str]:
        initial = ",".join(f"{n}=http://127.0.0.1:{self.peer_ports[n]}" for n in NAMES)
        client, peer = self.client_ports[name], self.peer_ports[name]
        return [
            self.etcd,
            f"--name={name}",
            f"--data-dir={self.base / name}",
            f"--listen-client-urls=http://127.0.0.1:{client}",
            f"--advertise-client-urls=http://127.0.0.1:{client}",
            f"--listen-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-cluster={initial}",
            "--initial-cluster-state=new",  # ignored once the data dir exists (a restart rejoins)
            "--initial-cluster-token=bench",
            "--logger=zap",
            *self.flags,
        ]

    def start(self, name: str) -> None:
        with open(self.base / f"{name}.log", "ab") as log:
            self.procs[name] = subprocess.Popen(self.argv(name), stdout=log, stderr=log)

    def kill(self, name: str) -> None:
        """kill -9 of that member (by its PID), reaped."""
        proc = self.procs[name]
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)

    def stop_all(self) -> None:
        for name in list(self.procs):
            self.kill(name)

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs.values()]

    def pids_by_role(self) -> dict[str, list[int]]:
        """The PIDs as {"leader": [...], "followers": [...]} (bench_write_path measures CPU by role)."""
        leader = self.leader()
        return {
            "leader": [p.pid for n, p in self.procs.items() if n == leader],
            "followers": [p.pid for n, p in self.procs.items() if n != leader],
        }

    def status(self, name: str) -> dict | None:
        with contextlib.suppress(OSError, ValueError):
            return etcd_post(self.client_ports[name], "/v3/maintenance/status", {})
        return None

    def leader(self) -> str | None:
        """The member that says it leads, or None."""
        for name in NAMES:
            doc = self.status(name)
            if doc and doc.get("leader") and doc["leader"] == doc["header"]["member_id"]:
                return name
        return None

    def whole(self) -> bool:
        """Every member answers, names the same leader and has applied what the leader had."""
        docs = [self.status(n) for n in NAMES]
        if any(d is None or not d.get("leader") for d in docs):
            return False
        leaders = {d["leader"] for d in docs if d}
        index = [int(d.get("raftIndex", 0)) for d in docs if d]
        return len(leaders) == 1 and max(index) - min(index) <= 2

    def leader_port(self) -> int | None:
        name = self.leader()
        return self.client_ports[name] if name else None


@contextlib.contextmanager
def etcd_cluster(base: Path, etcd: str, flags: tuple[str, ...] = ("--log-level=warn",)) -> Iterator[EtcdCluster]:
    """Three members running with a leader; every one killed (by PID) on the way out."""
    base.mkdir(parents=True, exist_ok=True)
    cluster = EtcdCluster(base, etcd, flags)
    try:
        for name in NAMES:
            cluster.start(name)
        wait_for(cluster.leader, 30, what="an etcd leader")
        yield cluster
    finally:
        cluster.stop_all()


def etcd_post(port: int, path: str, body: dict) -> dict:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", json.dumps(body).encode(), method="POST")
    with urllib.request.urlopen(request, timeout=2) as answer:
        return json.loads(answer.read())


class EtcdConnection:
    """One HTTP/1.1 keep-alive connection to an etcd gateway; one put at a time."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)

    async def put(self, key: bytes, value: bytes) -> None:
        """Raises ValueError when etcd refuses the put (e.g. no leader), OSError when the connection fails."""
        assert self.reader is not None and self.writer is not None
        body = json.dumps({"key": base64.b64encode(key).decode(), "value": base64.b64encode(value).decode()}).encode()
        self.writer.write(
            b"POST /v3/kv/put HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        try:
            head = await self.reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as exc:
            raise OSError("etcd closed the connection") from exc
        status = head.split(b" ", 2)[1]
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        answer = await self.reader.readexactly(length)
        if status != b"200" or b'"header"' not in answer:
            raise ValueError(f"etcd put answered {status.decode()}: {answer[:200]!r}")

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
