"""`kchaos doctor`: pre-flight checks for the netns backend, each with what to install when it fails; with
`--inventory FILE` also the ssh backend's hosts (harness/backends/ssh_doctor.py).

The namespace checks run in a throwaway namespace (bridge, veth and packet-filter rules are made and
removed inside it), so the root namespace is never changed.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.backends import fault_checks
from harness.backends.firewall import detect_firewall, forward_policy_drops, iptables_backend
from harness.backends.lazyfs.probe import FIX as LAZYFS_FIX
from harness.backends.lazyfs.probe import power_loss_probe
from harness.backends.ledger import Ledger, LedgerError
from harness.backends.netns import free_subnet
from harness.backends.resources import create_netns
from harness.backends.shell import BackendError, run
from harness.backends.signals import deferred_termination, exit_on_termination
from vocab.errors import EXIT_ERROR

# Ports the real runtime listens on when nodes share loopback instead of having namespaces of their own.
LOOPBACK_PORTS = (9092, 9093, 9400)
PYTHON_DEPS = ("pyspark", "pyarrow")
NFQUEUE_FIX = "apt-get install iptables; a kernel with CONFIG_NETFILTER_NETLINK_QUEUE and the NFQUEUE target"
# Ledgers of the doctor's throwaway namespaces (`kchaos heal FILE` also takes one of these).
DOCTOR_LEDGERS = Path(tempfile.gettempdir()) / "kchaos-doctor"


@dataclass
class Check:
    name: str
    required: bool
    ok: bool
    detail: str
    fix: str = ""

    @property
    def status(self) -> str:
        if self.ok:
            return "OK"
        return "FAIL" if self.required else "WARN"


LINCORE_FIX = "apt-get install gcc python3-dev, then pip install -e . (setup.sh does both)"


def _try(name: str, required: bool, fix: str, probe: Callable[[], str]) -> Check:
    """Run `probe`; its return value is the detail of an OK, a BackendError's message that of a failure."""
    try:
        return Check(name, required, True, probe())
    except (BackendError, OSError) as exc:
        return Check(name, required, False, str(exc), fix)


@contextmanager
def throwaway_ledger() -> Iterator[Ledger]:
    """A ledger for a probe's resources, undone on exit; a doctor killed meanwhile is cleaned up by the next one."""
    _heal_stale_doctor_ledgers()
    DOCTOR_LEDGERS.mkdir(mode=0o700, exist_ok=True)
    ledger = Ledger.create(DOCTOR_LEDGERS / f"{os.getpid()}-{secrets.token_hex(3)}.jsonl")
    with exit_on_termination():
        try:
            yield ledger
        finally:
            with deferred_termination():
                if ledger.undo_all().ok:
                    ledger.path.unlink(missing_ok=True)


@contextmanager
def throwaway_netns() -> Iterator[str]:
    """A ledgered namespace for the probes."""
    with throwaway_ledger() as ledger:
        name = f"kcdoc{secrets.token_hex(3)}"
        create_netns(ledger, name)
        yield name


def _lazyfs_probe() -> str:
    with throwaway_ledger() as ledger:
        return power_loss_probe(ledger)


def _heal_stale_doctor_ledgers() -> None:
    for path in DOCTOR_LEDGERS.glob("*.jsonl"):
        try:
            ledger = Ledger.load(path)
        except LedgerError:
            continue
        if not ledger.owner_alive() and ledger.undo_all().ok:
            path.unlink(missing_ok=True)


def _nft_probe(ns: str) -> str:
    exec_ = ["ip", "netns", "exec", ns, "nft"]
    run([*exec_, "add", "table", "inet", "kcdoctor"])
    run([*exec_, "add", "chain", "inet", "kcdoctor", "input", "{ type filter hook input priority 0; }"])
    run([*exec_, "add", "rule", "inet", "kcdoctor", "input", "ip", "saddr", "192.0.2.1", "drop"])
    if "192.0.2.1" not in run([*exec_, "list", "table", "inet", "kcdoctor"]):
        raise BackendError("nft accepted a rule but does not list it")
    run([*exec_, "delete", "table", "inet", "kcdoctor"])
    return run(["nft", "--version"]).strip() + ": table, rule and delete work in a namespace"


