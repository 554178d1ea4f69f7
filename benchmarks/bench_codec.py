"""Codec throughput and FileStorage fsync latency on this machine (printed figures, not a test).

python benchmarks/bench_codec.py [--seconds 0.5] [--fsyncs 500] [--dir /path/on/the/disk/to/measure]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from node.protocol.codec import BinaryCodec
from node.protocol.errors import ErrorCode
from node.protocol.messages import FetchRequest, FetchResponse, VoteRequest
from node.raft.records import RecordBatch
from node.runtime.file_storage import FileStorage


def rate(fn: Callable[[], object], seconds: float) -> float:
    """Calls per second of `fn`, measured for about `seconds`."""
    n, start = 0, time.perf_counter()
    deadline = start + seconds
    batch = 1
    while True:
        for _ in range(batch):
            fn()
        n += batch
        now = time.perf_counter()
        if now >= deadline:
            return n / (now - start)
        batch = min(batch * 2, 1024)


def fetch_response(total_bytes: int, record_bytes: int, records_per_batch: int) -> FetchResponse:
    batches, offset = [], 0
    n_records = max(1, total_bytes // record_bytes) if total_bytes else 0
    while n_records > 0:
        n = min(records_per_batch, n_records)
        batches.append(RecordBatch(offset, 3, tuple(b"r" * record_bytes for _ in range(n))))
        offset += n
        n_records -= n
    return FetchResponse(ErrorCode.NONE, 1, 3, offset, 0, None, tuple(batches))


def bench_codec(seconds: float) -> None:
    codec = BinaryCodec(max_frame_bytes=64 << 20)
    cases = [
        ("VoteRequest", None, VoteRequest("AAAAAAAAAAAAAAAAAAAAAA", 7, 1, 6, 123456)),
        ("FetchRequest", None, FetchRequest("AAAAAAAAAAAAAAAAAAAAAA", 2, 7, 123456, 6, 500, 1 << 20)),
        ("FetchResponse, empty", None, fetch_response(0, 100, 1)),
        ("FetchResponse, 1 x 100 B record", None, fetch_response(100, 100, 1)),
        ("FetchResponse, 64 KiB: 100 B records, 64/batch", None, fetch_response(64 << 10, 100, 64)),
        ("FetchResponse, 1 MiB: 100 B records, 1 batch", None, fetch_response(1 << 20, 100, 1 << 20)),
        ("FetchResponse, 1 MiB: 1 KiB records, 1 batch", None, fetch_response(1 << 20, 1024, 1024)),
        ("FetchResponse, 1 MiB: 64 KiB records, 16 batches", None, fetch_response(1 << 20, 64 << 10, 1)),
    ]
    print(f"codec ({seconds:.2f} s per figure)")
    print(f"  {'message':50} {'frame':>10} {'encode msg/s':>13} {'MB/s':>8} {'decode msg/s':>13} {'MB/s':>8}")
    for name, _, msg in cases:
        is_request = not isinstance(msg, FetchResponse)
        encode = codec.encode_request if is_request else codec.encode_response
        frame = encode(1, msg)  # type: ignore[arg-type]
        assert codec.decode(frame).message == msg
        enc = rate(lambda: encode(1, msg), seconds)  # type: ignore[arg-type]  # noqa: B023
        dec = rate(lambda: codec.decode(frame), seconds)  # noqa: B023
        mb = len(frame) / 1e6
        print(f"  {name:50} {len(frame):>10,} {enc:>13,.0f} {enc * mb:>8,.1f} {dec:>13,.0f} {dec * mb:>8,.1f}")


def bench_fsync(count: int, directory: str | None) -> None:
    with tempfile.TemporaryDirectory(dir=directory, prefix="bench-storage-") as d:
        print(f"\nFileStorage append + flush (fsync) in {d}, {count} rounds")
        for records, size in ((1, 100), (64, 100), (16, 64 << 10)):
            with FileStorage(Path(d) / f"{records}x{size}", 1) as storage:
                storage.load()
                latencies, offset = [], 0
                payload = tuple(b"x" * size for _ in range(records))
                for _ in range(count):
                    storage.append((RecordBatch(offset, 1, payload),))
                    offset += records
                    start = time.perf_counter()
                    storage.flush()
                    latencies.append((time.perf_counter() - start) * 1e3)
            latencies.sort()
            p50 = statistics.median(latencies)
            p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
            kib = records * size / 1024
            print(f"  batch of {records:>3} x {size:>6} B ({kib:8.1f} KiB): flush p50 {p50:6.2f} ms, p99 {p99:6.2f} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=0.5, help="measuring time per codec figure")
    parser.add_argument("--fsyncs", type=int, default=300, help="append+flush rounds per batch size")
    parser.add_argument("--dir", default=None, help="directory on the disk to measure (default: $TMPDIR)")
    args = parser.parse_args()
    bench_codec(args.seconds)
    bench_fsync(args.fsyncs, args.dir)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
