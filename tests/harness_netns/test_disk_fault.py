"""Disk faults on a real process: the kchaos_disk preload shim, driven through DiskControl.

No namespaces needed, only gcc. Each call is made by disk_child.py on a file in the faulted data
dir and on one elsewhere, which must never be touched.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator

import pytest

from harness.backends import disks
from harness.backends.disks import DiskControl
from harness.backends.ledger import Ledger, heal
from tests.harness_netns.conftest import HERE
from vocab.faults.kinds import DiskFault

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to build the disk shim")
STALL_MS = 200


class Child:
    def __init__(self, control: DiskControl, data_dir, other_dir) -> None:
        env = {**os.environ, **disks.preload_env(control.path, data_dir)}
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "disk_child.py"), str(data_dir), str(other_dir)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )

    def call(self, op: str, where: str = "data") -> dict:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{op} {where}\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def ledger(tmp_path) -> Ledger:
    return Ledger.create(tmp_path / "ledger.jsonl")


@pytest.fixture
def control(tmp_path, ledger) -> DiskControl:
    control = DiskControl(ledger, "n1", tmp_path / "nodes" / "n1" / "disk-fault")
    control.create()
    return control


@pytest.fixture
def child(tmp_path, control) -> Iterator[Child]:
    data, other = tmp_path / "nodes" / "n1" / "data", tmp_path / "nodes" / "n1" / "logs"
    data.mkdir(parents=True)
    other.mkdir()
    child = Child(control, data, other)
    yield child
    child.close()


def test_healthy_calls_pass_through(child):
    for op in ("write", "pwrite", "fsync", "fdatasync"):
        assert child.call(op)["errno"] is None


def test_stall_delays_only_the_chosen_ops_on_the_data_dir(child, control, ledger):
    control.apply(DiskFault("stall", ops=("fsync",), delay_ms=STALL_MS))
    assert [e.kind for e in ledger.outstanding()] == ["disk_fault"]
    for op in ("fsync", "fdatasync"):
        result = child.call(op)
        assert result["errno"] is None and result["ms"] >= STALL_MS * 0.95
    assert child.call("fsync", "other")["ms"] < STALL_MS * 0.5  # outside the data dir: untouched
    assert child.call("write")["ms"] < STALL_MS * 0.5  # not one of the stalled ops
    control.apply(DiskFault("stall", ops=("write",), delay_ms=STALL_MS))  # replaces the fault
    assert child.call("write")["ms"] >= STALL_MS * 0.95 and child.call("pwrite")["ms"] >= STALL_MS * 0.95
    assert child.call("fsync")["ms"] < STALL_MS * 0.5
    control.heal()
    assert child.call("write")["ms"] < STALL_MS * 0.5
    assert ledger.outstanding() == []


def test_fail_eio_on_fsync_and_enospc_on_write(child, control):
    control.apply(DiskFault("fail", ops=("fsync",), errno="EIO"))
    assert child.call("fsync")["errno"] == "EIO" and child.call("fdatasync")["errno"] == "EIO"
    assert child.call("write")["errno"] is None and child.call("fsync", "other")["errno"] is None
    control.apply(DiskFault("fail", ops=("write",), errno="ENOSPC"))
    assert child.call("write")["errno"] == "ENOSPC" and child.call("pwrite")["errno"] == "ENOSPC"
    assert child.call("fsync")["errno"] is None and child.call("write", "other")["errno"] is None
    control.heal()
    assert child.call("write")["errno"] is None


def test_fail_with_a_probability_fails_about_that_share(child, control):
    control.apply(DiskFault("fail", ops=("fsync",), errno="EIO", probability=0.5))
    failed = sum(child.call("fsync")["errno"] == "EIO" for _ in range(200))
    assert 60 <= failed <= 140  # binomial(200, 0.5): sd ~7


def test_heal_of_a_crashed_harness_switches_the_fault_off(child, control, ledger):
    control.apply(DiskFault("fail", ops=("fsync", "write"), errno="EIO"))
    assert child.call("write")["errno"] == "EIO"
    report = heal(ledger.path)
    assert report.ok and any("disk fault on n1" in r for r in report.removed)
    assert child.call("write")["errno"] is None and child.call("fsync")["errno"] is None
    assert heal(ledger.path).removed == []


def test_control_file_layout():
    field = disks.encode_params(DiskFault("stall", ops=("fsync", "write"), delay_ms=25))
    assert len(field) == disks.CONTROL_BYTES - 2 and field.split()[:5] == [b"3", b"S", b"25000", b"5", b"1000000"]
    field = disks.encode_params(DiskFault("fail", ops=("write",), errno="ENOSPC", probability=0.25))
    assert field.split()[:5] == [b"2", b"F", b"0", b"28", b"250000"]
