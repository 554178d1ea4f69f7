"""SSH hosts for tests: one network namespace per host (harness.backends.netns), each running its own
sshd (own config, own host key, key-only login, a non-default port), and the inventory that names them.

The hosts share this machine's filesystem, so to make sure the backend reaches a host's files only
over SSH, each sshd runs in a mount namespace of its own in which ROOT (an empty local directory,
the same path for every host, as on real machines) is a bind mount of that host's own directory
tmp/hosts/NAME. The harness sees ROOT empty; a test looks at tmp/hosts/NAME. sshd is started and
stopped by PID through the netns backend, whose teardown removes the namespaces and everything in
them whatever happened in the test.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.backends.netns import NetnsBackend

SSHD = "/usr/sbin/sshd"
SSH_PORT = 2222
PYTHON = "/usr/bin/python3"  # Debian's, as on a VM (not this machine's pyenv)

needs_sshd = pytest.mark.skipif(
    os.geteuid() != 0 or not Path(SSHD).is_file(), reason="needs root and openssh-server (network namespaces, sshd)"
)


@dataclass
class SshHosts:
    net: NetnsBackend
    inventory: Path
    key: Path
    roots: dict[str, Path]  # host name -> what it sees at `root` (a local path only the test looks at)
    root: Path  # the hosts' root: empty from here

    def address(self, name: str) -> str:
        return self.net.address(name)


def _sshd_config(directory: Path, address: str) -> Path:
    config = directory / "sshd_config"
    config.write_text(
        f"Port {SSH_PORT}\n"
        f"ListenAddress {address}\n"
        f"HostKey {directory / 'host_key'}\n"
        f"PidFile {directory / 'sshd.pid'}\n"
        f"AuthorizedKeysFile {directory / 'authorized_keys'}\n"
        "PermitRootLogin prohibit-password\n"
        "PubkeyAuthentication yes\n"
        "PasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\n"
        "UsePAM no\n"
        "StrictModes no\n"  # the files live under the test's tmp dir
        # This machine's root ~/.bashrc runs `pyenv init` (~200 ms per command, since bash reads it for
        # ssh commands); a host's logins get a home of their own instead, as a fresh VM user has.
        f"SetEnv HOME={directory}\n"
        "MaxSessions 64\n"
        "MaxStartups 64\n"
        "LogLevel ERROR\n",
        encoding="utf-8",
    )
    return config


def _keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)


@contextlib.contextmanager
def sshd_hosts(tmp: Path, names: list[str], *, extra: str = "") -> Iterator[SshHosts]:
    """Hosts `names` with sshd running; the inventory at tmp/inventory.toml (`extra` appended)."""
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege separation dir
    ssh_dir = tmp / "ssh"
    ssh_dir.mkdir(parents=True)
    key = ssh_dir / "id_ed25519"
    _keygen(key)
    root = tmp / "remote-root"
    root.mkdir()
    net = NetnsBackend(tmp / "hostnet", names)
    with net:
        known = []
        roots = {}
        lines = [
            "[defaults]",
            'user = "root"',
            f'key = "{key}"',
            f'python = "{PYTHON}"',
            f'known_hosts = "{ssh_dir / "known_hosts"}"',
            f'root = "{root}"',
            'host_key_checking = "yes"',
            f"port = {SSH_PORT}",
            "",
        ]
        for name in names:
            directory = ssh_dir / name
            directory.mkdir()
            _keygen(directory / "host_key")
            (directory / "authorized_keys").write_bytes(key.with_suffix(".pub").read_bytes())
            address = net.address(name)
            known.append(f"[{address}]:{SSH_PORT} {(directory / 'host_key.pub').read_text().strip()}\n")
            config = _sshd_config(directory, address)
            roots[name] = tmp / "hosts" / name
            roots[name].mkdir(parents=True)
            mount = f"mount --bind {roots[name]} {root} && exec {SSHD} -D -e -f {config}"
            net.start(name, ["unshare", "--mount", "--propagation", "private", "sh", "-c", mount])
            lines += ["[[hosts]]", f'name = "{name}"', f'address = "{address}"', ""]
        (ssh_dir / "known_hosts").write_text("".join(known), encoding="utf-8")
        inventory = tmp / "inventory.toml"
        inventory.write_text("\n".join(lines) + extra, encoding="utf-8")
        for name in names:
            _wait_listening(net, name)
        yield SshHosts(net, inventory, key, roots, root)


def _wait_listening(net: NetnsBackend, name: str) -> None:
    import time

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        out = net.exec(name, ["ss", "-Hltn", f"sport = :{SSH_PORT}"]).stdout
        if out.strip():
            return
        if not net.is_alive(name):
            break
        time.sleep(0.05)
    log = (net.run_dir / "nodes" / name / "stderr.log").read_text(errors="replace")
    raise RuntimeError(f"sshd on {name} did not start listening: {log.strip()[-300:]}")