def _iptables_probe(ns: str) -> str:
    ipt = ["ip", "netns", "exec", ns, "iptables", "-w"]
    run([*ipt, "-N", "KCDOCTOR"])
    run([*ipt, "-A", "KCDOCTOR", "-s", "192.0.2.1", "-j", "DROP"])
    run([*ipt, "-I", "INPUT", "-j", "KCDOCTOR"])
    run([*ipt, "-D", "INPUT", "-j", "KCDOCTOR"])
    run([*ipt, "-F", "KCDOCTOR"])
    run([*ipt, "-X", "KCDOCTOR"])
    return f"iptables ({iptables_backend()}): chain and rule work in a namespace"


def _links_probe(ns: str) -> str:
    run(["ip", "-n", ns, "link", "add", "kcdbr", "type", "bridge"])
    run(["ip", "-n", ns, "link", "add", "kcdv0", "type", "veth", "peer", "name", "kcdv1"])
    run(["ip", "-n", ns, "link", "set", "kcdv0", "master", "kcdbr", "up"])
    run(["ip", "-n", ns, "link", "set", "kcdbr", "up"])
    return "bridge + veth pair created and enslaved"


def _java_probe() -> str:
    if not shutil.which("java"):
        raise BackendError("java not found (Spark reports need it)")
    out = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False)
    lines = (out.stderr or out.stdout).strip().splitlines()
    return lines[0] if lines else "java present"


def _ports_probe() -> str:
    busy = []
    for port in LOOPBACK_PORTS:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                busy.append(port)
    if busy:
        raise BackendError(f"127.0.0.1 ports in use: {', '.join(map(str, busy))} (only loopback runs need them)")
    return f"127.0.0.1 ports {', '.join(map(str, LOOPBACK_PORTS))} free (namespaced nodes have their own)"


def _python_deps_probe() -> str:
    missing = [m for m in PYTHON_DEPS if importlib.util.find_spec(m) is None]
    if missing:
        raise BackendError(f"missing Python packages: {', '.join(missing)}")
    return "importable: " + ", ".join(PYTHON_DEPS)


ETCD_FIX = "apt-get install etcd-server etcd-client; pip install -e . (httpx)"


def _etcd_probe() -> str:
    """The etcd program and the workloads' client library; where `--sut etcd` runs (never on sim)."""
    from harness.db import SUT_BACKENDS

    binary = shutil.which("etcd")
    if binary is None:
        raise BackendError("etcd not found (--sut etcd needs Debian's etcd-server)")
    if importlib.util.find_spec("httpx") is None:
        raise BackendError("httpx is not importable (the etcd workloads' client)")
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10, check=False).stdout
    except subprocess.TimeoutExpired:
        raise BackendError(f"{binary} --version did not answer within 10 s") from None
    version = next((line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("etcd Version")), "?")
    backends = ", ".join(SUT_BACKENDS["etcd"])
    return f"etcd {version} at {binary}; --sut etcd runs on {backends}, not on sim"


KAFKA_FIX = "bash setup.sh (or: python -m harness.db.kafka.dist; needs Java 17+ and mvn)"


def _kafka_probe() -> str:
    """Java and the pinned Kafka version's jars; where `--sut kafka` runs (never on sim)."""
    from harness.db import SUT_BACKENDS
    from harness.db.kafka.dist import KafkaDistError, probe

    try:
        found = probe()
    except KafkaDistError as exc:
        raise BackendError(str(exc)) from None
    if importlib.util.find_spec("confluent_kafka") is None:
        raise BackendError("confluent_kafka is not importable (the kafka workloads' client)")
    return f"{found}; --sut kafka runs on {', '.join(SUT_BACKENDS['kafka'])}, not on sim"


