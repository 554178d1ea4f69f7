"""The ssh inventory: what a good file gives, and a one-line error naming file, host and key otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.backends.inventory import load_inventory
from vocab.errors import UserError


@pytest.fixture
def key(tmp_path: Path) -> Path:
    path = tmp_path / "keys" / "id"
    path.parent.mkdir()
    path.write_text("not really a key\n")
    return path


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "inventory.toml"
    path.write_text(text)
    return path


GOOD = """
[defaults]
user = "vagrant"
key = "keys/id"
sudo = true

[[hosts]]
name = "kc1"
address = "192.168.56.11"
ssh_address = "127.0.0.1"
port = 2222

[[hosts]]
name = "kc2"
address = "192.168.56.12"
user = "admin"
"""


def test_defaults_apply_per_host_and_relative_keys_resolve_next_to_the_file(tmp_path, key):
    inv = load_inventory(write(tmp_path, GOOD))
    first, second = inv.hosts
    assert (first.name, first.address, first.target, first.port, first.user) == (
        "kc1",
        "192.168.56.11",
        "127.0.0.1",
        2222,
        "vagrant",
    )
    assert (second.target, second.port, second.user, second.python, second.root) == (
        "192.168.56.12",
        22,
        "admin",
        "python3",
        "kchaos",
    )
    assert first.key == second.key == str(key) and first.sudo and second.sudo
    assert inv.for_nodes(["c1", "c2"]) == {"c1": first, "c2": second}
    assert first.vm == "" and first.pause == "process"


def test_a_vm_host_names_its_cluster_directory_relative_to_the_file(tmp_path, key):
    inv = load_inventory(write(tmp_path, GOOD.replace("sudo = true", 'sudo = true\nvm = "cluster"\npause = "vm"')))
    assert [(h.vm, h.pause) for h in inv.hosts] == [(str(tmp_path / "cluster"), "vm")] * 2


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[[hosts]]\nname = 'a'\n", "host a: missing 'address'"),
        (GOOD.replace('address = "192.168.56.12"', 'address = "kc2.local"'), "address 'kc2.local' is not an IP"),
        (GOOD.replace("port = 2222", "port = 70000"), "port 70000 is not between"),
        (GOOD.replace("port = 2222", 'port = "22"'), "'port' must be a int"),
        (GOOD.replace("sudo = true", "sudo = true\ncolour = 1"), "[defaults]: unknown key 'colour'"),
        (GOOD.replace('name = "kc2"', 'name = "kc1"'), "name 'kc1' is used by host kc1 too"),
        (GOOD.replace('"192.168.56.12"', '"192.168.56.11"'), "address '192.168.56.11' is used by host kc1"),
        (GOOD.replace('key = "keys/id"', 'key = "keys/nope"'), "key 'keys/nope' not found"),
        (GOOD.replace("[defaults]", "[default]"), "unknown top-level key 'default'"),
        ("[defaults]\nuser = 'x'\n", "needs at least one [[hosts]] table"),
        ("[[hosts]\n", "not valid TOML"),
        (GOOD.replace('user = "admin"', 'user = "ad\'min"'), "'user' must be non-empty and free of quotes"),
        (GOOD.replace("sudo = true", 'sudo = true\nclock = "ntp"'), "clock 'ntp' is not one of libfaketime, guest"),
        (GOOD.replace("sudo = true", 'sudo = true\npause = "cgroup"'), "pause 'cgroup' is not one of process, vm"),
        (GOOD.replace("sudo = true", 'sudo = true\npause = "vm"'), "pause 'vm' needs vm = the directory"),
    ],
)
def test_a_bad_inventory_is_one_line_naming_file_and_place(tmp_path, key, text, message):
    path = write(tmp_path, text)
    with pytest.raises(UserError) as info:
        load_inventory(path)
    assert str(path) in str(info.value) and message in str(info.value)
    assert "\n" not in str(info.value)


def test_too_few_hosts_for_the_cluster_is_an_error(tmp_path, key):
    inv = load_inventory(write(tmp_path, GOOD))
    with pytest.raises(UserError, match="2 host\\(s\\) for 3 nodes"):
        inv.for_nodes(["c1", "c2", "c3"])


def test_a_missing_inventory_file_is_named(tmp_path):
    with pytest.raises(UserError, match="no such inventory file"):
        load_inventory(tmp_path / "nope.toml")


def test_run_cli_refuses_ssh_without_an_inventory_and_a_bad_one(tmp_path, key, capsys):
    from harness.cli import main

    assert main(["run", "--backend", "ssh", "--results", str(tmp_path / "r"), "--no-progress"]) == 254
    assert "--backend ssh needs --inventory FILE" in capsys.readouterr().err
    bad = write(tmp_path, GOOD.replace("port = 2222", "port = 0"))
    argv = ["run", "--inventory", str(bad), "--results", str(tmp_path / "r"), "--no-progress"]  # implies ssh
    assert main(argv) == 254
    err = capsys.readouterr().err
    assert f"{bad}: host kc1: port 0 is not between 1 and 65535" in err and "Traceback" not in err


def test_a_test_file_names_its_inventory_and_test_json_keeps_it(tmp_path, key, monkeypatch):
    from harness.test_spec import from_dict, load_test

    monkeypatch.chdir(tmp_path)
    write(tmp_path, GOOD)
    test = tmp_path / "t.toml"
    test.write_text('backend = "ssh"\ninventory = "inventory.toml"\n')
    spec = load_test(test)
    assert spec.backend == "ssh" and spec.inventory == str(tmp_path / "inventory.toml")
    assert from_dict(spec.to_dict()).inventory == spec.inventory  # a stored run names the same hosts
    assert "inventory" not in load_test(None, {"backend": "sim"}).to_dict()
    test.write_text('backend = "ssh"\ninventory = 3\n')
    with pytest.raises(UserError, match=r"t.toml:2: inventory: expected the path of an inventory file"):
        load_test(test)
