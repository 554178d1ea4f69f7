"""Real VMs booted on this machine (`kchaos vagrant up`): three Debian guests under qemu (TCG where KVM
does not work, as here), a 60 s chaos run on them through the ssh backend with partitions (nft in the
guests), kills, pauses and steps of each guest's own clock (`date -s`), and nothing left afterwards,
also when `up` itself was SIGKILLed mid-boot. No skip: if no VM boots, these fail.

Also: a planted bug the simulator found, reproduced on the VMs (`kchaos reproduce --backend vagrant`),
the whole-VM faults (power loss, VM pause, netem in the guests), `kchaos heal` booting a VM that a
run killed mid-power-loss left off, Apache Kafka on the guests' own Java under a kill and a power
loss, and the guests' own etcd under kills, power losses and clock steps. All share one module cluster
(1 GiB guests, so that a Kafka node fits).

Takes minutes: the first run builds the box with debootstrap (~7 min here, then cached by content
hash); booting three VMs under TCG ~1 min; each run ~4 min (Python is ~13x slower in a TCG guest);
the whole module 12 min 50 s here with the box cached."""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from harness.backends.ledger import LEDGER_NAME, Ledger
from harness.backends.resources import link_names, netns_names
from harness.backends.vm_box import Box, cache_root
from harness.backends.vm_cache import LEASES, live_leases
from harness.backends.vms import Cluster, destroy, guest_run, live_qemu, status, up
from harness.cli import main
from harness.db.kafka.dist import installed_jars
from harness.runner import run_test
from harness.test_spec import Cluster as Shape
from nemesis.nemesis import DOWN_KINDS
from tests.harness_run.helpers import sim_spec

pytestmark = [pytest.mark.root]
REPO = Path(__file__).resolve().parents[2]
# Three combined nodes, one per VM, and a load a TCG guest keeps up with.
VM_SHAPE: dict[str, Any] = {"cluster": Shape(combined=3), "concurrency": 3, "rate": 10.0}


@pytest.fixture(scope="module")
def cluster_dir(tmp_path_factory) -> Iterator[Path]:
    directory = tmp_path_factory.mktemp("vms") / "cluster"
    try:
        up(directory, nodes=3, cpus=1, say=lambda line: print(line, file=sys.stderr))  # 1 GiB each: Kafka fits
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


def run_on_vms(inventory: Path, root: Path, **changes: Any) -> Any:
    """A run of 3 combined nodes on the VMs. Every kind may be active at once, a start 3 s after the
    last one completed, so the first starts are one of each kind (a fault takes seconds over ssh
    into a TCG guest)."""
    spec = sim_spec(backend="ssh", inventory=str(inventory), nemesis_max_active=0, nemesis_interval_s=3.0, **VM_SHAPE)
    spec = dataclasses.replace(spec, **changes)
    result = run_test(spec, root=root, say=lambda line: print(line, file=sys.stderr), progress=False)
    assert result.error is None, result.error
    return result


