"""A harness stand-in with every netns fault in force, waiting to be killed.

`fault_driver.py RUN_DIR MARKER` sets up three nodes running dual_echo.py with clock and disk faults
enabled (so preloaded), then puts on a delay + loss on every link, a clock bump on n1 and a strobe on
n3, a disk stall on n1 and a disk failure on n2, and pauses n2. It prints one JSON line describing it
all, then sleeps inside the backend's `with` block.
"""

import json
import sys
import time
from pathlib import Path

from harness.backends.netns import NetnsBackend
from vocab.faults.kinds import ClockFault, DiskFault, PacketFault

HERE = Path(__file__).parent


def main() -> None:
    run_dir, marker = Path(sys.argv[1]), sys.argv[2]
    nodes = ["n1", "n2", "n3"]
    with NetnsBackend(run_dir, nodes) as backend:
        backend.enable_faults(["packet", "clock", "pause", "disk_stall", "disk_fail"])
        pids = {}
        for n in nodes:
            argv = [sys.executable, str(HERE / "dual_echo.py"), backend.address(n), "7000", "7001", marker]
            pids[n] = backend.start(n, argv).pid
        backend.packet(None, PacketFault(loss=0.1, delay_ms=30, jitter_ms=5))
        backend.clock("n1", ClockFault("bump", delta_ms=60_000))
        backend.clock("n3", ClockFault("strobe", delta_ms=5_000, period_ms=50, duration_ms=600_000))
        backend.disk("n1", DiskFault("stall", ops=("fsync",), delay_ms=100))
        backend.disk("n2", DiskFault("fail", ops=("fsync", "write"), errno="EIO"))
        backend.pause("n2")
        nodes_dir = run_dir / "nodes"
        info = {
            "pids": pids,
            "netns": [backend.hosts[n].netns for n in nodes],
            "bridge": backend.bridge,
            "clock_files": [str(nodes_dir / n / "faketime") for n in nodes],
            "disk_files": [str(nodes_dir / n / "disk-fault") for n in nodes],
        }
        print(json.dumps(info), flush=True)
        while True:
            time.sleep(1)


if __name__ == "__main__":
    main()