def _docker_probe() -> str:
    from harness.backends.docker_engine import engine_url, reachable

    if reachable():
        return f"answers at {engine_url()}"
    if shutil.which("dockerd") is None:
        raise BackendError(f"no engine answers at {engine_url()} and dockerd is not installed")
    return f"no engine at {engine_url()}; a docker run starts dockerd and stops it at the end"


def _docker_image_probe() -> str:
    from harness.backends import docker_image
    from harness.backends.docker_engine import client, reachable

    if not reachable():
        if shutil.which("debootstrap") is None:
            raise BackendError("debootstrap is not installed: the first docker run cannot build the image")
        return f"{docker_image.node_tag()}: built by the first docker run (or kchaos image build)"
    c = client()
    try:
        return docker_image.describe(c)
    finally:
        c.close()


def _lincore_probe() -> str:
    """The compiled linearizability search: optional (the checker falls back to Python), but 10-20x
    faster on large histories."""
    if importlib.util.find_spec("checkers._lincore") is None:
        raise BackendError("not built: linearizability checks use the pure-Python search (slower)")
    return "built: linearizability checks use the compiled search"


def _subnet_probe() -> str:
    return f"{free_subnet(secrets.token_hex(3))} is free for a bridge"


def _forward_probe() -> str:
    if forward_policy_drops():
        return "policy DROP: runs add (and remove) an ACCEPT rule for their own bridge"
    return "bridged traffic is not dropped"


def root_is_a_mount_point(mountinfo: str | None = None) -> bool:
    """Whether `/` (as this process sees it) is a mount point. In a chroot it often is not, and then
    `ip netns add` cannot make /run/netns a shared mount. (os.path.ismount("/") is always true: it
    compares `/` with `/..`, which a chroot makes the same directory.)"""
    if mountinfo is None:
        try:
            mountinfo = Path("/proc/self/mountinfo").read_text()
        except OSError:
            return True  # cannot tell: blame nothing
    return any(len(fields) > 4 and fields[4] == "/" for fields in (line.split() for line in mountinfo.splitlines()))


def netns_fix(error: str, root_is_mount: bool) -> str:
    """What to do when no network namespace could be made, from why `ip netns add` failed."""
    if not root_is_mount:
        return "/ is not a mount point (a chroot?): `mount --bind / /` makes it one; then ip netns works"
    if "Operation not permitted" in error or "Permission denied" in error:
        return "needs CAP_SYS_ADMIN: root on the host, or a privileged container"
    return "a kernel with network namespaces (CONFIG_NET_NS)"


