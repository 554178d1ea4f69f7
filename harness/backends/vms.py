"""`kchaos vagrant up / status / destroy`: N real VMs booted here with qemu, for the ssh backend.

Layout for a cluster with tag T (random hex), all ledgered in CLUSTER_DIR/ledger.jsonl before it exists:
  netns    kcvm-T        holds the VMs' network: bridge br0 and one tap per VM (qemu runs in here)
  veth     kvT (host) -- up0 on br0: the harness's only way in, the first address of a free private
           /24; the VMs get .11, .12, ... on it, no default route, no NAT, no DHCP anywhere
  process  one qemu per VM (kc1, kc2, ...), each in its own session, booting the box's kernel directly
  tmpdir   CLUSTER_DIR/kchaos-*/ with each VM's copy-on-write disk over the box's disk
  files    CLUSTER_DIR/inventory.toml (for `kchaos run --backend ssh`), cluster.json, logs/kcN.console
`destroy` (= `kchaos heal CLUSTER_DIR`) undoes the ledger newest first: the qemu processes, the
namespace (with its bridge, taps and whatever still runs inside), the veth, the disks. It works the
same after the `up` process or a run was SIGKILLed, since only the ledger is needed.

Whole-VM faults (harness/backends/vm_faults.py, for the ssh backend on these hosts): `power_off` /
`power_on` (SIGKILL of a VM's qemu, and a boot with the same command line, each in this ledger) and
`live_qemu` (the PID to SIGSTOP for a VM pause).

Acceleration (harness/backends/vm_accel.py): KVM when a probe boots the box's kernel under it, else
software emulation (TCG); the answer is kept for the rest of the machine's boot.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import secrets
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from harness.backends.ledger import LEDGER_NAME, Ledger, LedgerError, heal
from harness.backends.netns import free_subnet
from harness.backends.procs import is_same_process, start_time
from harness.backends.resources import create_netns, create_tmpdir
from harness.backends.shell import BackendError, run
from harness.backends.vm_accel import choose_accel, qemu_binary
from harness.backends.vm_box import Box, add_to_vagrant, cache_root, ensure_box
from harness.backends.vm_cache import lease, prune, release
from vocab.errors import UserError

log = logging.getLogger("kchaos.backends")

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DIR = REPO_ROOT / "vagrant" / ".cluster"
FIRST_HOST = 10  # kcN gets .(10 + N), as in vagrant/Vagrantfile
BOOT_TIMEOUT_S = 600.0
# The guest kernel's own report of a task stuck in uninterruptible sleep (its hung-task detector, 120 s
# of guest time by default). Seen once here, on a boot after a power loss while a whole test suite loaded
# the 2 cores: the initramfs's mount of the root file system stayed blocked for 10 minutes, and the VM
# never came up. A boot that reports it will not finish: a power-on cuts it short and boots once more,
# keeping its console as logs/NAME.console.hung-N.
HUNG_TASK = "blocked for more than"
POWER_ON_ATTEMPTS = 2
STATE = "cluster.json"
# MiB per guest: an Apache Kafka node is about 350 MB of RSS in its guest (docs/concepts/suts.md), more than
# 512 MiB holds with the guest's own share. Memory a guest does not touch costs the host nothing.
DEFAULT_MEMORY_MB = 1024


class BootHung(BackendError):
    """The guest's kernel reported a hung task during the boot (`HUNG_TASK`): ssh will never answer."""


@dataclass
class Cluster:
    """What `up` made (cluster.json): enough for status and for the tests to look for leftovers."""

    tag: str
    netns: str
    veth: str
    subnet: str
    accel: str
    box: str
    vms: dict[str, str]  # name -> address
    memory_mb: int
    cpus: int
    boot_s: float = 0.0

    @classmethod
    def load(cls, directory: Path) -> Cluster:
        path = directory / STATE
        try:
            return cls(**json.loads(path.read_text(encoding="utf-8")))
        except FileNotFoundError:
            raise UserError(f"{directory}: no VM cluster here (no {STATE}; run `kchaos vagrant up`)") from None


def _ssh_argv(key: Path, address: str, command: str, timeout: int = 5) -> list[str]:
    return [
        "ssh",
        "-i",
        str(key),
        "-o",
        "BatchMode=yes",
        "-o",
        "StrictHostKeyChecking=no",
        "-o",
        "UserKnownHostsFile=/dev/null",
        "-o",
        "LogLevel=ERROR",
        "-o",
        f"ConnectTimeout={timeout}",
        f"root@{address}",
        command,
    ]


