"""Where the write path waits: the scheduler's view of `bench_write_path.py`'s cluster under its load.

    python benchmarks/sched_write_path.py [--seconds 2] [--in-flight 64] [--strip-ms 40] [--out DIR]

CPU per write (bench_write_path.py) and the profile of each process (profile_write_path.py) say what
the CPU is spent on; neither says whether the two cores are used at once. This script starts the same
cluster (3 controllers and 1 broker, fsync on, the same async admin client with 64 IncrementalAlterConfigs
in flight through the broker), records every context switch of the machine for `--seconds` with `perf
sched record -a`, and prints from `perf sched timehist`:

- each process's CPU per second of wall (its main thread, and its other threads: the fsync workers);
- for how much of the time none, one or both cores ran one of these processes;
- a short stretch of the recording drawn per core, one character per slice of time, to see the
  writes move from process to process.

Needs `perf` (Debian: `apt-get install linux-perf`) and root (or perf_event_paranoid -1).
"""

from __future__ import annotations

import argparse
import bisect
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from profile_write_path import cluster_under_test, drive  # type: ignore[import-not-found]

from node.runtime import event_loop

# `perf sched timehist`: time, [cpu], task (comm[tid] or comm[tid/pid]), wait, sch delay, run time (ms)
LINE = re.compile(r"^\s*(\d+\.\d+)\s+\[(\d+)\]\s+(.*?)\s+(-?[\d.]+)\s+(-?[\d.]+)\s+(-?[\d.]+)\s*$")
TASK = re.compile(r"\[(\d+)(?:/(\d+))?\]$")
SYMBOLS = {"active controller": "A", "follower controller 1": "F", "follower controller 2": "G", "broker": "B"}


@dataclass(frozen=True)
class Slice:
    """One stretch of a task on a core, in seconds."""

    start: float
    end: float
    cpu: int
    pid: int  # the thread group; 0 for the idle task
    main_thread: bool


def parse_timehist(text: str) -> list[Slice]:
    slices = []
    for line in text.splitlines():
        m = LINE.match(line)
        if m is None:
            continue
        end, cpu, task, run_ms = float(m[1]), int(m[2]), m[3], float(m[6])
        if task.startswith("<idle>"):
            pid, main = 0, True
        else:
            t = TASK.search(task)
            if t is None:
                continue
            pid, main = (int(t[2]), False) if t[2] else (int(t[1]), True)
        slices.append(Slice(end - run_ms / 1000, end, cpu, pid, main))
    return slices


def concurrency(slices: list[Slice], ours: set[int]) -> dict[int, float]:
    """Seconds during which exactly 0, 1, 2... of our processes' threads were on a core."""
    if not slices:
        return {}
    mine = [s for s in slices if s.pid in ours]
    edges = sorted([(s.start, 1) for s in mine] + [(s.end, -1) for s in mine])
    begin, finish = min(s.start for s in slices), max(s.end for s in slices)
    out: collections.Counter[int] = collections.Counter()
    running, at = 0, begin
    for when, step in edges:
        out[max(running, 0)] += max(0.0, when - at)
        running, at = running + step, when
    out[max(running, 0)] += max(0.0, finish - at)
    return dict(out)


