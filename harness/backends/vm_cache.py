"""The box cache: which cached boxes are in use, and pruning the rest (`kchaos vagrant box --prune`).

Each box lives in `~/.cache/kchaos/vagrant/box-HASH`; a change to the box's recipe (`vm_box.py`) makes a
new one and leaves the old one there (430-640 MB each). A box is in use while a cluster booted from it
is not destroyed: its VMs' disks are copy-on-write over the box's disk, and `kchaos heal` boots a
powered-off VM again with the box's kernel. So `up` leaves a lease in the box (`leases/HASH`, naming
the cluster's directory) and `destroy` takes it back. A lease is live while that directory's ledger
has something outstanding; one whose cluster is gone (destroyed by `kchaos heal DIR`, or its directory
removed) is stale and is cleared by the prune.

A box is kept when it is this tree's box, when a live lease names it, or when a running qemu boots
from it (a cluster booted by a checkout that predates leases).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness.backends.ledger import LEDGER_NAME, Ledger, LedgerError
from harness.backends.procs import find_where
from harness.backends.vm_box import Box, cache_root, current_box

LEASES = "leases"


def lease(box: Box, directory: Path) -> None:
    """Mark `box` as used by the cluster in `directory` (before its first VM boots)."""
    path = _lease_path(box.path, directory)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(str(Path(directory).resolve()) + "\n", encoding="utf-8")


def release(box_name: str, directory: Path) -> None:
    """The cluster in `directory` no longer uses the box `box_name` (after a destroy that left nothing)."""
    _lease_path(cache_root() / box_name, directory).unlink(missing_ok=True)


@dataclass(frozen=True)
class Pruned:
    removed: list[str]  # one line per box removed
    kept: list[str]  # one line per box kept, and why


def prune(say: Callable[[str], None] = lambda _: None) -> Pruned:
    """Remove every cached box that is not in use (module docstring); what was removed and kept."""
    root = cache_root()
    current = current_box().path
    removed, kept = [], []
    for path in sorted(root.glob("box-*")) if root.is_dir() else []:
        if not path.is_dir():
            continue
        if path == current:
            kept.append(f"kept {path.name}: this checkout's box")
            continue
        users = live_leases(path) + [f"qemu PID {pid}" for pid in qemu_booting_from(path)]
        if users:
            kept.append(f"kept {path.name}: in use by {', '.join(users)}")
            continue
        size = _size(path)
        say(f"removing {path}")
        shutil.rmtree(path)
        removed.append(f"removed {path.name} ({size / 1e6:.0f} MB)")
    return Pruned(removed, kept)


def live_leases(box_path: Path) -> list[str]:
    """The cluster directories whose lease on the box is live; stale leases are cleared."""
    live = []
    for path in sorted((box_path / LEASES).glob("*")):
        try:
            directory = Path(path.read_text(encoding="utf-8").strip())
            ledger = directory / LEDGER_NAME
            outstanding = ledger.is_file() and bool(Ledger.load(ledger).outstanding())
        except (OSError, LedgerError):
            outstanding = False  # unreadable: nothing there can be healed or booted from it any more
        if outstanding:
            live.append(f"the cluster in {directory}")
        else:
            path.unlink(missing_ok=True)
    return live


def qemu_booting_from(box_path: Path) -> list[int]:
    """PIDs of live qemu processes whose command line names a file of the box."""
    inside = str(box_path) + "/"

    def boots(argv: list[str]) -> bool:
        return os.path.basename(argv[0]).startswith("qemu-system") and any(inside in a for a in argv)

    return [stat.pid for stat, _ in find_where(boots)]


def _lease_path(box_path: Path, directory: Path) -> Path:
    digest = hashlib.sha256(str(Path(directory).resolve()).encode()).hexdigest()[:16]
    return box_path / LEASES / digest


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())
