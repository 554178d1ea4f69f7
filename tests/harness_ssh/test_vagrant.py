"""The Vagrant cluster, as far as it can be tested without a hypervisor: the Vagrantfile validates, the
inventory writer turns a recorded `vagrant ssh-config` into an inventory the ssh backend loads, and the
provisioning script (run over SSH on an sshd host, as `vagrant provision` would) finds what it needs."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.backends.inventory import load_inventory
from harness.backends.vagrant_inventory import inventory_toml, parse_ssh_config
from harness.cli import main
from vocab.errors import UserError

HERE = Path(__file__).parent
VAGRANT = HERE.parents[1] / "vagrant"
RECORDED = HERE / "data" / "vagrant-ssh-config.txt"


def recorded_with_keys(tmp_path: Path) -> Path:
    """The recorded output with its IdentityFile paths pointing at files that exist here."""
    text = RECORDED.read_text()
    for name in ("kc1", "kc2", "kc3"):
        key = tmp_path / "keys" / name
        key.parent.mkdir(exist_ok=True)
        key.write_text("key\n")
        for provider in ("virtualbox", "libvirt"):
            text = text.replace(
                f"/home/dev/kraft-chaos/vagrant/.vagrant/machines/{name}/{provider}/private_key", str(key)
            )
    path = tmp_path / "ssh-config.txt"
    path.write_text(text)
    return path


def test_recorded_ssh_config_becomes_an_inventory_the_backend_loads(tmp_path, capsys):
    out = tmp_path / "inventory.toml"
    config = recorded_with_keys(tmp_path)
    assert main(["vagrant", "inventory", "--ssh-config", str(config), "--subnet", "10.9.8", "-o", str(out)]) == 0
    assert "3 host(s) (kc1, kc2, kc3)" in capsys.readouterr().out
    hosts = load_inventory(out).hosts
    assert [(h.name, h.address, h.target, h.port, h.user, h.sudo) for h in hosts] == [
        ("kc1", "10.9.8.11", "127.0.0.1", 2222, "vagrant", True),
        ("kc2", "10.9.8.12", "127.0.0.1", 2200, "vagrant", True),
        ("kc3", "10.9.8.13", "192.168.121.47", 22, "vagrant", True),
    ]
    assert all(h.host_key_checking == "no" and h.key == str(tmp_path / "keys" / h.name) for h in hosts)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no Host blocks"),
        ("HostName 1.2.3.4\n", ":1: 'HostName' before any Host line"),
        ("Host kc1\n  HostName 1.2.3.4\n  User v\n  Port 22\n", ":1: Host kc1 has no identityfile"),
        ("Host kc1\n  HostName h\n  User v\n  Port x\n  IdentityFile k\n", "port 'x' is not a number"),
    ],
)
def test_bad_ssh_config_is_one_line(text, message):
    with pytest.raises(UserError) as info:
        parse_ssh_config(text, "saved.txt")
    assert str(info.value).startswith("saved.txt") and message in str(info.value)


def test_a_vm_not_of_the_vagrantfile_is_refused():
    hosts = parse_ssh_config("Host web\n  HostName h\n  User v\n  Port 22\n  IdentityFile k\n", "saved.txt")
    with pytest.raises(UserError, match="Host web is not one of the Vagrantfile's VMs"):
        inventory_toml(hosts, "192.168.56", "saved.txt")


def test_cli_error_for_a_missing_file_is_one_line(tmp_path, capsys):
    assert main(["vagrant", "inventory", "--ssh-config", str(tmp_path / "nope"), "-o", str(tmp_path / "i.toml")]) == 254
    err = capsys.readouterr().err
    assert "nope: cannot read" in err and "Traceback" not in err


@pytest.mark.skipif(shutil.which("vagrant") is None, reason="needs vagrant (apt-get install vagrant)")
def test_vagrantfile_validates_for_any_node_count_and_refuses_a_bad_one(tmp_path):
    work = tmp_path / "vagrant"
    shutil.copytree(VAGRANT, work, ignore=shutil.ignore_patterns(".vagrant", "inventory.toml"))
    for nodes in ("3", "5"):
        env = {**os.environ, "KCHAOS_NODES": nodes, "KCHAOS_MEMORY": "512", "KCHAOS_BOX": "debian/bookworm64"}
        proc = subprocess.run(
            ["vagrant", "validate", "--ignore-provider"], cwd=work, env=env, capture_output=True, text=True
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert f"kc{nodes}:" in proc.stdout and f"kc{int(nodes) + 1}:" not in proc.stdout
    env = {**os.environ, "KCHAOS_NODES": "many"}
    proc = subprocess.run(
        ["vagrant", "validate", "--ignore-provider"], cwd=work, env=env, capture_output=True, text=True
    )
    assert proc.returncode != 0 and "many" in proc.stdout + proc.stderr


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (an sshd host in a namespace)")
def test_provisioning_script_on_an_sshd_host_finds_what_the_backend_needs(tmp_path):
    from harness.backends.remote_shell import Remote
    from tests.harness_ssh.sshd_hosts import sshd_hosts

    with sshd_hosts(tmp_path, ["h1"]) as hosts:
        remote = Remote(load_inventory(hosts.inventory).hosts[0])
        try:
            remote.put((VAGRANT / "provision.sh").read_bytes(), "/tmp/kchaos-provision.sh", mode="755")
            ready = remote.run("KCHAOS_PROVISION_CHECK=1 sh /tmp/kchaos-provision.sh", check=False)
            assert ready.returncode == 0 and b"kchaos provision: ready (Python 3.11" in ready.stdout, ready
            again = remote.run("sh /tmp/kchaos-provision.sh", check=False)  # nothing missing: no apt-get at all
            assert again.returncode == 0 and b"ready" in again.stdout
            # a host without nft (PATH without sbin) and without libfaketime is told what to install
            lacking = remote.run("PATH=/usr/bin:/bin KCHAOS_PROVISION_CHECK=1 sh /tmp/kchaos-provision.sh", check=False)
            assert lacking.returncode == 1 and b"missing: nftables" in lacking.stdout, lacking
        finally:
            remote.run("rm -f /tmp/kchaos-provision.sh", check=False)
            remote.close()
