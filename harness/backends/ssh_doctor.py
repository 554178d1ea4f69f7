"""`kchaos doctor` rows for the ssh backend: the OpenSSH client here and, with `--inventory FILE`, each host
(login, Python, packet filter, libfaketime, machine type, Java for `--sut kafka`), probed over SSH with
the backend's own transport, all hosts at once."""

from __future__ import annotations

import platform
import shlex
import shutil
import subprocess
from typing import Any

from harness.backends.inventory import Host, load_inventory
from harness.backends.remote_shell import Remote, each
from harness.backends.shell import BackendError
from harness.db.kafka.dist import MIN_JAVA, KafkaDistError, java_major
from vocab.errors import UserError

PROVISION = "vagrant/provision.sh on the host (apt-get install python3 python3-venv nftables faketime)"


def ssh_checks(check: Any, inventory: str | None) -> list[Any]:
    """Doctor rows (built with `check(name, required, ok, detail, fix)`)."""
    ssh = shutil.which("ssh")
    version = ""
    if ssh:
        proc = subprocess.run(["ssh", "-V"], capture_output=True, text=True, check=False)
        version = (proc.stderr or proc.stdout).strip()
    rows = [check("ssh: OpenSSH client", inventory is not None, bool(ssh), version or "ssh not found",
                  "apt-get install openssh-client")]  # fmt: skip
    if inventory is None:
        rows.append(check("ssh: hosts", False, False, "not checked: pass --inventory FILE", ""))
        return rows
    try:
        hosts = load_inventory(inventory).hosts
    except UserError as exc:
        return [*rows, check("ssh: inventory", True, False, str(exc), "fix the inventory file")]
    rows.append(check("ssh: inventory", True, True, f"{inventory}: {len(hosts)} host(s)", ""))
    if not ssh:
        return rows
    for found in each(hosts, _probe_host):
        rows += [check(*row) for row in found]
    return rows


def _probe_host(host: Host) -> list[tuple[str, bool, bool, str, str]]:
    name = f"ssh: {host.name}"
    remote = Remote(host)
    try:
        remote.connect()
        q = shlex.quote
        sudo = "sudo -n " if host.sudo else ""
        script = (
            f"{q(host.python)} -c 'import sys, venv; print(\"%d.%d\" % sys.version_info[:2])' 2>/dev/null "
            "|| echo none; "
            f"{{ {sudo}nft list tables >/dev/null 2>&1 && echo nft; }} || "
            f"{{ {sudo}iptables -w -S INPUT >/dev/null 2>&1 && echo iptables; }} || echo none; "
            "ls /usr/lib/*/faketime/libfaketime.so.1 /usr/lib/faketime/libfaketime.so.1 2>/dev/null | head -n 1 "
            "| grep . || echo none; uname -m; "
            "{ java -version 2>&1 | grep -m 1 ' version ' || echo none; }"
        )
        python, firewall, faketime, machine, java = (line.strip() for line in remote.out(script).splitlines()[:5])
    except (BackendError, ValueError) as exc:
        return [(name, True, False, str(exc), "check address, port, user and key in the inventory")]
    finally:
        remote.close()
    ok_python = python != "none" and tuple(map(int, python.split("."))) >= (3, 11)
    try:
        java_major(java, "java")  # raises when there is none, or it is too old
        java_ok = True
    except KafkaDistError:
        java_ok = False
    here = platform.machine()
    return [
        (name, True, True, f"{host.user}@{host.target}:{host.port} logs in", ""),
        (f"{name} python", True, ok_python, f"{host.python}: {python} (venv module)", PROVISION),
        (f"{name} packet filter", True, firewall != "none", firewall, PROVISION + (" and sudo" if host.sudo else "")),
        (f"{name} libfaketime", False, faketime != "none", faketime, PROVISION),
        (f"{name} machine", False, machine == here, f"{machine} (shims built here for {here})",
         "clock and disk faults need the same machine type"),
        (f"{name} java", False, java_ok, f"{java} (--sut kafka needs Java {MIN_JAVA}+)",
         "apt-get install openjdk-17-jre-headless on the host"),
    ]  # fmt: skip
