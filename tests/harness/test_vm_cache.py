"""`kchaos vagrant box --prune`: the boxes no cluster uses go, the rest stay, and each line says why.

The boxes here are directories in a cache of the test's own (XDG_CACHE_HOME); a cluster is a directory
with a ledger (a lease counts while something in it is outstanding), and a VM booting from a box is a
real process whose command line names the box's kernel, as qemu's does (`tests/harness_vagrant` leases
and releases a box with real VMs).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.backends.ledger import LEDGER_NAME, Ledger
from harness.backends.vm_box import Box, cache_root, current_box
from harness.backends.vm_cache import LEASES, lease, live_leases, prune, release
from harness.cli import main


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    for name in (current_box().path.name, "box-aaaaaaaaaaaa", "box-bbbbbbbbbbbb", "box-cccccccccccc"):
        (cache_root() / name).mkdir(parents=True)
        (cache_root() / name / "disk.qcow2").write_bytes(b"\0" * 1_000_000)
    return cache_root()


def cluster_dir(path: Path, outstanding: bool) -> Path:
    path.mkdir()
    ledger = Ledger.create(path / LEDGER_NAME)
    rid = ledger.record("link", name="kvtest", type="veth")
    if not outstanding:
        ledger.mark_done(rid)
    return path


def boxes(cache: Path) -> list[str]:
    return sorted(p.name for p in cache.glob("box-*"))


def test_a_box_is_kept_while_a_cluster_or_a_vm_uses_it_and_removed_after(cache, tmp_path):
    up = cluster_dir(tmp_path / "up", outstanding=True)
    gone = cluster_dir(tmp_path / "destroyed", outstanding=False)
    lease(Box(cache / "box-aaaaaaaaaaaa"), up)
    lease(Box(cache / "box-bbbbbbbbbbbb"), gone)  # its cluster was healed: nothing outstanding
    kernel = cache / "box-cccccccccccc" / "vmlinuz"
    argv = ["qemu-system-x86_64", "-c", "import time; time.sleep(60)", "-kernel", str(kernel)]
    vm = subprocess.Popen(argv, executable=sys.executable)
    try:
        pruned = prune()
        assert pruned.removed == ["removed box-bbbbbbbbbbbb (1 MB)"]
        assert f"kept box-aaaaaaaaaaaa: in use by the cluster in {up}" in pruned.kept
        assert f"kept box-cccccccccccc: in use by qemu PID {vm.pid}" in pruned.kept
        assert f"kept {current_box().path.name}: this checkout's box" in pruned.kept
    finally:
        vm.kill()
        vm.wait()
    release("box-aaaaaaaaaaaa", up)
    assert not list((cache / "box-aaaaaaaaaaaa" / LEASES).iterdir())
    assert sorted(prune().removed) == ["removed box-aaaaaaaaaaaa (1 MB)", "removed box-cccccccccccc (1 MB)"]
    assert boxes(cache) == [current_box().path.name]


def test_a_stale_lease_is_cleared_and_an_unreadable_ledger_keeps_nothing(cache, tmp_path):
    box = Box(cache / "box-aaaaaaaaaaaa")
    lease(box, tmp_path / "never-made")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / LEDGER_NAME).write_text("{not a ledger\n")
    lease(box, broken)
    assert live_leases(box.path) == []
    assert not list((box.path / LEASES).iterdir())


def test_the_command_says_what_it_removed_and_kept(cache, tmp_path, capsys):
    lease(Box(cache / "box-aaaaaaaaaaaa"), cluster_dir(tmp_path / "up", outstanding=True))
    assert main(["vagrant", "box", "--prune"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "pruned 2 box(es)" and "removed box-bbbbbbbbbbbb (1 MB)" in out
    assert any(line.startswith("kept box-aaaaaaaaaaaa: in use by the cluster in ") for line in out)
    assert main(["vagrant", "box", "--prune"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "nothing to prune"
    assert boxes(cache) == sorted([current_box().path.name, "box-aaaaaaaaaaaa"])


def test_destroy_gives_the_lease_back_and_a_broken_cluster_json_does_not_stop_it(cache, tmp_path):
    from harness.backends.vms import STATE, destroy

    box = Box(cache / "box-aaaaaaaaaaaa")
    up = cluster_dir(tmp_path / "up", outstanding=False)
    (up / STATE).write_text('{"box": "box-aaaaaaaaaaaa"}')
    lease(box, up)
    destroy(up)
    assert not list((box.path / LEASES).iterdir()) and not (up / STATE).exists()
    broken = cluster_dir(tmp_path / "broken", outstanding=False)
    (broken / STATE).write_text("{not json")
    assert destroy(broken) == [] and not (broken / STATE).exists()
