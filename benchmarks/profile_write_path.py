"""Where the write path's CPU goes: py-spy on every process of `bench_write_path.py`'s cluster under its load.

    python benchmarks/profile_write_path.py [--seconds 15] [--in-flight 64] [--top 8] [--out DIR]

Starts the same cluster as `bench_write_path.py` (3 controllers and 1 broker, `python -m node.runtime`
processes, fsync on) and drives it with the same async admin client (IncrementalAlterConfigs through the
broker, 64 in flight), then samples the active controller, one follower, the broker and this process
(the client) with `py-spy record --gil --nonblocking --format raw` for `--seconds`. For each process it
prints the share of its samples by function: self (the function was running) and cumulative (one of
the node package's functions was on the stack). `--gil` samples the thread that holds the GIL, i.e. the
Python being run; `--all-threads` samples every thread py-spy thinks busy instead (it counts threads
blocked in fdatasync or a socket call too). A GIL sample is wall time: on a loaded machine the holder
may be off the CPU. The raw stacks stay in `--out` (for flame graphs, `py-spy record --format
flamegraph`, or speedscope).

Needs py-spy (`pip install py-spy`) and permission to ptrace the processes (root, or ptrace_scope 0).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_write_path import SETTINGS, kraft_client, measure  # type: ignore[import-not-found]

from node.runtime import event_loop
from node.runtime.local_cluster import NodeProcess, find_leader, kill_all, plan_cluster, wait_for


def frame_name(frame: str) -> str:
    """`func (path/to/file.py:12)` -> `func (file.py)`: one row per function, not per line."""
    name, _, where = frame.partition(" (")
    path = where.rstrip(")").rsplit(":", 1)[0]
    parts = Path(path).parts
    short = "/".join(parts[-2:]) if parts and parts[-2:-1] != ("",) else path
    return f"{name} ({short})"


def ours(frame: str) -> bool:
    """A frame of this project's node package (the cumulative rows skip the loop's and runpy's frames)."""
    path = frame.partition(" (")[2]
    if path.startswith(("node/runtime/__main__.py", "node/runtime/cli.py", "node/runtime/event_loop.py")):
        return False
    return "/node/" in path or path.startswith("node/")


def summarise(raw: Path, top: int) -> list[str]:
    """Self and cumulative shares of the samples in a py-spy raw (collapsed stacks) file."""
    own: collections.Counter[str] = collections.Counter()
    cumulative: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = [f for f in stack.split(";") if not f.startswith(("process ", "thread "))]
        if not frames:
            continue
        total += n
        own[frame_name(frames[-1])] += n
        for name in {frame_name(f) for f in frames if ours(f)}:
            cumulative[name] += n
    if total == 0:
        return ["  (no samples)"]
    lines = [f"  {total} samples; self:"]
    lines += [f"    {100 * n / total:5.1f}%  {name}" for name, n in own.most_common(top)]
    lines.append("  cumulative (the node package's functions on the stack):")
    lines += [f"    {100 * n / total:5.1f}%  {name}" for name, n in cumulative.most_common(top)]
    return lines


async def drive(address: str, in_flight: int, seconds: float, start_profilers) -> tuple[float, list[subprocess.Popen]]:  # type: ignore[no-untyped-def]
    client, alter = await kraft_client(address)
    try:
        await measure(alter, in_flight, 2, {})
        profilers = start_profilers()
        window = await measure(alter, in_flight, seconds + 1.5, {})
        return window.per_s, profilers
    finally:
        await client.__aexit__(None, None, None)


@contextlib.contextmanager
def cluster_under_test(base: Path, both_followers: bool = False) -> Iterator[tuple[str, dict[str, int | None]]]:
    """bench_write_path.py's cluster (3 controllers, 1 broker, fsync on), started in `base`: yields the
    broker's address and the pid of each role (None: this process, the client), one follower or both.
    Killed on the way out."""
    plan = plan_cluster(base, voters=3, observers=1, settings=SETTINGS)
    procs = {spec.node_id: NodeProcess(spec).start() for spec in plan.nodes}
    try:
        leader = wait_for(lambda: find_leader(plan.voters), 30, what="a leader")["node_id"]
        followers = [s.node_id for s in plan.voters if s.node_id != leader][: 2 if both_followers else 1]
        broker = plan.brokers[0]
        roles: dict[str, int | None] = {"active controller": procs[leader].pid}
        for i, follower in enumerate(followers):
            roles["follower controller" + (f" {i + 1}" if both_followers else "")] = procs[follower].pid
        roles["broker"] = procs[broker.node_id].pid
        roles["client"] = None
        yield broker.address, roles
    finally:
        kill_all(procs.values())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=15.0, help="how long py-spy samples")
    parser.add_argument("--in-flight", type=int, default=64)
    parser.add_argument("--rate", type=int, default=100, help="py-spy samples per second")
    parser.add_argument("--top", type=int, default=8, help="rows per process")
    parser.add_argument(
        "--all-threads",
        action="store_true",
        help="sample every thread that is not idle (default: only the one holding the GIL, i.e. running Python)",
    )
    parser.add_argument("--out", type=Path, help="keep the raw stacks here (default: a temporary dir)")
    args = parser.parse_args()
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(py_spy).exists():
        print("profile_write_path: py-spy not found; `pip install py-spy`", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="profile-write-path-") as tmp:
        out = args.out or Path(tmp) / "raw"
        out.mkdir(parents=True, exist_ok=True)
        with cluster_under_test(Path(tmp) / "kraft") as (address, targets):

            def start_profilers() -> list[subprocess.Popen]:
                started = []
                for role, pid in targets.items():
                    target = pid or os.getpid()
                    raw = out / f"{role.replace(' ', '-')}.txt"
                    started.append(
                        subprocess.Popen(
                            [
                                *(py_spy, "record", "--nonblocking", "--format", "raw", "--rate", str(args.rate)),
                                *("--duration", str(int(args.seconds)), "--pid", str(target), "-o", str(raw)),
                                *(() if args.all_threads else ("--gil",)),
                            ],
                            stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL,
                        )
                    )
                return started

            began = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
            per_s, profilers = event_loop.run(drive(address, args.in_flight, args.seconds, start_profilers))
            for proc in profilers:
                proc.wait(30)
        print(
            f"{began}: {per_s:,.0f} writes/s while sampled ({args.in_flight} in flight, py-spy {args.rate}/s, "
            f"event loop {event_loop.loop_name()})"
        )
        for role in targets:
            print(f"{role}:")
            print("\n".join(summarise(out / f"{role.replace(' ', '-')}.txt", args.top)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
