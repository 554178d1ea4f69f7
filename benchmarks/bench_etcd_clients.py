"""Which Python client the etcd adapter uses: the gRPC JSON gateway with httpx vs the aetcd gRPC library.

    python benchmarks/bench_etcd_clients.py [--ops 1000] [--rounds 3]

One etcd member on 127.0.0.1 (a data dir in a temporary directory, default settings: every put waits
for its WAL fsync). Each round runs, for each client in turn, `--ops` sequential puts then `--ops`
sequential linearizable gets on 16 keys, and prints p50/p99 latency and the client process's CPU per
1,000 ops (time.process_time, which other jobs on the machine do not inflate). aetcd is measured only
when it is importable (it is not a dependency: `pip install aetcd` in a scratch venv to compare).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Awaitable, Callable
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_etcd(base: Path) -> tuple[subprocess.Popen[bytes], int]:
    client, peer = free_port(), free_port()
    proc = subprocess.Popen(
        [
            "etcd",
            "--name=bench",
            f"--data-dir={base / 'data'}",
            f"--listen-client-urls=http://127.0.0.1:{client}",
            f"--advertise-client-urls=http://127.0.0.1:{client}",
            f"--listen-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-cluster=bench=http://127.0.0.1:{peer}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=open(base / "etcd.log", "wb"),  # noqa: SIM115 - lives as long as the process
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{client}/health", timeout=1) as r:
                if b'"true"' in r.read():
                    return proc, client
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("etcd did not become healthy within 20 s")


async def timed(n: int, call: Callable[[int], Awaitable[object]]) -> tuple[list[float], float]:
    latencies = []
    cpu = time.process_time()
    for i in range(n):
        t = time.perf_counter()
        await call(i)
        latencies.append(time.perf_counter() - t)
    return latencies, time.process_time() - cpu


def line(name: str, lat: list[float], cpu_s: float) -> str:
    q = statistics.quantiles(lat, n=100)
    cpu_ms = cpu_s / len(lat) * 1e6
    return f"{name:<22} p50 {q[49] * 1e3:6.2f} ms  p99 {q[98] * 1e3:6.2f} ms  client CPU {cpu_ms:6.0f} ms/1000"


async def gateway(port: int, ops: int) -> list[str]:
    import httpx

    def b64(text: str) -> str:
        return base64.b64encode(text.encode()).decode()

    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:

        async def put(i: int) -> None:
            (await http.post("/v3/kv/put", json={"key": b64(f"k{i % 16}"), "value": b64(str(i))})).raise_for_status()

        async def get(i: int) -> None:
            (await http.post("/v3/kv/range", json={"key": b64(f"k{i % 16}")})).raise_for_status()

        return [line("httpx gateway put", *await timed(ops, put)), line("httpx gateway get", *await timed(ops, get))]


async def grpc_library(port: int, ops: int) -> list[str]:
    import aetcd

    client = aetcd.Client("127.0.0.1", port)
    try:

        async def put(i: int) -> None:
            await client.put(f"k{i % 16}".encode(), str(i).encode())

        async def get(i: int) -> None:
            await client.get(f"k{i % 16}".encode())

        return [line("aetcd (gRPC) put", *await timed(ops, put)), line("aetcd (gRPC) get", *await timed(ops, get))]
    finally:
        await client.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if shutil.which("etcd") is None:
        print("etcd is not installed (apt-get install etcd-server)", file=sys.stderr)
        return 2
    try:
        import aetcd  # noqa: F401

        have_aetcd = True
    except ImportError:
        have_aetcd = False
        print("aetcd is not importable: measuring the gateway only", file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        proc, port = start_etcd(Path(tmp))
        try:
            for r in range(args.rounds):
                print(f"round {r + 1}")
                for text in asyncio.run(gateway(port, args.ops)):
                    print("  " + text)
                if have_aetcd:
                    for text in asyncio.run(grpc_library(port, args.ops)):
                        print("  " + text)
        finally:
            proc.terminate()
            proc.wait(10)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
