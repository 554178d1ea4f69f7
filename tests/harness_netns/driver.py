"""A harness stand-in that builds a netns setup and then waits to be killed.

`driver.py RUN_DIR MARKER TAG` sets up two nodes running echo servers, partitions them, makes a ledgered
temp dir, prints one JSON line describing it all, then sleeps inside the backend's `with` block.
"""

import json
import sys
import time
from pathlib import Path

from harness.backends.netns import NetnsBackend
from harness.backends.resources import create_tmpdir
from vocab.faults import grudges

ECHO = str(Path(__file__).with_name("echo_server.py"))


def main() -> None:
    run_dir, marker, tag = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    nodes = ["n1", "n2"]
    with NetnsBackend(run_dir, nodes, tag=tag) as backend:
        pids = {n: backend.start(n, [sys.executable, ECHO, backend.address(n), "7000", marker]).pid for n in nodes}
        backend.partition(grudges.isolate("n1", nodes))
        assert backend.ledger is not None
        _, tmp = create_tmpdir(backend.ledger, run_dir)
        info = {"pids": pids, "netns": [backend.hosts[n].netns for n in nodes], "bridge": backend.bridge}
        print(json.dumps({**info, "tmpdir": str(tmp)}), flush=True)
        while True:
            time.sleep(1)


if __name__ == "__main__":
    main()
