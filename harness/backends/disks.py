"""Disk faults for real processes: the kchaos_disk preload shim stalls or fails data-dir I/O.

A node started with disk faults enabled has `LD_PRELOAD=kchaos_disk.so`, `KCHAOS_DISK_DIR` (its data
dir) and `KCHAOS_DISK_CONTROL` (a 64-byte file the shim maps shared). `DiskControl` rewrites that file
in place (the mapping follows the inode, so never by rename): the parameters first, then byte 0, the
switch. See `native/kchaos_disk.c` for the format and what is intercepted.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

from harness.backends import native
from harness.backends.ledger import Ledger, register_undo
from vocab.faults.kinds import DiskFault

CONTROL_BYTES = 64
OP_BITS = {"fsync": 1, "write": 2}
ON, OFF = b"1", b"0"


def encode_params(fault: DiskFault) -> bytes:
    """The shim's parameter field (bytes 2..63 of the control file)."""
    ops = sum(OP_BITS[op] for op in set(fault.ops))
    action = "S" if fault.kind == "stall" else "F"
    text = f"{ops} {action} {fault.delay_ms * 1000} {getattr(errno, fault.errno)} {round(fault.probability * 1e6)}"
    field = text.encode("ascii").ljust(CONTROL_BYTES - 3) + b"\n"
    assert len(field) == CONTROL_BYTES - 2
    return field


def preload_env(control: Path, data_dir: Path) -> dict[str, str]:
    """The environment that puts a process's data-dir I/O under `control` (LD_PRELOAD to be joined by
    the caller with any other shim)."""
    return {
        "LD_PRELOAD": str(native.build("kchaos_disk")),
        "KCHAOS_DISK_CONTROL": str(control),
        "KCHAOS_DISK_DIR": os.path.realpath(data_dir),
    }


def create_control(path: Path) -> None:
    """A control file that says healthy (its size never changes afterwards: the shim maps it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(OFF + b" " * (CONTROL_BYTES - 2) + b"\n")


def set_fault(path: Path, fault: DiskFault) -> None:
    """Switch off, write the parameters, switch on: a call never reads half-written parameters."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, OFF, 0)
        os.pwrite(fd, encode_params(fault), 2)
        os.pwrite(fd, ON, 0)
    finally:
        os.close(fd)


class DiskControl:
    """One node's control file and the fault it holds (ledgered while there is one)."""

    def __init__(self, ledger: Ledger, node: str, path: Path) -> None:
        self.ledger = ledger
        self.node = node
        self.path = path
        self.fault: DiskFault | None = None
        self._ledger_id: int | None = None

    def create(self) -> None:
        create_control(self.path)

    def apply(self, fault: DiskFault) -> None:
        if self._ledger_id is None:
            self._ledger_id = self.ledger.record("disk_fault", node=self.node, path=str(self.path))
        set_fault(self.path, fault)
        self.fault = fault

    def heal(self) -> None:
        if self._ledger_id is None:
            return
        _switch(self.path, OFF)
        self.fault = None
        self.ledger.mark_done(self._ledger_id)
        self._ledger_id = None


def _switch(path: Path, value: bytes) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, value, 0)
    finally:
        os.close(fd)


def is_on(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(1) == ON
    except FileNotFoundError:
        return False


@register_undo("disk_fault")
def undo_disk_fault(fields: dict[str, Any]) -> str | None:
    path = Path(fields["path"])
    if not is_on(path):
        return None
    _switch(path, OFF)
    return f"disk fault on {fields.get('node', '?')}"