def guest_run(key: Path, address: str, command: str, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(_ssh_argv(key, address, command), capture_output=True, text=True, timeout=timeout)


def up(
    directory: Path,
    nodes: int = 3,
    memory_mb: int = DEFAULT_MEMORY_MB,
    cpus: int = 1,
    accel: str = "auto",
    say: Callable[[str], None] = lambda _: None,
) -> Cluster:
    """Boot `nodes` VMs and write the inventory; every resource is ledgered first (module docstring)."""
    if os.geteuid() != 0:
        raise BackendError("kchaos vagrant up makes a network namespace and taps, which needs root")
    if not 1 <= nodes <= 200:
        raise UserError(f"--nodes {nodes}: must be between 1 and 200")
    directory = Path(directory).resolve()
    ledger_path = directory / LEDGER_NAME
    if ledger_path.exists() and Ledger.load(ledger_path).outstanding():
        raise UserError(f"{directory}: a cluster is already up; `kchaos vagrant destroy --dir {directory}` first")
    box = ensure_box(say)
    if accel == "auto":
        accel, why = choose_accel(box)
        say(f"acceleration: {accel} ({why})")
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "logs").mkdir(exist_ok=True)
    for stale in (directory / "inventory.toml", directory / STATE):
        stale.unlink(missing_ok=True)
    ledger = Ledger.create(ledger_path)
    tag = secrets.token_hex(3)
    subnet = free_subnet(f"vms-{tag}")
    hosts = list(subnet.hosts())
    netns, veth = f"kcvm-{tag}", f"kv{tag}"
    vms = {f"kc{i}": str(hosts[FIRST_HOST + i - 1]) for i in range(1, nodes + 1)}
    cluster = Cluster(tag, netns, veth, str(subnet), accel, box.path.name, vms, memory_mb, cpus)
    started = time.monotonic()
    _write_state(directory, cluster, box)  # first: a SIGKILLed `up` leaves the names for status and tests
    lease(box, directory)  # the box stays in the cache while this cluster is not destroyed (vm_cache.py)
    create_netns(ledger, netns)
    run(["ip", "-n", netns, "link", "add", "br0", "type", "bridge"])
    run(["ip", "-n", netns, "link", "set", "br0", "up"])
    ledger.record("link", name=veth, type="veth", peer_netns=netns)
    run(["ip", "link", "add", veth, "type", "veth", "peer", "name", "up0", "netns", netns])
    run(["ip", "addr", "add", f"{hosts[0]}/{subnet.prefixlen}", "dev", veth])
    run(["ip", "link", "set", veth, "up"])
    run(["ip", "-n", netns, "link", "set", "up0", "master", "br0", "up"])
    _, disks = create_tmpdir(ledger, directory)
    for i, (name, address) in enumerate(vms.items(), 1):
        tap = f"tap{i}"
        run(["ip", "-n", netns, "tuntap", "add", "dev", tap, "mode", "tap"])
        run(["ip", "-n", netns, "link", "set", tap, "master", "br0", "up"])
        disk = disks / f"{name}.qcow2"
        run(["qemu-img", "create", "-q", "-f", "qcow2", "-b", str(box.disk), "-F", "qcow2", str(disk)])
        argv = _qemu_argv(box, cluster, name, address, tap, disk, directory / "logs" / f"{name}.console", i)
        _start_qemu(directory, ledger, netns, name, argv)
    say(f"booting {nodes} VM(s) ({accel}, {memory_mb} MiB, {cpus} CPU each) on {subnet} in namespace {netns}")
    try:
        with ThreadPoolExecutor(max_workers=nodes) as pool:
            list(pool.map(lambda item: _wait_ssh(directory, ledger, box, *item), vms.items()))
    except BaseException:
        say("boot failed; removing what was made")
        ledger.undo_all()
        raise
    cluster.boot_s = round(time.monotonic() - started, 1)
    _write_state(directory, cluster, box)
    return cluster