def run_checks(inventory: str | None = None) -> list[Check]:
    is_root = os.geteuid() == 0
    checks = [
        Check("root", True, is_root, "uid 0" if is_root else f"uid {os.geteuid()}", "run as root (sudo kchaos ...)"),
        Check(
            "iproute2 (ip)",
            True,
            shutil.which("ip") is not None,
            shutil.which("ip") or "ip not found",
            "apt-get install iproute2",
        ),
    ]
    ns_checks = [
        ("bridge + veth", True, "a kernel with bridge and veth support", _links_probe),
        ("nft in a namespace", False, "apt-get install nftables", _nft_probe),
        ("iptables in a namespace", False, "apt-get install iptables", _iptables_probe),
        ("packet faults (loss, delay)", False, NFQUEUE_FIX, fault_checks.nfqueue_probe),
    ]
    ns_rows: list[Check] = []
    if not is_root:
        reason, todo = "not checked: needs root", "run as root"
    elif shutil.which("ip") is None:
        reason, todo = "not checked: no ip command", "apt-get install iproute2"
    else:
        try:
            with throwaway_netns() as ns:
                ns_rows.append(Check("network namespaces", True, True, "ip netns add/exec/del work"))
                ns_rows += [_try(name, req, fix, lambda p=probe: p(ns)) for name, req, fix, probe in ns_checks]
        except BackendError as exc:
            reason, todo = f"not checked: {exc}", netns_fix(str(exc), root_is_a_mount_point())
    if not ns_rows:  # no namespace could be made: say why on every row that needed one
        ns_rows = [Check("network namespaces", True, False, reason, todo)]
        ns_rows += [Check(name, req, False, reason, todo) for name, req, _, _ in ns_checks]
        ns_rows.append(Check("packet filter for partitions", True, False, reason, todo))
    else:
        ns_rows.append(_packet_filter_row({c.name: c for c in ns_rows}))
    checks += ns_rows
    checks.append(_try("root FORWARD chain", False, "", _forward_probe) if is_root else _skip("root FORWARD chain"))
    checks.append(_try("free private subnet", True, "remove an unused route", _subnet_probe))
    checks.append(_try("lazyfs (lose_unsynced)", False, LAZYFS_FIX, _lazyfs_probe) if is_root else _skip("lazyfs"))
    checks.append(_try("free loopback ports", False, "stop what listens there", _ports_probe))
    checks.append(_try("clock faults (libfaketime)", False, "apt-get install faketime gcc", fault_checks.clock_probe))
    checks.append(_try("disk faults (preload shim)", False, "apt-get install gcc", fault_checks.disk_probe))
    checks.append(_try("java", False, "apt-get install openjdk-17-jre-headless", _java_probe))
    checks.append(_try("docker engine (--backend docker)", False, "apt-get install docker.io", _docker_probe))
    checks.append(_try("docker node image", False, "apt-get install debootstrap", _docker_image_probe))
    checks.append(_try("etcd (--sut etcd)", False, ETCD_FIX, _etcd_probe))
    checks.append(_try("kafka (--sut kafka)", False, KAFKA_FIX, _kafka_probe))
    checks.append(_try("python packages", True, "pip install -e . (in the project's venv)", _python_deps_probe))
    checks.append(_try("compiled checker core", False, LINCORE_FIX, _lincore_probe))
    from harness.backends.ssh_doctor import ssh_checks

    checks += ssh_checks(Check, inventory)
    return checks


def _packet_filter_row(rows: dict[str, Check]) -> Check:
    """Which filter a run would use (nft unless iptables is the legacy one), and whether it worked above."""
    try:
        chosen = detect_firewall().kind
    except BackendError as exc:
        return Check("packet filter for partitions", True, False, str(exc), "apt-get install nftables")
    probe = rows["nft in a namespace" if chosen == "nft" else "iptables in a namespace"]
    detail = f"{chosen} (chosen)" if probe.ok else f"{chosen} (chosen) does not work in a namespace"
    return Check("packet filter for partitions", True, probe.ok, detail, probe.fix)


def _skip(name: str) -> Check:
    return Check(name, False, False, "skipped: needs root")


def format_table(checks: list[Check]) -> str:
    rows = [("CHECK", "STATUS", "DETAIL", "FIX")] + [
        (c.name, c.status, c.detail, "" if c.ok else c.fix) for c in checks
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    return "\n".join(f"{r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:<{widths[2]}}  {r[3]}".rstrip() for r in rows)


def doctor_command(args: argparse.Namespace) -> int:
    checks = run_checks(args.inventory)
    print(format_table(checks))
    failed = [c.name for c in checks if c.required and not c.ok]
    if failed:
        print(f"doctor: {len(failed)} required check(s) failed: {', '.join(failed)}")
        return EXIT_ERROR
    print("doctor: all required checks passed")
    return 0


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "doctor", description="check this machine can run the netns backend (and ssh hosts); says what to install"
    )
    p.add_argument("--inventory", metavar="FILE", help="also check the ssh backend's hosts in this inventory")
    p.set_defaults(func=doctor_command)
