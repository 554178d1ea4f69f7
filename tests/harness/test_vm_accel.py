"""`kchaos vagrant up`'s choice of accelerator is probed once per boot: the probe under nested KVM hangs
until its 60 s timeout here, on every `up`. The probe itself is replaced by a counter (it boots a
kernel under qemu; `tests/harness_vagrant` runs the real one); what is tested is the keeping around it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness.backends import vm_accel
from harness.backends.vm_box import Box


@pytest.fixture
def probed(tmp_path, monkeypatch) -> list[str]:
    """A box kernel, a KVM device and a qemu binary as plain files, and a probe that counts its calls."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    for name in ("kvm", "qemu", "box/vmlinuz", "boot_id"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(name)
    monkeypatch.setattr(vm_accel, "KVM_DEVICE", str(tmp_path / "kvm"))
    monkeypatch.setattr(vm_accel, "BOOT_ID", tmp_path / "boot_id")
    monkeypatch.setattr(vm_accel, "qemu_binary", lambda: str(tmp_path / "qemu"))
    calls: list[str] = []

    def probe(box: Box, timeout: float) -> tuple[bool, str]:
        calls.append(str(box.kernel))
        return False, "the kernel did not reach its panic under KVM within 60 s: (timed out)"

    monkeypatch.setattr(vm_accel, "probe_kvm", probe)
    return calls


def box(tmp_path: Path) -> Box:
    kernel = tmp_path / "box" / "vmlinuz"
    found = Box(tmp_path / "box")
    assert found.kernel == kernel, "the fixture's kernel is not where Box looks"
    return found


def test_the_probe_runs_once_per_boot_and_says_so_when_its_answer_is_reused(tmp_path, probed):
    first = vm_accel.choose_accel(box(tmp_path))
    second = vm_accel.choose_accel(box(tmp_path))
    assert first == ("tcg", "the kernel did not reach its panic under KVM within 60 s: (timed out)")
    assert second[0] == "tcg" and second[1].startswith(first[1]) and "probed earlier since this boot" in second[1]
    assert len(probed) == 1


@pytest.mark.parametrize("changed", ["boot_id", "kvm", "qemu", "box/vmlinuz"])
def test_a_new_boot_device_qemu_or_kernel_probes_again(tmp_path, probed, changed):
    vm_accel.choose_accel(box(tmp_path))
    path = tmp_path / changed
    path.write_text(f"{changed}, changed: a longer content")
    os.utime(path, ns=(1, 1))
    vm_accel.choose_accel(box(tmp_path))
    assert len(probed) == 2


def test_an_unreadable_answer_is_probed_again_and_rewritten(tmp_path, probed):
    vm_accel.choose_accel(box(tmp_path))
    kept = tmp_path / "cache" / "kchaos" / "vagrant" / vm_accel.PROBE_FILE
    kept.write_text("{not json")
    assert vm_accel.choose_accel(box(tmp_path))[0] == "tcg"
    assert len(probed) == 2 and json.loads(kept.read_text())["accel"] == "tcg"


def test_no_accessible_kvm_device_means_tcg_without_a_probe(tmp_path, probed, monkeypatch):
    missing = tmp_path / "no-such-device"
    monkeypatch.setattr(vm_accel, "KVM_DEVICE", str(missing))
    assert vm_accel.choose_accel(box(tmp_path)) == ("tcg", f"{missing} is missing or not accessible")
    assert probed == []