def assert_nothing_left(directory: Path, made: Cluster) -> None:
    assert made.netns not in netns_names()
    assert made.veth not in link_names()
    assert not qemu_processes(directory)
    assert not list(directory.glob("kchaos-*")), "the VMs' disks are still there"
    assert not Ledger.load(directory / LEDGER_NAME).outstanding()
    leases = cache_root() / made.box / LEASES  # the box is free to be pruned again
    assert str(directory.resolve()) not in [p.read_text().strip() for p in leases.glob("*")]


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
    assert f"the cluster in {cluster_dir.resolve()}" in live_leases(cache_root() / made.box)  # no prune takes it
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
    result = run_on_vms(
        cluster_dir / "inventory.toml",
        tmp_path,
        seed=5,
        nemesis=("partition", "kill", "pause", "clock"),
        nemesis_options={"clock": {"modes": ["bump", "strobe"]}},  # rate needs libfaketime
        time_limit_s=60.0,
        nemesis_duration_s=30.0,
        recovery_s=30.0,
        recovery_tail_s=10.0,  # the window ends 10 s after its first committed write
    )
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
    argv = [sys.executable, "-m", "harness", "vagrant", "up", "--dir", str(directory), "--nodes", "1", "--accel", "tcg"]
    proc = subprocess.Popen(argv, env=repo_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and not qemu_processes(directory):
        assert proc.poll() is None, "up ended before any VM started"
        time.sleep(0.5)
    assert qemu_processes(directory)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    made = Cluster.load(directory)
    assert made.netns in netns_names()
    done = kchaos("vagrant", "destroy", "--dir", str(directory), timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"namespace {made.netns}" in done.stdout
    assert_nothing_left(directory, made)
    again = kchaos("vagrant", "destroy", "--dir", str(directory), timeout=120)
    assert again.returncode == 0 and "nothing to destroy" in again.stdout


def kchaos(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """`kchaos ARGS` in a process of its own, as after a crash (this checkout's code)."""
    argv = [sys.executable, "-m", "harness", *args]
    return subprocess.run(argv, env=repo_env(), capture_output=True, text=True, timeout=timeout)


def repo_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


# Faults the nemesis aims only at running nodes (a partition or a clock step may hit a killed one)
UP_NODES_ONLY = frozenset({"start-kill", "start-pause", "start-lose_unsynced", "start-corrupt"})


def _fault_starts(run: Path) -> list[tuple[str, Any]]:
    """The fault starts that did something, in order: (f, targets); a fault aimed at a role (the
    leader) hits whoever holds it in the run, so only its kind counts."""
    return [(f, targets) for f, targets, _ in _fault_starts_and_down(run)]


def _fault_starts_and_down(run: Path) -> list[tuple[str, Any, set[str]]]:
    """`_fault_starts`, each with the nodes a fault that takes nodes down (`DOWN_KINDS`) held down
    when it started."""
    out: list[tuple[str, Any, set[str]]] = []
    down: dict[str, set[str]] = {}  # kind -> the nodes its active fault took down
    for line in (run / "history.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event["process"] != "nemesis" or event["type"] != "info":
            continue
        value = event["value"] if isinstance(event["value"], dict) else {}
        action, _, kind = event["f"].partition("-")
        if action == "stop":
            down.pop(kind, None)
        elif action == "start":
            role = value.get("mode") in ("leader", "follower", "isolate-leader", "leader-from-controllers")
            out.append((event["f"], None if role else value.get("targets"), set().union(*down.values())))
            if kind in DOWN_KINDS:
                down[kind] = set(value.get("targets") or ())
    return out


@pytest.mark.timeout(2400)  # the simulator ~10 s; each reproduction on the VMs ~5 min here
def test_a_planted_bug_found_in_the_simulator_is_caught_again_on_the_vms(cluster_dir, tmp_path, capsys):
    """`kchaos reproduce RUN --backend vagrant`: the simulator's seed and fault timeline on the VMs.
    KAFKA-13836's bug (a broker's read carries the offset of the log it fetched, not of the image it
    applied) shows wherever a broker applies behind its fetches, which a TCG guest does all the time."""
    spec = sim_spec(
        seed=2,  # seed 1 stopped catching it when issue 30's election changes moved the timing (2-6 do)
        nemesis=("partition", "kill", "pause"),
        nemesis_buggify=False,  # the simulator's targeted faults are not replayed elsewhere
        nemesis_interval_s=5.0,
        nemesis_duration_s=20.0,
        time_limit_s=60.0,
        recovery_s=30.0,
        bugs=("broker-read-offset-not-applied",),
        **VM_SHAPE,
    )
    original = run_test(spec, root=tmp_path / "sim", say=lambda _: None, progress=False)
    assert original.valid is False and original.exit_code == 1, original.checker_lines
    # The bug shows only in a read that falls between a fetch and its apply, so a run on the VMs may
    # miss it (CI: one run in many read valid): up to three runs, stopping at the first that catches it.
    argv = ["reproduce", str(original.run.path), "--backend", "vagrant", "--cluster", str(cluster_dir)]
    code = main([*argv, "--attempts", "3", "--results", str(tmp_path / "vms"), "--no-progress"])
    out, err = capsys.readouterr()
    print(err, out)  # each attempt, and the last one's verdicts checker by checker
    assert code == 1, out
    image_reads = next(line.split() for line in out.splitlines() if line.startswith("image-reads"))
    assert image_reads[1:] == ["INVALID", "INVALID"], out
    assert "reproduced: yes" in out
    tries = int(next(line for line in out.splitlines() if line.startswith("attempts: ")).split()[1])
    assert err.count("running it again") == tries - 1
    run = Path(next(line for line in out.splitlines() if line.startswith("run directory: ")).split(": ", 1)[1])
    assert len([p for p in (tmp_path / "vms").glob("*/2*") if p.is_dir()]) == tries
    test = json.loads((run / "test.json").read_text())
    assert test["backend"] == "ssh" and test["inventory"] == str(cluster_dir / "inventory.toml")
    assert test["reproduces"] == str(original.run.path) and test["bugs"] == ["broker-read-offset-not-applied"]
    assert test["attempt"] == tries
    # The same faults on the same nodes, in the same order, all of them. A fault takes seconds over ssh
    # into a TCG guest (a kill of three nodes ~12 s) and the nemesis does one at a time, so the replay
    # falls behind its recorded times; the clients run on until its last fault has been carried out.
    # A kill aimed at the leader hits the VMs' leader, which need not be the simulator's: a later fault
    # aimed by name then skips a recorded node that this kill took down (a suite run paused n3 where
    # the simulator had paused n2 and n3), and only such a node.
    replayed, recorded = _fault_starts_and_down(run), _fault_starts(original.run.path)
    assert len(recorded) >= 3 and [f for f, _, _ in replayed] == [f for f, _ in recorded], (replayed, recorded)
    for (f, targets, down), (_, wanted) in zip(replayed, recorded, strict=True):
        skipped = down if f in UP_NODES_ONLY else set()
        expected = None if wanted is None else [node for node in wanted if node not in skipped]
        assert targets == expected, (f, targets, wanted, down, replayed, recorded)
    assert f"faults: {len(recorded)} of the {len(recorded)} recorded fault starts carried out" in out, out
    for i, node in enumerate(sorted(p.name for p in (run / "nodes").iterdir()), 1):
        assert f"host kc{i} (Linux " in (run / "nodes" / node / "stderr.log").read_text()


@pytest.mark.timeout(1800)  # ~6 min here: a power-cycled VM boots again under TCG (~1 min)
def test_whole_vm_faults_power_loss_vm_pause_and_netem(cluster_dir, tmp_path):
    """Power loss of a whole VM (qemu SIGKILLed, booted again from its disk), a VM stopped as a whole
    (SIGSTOP of its qemu: `pause = "vm"` in the inventory), and packet loss and delay by netem in the
    guests, all at once on the correct cluster: valid, and nothing left in the guests."""
    inventory = tmp_path / "inventory.toml"
    text = (cluster_dir / "inventory.toml").read_text()
    inventory.write_text(text.replace('pause = "process"', 'pause = "vm"'))
    before = {name: guest_boot(cluster_dir, name) for name in ("kc1", "kc2", "kc3")}
    result = run_on_vms(
        inventory,
        tmp_path,
        seed=3,
        nemesis=("lose_unsynced", "pause", "packet"),
        nemesis_options={"packet": {"loss": 0.2, "delay_ms": 100, "jitter_ms": 50}},
        time_limit_s=45.0,
        nemesis_duration_s=15.0,
        recovery_s=60.0,
        recovery_tail_s=10.0,
    )
    run = result.run.path
    started = [f for f, _ in _fault_starts(run)]
    assert {"start-lose_unsynced", "start-pause", "start-packet"} <= set(started), started
    ledger = [json.loads(line) for line in (run / LEDGER_NAME).read_text().splitlines()]
    kinds = {rec.get("kind") for rec in ledger}
    assert {"vm_power", "vm_paused", "vm_netem"} <= kinds, kinds
    assert not Ledger.load(run / LEDGER_NAME).outstanding()
    assert result.valid is True and result.exit_code == 0, result.checker_lines
    # The power-cycled VM booted again (a new boot id) and runs; the others kept theirs.
    off = {rec["host"]["name"] for rec in ledger if rec.get("kind") == "vm_power"}
    for name, boot in before.items():
        now = guest_boot(cluster_dir, name)
        assert (now != boot) == (name in off), (name, boot, now, off)
    assert all(row["running"] for row in status(cluster_dir))
    made = Cluster.load(cluster_dir)
    key = Box(cache_root() / made.box).key
    for address in made.vms.values():
        left = guest_run(key, address, "tc qdisc show dev eth0; pgrep -f '[n]ode[.]runtime'", timeout=60)
        assert "netem" not in left.stdout and "prio" not in left.stdout, left.stdout


@pytest.mark.skipif(not installed_jars(), reason="needs the Kafka jars (bash setup.sh)")
@pytest.mark.timeout(1800)  # ~9 min here: three JVMs start in TCG guests, then again after each fault
def test_apache_kafka_on_the_vms_survives_a_kill_and_a_power_loss_of_its_leader(cluster_dir, tmp_path):
    """Apache Kafka as the system under test on the VMs: each guest's own java (the box's JRE) runs the
    jars shipped to it. The leader is killed, then the leader's whole VM loses power (lose_unsynced on a
    VM: qemu SIGKILLed, the guest's unsynced writes gone, a boot from its disk), which the lazyfs mount
    cannot do to Kafka elsewhere. Every acknowledged config change is still there, and nothing is left."""
    result = run_on_vms(
        cluster_dir / "inventory.toml",
        tmp_path,
        sut="kafka",
        workload="config-register",
        seed=3,  # in the order the seed draws them: a kill of the leader, then its power loss
        nemesis=("kill", "lose_unsynced"),
        time_limit_s=40.0,
        nemesis_interval_s=10.0,
        nemesis_duration_s=10.0,
        ready_timeout_s=600.0,  # three JVMs starting at once in TCG guests on 2 cores: ~3 min here
        # The leader is killed, and while it restarts the new leader loses power: two of the three JVMs
        # start again at once in TCG guests. Writes committed again 128 s after the final heal here,
        # quiet; the window leaves room for a loaded machine, and ends 10 s after that first write.
        recovery_s=300.0,
        recovery_tail_s=10.0,
    )
    run = result.run.path
    starts = _fault_starts(run)
    assert [f for f, _ in starts] == ["start-kill", "start-lose_unsynced"], starts
    ledger = [json.loads(line) for line in (run / LEDGER_NAME).read_text().splitlines()]
    powered = {rec["host"]["name"] for rec in ledger if rec.get("kind") == "vm_power"}
    assert len(powered) == 1, ledger
    assert not Ledger.load(run / LEDGER_NAME).outstanding()
    assert result.valid is True and result.exit_code == 0, result.checker_lines
    verdicts = json.loads((run / "results.json").read_text())["checkers"]
    assert verdicts["committed-loss"]["valid"] is True and verdicts["prefix-reads"]["reads"] > 0
    started = next(rec for rec in ledger if rec.get("kind") == "ssh_process")
    assert started["argv"][0] == "java" and "/opt/kafka-" in started["argv"][started["argv"].index("-cp") + 1]
    made = Cluster.load(cluster_dir)
    key = Box(cache_root() / made.box).key
    # Each fault's node came back. The killed one's log shows a second start. The power loss took with it
    # what its guest had not written back, its log's last lines among them, so that node shows a start
    # after its guest's new boot instead. (Node nI runs on VM kcI: the inventory's hosts, in order.)
    targets = _fault_targets(run)
    kafka_starts = {n.name: _kafka_starts(n / "stdout.log") for n in (run / "nodes").iterdir()}
    for node in targets["kill"] - targets["lose_unsynced"]:
        assert len(kafka_starts[node]) == 2, (node, kafka_starts)
    (lost,) = targets["lose_unsynced"]
    booted = float(guest_run(key, made.vms[f"kc{lost[1:]}"], "awk '/^btime/ {print $2}' /proc/stat", timeout=60).stdout)
    assert kafka_starts[lost] and kafka_starts[lost][-1] >= booted, (lost, kafka_starts[lost], booted)
    for address in made.vms.values():
        left = guest_run(key, address, "pgrep -f '[k]afka[.]Kafka'", timeout=60)
        assert left.stdout.strip() == "", left.stdout


@pytest.mark.timeout(1200)  # etcd starts in seconds even in a TCG guest; the power-lost VM boots again
def test_etcd_on_the_vms_survives_a_kill_a_power_loss_and_steps_of_its_clock(cluster_dir, tmp_path):
    """etcd as the system under test on the VMs, each guest running the box's own etcd 3.4. Two faults
    reach it only here: a power loss of a member's whole VM (bbolt cannot open a file on the lazyfs
    mount) and steps of its guest's kernel clock (etcd is Go and reads the clock without libc, so
    libfaketime misses it). Every acknowledged write is still read back (linearizable register)."""
    result = run_on_vms(
        cluster_dir / "inventory.toml",
        tmp_path,
        sut="etcd",
        workload="register",
        seed=1,  # draws a kill of a majority, a clock step, a power loss, a kill of the leader
        nemesis=("kill", "lose_unsynced", "clock"),
        nemesis_options={"clock": {"modes": ["bump", "strobe"]}},  # rate needs libfaketime
        time_limit_s=30.0,
        nemesis_duration_s=8.0,
        recovery_s=120.0,  # a power-lost VM boots again under TCG before its member serves
        recovery_tail_s=5.0,
    )
    run = result.run.path
    started = {f for f, _ in _fault_starts(run)}
    assert {"start-kill", "start-lose_unsynced", "start-clock"} <= started, started
    assert result.valid is True and result.exit_code == 0, result.checker_lines
    verdicts = json.loads((run / "results.json").read_text())["checkers"]
    assert verdicts["linearizable"]["valid"] is True, verdicts
    ledger = [json.loads(line) for line in (run / LEDGER_NAME).read_text().splitlines()]
    assert any(rec.get("kind") == "vm_power" for rec in ledger), ledger
    assert any(rec.get("kind") == "guest_clock" for rec in ledger), "no clock step reached a guest"
    assert not any(rec.get("kind") == "ssh_clock" for rec in ledger)  # no libfaketime on the VMs
    assert not Ledger.load(run / LEDGER_NAME).outstanding()
    spawned = [rec for rec in ledger if rec.get("kind") == "ssh_process"]
    assert spawned and all(rec["argv"][0] == "etcd" for rec in spawned)  # each guest's own etcd
    made = Cluster.load(cluster_dir)
    key = Box(cache_root() / made.box).key
    # The power-lost member started again after its guest's new boot (etcd's zap log, in the guest's UTC).
    (lost,) = _fault_targets(run)["lose_unsynced"]
    booted = float(guest_run(key, made.vms[f"kc{lost[1:]}"], "awk '/^btime/ {print $2}' /proc/stat", timeout=60).stdout)
    assert _etcd_starts(run / "nodes" / lost / "stderr.log")[-1] >= booted, lost
    for node in sorted(p.name for p in (run / "nodes").iterdir()):
        status_doc = json.loads((run / "nodes" / node / "etcd-status.json").read_text())
        assert status_doc["version"].startswith("3.4"), status_doc
    for address in made.vms.values():
        left = guest_run(key, address, "pgrep -x etcd", timeout=60)
        assert left.stdout.strip() == "", left.stdout


def _etcd_starts(stderr_log: Path) -> list[float]:
    """When an etcd member's log says it started, as epoch seconds (zap's "ts", the guest's UTC)."""
    starts = []
    for line in stderr_log.read_text(errors="replace").splitlines():
        if '"msg":"starting an etcd server"' in line:
            stamp = json.loads(line)["ts"]
            starts.append(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp())
    return starts


def _fault_targets(run: Path) -> dict[str, set[str]]:
    """The nodes each fault kind's starts hit in the run, as its history's info events name them."""
    out: dict[str, set[str]] = {}
    for line in (run / "history.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event["process"] == "nemesis" and event["type"] == "info" and event["f"].startswith("start-"):
            value = event["value"] if isinstance(event["value"], dict) else {}
            out.setdefault(event["f"].removeprefix("start-"), set()).update(value.get("targets") or ())
    return out


def _kafka_starts(stdout_log: Path) -> list[float]:
    """When a Kafka node's log says it started, as epoch seconds (its timestamps are the guest's UTC)."""
    text = stdout_log.read_text(errors="replace")
    stamps = re.findall(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),\d+\] INFO .*Kafka Server started", text, re.M)
    return [datetime.strptime(s, "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC).timestamp() for s in stamps]


def guest_boot(cluster_dir: Path, name: str) -> str:
    """The guest's boot id: a new one on every boot (its uptime alone cannot tell a VM that booted
    again from one that has simply not been up for long)."""
    made = Cluster.load(cluster_dir)
    key = Box(cache_root() / made.box).key
    done = guest_run(key, made.vms[name], "cat /proc/sys/kernel/random/boot_id", timeout=60)
    assert done.returncode == 0 and done.stdout.strip(), done.stderr
    return done.stdout.strip()


@pytest.mark.timeout(900)  # one more boot under TCG (~1 min here)
def test_a_run_killed_during_a_power_loss_is_healed_by_booting_the_vm(cluster_dir, tmp_path):
    """A run that died between a power loss and the boot that ends it leaves its ledger's `vm_power`
    entry outstanding: `kchaos heal RUN_DIR` boots the VM from its own disk, so the cluster is whole
    again, and a second heal finds nothing to do."""
    before = guest_boot(cluster_dir, "kc3")
    # The run: a process of its own that records the power loss in its ledger, pulls the plug and ends.
    run = f"""
import sys
from pathlib import Path
from harness.backends import vm_faults
from harness.backends.inventory import load_inventory
from harness.backends.ledger import Ledger
host = next(h for h in load_inventory({str(cluster_dir / "inventory.toml")!r}).hosts if h.name == "kc3")
sys.exit(0 if vm_faults.power_off(Ledger.create(Path({str(tmp_path / LEDGER_NAME)!r})), host) else 1)
"""
    died = subprocess.run([sys.executable, "-c", run], env=repo_env(), capture_output=True, text=True, timeout=120)
    assert died.returncode == 0, died.stderr
    assert live_qemu(cluster_dir, "kc3") is None
    assert [e.kind for e in Ledger.load(tmp_path / LEDGER_NAME).outstanding()] == ["vm_power"]
    healed = kchaos("heal", str(tmp_path), timeout=600)
    assert healed.returncode == 0, healed.stderr
    assert "removed VM kc3 booted again after a power loss" in healed.stdout, healed.stdout
    assert live_qemu(cluster_dir, "kc3") is not None
    assert guest_boot(cluster_dir, "kc3") != before  # a fresh boot, from its own disk
    assert all(row["running"] for row in status(cluster_dir))
    assert not Ledger.load(tmp_path / LEDGER_NAME).outstanding()
    again = kchaos("heal", str(tmp_path), timeout=600)
    assert again.returncode == 0 and "nothing to heal" in again.stdout, again.stdout