def _start_qemu(directory: Path, ledger: Ledger, netns: str, name: str, argv: list[str]) -> None:
    """One VM's qemu in the cluster's namespace, ledgered first (`ip netns exec` execs: the PID is qemu's)."""
    rid = ledger.record("process", node=name, argv=argv)
    with open(directory / "logs" / f"{name}.qemu.log", "ab") as log:
        proc = subprocess.Popen(
            ["ip", "netns", "exec", netns, *argv],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    ledger.update(rid, pid=proc.pid, starttime=start_time(proc.pid))


def _qemu_argv(
    box: Box, cluster: Cluster, name: str, address: str, tap: str, disk: Path, console: Path, i: int
) -> list[str]:
    prefix = cluster.subnet.split("/")[1]
    accel = ["-accel", "kvm", "-cpu", "host"] if cluster.accel == "kvm" else ["-accel", "tcg"]
    cmdline = "root=/dev/vda rw console=ttyS0 init=/sbin/kchaos-init net.ifnames=0 quiet"
    cmdline += f" kchaos.host={name} kchaos.ip={address}/{prefix}"
    return [
        qemu_binary(),
        "-name",
        name,
        *accel,
        "-m",
        str(cluster.memory_mb),
        "-smp",
        str(cluster.cpus),
        "-nodefaults",
        "-no-user-config",
        "-display",
        "none",
        "-serial",
        f"file:{console}",
        "-rtc",
        "base=utc",
        "-kernel",
        str(box.kernel),
        "-initrd",
        str(box.initrd),
        "-append",
        cmdline,
        "-drive",
        f"file={disk},if=virtio,format=qcow2",
        "-netdev",
        f"tap,id=net0,ifname={tap},script=no,downscript=no",
        "-device",
        f"virtio-net-pci,netdev=net0,mac=52:54:00:6b:63:{i:02x}",
    ]


def _wait_ssh(directory: Path, ledger: Ledger, box: Box, name: str, address: str) -> None:
    """Until the VM answers over ssh; a one-line error (with the console's last line) if it died."""
    proc = next(e for e in ledger.outstanding() if e.kind == "process" and e.fields.get("node") == name)
    deadline = time.monotonic() + BOOT_TIMEOUT_S
    while time.monotonic() < deadline:
        if not is_same_process(proc.fields["pid"], proc.fields["starttime"]):
            raise BackendError(f"VM {name}: qemu exited during boot: {_last_line(directory / 'logs', name)}")
        hung = _hung_task(directory / "logs" / f"{name}.console")
        if hung is not None:
            raise BootHung(f"VM {name}: its boot hung: {hung}")
        try:
            done = guest_run(box.key, address, "true", timeout=15)
        except subprocess.TimeoutExpired:
            continue
        if done.returncode == 0:
            return
        time.sleep(1)
    raise BackendError(f"VM {name}: no ssh after {BOOT_TIMEOUT_S:.0f} s: {_last_line(directory / 'logs', name)}")


def _hung_task(console: Path) -> str | None:
    """The guest kernel's first hung-task report on this boot's console, or None."""
    try:
        text = console.read_text(errors="replace")
    except OSError:
        return None
    return next((line.strip() for line in text.splitlines() if HUNG_TASK in line), None)


def _last_line(logs: Path, name: str) -> str:
    for suffix in ("qemu.log", "console"):
        try:
            lines = [x for x in (logs / f"{name}.{suffix}").read_text(errors="replace").splitlines() if x.strip()]
        except OSError:
            continue
        if lines:
            return f"{suffix}: {lines[-1].strip()}"
    return "no output"


def _write_state(directory: Path, cluster: Cluster, box: Box) -> None:
    (directory / STATE).write_text(json.dumps(asdict(cluster), indent=1) + "\n", encoding="utf-8")
    lines = [
        f"# Written by `kchaos vagrant up`: VMs {', '.join(cluster.vms)} ({cluster.accel}) on {cluster.subnet}.",
        "[defaults]",
        'user = "root"',
        f'key = "{box.key}"',
        'python = "/usr/bin/python3"',
        'root = "/root/kchaos"',
        'host_key_checking = "no"',
        'clock = "guest"',
        f'vm = "{directory}"',
        'pause = "process"  # "vm": pause faults stop the whole VM (SIGSTOP of its qemu)',
        "",
    ]
    for name, address in cluster.vms.items():
        lines += ["[[hosts]]", f'name = "{name}"', f'address = "{address}"', ""]
    (directory / "inventory.toml").write_text("\n".join(lines), encoding="utf-8")


# -- whole-VM faults (the ssh backend calls these for hosts whose inventory says `vm = DIR`) --------------


def _qemu_entries(ledger: Ledger, name: str) -> list[Any]:
    return [e for e in ledger.all_entries() if e.kind == "process" and e.fields.get("node") == name]


def _live_qemu(directory: Path, name: str) -> tuple[Ledger, Any]:
    """The cluster's ledger and VM `name`'s running qemu entry (None when it is off)."""
    ledger = Ledger.load(Path(directory) / LEDGER_NAME)
    for entry in _qemu_entries(ledger, name):
        pid, start = entry.fields.get("pid"), entry.fields.get("starttime")
        if not entry.done and pid is not None and start is not None and is_same_process(pid, start):
            return ledger, entry
    return ledger, None


def power_off(directory: Path, name: str) -> bool:
    """Pull the plug on VM `name`: SIGKILL its qemu. Whatever the guest had not fsynced (its page
    cache) is gone, as in a power loss; what it fsynced qemu already wrote to the disk file. False
    when the VM was already off."""
    ledger, entry = _live_qemu(directory, name)
    if entry is None:
        return False
    pid = entry.fields["pid"]
    os.kill(pid, 9)
    deadline = time.monotonic() + 30
    while is_same_process(pid, entry.fields["starttime"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    ledger.mark_done(entry.id)
    return True


def power_on(directory: Path, name: str) -> bool:
    """Boot VM `name` again from its own disk (the same qemu command line) and wait for ssh. False
    when it was running already."""
    directory = Path(directory).resolve()
    ledger, entry = _live_qemu(directory, name)
    if entry is not None:
        return False
    cluster = Cluster.load(directory)
    box = Box(cache_root() / cluster.box)
    recorded = _qemu_entries(ledger, name)
    if not recorded:
        raise BackendError(f"{directory}: VM {name} is not in this cluster's ledger")
    argv, attempt = recorded[-1].fields["argv"], 1
    while True:
        _start_qemu(directory, ledger, cluster.netns, name, argv)
        try:
            _wait_ssh(directory, ledger, box, name, cluster.vms[name])
            return True
        except BootHung as hung:
            power_off(directory, name)
            console = directory / "logs" / f"{name}.console"
            kept = console.with_name(f"{console.name}.hung-{attempt}")
            console.replace(kept)  # the next boot's qemu truncates the console
            if attempt == POWER_ON_ATTEMPTS:
                raise
            log.warning("%s; booting it once more (its console: %s)", hung, kept)
            attempt += 1
            ledger = Ledger.load(directory / LEDGER_NAME)  # power_off marked the hung qemu done there


def live_qemu(directory: Path, name: str) -> tuple[int, int] | None:
    """(pid, starttime) of VM `name`'s running qemu, None when it is off."""
    _, entry = _live_qemu(directory, name)
    return None if entry is None else (entry.fields["pid"], entry.fields["starttime"])


def status(directory: Path) -> list[dict[str, Any]]:
    """Per VM: its address, whether its qemu runs, and what it answers over ssh (kernel, hostname)."""
    directory = Path(directory).resolve()
    cluster = Cluster.load(directory)
    key = Box(cache_root() / cluster.box).key
    try:
        ledger = Ledger.load(directory / LEDGER_NAME)
    except LedgerError as exc:
        raise UserError(str(exc)) from None
    procs = {e.fields.get("node"): e for e in ledger.outstanding() if e.kind == "process"}
    rows = []
    for name, address in cluster.vms.items():
        entry = procs.get(name)
        alive = entry is not None and is_same_process(entry.fields["pid"], entry.fields["starttime"])
        answer = ""
        if alive:
            try:
                done = guest_run(key, address, "echo $(hostname) $(uname -r)", timeout=20)
                answer = done.stdout.strip() if done.returncode == 0 else "ssh failed: " + done.stderr.strip()[-80:]
            except subprocess.TimeoutExpired:
                answer = "ssh timed out"
        rows.append({"vm": name, "address": address, "running": alive, "guest": answer})
    return rows


def destroy(directory: Path) -> list[str]:
    """Undo everything the cluster's ledger lists; what was removed (idempotent)."""
    directory = Path(directory).resolve()
    path = directory / LEDGER_NAME
    if not path.exists():
        return []
    state = directory / STATE
    try:  # which box's lease to give back; an unreadable cluster.json must not stop the destroy
        box_name = json.loads(state.read_text(encoding="utf-8")).get("box")
    except (OSError, ValueError, AttributeError):
        box_name = None
    report = heal(path)
    if report.failed:
        raise BackendError("destroy left something behind: " + "; ".join(report.failed))
    for stale in (directory / "inventory.toml", state):
        stale.unlink(missing_ok=True)
    if box_name:
        release(box_name, directory)
    return report.removed


# -- CLI ------------------------------------------------------------------------------------------------


def _say(line: str) -> None:
    print(f"kchaos vagrant: {line}", flush=True)


def box_command(args: argparse.Namespace) -> int:
    if args.prune:
        pruned = prune(_say)
        for line in [*pruned.kept, *pruned.removed]:
            print(line)
        print(f"pruned {len(pruned.removed)} box(es)" if pruned.removed else "nothing to prune")
        return 0
    started = time.monotonic()
    box = ensure_box(_say)
    print(f"box {box.path} ({time.monotonic() - started:.0f} s)")
    if args.add:
        print(f"registered with vagrant as {add_to_vagrant(box, _say)}")
    return 0


def up_command(args: argparse.Namespace) -> int:
    cluster = up(Path(args.dir), args.nodes, args.memory, args.cpus, args.accel, _say)
    print(f"up: {', '.join(f'{n} {a}' for n, a in cluster.vms.items())} in {cluster.boot_s:.0f} s ({cluster.accel})")
    # Under TCG a killed node needs tens of seconds to import its code again: the default 10 s
    # recovery window would call a slow restart an availability failure.
    # With a tail, the window ends 10 s after its first committed write instead of running out.
    recovery = " --recovery 60s --recovery-tail 10s" if cluster.accel == "tcg" else ""
    inventory = Path(args.dir) / "inventory.toml"
    print(f"run: kchaos run --backend ssh --inventory {inventory}{recovery}")
    # A JVM in a TCG guest takes a minute or two to serve, at start and after each kill (suts.md).
    slow = " --ready-timeout 5m --recovery 5m --recovery-tail 10s" if cluster.accel == "tcg" else ""
    print(f"Apache Kafka on them: kchaos run --backend ssh --inventory {inventory} --sut kafka{slow}")
    # etcd serves within seconds of its start, but a power-lost VM boots again first.
    print(f"etcd on them: kchaos run --backend ssh --inventory {inventory} --sut etcd{recovery}")
    cluster_flag = "" if Path(args.dir).resolve() == DEFAULT_DIR else f" --cluster {args.dir}"
    print(f"reproduce a stored run: kchaos reproduce RUN_DIR --backend vagrant{cluster_flag}")
    return 0


def status_command(args: argparse.Namespace) -> int:
    rows = status(Path(args.dir))
    for row in rows:
        state = "running" if row["running"] else "not running"
        print(f"{row['vm']:6} {row['address']:15} {state:12} {row['guest']}")
    return 0 if all(r["running"] for r in rows) else 1


def destroy_command(args: argparse.Namespace) -> int:
    removed = destroy(Path(args.dir))
    for what in removed:
        print(f"removed {what}")
    print(f"destroyed ({len(removed)} resource(s))" if removed else "nothing to destroy")
    return 0


def add_commands(sub: Any) -> None:
    """`kchaos vagrant box / up / status / destroy` (registered next to `inventory`)."""
    p = sub.add_parser("box", description="build the VM box (Debian 12, debootstrap; cached by content hash)")
    p.add_argument("--add", action="store_true", help="also package it for vagrant-libvirt and `vagrant box add` it")
    p.add_argument(
        "--prune", action="store_true", help="remove the cached boxes no cluster uses, instead (this checkout's stays)"
    )
    p.set_defaults(func=box_command)
    p = sub.add_parser("up", description="boot a cluster of VMs with qemu in a network namespace of its own")
    p.add_argument("--dir", default=str(DEFAULT_DIR), help="the cluster's directory (default: vagrant/.cluster)")
    p.add_argument("--nodes", type=int, default=3, help="how many VMs (default 3: one per combined node)")
    p.add_argument("--memory", type=int, default=DEFAULT_MEMORY_MB, help=f"MiB per VM (default {DEFAULT_MEMORY_MB})")
    p.add_argument("--cpus", type=int, default=1, help="virtual CPUs per VM (default 1)")
    p.add_argument("--accel", choices=("auto", "kvm", "tcg"), default="auto", help="auto: KVM if a probe boots")
    p.set_defaults(func=up_command)
    for name, func, text in (
        ("status", status_command, "each VM: running, and its hostname and kernel over ssh"),
        ("destroy", destroy_command, "remove the VMs and everything `up` made (also after a crash)"),
    ):
        p = sub.add_parser(name, description=text)
        p.add_argument("--dir", default=str(DEFAULT_DIR), help="the cluster's directory (default: vagrant/.cluster)")
        p.set_defaults(func=func)