def strip(
    slices: list[Slice], symbol: dict[int, str], cpus: list[int], start: float, ms: float, per_ms: float
) -> list[str]:
    """One row per core: at each step, the task that held the core longest in it (`.` idle, `o` others)."""
    rows = []
    width = int(ms * per_ms)
    for cpu in cpus:
        mine = sorted((s for s in slices if s.cpu == cpu), key=lambda s: s.start)
        starts = [s.start for s in mine]
        row = []
        for k in range(width):
            lo, hi = start + k / per_ms / 1000, start + (k + 1) / per_ms / 1000
            best, held = ".", 0.0
            for s in mine[max(0, bisect.bisect_right(starts, lo) - 1) :]:
                if s.start >= hi:
                    break
                overlap = min(s.end, hi) - max(s.start, lo)
                if overlap > held:
                    held = overlap
                    best = "." if s.pid == 0 else symbol.get(s.pid, "o")
                    if best != "." and best != "o" and not s.main_thread:
                        best = best.lower()
            row.append(best)
        rows.append(f"  cpu{cpu} " + "".join(row))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=2.0, help="how long perf records (every context switch)")
    parser.add_argument("--in-flight", type=int, default=64)
    parser.add_argument("--strip-ms", type=float, default=40.0, help="how much of the recording to draw")
    parser.add_argument("--per-ms", type=float, default=4.0, help="characters per millisecond in the drawing")
    parser.add_argument("--out", type=Path, help="keep perf.data and the timehist text here")
    args = parser.parse_args()
    perf = shutil.which("perf")
    if perf is None:
        print("sched_write_path: perf not found; `apt-get install linux-perf`", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="sched-write-path-") as tmp:
        out = args.out or Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        data = out / "perf.data"
        with cluster_under_test(Path(tmp) / "kraft", both_followers=True) as (address, targets):

            def start_recording() -> list[subprocess.Popen]:
                return [
                    subprocess.Popen(
                        [perf, "sched", "record", "-a", "-o", str(data), "--", "sleep", str(args.seconds)],
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                    )
                ]

            began = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
            per_s, recorders = event_loop.run(drive(address, args.in_flight, args.seconds, start_recording))
            for proc in recorders:
                proc.wait(60)
        text = subprocess.run(
            [perf, "sched", "timehist", "-i", str(data)], capture_output=True, text=True, check=False
        ).stdout
        (out / "timehist.txt").write_text(text)
    slices = parse_timehist(text)
    if not slices:
        print("sched_write_path: perf recorded no context switches (is perf allowed here?)", file=sys.stderr)
        return 1
    pids = {role: pid or os.getpid() for role, pid in targets.items()}
    wall = max(s.end for s in slices) - min(s.start for s in slices)
    cpus = sorted({s.cpu for s in slices})
    print(
        f"{began}: {per_s:,.0f} writes/s while recorded ({args.in_flight} in flight, {wall:.2f} s of every "
        f"context switch on {len(cpus)} cores, event loop {event_loop.loop_name()})"
    )
    print("CPU per second of wall (cores): main thread + other threads (fsync workers)")
    by_pid: collections.Counter[tuple[int, bool]] = collections.Counter()
    for s in slices:
        by_pid[s.pid, s.main_thread] += s.end - s.start
    ours = set(pids.values())
    for role, pid in pids.items():
        main_s, other_s = by_pid[pid, True] / wall, by_pid[pid, False] / wall
        print(f"  {role:<22} {main_s + other_s:4.2f} = {main_s:4.2f} + {other_s:4.2f}")
    rest = sum(v for (pid, _), v in by_pid.items() if pid not in ours and pid != 0) / wall
    print(f"  {'anything else':<22} {rest:4.2f}")
    print(f"  {'idle':<22} {by_pid[0, True] / wall:4.2f}")
    together = concurrency(slices, ours)
    total = sum(together.values()) or 1.0
    shares = ", ".join(f"{n if n < 2 else '2+'}: {100 * v / total:.0f} %" for n, v in _folded(together).items())
    print(f"Cores running the write path's processes at once (share of the time): {shares}")
    symbol = {pid: SYMBOLS.get(role, "C") for role, pid in pids.items()}
    legend = "A active, F G followers, B broker, C client (lower case: their other threads), o anything else, . idle"
    middle = min(s.start for s in slices) + wall / 2
    print(
        f"{args.strip_ms:.0f} ms from the middle of the recording, {1000 / args.per_ms:.0f} µs a character ({legend}):"
    )
    print("\n".join(strip(slices, symbol, cpus, middle, args.strip_ms, args.per_ms)))
    return 0


def _folded(together: dict[int, float]) -> dict[int, float]:
    out = {0: together.get(0, 0.0), 1: together.get(1, 0.0)}
    out[2] = sum(v for n, v in together.items() if n >= 2)
    return out


if __name__ == "__main__":
    sys.exit(main())
