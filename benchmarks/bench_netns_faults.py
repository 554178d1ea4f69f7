"""What the netns backend's packet, clock, pause and disk faults cost (root; prints figures).

1. Per call, in a child process: a wall-clock read (time.time) and a monotonic read with and
   without the clock preloads (libfaketime + kchaos_clock, FAKETIME_NO_CACHE=1); a 4 KiB write and
   an fdatasync on the data dir with and without the idle disk shim.
2. Per fault action on 3 namespaces (median of --repeat): packet loss on, packet delay on (starts a
   delay daemon per namespace), packet heal, clock bump, pause, resume, disk fault on, disk heal.
3. The reference cluster (3 controllers): sequential committed appends through POST /v1/append,
   median and p99 latency, with no preloads and with every shim preloaded (faults enabled, none on).

    python benchmarks/bench_netns_faults.py [--repeat 5] [--appends 300]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.backends import clocks, disks
from harness.backends.netns import NetnsBackend
from harness.db.kraft import METRICS_PORT, KraftDB
from harness.test_spec import Cluster
from vocab.faults.kinds import ClockFault, DiskFault, PacketFault

CALLS_CHILD = """
import os, sys, time
n = 200_000
def per_call(fn, n):
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t) / n * 1e9
fd = os.open(os.path.join(sys.argv[1], "bench"), os.O_WRONLY | os.O_CREAT, 0o644)
block = b"x" * 4096
out = {
    "time.time": per_call(time.time, n),
    "time.monotonic": per_call(time.monotonic, n),
    "write 4 KiB": per_call(lambda: os.pwrite(fd, block, 0), 20_000),
    "fdatasync": per_call(lambda: (os.pwrite(fd, block, 0), os.fdatasync(fd)), 200),
}
print(repr(out))
"""


def per_call_costs() -> None:
    with tempfile.TemporaryDirectory(prefix="kchaos-bench-") as tmp:
        data = Path(tmp) / "data"
        data.mkdir()
        spec, control = Path(tmp) / "faketime", Path(tmp) / "disk-fault"
        clocks.write_spec(spec, clocks.TRUE_TIME)
        disks.create_control(control)
        variants = {
            "plain": {},
            "clock preloads": clocks.preload_env(spec),
            "disk shim (idle)": disks.preload_env(control, data),
        }
        results = {}
        for name, extra in variants.items():
            out = subprocess.run(
                [sys.executable, "-c", CALLS_CHILD, str(data)],
                env={**os.environ, **extra},
                capture_output=True,
                text=True,
                check=True,
            )
            results[name] = eval(out.stdout)  # our own child's repr of a dict of floats
    print("per call (ns):")
    print(f"  {'':18}" + "".join(f"{v:>18}" for v in results))
    for call in results["plain"]:
        print(f"  {call:18}" + "".join(f"{results[v][call]:>18,.0f}" for v in results))


def timed(fn: Callable[[], object]) -> float:
    t = time.perf_counter()
    fn()
    return (time.perf_counter() - t) * 1000


def action_costs(repeat: int) -> None:
    nodes = ["n1", "n2", "n3"]
    echo = Path(__file__).resolve().parents[1] / "tests" / "harness_netns" / "dual_echo.py"
    with tempfile.TemporaryDirectory(prefix="kchaos-bench-") as tmp, NetnsBackend(Path(tmp) / "run", nodes) as b:
        b.enable_faults(["packet", "clock", "pause", "disk_stall"])
        for n in nodes:
            b.start(n, [sys.executable, str(echo), b.address(n), "7000", "7001", "kchaos-bench"])
        time.sleep(0.5)
        costs: dict[str, list[float]] = {}
        for _ in range(repeat):
            for name, fn in [
                ("packet loss on (all links)", lambda: b.packet(None, PacketFault(loss=0.1))),
                ("packet heal (loss)", b.heal_packet),
                ("packet delay on (all links)", lambda: b.packet(None, PacketFault(delay_ms=20, jitter_ms=5))),
                ("packet heal (delay)", b.heal_packet),
                ("clock bump", lambda: b.clock("n1", ClockFault("bump", delta_ms=1000))),
                ("clock reset", lambda: b.clock_reset("n1")),
                ("pause", lambda: b.pause("n2")),
                ("resume", lambda: b.resume("n2")),
                ("disk stall on", lambda: b.disk("n3", DiskFault("stall", delay_ms=10))),
                ("disk heal", lambda: b.disk_heal("n3")),
            ]:
                costs.setdefault(name, []).append(timed(fn))
    print(f"per fault action, 3 namespaces (ms, median of {repeat}):")
    for name, values in costs.items():
        print(f"  {name:28} {statistics.median(values):8.1f}")


def append_latencies(enabled: list[str], appends: int) -> list[float]:
    db = KraftDB(Cluster(controllers=3), {"kchaos.test.append.enable": "true"})
    with tempfile.TemporaryDirectory(prefix="kchaos-bench-") as tmp:
        run_dir = Path(tmp) / "run"
        with NetnsBackend(run_dir, list(db.nodes)) as b:
            b.enable_faults(enabled)
            db.install(b, run_dir)
            db.wait_ready(120)
            leader = db.leader()
            assert leader is not None
            conn = http.client.HTTPConnection(b.address(leader), METRICS_PORT, timeout=10)
            latencies = []
            for i in range(appends):
                t = time.perf_counter()
                conn.request("POST", "/v1/append", body=f"r{i}\n".encode())
                resp = conn.getresponse()
                json.loads(resp.read())
                if resp.status == 200:
                    latencies.append((time.perf_counter() - t) * 1000)
            conn.close()
            db.stop_all()
    return sorted(latencies)


def node_overhead(appends: int) -> None:
    print(f"committed append latency, 3 controllers, {appends} sequential appends (ms):")
    for name, kinds in [("no preloads", []), ("clock + disk preloads", ["clock", "disk_stall", "disk_fail"])]:
        lat = append_latencies(kinds, appends)
        p99 = lat[min(len(lat) - 1, int(0.99 * len(lat)))]
        print(f"  {name:24} median {statistics.median(lat):6.2f}  p99 {p99:6.2f}  ({len(lat)} committed)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--appends", type=int, default=300)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    per_call_costs()
    action_costs(args.repeat)
    node_overhead(args.appends)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
