"""FileStorage's own CPU cost, on the operating system's filesystem and on the simulator's SimFS
(printed figures, not a test). fsync latency is the disk's business: see bench_codec.py.

    python benchmarks/bench_storage.py [--batches 20000] [--dir DIR]

1. append: batches per second appended (encode + write), no fsync, 64 KiB segments.
2. append + flush: the same with a flush after every batch (on the OS: write + fdatasync).
3. load: batches per second read back at start-up (scan, CRC check, fsync of what was read).

Runs against whichever `node` package is first on PYTHONPATH, so the same script measures the tree
before and after a change to FileStorage; the SimFS rows need node.sim.simfs.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from node.raft.records import RecordBatch
from node.runtime.file_storage import FileStorage

SEGMENT_BYTES = 64 << 10


def batches(count: int) -> list[RecordBatch]:
    return [RecordBatch(2 * i, 1, (b"key-%d" % i, b"v" * 40)) for i in range(count)]


def timed(fn: Callable[[], None]) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


def measure(name: str, make: Callable[[str], FileStorage], count: int, flush_count: int) -> None:
    """`make(name)` opens a FileStorage on a data dir of that name."""
    log = batches(count)

    def append_all() -> None:
        with make("appended") as s:
            s.load()
            for b in log:
                s.append((b,))
            s.flush()

    def append_and_flush() -> None:
        with make("flushed") as s:
            s.load()
            for b in log[:flush_count]:
                s.append((b,))
                s.flush()

    def load() -> None:
        with make("appended") as s:
            assert len(s.load().batches) == count

    appended = timed(append_all)
    loaded = timed(load)
    flushed = timed(append_and_flush)
    print(
        f"  {name:<28} append {count / appended:>9,.0f}/s   load {count / loaded:>9,.0f}/s   "
        f"append+flush {flush_count / flushed:>8,.0f}/s (CPU)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=20_000)
    parser.add_argument("--flushes", type=int, default=2_000)
    parser.add_argument("--dir", default=None, help="directory for the OS rows (default: $TMPDIR)")
    args = parser.parse_args()
    print(f"FileStorage, {args.batches} batches of 2 records (~80 B), {SEGMENT_BYTES >> 10} KiB segments; CPU seconds")
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="bench-storage-") as d:
        for run in range(2):
            root = Path(d) / f"run{run}"
            measure(
                "operating system",
                lambda name, root=root: FileStorage(root / name, 1, segment_bytes=SEGMENT_BYTES),
                args.batches,
                args.flushes,
            )
    try:
        from node.sim.simfs import SimFS
    except ImportError:
        print("  (no node.sim.simfs in this tree)")
        return 0
    for _ in range(2):
        fs = SimFS()
        measure(
            "SimFS (simulator)",
            lambda name, fs=fs: FileStorage(f"/{name}", 1, segment_bytes=SEGMENT_BYTES, fs=fs),  # type: ignore[call-arg]
            args.batches,
            args.flushes,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
