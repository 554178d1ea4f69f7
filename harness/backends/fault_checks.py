"""`kchaos doctor`'s checks for the packet, clock and disk fault mechanisms: each one is carried out
for real on a throwaway target and its effect measured, so OK means the fault works here.

Each probe returns a one-line detail, or raises BackendError saying what did not work.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness.backends import clocks, disks, native
from harness.backends.packets import QUEUE, TREE_ROOT
from harness.backends.shell import BackendError, run
from vocab.faults.kinds import DiskFault

CLOCK_SKEW_S = 3600
PROBE_DELAY_MS = 60

# Run in a child under the shims: prints what it saw as JSON.
_CLOCK_CHILD = """
import json, time
t0 = time.monotonic(); time.sleep(0.05); slept = time.monotonic() - t0
print(json.dumps({"wall": time.time(), "slept": slept}))
"""
_DISK_CHILD = """
import json, os, sys, time
path = os.path.join(sys.argv[1], "probe")
fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
os.write(fd, b"x")
try:
    os.fsync(fd)
    print(json.dumps({"error": None}))
except OSError as exc:
    print(json.dumps({"error": exc.errno}))
"""
_UDP_CHILD = """
import json, socket, time
rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); rx.bind(("127.0.0.1", 0)); rx.settimeout(5)
tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
t0 = time.monotonic(); tx.sendto(b"kchaos-doctor", ("127.0.0.1", rx.getsockname()[1]))
rx.recv(64)
print(json.dumps({"rtt_ms": (time.monotonic() - t0) * 1000}))
"""


def _child(code: str, env: dict[str, str] | None, *args: str, netns: str | None = None) -> dict:
    prefix = ["ip", "netns", "exec", netns] if netns else []
    proc = subprocess.run(
        [*prefix, sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=60, check=False
    )
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise BackendError(f"probe process failed: {last}")
    return json.loads(proc.stdout)


def clock_probe() -> str:
    """A +1 h skew written to the timestamp file reaches a Python process, whose sleeps stay real."""
    try:
        library = clocks.find_libfaketime()
        with tempfile.TemporaryDirectory(prefix="kchaos-doctor-") as tmp:
            spec = Path(tmp) / "faketime"
            clocks.write_spec(spec, f"+{CLOCK_SKEW_S}.000 x1\n")
            seen = _child(_CLOCK_CHILD, {**os.environ, **clocks.preload_env(spec)})
    except native.NativeBuildError as exc:
        raise BackendError(str(exc)) from None
    skew = seen["wall"] - time.time()
    if abs(skew - CLOCK_SKEW_S) > 60:
        raise BackendError(f"libfaketime at {library} did not move the clock (skew {skew:+.0f} s)")
    if not 0.04 <= seen["slept"] < 5:
        raise BackendError(f"time.sleep(0.05) took {seen['slept']:.3f} s under libfaketime")
    return f"{library}: a +{CLOCK_SKEW_S // 3600} h skew reached a process; its sleeps stay real"


def disk_probe() -> str:
    """The shim fails an fsync under the directory with EIO when told to, and passes it when not."""
    try:
        with tempfile.TemporaryDirectory(prefix="kchaos-doctor-") as tmp:
            control, data = Path(tmp) / "control", Path(tmp) / "data"
            disks.create_control(control)
            data.mkdir()
            env = {**os.environ, **disks.preload_env(control, data)}
            healthy = _child(_DISK_CHILD, env, str(data))
            disks.set_fault(control, DiskFault("fail", ("fsync",), errno="EIO"))
            failing = _child(_DISK_CHILD, env, str(data))
    except native.NativeBuildError as exc:
        raise BackendError(str(exc)) from None
    if healthy["error"] is not None or failing["error"] != errno.EIO:
        raise BackendError(f"the disk shim did not work (healthy: {healthy['error']}, failing: {failing['error']})")
    return f"{native.shim_path('kchaos_disk').name}: fsync fails with EIO on demand, passes otherwise"


def nfqueue_probe(netns: str) -> str:
    """In `netns`: a statistic rule is accepted, and a packet sent to a NFQUEUE rule comes out delayed."""
    ipt = ["ip", "netns", "exec", netns, "iptables", "-w"]
    run([*ipt, "-A", "INPUT", "-p", "udp", "-m", "statistic", "--mode", "random", "--probability", "0", "-j", "DROP"])
    run([*ipt, "-A", "INPUT", "-p", "udp", "-j", "NFQUEUE", "--queue-num", str(QUEUE), "--queue-bypass"])
    daemon = subprocess.Popen(
        ["ip", "netns", "exec", netns, sys.executable, "-m", "harness.backends.delayd",
         f"--queue={QUEUE}", f"--delay-ms={PROBE_DELAY_MS}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=TREE_ROOT,
    )  # fmt: skip
    try:
        ready = daemon.stdout.readline().strip() if daemon.stdout else ""
        if ready != "ready":
            err = daemon.stderr.read().strip() if daemon.stderr else ""
            raise BackendError(f"delay daemon did not start: {err or 'no output'}")
        rtt = _child(_UDP_CHILD, None, netns=netns)["rtt_ms"]
    finally:
        daemon.terminate()
        daemon.communicate(timeout=10)
    if rtt < PROBE_DELAY_MS * 0.8:
        raise BackendError(f"a packet through NFQUEUE took {rtt:.0f} ms, not the {PROBE_DELAY_MS} ms delay")
    return f"loss (statistic) and delay (NFQUEUE + delay daemon: {rtt:.0f} ms for {PROBE_DELAY_MS} ms) work"
