"""A real lazyfs mount per test (root: FUSE mounts), ledgered, and checked gone afterwards."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.backends.lazyfs import LazyMount, start_lazyfs, stop_lazyfs
from harness.backends.ledger import LEDGER_NAME, Ledger, heal
from harness.backends.resources import is_mounted

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: FUSE mounts")


@dataclass
class Mounted:
    lazy: LazyMount
    ledger: Ledger

    @property
    def root(self) -> Path:
        return self.lazy.mountpoint

    def power_loss(self, torn_seed: int | None = None) -> dict:
        return self.lazy.power_loss(torn_seed)

    def status(self) -> dict:
        return self.lazy.status()


def fuse_mounts(under: Path) -> list[str]:
    """Mount points below `under` (from /proc/self/mountinfo)."""
    prefix = os.path.realpath(under)
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        points = [line.split()[4].encode().decode("unicode_escape") for line in f]
    return [p for p in points if p == prefix or p.startswith(prefix + "/")]


@pytest.fixture
def mounted(tmp_path: Path) -> Iterator[Mounted]:
    ledger = Ledger.create(tmp_path / LEDGER_NAME)
    lazy = start_lazyfs(ledger, tmp_path / "state", tmp_path / "mnt", backing_sync=False)
    try:
        yield Mounted(lazy, ledger)
    finally:
        try:
            stop_lazyfs(ledger, lazy)
        finally:
            heal(ledger.path)
    assert not is_mounted(str(tmp_path / "mnt"))
    assert lazy.popen.poll() is not None
    assert not ledger.outstanding()


def fsync_path(path: Path) -> None:
    """fsync a file or a directory by name (a fresh descriptor: fsync is per inode, not per descriptor)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_file(path: Path, data: bytes, *, sync: bool = False, append: bool = False) -> None:
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC)
    fd = os.open(path, flags, 0o644)
    try:
        os.write(fd, data)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
