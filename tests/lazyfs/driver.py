"""A harness stand-in with lazyfs data dirs that waits to be killed.

`driver.py RUN_DIR MARKER` sets up two netns nodes with lose_unsynced enabled, starts a process per node
that keeps a file open in its data dir, prints one JSON line (mount points, daemon pids), then sleeps
inside the backend's `with` block (so SIGTERM/SIGINT tear down, SIGKILL leaves everything to heal).
"""

import json
import sys
import time
from pathlib import Path

from harness.backends.netns import NetnsBackend

HOLDER = "import sys, time; f = open(sys.argv[1] + '/held', 'ab'); f.write(b'x'); f.flush(); time.sleep(600)"


def main() -> None:
    run_dir, marker = Path(sys.argv[1]), sys.argv[2]
    nodes = ["n1", "n2"]
    with NetnsBackend(run_dir, nodes) as backend:
        backend.enable_faults(["lose_unsynced"])
        pids = {n: backend.start(n, [sys.executable, "-c", HOLDER, backend.data_dir(n), marker]).pid for n in nodes}
        while not all((Path(backend.data_dir(n)) / "held").exists() for n in nodes):
            time.sleep(0.05)
        info = {
            "pids": pids,
            "mounts": {n: backend.data_dir(n) for n in nodes},
            "daemons": {n: m.popen.pid for n, m in backend.lazyfs.mounts.items()},
            "bridge": backend.bridge,
        }
        print(json.dumps(info), flush=True)
        while True:
            time.sleep(1)


if __name__ == "__main__":
    main()
