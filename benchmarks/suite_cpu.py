"""How much CPU a command uses, and so the least wall time it could take on this machine's cores.

    python benchmarks/suite_cpu.py [--every 10] -- bash setup.sh test

Runs the command and samples the machine's CPU counters (/proc/stat) every `--every` seconds while it
runs. It prints the wall time, the CPU-seconds the machine spent busy meanwhile (user, system, irq and
softirq; idle, iowait and steal are not busy), the busy share of each sample as a short histogram, and
the floor: busy CPU-seconds / cores, the wall the same work would take with every core busy all the
time. A command whose floor is above a wall-time target cannot meet that target on this machine by
running its parts in parallel; only by doing less work.

Machine-wide on purpose: the suite's work runs in processes the test runner does not wait for (Docker
containers under dockerd, VMs, Kafka's JVMs), which per-process accounting would miss. So run it on an
otherwise quiet machine: what else runs is counted too. The command's own exit status is passed on.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time

BUSY = (0, 1, 2, 5, 6)  # user, nice, system, irq, softirq (fields of the "cpu" line of /proc/stat)


def cpu_counters() -> list[int]:
    with open("/proc/stat") as f:
        return [int(v) for v in f.readline().split()[1:9]]


def busy_and_total(before: list[int], after: list[int]) -> tuple[int, int, list[int]]:
    """Busy ticks, all ticks, and the per-field deltas between two readings of `cpu_counters`."""
    delta = [b - a for a, b in zip(before, after, strict=True)]
    return sum(delta[i] for i in BUSY), sum(delta), delta


def busy_share(before: list[int], after: list[int]) -> float:
    busy, total, _ = busy_and_total(before, after)
    return busy / total if total else 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--every", type=float, default=10.0, help="seconds between samples")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given (put it after --)")
    ticks = os.sysconf("SC_CLK_TCK")
    cores = os.cpu_count() or 1
    shares: list[float] = []
    done = threading.Event()

    def sample() -> None:
        last = cpu_counters()
        while not done.wait(args.every):
            now = cpu_counters()
            shares.append(busy_share(last, now))
            last = now

    sampler = threading.Thread(target=sample, daemon=True)
    start_counters, started = cpu_counters(), time.monotonic()
    sampler.start()
    try:
        rc = subprocess.call(command)
    except FileNotFoundError:
        print(f"suite_cpu: no such command: {command[0]}", file=sys.stderr)
        return 2
    finally:
        done.set()
    wall = time.monotonic() - started
    end_counters = cpu_counters()
    busy, _, delta = busy_and_total(start_counters, end_counters)
    busy_s = busy / ticks
    steal_s = delta[7] / ticks
    print(f"suite_cpu: {' '.join(command)}: exit {rc}")
    print(f"  wall {wall / 60:.1f} min; the machine busy for {busy_s / 60:.1f} CPU-minutes on {cores} cores")
    used = 100 * busy_s / (wall * cores)
    print(f"  ({used:.0f} % of what the cores could give; stolen by the host: {steal_s:.0f} s)")
    print(f"  floor: {busy_s / cores / 60:.1f} min of wall, with every core busy all the time")
    if shares:
        bins = [0] * 5
        for share in shares:
            bins[min(4, int(share * 5))] += 1
        labels = ("0-20", "20-40", "40-60", "60-80", "80-100")
        print("  busy share of the samples: " + ", ".join(f"{lab} %: {n}" for lab, n in zip(labels, bins, strict=True)))
    return rc


if __name__ == "__main__":
    sys.exit(main())
