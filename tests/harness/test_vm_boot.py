"""A VM whose boot hangs after a power loss is booted once more, and only once more.

Around `vms.power_on` only: the "qemu" here is a real process started the way the real one is (`ip netns
exec` in a namespace of the test's own), which writes what a guest kernel writes to its console when a
task stays blocked, and then waits. The real VMs are in tests/harness_vagrant."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

from harness.backends.ledger import LEDGER_NAME, Ledger
from harness.backends.procs import is_same_process, start_time
from harness.backends.vms import POWER_ON_ATTEMPTS, STATE, BootHung, Cluster, _hung_task, power_on

pytestmark = [pytest.mark.root]

HUNG = "[  242.818899] INFO: task mount:131 blocked for more than 120 seconds."
# Counts its starts, writes a hung boot's console as the guest kernel would, then waits like a hung guest.
FAKE_QEMU = """
import sys, time
from pathlib import Path
starts, console = Path(sys.argv[1]), Path(sys.argv[2])
with starts.open("a") as f:
    f.write("boot\\n")
console.write_text("Loading, please wait...\\n" + sys.argv[3] + "\\n")
time.sleep(300)
"""


@pytest.fixture
def netns():
    name = f"kct-{secrets.token_hex(3)}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)


def _cluster(directory: Path, netns: str) -> Path:
    """A cluster dir as `up` leaves it, with one VM (kc1) whose qemu was powered off."""
    (directory / "logs").mkdir(parents=True)
    cluster = Cluster("t0", netns, "kvt0", "127.0.0.0/8", "tcg", "box-none", {"kc1": "127.0.0.1"}, 256, 1)
    (directory / STATE).write_text(json.dumps(asdict(cluster)))
    starts, console = directory / "starts.txt", directory / "logs" / "kc1.console"
    argv = [sys.executable, "-c", FAKE_QEMU, str(starts), str(console), HUNG]
    ledger = Ledger.create(directory / LEDGER_NAME)
    gone = subprocess.Popen(["true"])
    rid = ledger.record("process", node="kc1", argv=argv)
    ledger.update(rid, pid=gone.pid, starttime=start_time(gone.pid))
    gone.wait()
    ledger.mark_done(rid)  # a power loss: its qemu SIGKILLed
    return directory


def test_a_boot_the_guest_kernel_reports_hung_is_cut_short_and_tried_once_more(tmp_path, netns):
    directory = _cluster(tmp_path / "cluster", netns)
    with pytest.raises(BootHung) as caught:
        power_on(directory, "kc1")
    assert str(caught.value) == f"VM kc1: its boot hung: {HUNG.strip()}"
    assert (directory / "starts.txt").read_text().splitlines() == ["boot"] * POWER_ON_ATTEMPTS == ["boot", "boot"]
    logs = directory / "logs"
    assert sorted(p.name for p in logs.iterdir()) == ["kc1.console.hung-1", "kc1.console.hung-2", "kc1.qemu.log"]
    assert HUNG in (logs / "kc1.console.hung-1").read_text()
    ledger = Ledger.load(directory / LEDGER_NAME)
    booted = [e for e in ledger.all_entries() if e.kind == "process"][1:]
    assert len(booted) == 2 and not ledger.outstanding()  # each hung qemu was killed and marked done
    assert not any(is_same_process(e.fields["pid"], e.fields["starttime"]) for e in booted)


def test_only_the_kernels_hung_task_report_counts(tmp_path):
    console = tmp_path / "kc1.console"
    assert _hung_task(console) is None  # no console yet
    console.write_text("mount: /sys: sys already mounted or mount point busy.\nkchaos-init: kc1 up at 10.0.0.1/24\n")
    assert _hung_task(console) is None
    console.write_text(f"{HUNG}\n      Not tainted 6.1.0-50-cloud-amd64 #1 Debian 6.1.176-1\n{HUNG}\n")
    assert _hung_task(console) == HUNG.strip()
