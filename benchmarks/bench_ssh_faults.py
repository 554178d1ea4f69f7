"""What a fault costs over SSH (printed figures, not a test). Needs root and openssh-server.

python benchmarks/bench_ssh_faults.py [--hosts 3] [--reps 20]

Hosts are network namespaces with their own sshd (tests/harness_ssh/sshd_hosts.py), so the network is a
local bridge: the figures are the SSH and process costs, without a real network's round trip. For each
action: median and 90th percentile wall milliseconds, and the CPU milliseconds of this process and its
ssh clients per call (getrusage of self + children), which the machine's other jobs do not inflate.
  - command: one `true` over the host's shared (ControlMaster) connection
  - new connection: the same without sharing (TCP + SSH handshake + key auth each time)
  - partition / heal_network: every host's nft set replaced, all hosts at once
  - pause / resume, kill / restart, clock bump: one node
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.backends.ssh import SshBackend
from tests.harness_ssh.sshd_hosts import PYTHON, sshd_hosts
from vocab.faults.kinds import ClockFault


def cpu_s() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def measure(name: str, reps: int, fn: Callable[[int], None]) -> None:
    walls, cpus = [], []
    for i in range(reps):
        c0, t0 = cpu_s(), time.perf_counter()
        fn(i)
        walls.append((time.perf_counter() - t0) * 1000)
        cpus.append((cpu_s() - c0) * 1000)
    walls.sort()
    p90 = walls[min(len(walls) - 1, int(len(walls) * 0.9))]
    print(f"{name:<24} {statistics.median(walls):8.1f} {p90:8.1f} {statistics.median(cpus):8.1f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hosts", type=int, default=3)
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args()
    names = [f"h{i}" for i in range(1, args.hosts + 1)]
    nodes = [f"n{i}" for i in range(1, args.hosts + 1)]
    with tempfile.TemporaryDirectory(prefix="kchaos-bench-ssh-") as tmp, sshd_hosts(Path(tmp), names) as hosts:
        backend = SshBackend(Path(tmp) / "run", nodes, hosts.inventory)
        t0 = time.perf_counter()
        with backend:
            setup_s = time.perf_counter() - t0
            backend.enable_faults(["clock"])
            for node in nodes:
                backend.start(node, [PYTHON, "-c", "import time; time.sleep(3600)"])
            print(f"setup (probe, deploy, packet filters on {args.hosts} hosts in parallel): {setup_s:.2f} s")
            print(f"{'action':<24} {'median':>8} {'p90':>8} {'cpu':>8}   (ms)")
            remote = backend.remotes["n1"]
            measure("command (shared conn.)", args.reps, lambda _: remote.run("true"))
            argv = [*remote.base_argv(), "-o", "ControlPath=none", remote.host.target, "true"]
            measure("new connection", args.reps, lambda _: subprocess.run(argv, check=True, capture_output=True))
            grudge = {nodes[0]: frozenset(nodes[1:])}
            measure("partition", args.reps, lambda _: backend.partition(grudge))
            measure("heal_network", args.reps, lambda _: backend.heal_network())
            measure("pause", args.reps, lambda i: (backend.resume("n2") if i else None, backend.pause("n2")))
            backend.resume("n2")
            measure("resume", args.reps, lambda _: (backend.pause("n2"), backend.resume("n2")))
            measure("kill", args.reps, lambda _: (backend.restart("n3"), backend.kill("n3")))
            measure("restart", args.reps, lambda _: (backend.kill("n3"), backend.restart("n3")))
            measure("clock bump", args.reps, lambda i: backend.clock("n1", ClockFault("bump", delta_ms=1000 + i)))
        print("(pause, resume, kill, restart rows include the opposite action that sets each repetition up)")


if __name__ == "__main__":
    main()
