"""What lazyfs costs: append+fsync on a plain directory vs a lazyfs mount (printed figures, not a test).

    python benchmarks/bench_lazyfs.py [--ops 500] [--cluster] [--writes 200]    (root: FUSE mounts, netns)

Rows: raw 4 KiB write+fdatasync, FileStorage append+flush (one ~300-byte batch each), on the plain
directory, on lazyfs with fsyncs passed to the backing file (the default), and on lazyfs with
`--no-backing-sync`. `--cluster` also measures committed config writes/s of a 3-controller + 1-broker
netns cluster (sequential IncrementalAlterConfigs through the broker) with and without lazyfs data dirs.
Everything the benchmark mounts or starts is ledgered and removed at the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from harness.backends.lazyfs import start_lazyfs, stop_lazyfs
from harness.backends.ledger import Ledger

PAGE = b"x" * 4096


def latencies(op: Callable[[int], None], n: int) -> list[float]:
    out = []
    for i in range(n):
        start = time.perf_counter()
        op(i)
        out.append(time.perf_counter() - start)
    return out


def summary(name: str, lat: list[float]) -> str:
    lat = sorted(lat)
    p = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] * 1000  # noqa: E731
    rate = len(lat) / sum(lat)
    return f"{name:<44} {rate:8.0f}/s   p50 {p(0.5):6.2f} ms   p99 {p(0.99):6.2f} ms"


def raw_fsync(directory: Path, n: int) -> list[float]:
    fd = os.open(directory / "raw", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        return latencies(lambda _: (os.write(fd, PAGE), os.fdatasync(fd)), n)
    finally:
        os.close(fd)


def file_storage(directory: Path, n: int) -> list[float]:
    from node.raft.records import RecordBatch
    from node.runtime.file_storage import FileStorage

    with FileStorage(directory / "node", 1) as storage:
        storage.load()

        def append(i: int) -> None:
            storage.append((RecordBatch(i, 1, (b"config-record" * 20,), timestamp_ms=i),))
            storage.flush()

        return latencies(append, n)


def disk_rows(base: Path, ops: int) -> None:
    ledger = Ledger.create(base / "ledger.jsonl")
    plain = base / "plain"
    plain.mkdir()
    mounts = {}
    try:
        for label, sync in (("lazyfs", True), ("lazyfs --no-backing-sync", False)):
            mounts[label] = start_lazyfs(ledger, base / f"state-{sync}", base / f"mnt-{sync}", backing_sync=sync)
        targets = {"plain directory": plain, **{k: m.mountpoint for k, m in mounts.items()}}
        for what, fn in (("write 4 KiB + fdatasync", raw_fsync), ("FileStorage append + flush", file_storage)):
            for where, directory in targets.items():
                print(summary(f"{what}, {where}", fn(directory, ops)), flush=True)
    finally:
        for lazy in mounts.values():
            stop_lazyfs(ledger, lazy)
        ledger.undo_all()


def cluster_rate(base: Path, writes: int, lazy: bool) -> str:
    from harness.backends.netns import NetnsBackend
    from harness.db.kraft import KraftDB
    from harness.test_spec import Cluster
    from node.client import AlterConfigOp, ConfigResource, NewTopic, SyncAdminClient

    run_dir = base / ("cluster-lazyfs" if lazy else "cluster-plain")
    db = KraftDB(Cluster(controllers=3, brokers=1))
    backend = NetnsBackend(run_dir, list(db.nodes))
    try:
        backend.setup()
        if lazy:
            backend.enable_faults(["lose_unsynced"])
        db.install(backend, run_dir)
        db.wait_ready(180)
        with SyncAdminClient([db.broker_address(b) for b in db.brokers], request_timeout_ms=30_000) as admin:
            admin.create_topics([NewTopic("bench", 1, 1)])
            resource = ConfigResource.topic("bench")
            lat = latencies(
                lambda i: admin.incremental_alter_config(resource, [AlterConfigOp.set("retention.ms", str(i + 1))]),
                writes,
            )
    finally:
        db.teardown()
        backend.teardown()
    return summary(f"config write (3 controllers, {'lazyfs' if lazy else 'plain'})", lat)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ops", type=int, default=500, help="fsyncs per disk row")
    parser.add_argument("--cluster", action="store_true", help="also measure a netns cluster with/without lazyfs")
    parser.add_argument("--writes", type=int, default=200, help="config writes per cluster row")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="kchaos-bench-lazyfs-"))
    try:
        print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}, {os.cpu_count()} cores")
        disk_rows(base, args.ops)
        if args.cluster:
            for lazy in (False, True):
                print(cluster_rate(base, args.writes, lazy), flush=True)
        print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
