"""`kchaos doctor`'s lazyfs row: a real mount round trip that leaves nothing, a clear fix when FUSE is
missing, and a lazyfs left by a killed doctor removed by the next one."""

from __future__ import annotations

import os
import re
import tempfile

import pytest

from harness import doctor_cli
from harness.backends.lazyfs import probe as lazyfs_probe
from harness.backends.lazyfs import start_lazyfs
from harness.backends.ledger import Ledger, heal
from harness.backends.resources import TMPDIR_PREFIX, is_mounted
from tests.lazyfs.conftest import needs_root

pytestmark = [pytest.mark.root, needs_root]


def lazyfs_row(checks):
    return next(c for c in checks if c.name == "lazyfs (lose_unsynced)")


def our_tmpdirs() -> set[str]:
    """The ledgered temp dirs (`create_tmpdir`: kchaos-<12 hex digits>). Other kchaos-* names, such as
    the fuzzer's TemporaryDirectory (kchaos-fuzz-*) of a test on another worker, come and go meanwhile."""
    pattern = re.compile(rf"{re.escape(TMPDIR_PREFIX)}[0-9a-f]{{12}}")
    return {p for p in os.listdir(tempfile.gettempdir()) if pattern.fullmatch(p)}


def test_the_lazyfs_check_passes_here_and_leaves_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(doctor_cli, "DOCTOR_LEDGERS", tmp_path)
    tmpdirs = our_tmpdirs()
    row = lazyfs_row(doctor_cli.run_checks())
    assert row.status == "OK" and "power loss" in row.detail, row
    assert list(tmp_path.iterdir()) == []
    assert our_tmpdirs() <= tmpdirs  # its throwaway directory (and so the mount point in it) is gone


def test_without_libfuse_the_check_warns_and_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setattr(doctor_cli, "DOCTOR_LEDGERS", tmp_path)
    monkeypatch.setattr(lazyfs_probe.ctypes.util, "find_library", lambda name: None)
    row = lazyfs_row(doctor_cli.run_checks())
    assert row.status == "WARN" and "libfuse2" in row.detail and "apt-get install libfuse2" in row.fix


def test_a_lazyfs_left_by_a_killed_doctor_is_removed_by_the_next_one(tmp_path, monkeypatch):
    monkeypatch.setattr(doctor_cli, "DOCTOR_LEDGERS", tmp_path / "ledgers")
    (tmp_path / "ledgers").mkdir()
    stale = Ledger.create(tmp_path / "ledgers" / "1-dead.jsonl")  # "dies" with its mount up
    lazy = start_lazyfs(stale, tmp_path / "state", tmp_path / "mnt")
    try:
        assert is_mounted(str(tmp_path / "mnt"))
        doctor_cli.run_checks()
        assert not is_mounted(str(tmp_path / "mnt"))
        assert lazy.popen.wait(timeout=30) is not None
        assert list((tmp_path / "ledgers").iterdir()) == []
    finally:
        if (tmp_path / "ledgers" / "1-dead.jsonl").exists():
            heal(tmp_path / "ledgers" / "1-dead.jsonl")
