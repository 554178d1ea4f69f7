"""The `kchaos doctor` check for lazyfs: mount a throwaway one, write, fsync, lose power, verify, unmount."""

from __future__ import annotations

import ctypes.util
import importlib.util
import os
import time
from pathlib import Path

from harness.backends.lazyfs.mount import start_lazyfs, stop_lazyfs
from harness.backends.ledger import Ledger
from harness.backends.resources import create_tmpdir
from harness.backends.shell import BackendError

FIX = "apt-get install libfuse2; pip install fusepy (both in setup.sh / pyproject.toml)"


def fuse_available() -> None:
    """Raise BackendError naming what is missing for lazyfs (before any mount is tried)."""
    if not os.path.exists("/dev/fuse"):
        raise BackendError("no /dev/fuse (a kernel with FUSE, and /dev/fuse inside a container)")
    if ctypes.util.find_library("fuse") is None:
        raise BackendError("libfuse2 not installed (fusepy needs libfuse.so.2)")
    if importlib.util.find_spec("fuse") is None:
        raise BackendError("the fusepy Python package is not installed")


def power_loss_probe(ledger: Ledger, parent: Path | None = None) -> str:
    """A real round trip through a lazyfs mount; everything it makes is in `ledger` (undone by the caller)."""
    fuse_available()
    started = time.monotonic()
    _, tmp = create_tmpdir(ledger, parent)
    lazy = start_lazyfs(ledger, tmp / "state", tmp / "mnt", label="doctor lazyfs")
    try:
        kept, lost = lazy.mountpoint / "kept", lazy.mountpoint / "lost"
        fd = os.open(kept, os.O_WRONLY | os.O_CREAT, 0o644)
        os.write(fd, b"durable")
        os.fsync(fd)
        os.write(fd, b"+volatile")
        os.close(fd)
        dfd = os.open(lazy.mountpoint, os.O_RDONLY)
        os.fsync(dfd)
        os.close(dfd)
        lost.write_bytes(b"never synced")
        lazy.power_loss()
        if kept.read_bytes() != b"durable" or lost.exists():
            raise BackendError(f"after a power loss: kept={kept.read_bytes()!r}, unsynced file exists={lost.exists()}")
    finally:
        stop_lazyfs(ledger, lazy)
    return f"mount, fsync, power loss and unmount work ({(time.monotonic() - started) * 1000:.0f} ms)"
