"""Real VMs booted on this machine (`kchaos vagrant up`): three Debian guests under qemu (TCG where KVM
does not work, as here), a 60 s chaos run on them through the ssh backend with partitions (nft in the
guests), kills, pauses and steps of each guest's own clock (`date -s`), and nothing left afterwards,
also when `up` itself was SIGKILLed mid-boot. No skip: if no VM boots, these fail.

Takes minutes: the first run builds the box with debootstrap (~7 min here, then cached by content
hash); booting three VMs under TCG ~1-2 min; the run ~4 min (Python is ~13x slower in a TCG guest)."""

from __future__ import annotations

import json
import os
import platform
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.backends.ledger import LEDGER_NAME, Ledger
from harness.backends.resources import link_names, netns_names
from harness.backends.vm_box import Box, cache_root
from harness.backends.vms import Cluster, destroy, guest_run, status, up
from harness.runner import run_test
from harness.test_spec import Cluster as Shape
from tests.harness_run.helpers import sim_spec

pytestmark = [pytest.mark.root]
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cluster_dir(tmp_path_factory) -> Iterator[Path]:
    directory = tmp_path_factory.mktemp("vms") / "cluster"
    try:
        up(directory, nodes=3, memory_mb=512, cpus=1, say=lambda line: print(line, file=sys.stderr))
        yield directory
    finally:
        made = Cluster.load(directory) if (directory / "cluster.json").exists() else None
        destroy(directory)
        if made is not None:
            assert_nothing_left(directory, made)


def qemu_processes(directory: Path) -> list[int]:
    """Live qemu processes whose command line names a file under `directory` (this cluster's disks)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if b"qemu-system" in argv[0] and any(str(directory).encode() in a for a in argv) and state != "Z":
            found.append(int(entry.name))
    return found


def assert_nothing_left(directory: Path, made: Cluster) -> None:
    assert made.netns not in netns_names()
    assert made.veth not in link_names()
    assert not qemu_processes(directory)
    assert not list(directory.glob("kchaos-*")), "the VMs' disks are still there"
    assert not Ledger.load(directory / LEDGER_NAME).outstanding()


@pytest.mark.timeout(1800)  # with the module's `up` (and the box's first build: ~7 min here)
def test_three_vms_boot_and_are_guests_of_their_own(cluster_dir):
    rows = status(cluster_dir)
    assert [r["vm"] for r in rows] == ["kc1", "kc2", "kc3"]
    for row in rows:
        assert row["running"], row
        hostname, kernel = row["guest"].split()
        assert hostname == row["vm"] != platform.node()
        assert kernel.endswith("-cloud-amd64") and kernel != platform.release()
    made = Cluster.load(cluster_dir)
    assert made.netns in netns_names() and made.veth in link_names()
    # The VMs' links live in the cluster's namespace: the host sees only the veth into it.
    assert not any(name.startswith("tap") and made.tag in name for name in link_names())
    taps = subprocess.run(["ip", "-n", made.netns, "-o", "link", "show", "type", "tun"], capture_output=True, text=True)
    assert taps.stdout.count("tap") == 3
    # No way out: a guest has no default route and reaches nothing beyond its own /24.
    key = Box(cache_root() / made.box).key
    route = guest_run(key, made.vms["kc1"], "ip route show default; ip route get 1.1.1.1 2>&1 || true")
    assert "default" not in route.stdout.split("\n")[0] and "unreachable" in route.stdout


@pytest.mark.timeout(1800)  # ~7 min here under a load of 20 on 2 cores
def test_chaos_run_on_the_vms_is_valid_with_guest_clock_steps(cluster_dir, tmp_path):
    spec = sim_spec(
        seed=5,
        backend="ssh",
        inventory=str(cluster_dir / "inventory.toml"),
        cluster=Shape(combined=3),
        nemesis=("partition", "kill", "pause", "clock"),
        nemesis_options={"clock": {"modes": ["bump", "strobe"]}},  # rate needs libfaketime
        time_limit_s=60.0,
        # Every kind may be active at once, each for 30 s, a start 3 s after the last one completed:
        # the first four starts are the four kinds (a fault takes seconds over ssh into a TCG guest).
        nemesis_max_active=0,
        nemesis_interval_s=3.0,
        nemesis_duration_s=30.0,
        concurrency=3,
        rate=10.0,
        recovery_s=30.0,
    )
    result = run_test(spec, root=tmp_path, say=lambda line: print(line, file=sys.stderr), progress=False)
    assert result.error is None, result.error
    run = result.run.path
    events = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
    started = {e["f"] for e in events if e["process"] == "nemesis" and e["type"] == "info"}
    assert {"start-partition", "start-kill", "start-pause", "start-clock"} <= started, started
    assert result.valid is True and result.exit_code == 0, result.checker_lines
    ledger = [json.loads(line) for line in (run / LEDGER_NAME).read_text().splitlines()]
    assert any(rec.get("kind") == "guest_clock" for rec in ledger), "no clock step reached a guest"
    assert not any(rec.get("kind") == "ssh_clock" for rec in ledger)  # no libfaketime on the VMs
    for i, node in enumerate(sorted(p.name for p in (run / "nodes").iterdir()), 1):
        log = (run / "nodes" / node / "stderr.log").read_text()
        assert f"host kc{i} (Linux " in log and f"host {platform.node()} " not in log
        assert "-cloud-amd64)" in log
    made = Cluster.load(cluster_dir)
    key = Box(cache_root() / made.box).key
    for address in made.vms.values():
        left = guest_run(key, address, "pgrep -f '[n]ode[.]runtime'; nft list tables", timeout=60)
        assert left.stdout.strip() == "", left.stdout


def test_destroy_after_up_was_sigkilled_mid_boot_leaves_nothing(tmp_path):
    """`up` killed with SIGKILL while a VM boots: `destroy` (a new process) removes all from the ledger."""
    directory = tmp_path / "killed"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    argv = [sys.executable, "-m", "harness", "vagrant", "up", "--dir", str(directory), "--nodes", "1", "--accel", "tcg"]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and not qemu_processes(directory):
        assert proc.poll() is None, "up ended before any VM started"
        time.sleep(0.5)
    assert qemu_processes(directory)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    made = Cluster.load(directory)
    assert made.netns in netns_names()
    done = kchaos_destroy(directory)
    assert done.returncode == 0, done.stderr
    assert f"namespace {made.netns}" in done.stdout
    assert_nothing_left(directory, made)
    again = kchaos_destroy(directory)
    assert again.returncode == 0 and "nothing to destroy" in again.stdout


def kchaos_destroy(directory: Path) -> subprocess.CompletedProcess[str]:
    """`kchaos vagrant destroy` in a process of its own, as after a crash."""
    argv = [sys.executable, "-m", "harness", "vagrant", "destroy", "--dir", str(directory)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
