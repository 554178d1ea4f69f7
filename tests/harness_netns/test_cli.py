"""`kchaos heal` and `kchaos doctor` through their register() on a fresh parser."""

from __future__ import annotations

import argparse
import os

import pytest

from harness import doctor_cli, heal_cli
from harness.backends.ledger import Ledger, heal
from harness.backends.resources import create_netns, create_tmpdir, netns_names
from tests.harness_netns.conftest import needs_root, snapshot
from vocab.errors import EXIT_ERROR, UserError


def heal_if_left_file(path) -> None:
    if path.exists():
        heal(path)


def run(module, *argv: str) -> int:
    parser = argparse.ArgumentParser(prog="kchaos")
    module.register(parser.add_subparsers())
    args = parser.parse_args(list(argv))
    return args.func(args)


def test_heal_names_a_missing_run_dir(tmp_path):
    with pytest.raises(UserError, match="nope: no such run directory or ledger file"):
        run(heal_cli, "heal", str(tmp_path / "nope"))


def test_heal_without_a_ledger_or_with_nothing_left(tmp_path, capsys):
    assert run(heal_cli, "heal", str(tmp_path)) == 0
    assert "has no ledger.jsonl" in capsys.readouterr().out
    ledger = Ledger.create(tmp_path / "ledger.jsonl")
    ledger.mark_done(ledger.record("tmpdir", path=str(tmp_path / "kchaos-z")))
    assert run(heal_cli, "heal", str(tmp_path / "ledger.jsonl")) == 0
    assert "already removed" in capsys.readouterr().out


def test_heal_rejects_a_file_that_is_not_a_ledger(tmp_path):
    (tmp_path / "ledger.jsonl").write_text("hello\n")
    with pytest.raises(UserError, match=r"ledger\.jsonl: not a kchaos ledger"):
        run(heal_cli, "heal", str(tmp_path))


@needs_root
@pytest.mark.root
def test_heal_removes_a_crashed_runs_tmpdir_and_reports_failures(tmp_path, capsys):
    # written by "another process": this one pretends to be a different, dead owner
    ledger = Ledger.create(tmp_path / "ledger.jsonl")
    _, made = create_tmpdir(ledger, tmp_path)
    ledger.record("tmpdir", path="/etc")  # a ledger must never make heal remove something else
    assert run(heal_cli, "heal", str(tmp_path)) == EXIT_ERROR
    captured = capsys.readouterr()
    assert f"removed directory {made}" in captured.out
    assert "refusing to remove /etc" in captured.err
    assert not made.exists() and os.path.isdir("/etc")


@needs_root
@pytest.mark.root
def test_doctor_passes_here_and_leaves_nothing(capsys):
    before = snapshot("kcdoc", "kcdoc")  # its namespaces, links, rules and processes: kcdoc...
    assert run(doctor_cli, "doctor") == 0
    out = capsys.readouterr().out
    for name in ("root", "network namespaces", "bridge + veth", "packet filter for partitions", "free private subnet"):
        line = next(line for line in out.splitlines() if line.startswith(name))
        assert "  OK  " in line, line
    assert "all required checks passed" in out
    assert snapshot("kcdoc", "kcdoc") == before


@needs_root
@pytest.mark.root
def test_doctor_removes_the_namespace_a_killed_doctor_left(tmp_path, monkeypatch):
    monkeypatch.setattr(doctor_cli, "DOCTOR_LEDGERS", tmp_path)
    stale = Ledger.create(tmp_path / "1-dead.jsonl")  # this process "dies" here, its namespace still up
    name = f"kcdoc{os.urandom(3).hex()}"
    try:
        create_netns(stale, name)
        assert name in netns_names()
        doctor_cli.run_checks()
        assert name not in netns_names()
        assert list(tmp_path.iterdir()) == []  # its own ledger and the stale one are both gone
    finally:
        heal_if_left_file(tmp_path / "1-dead.jsonl")


def test_doctor_fails_without_root_and_says_what_to_do(monkeypatch, capsys):
    monkeypatch.setattr(doctor_cli.os, "geteuid", lambda: 1000)
    assert run(doctor_cli, "doctor") == EXIT_ERROR
    out = capsys.readouterr().out
    root_line = next(line for line in out.splitlines() if line.startswith("root "))
    assert "FAIL" in root_line and "run as root" in root_line
    assert "required check(s) failed: root" in out


def test_doctor_reports_missing_python_packages(monkeypatch):
    monkeypatch.setattr(doctor_cli, "PYTHON_DEPS", ("pyarrow", "surely_not_installed_pkg"))
    check = next(c for c in doctor_cli.run_checks() if c.name == "python packages")
    assert check.status == "FAIL" and "surely_not_installed_pkg" in check.detail and "pip install" in check.fix


HOST_MOUNTS = "22 27 0:21 / /proc rw - proc proc rw\n27 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw\n"
CHROOT_MOUNTS = "22 27 0:21 / /proc rw - proc proc rw\n31 27 0:24 / /dev/pts rw - devpts devpts rw\n"


def test_doctor_names_a_chroot_not_the_kernel_when_root_is_not_a_mount_point():
    """`ip netns add` fails in a chroot whose / is not a mount point (it cannot make /run/netns a shared
    mount): the fix is a bind mount of /, not a kernel with CONFIG_NET_NS."""
    assert doctor_cli.root_is_a_mount_point(HOST_MOUNTS)
    assert not doctor_cli.root_is_a_mount_point(CHROOT_MOUNTS)
    error = "ip netns add kc-doctor: exit 1: mount --make-shared /run/netns failed: Invalid argument"
    assert "mount --bind / /" in doctor_cli.netns_fix(error, root_is_mount=False)
    assert "CONFIG_NET_NS" in doctor_cli.netns_fix(error, root_is_mount=True)
    assert "CAP_SYS_ADMIN" in doctor_cli.netns_fix("ip netns add x: exit 1: Operation not permitted", True)
