"""Which accelerator runs the box here: KVM when a probe boots the box's kernel with `-accel kvm -cpu
host` to its first panic (no root file system given), else software emulation (TCG).

Under nested KVM, qemu 7.2 aborts at once on some machines this ran on, and on another it neither
booted nor failed but hung until the probe's timeout, 60 s on every `kchaos vagrant up`. The answer
cannot change while the machine, its /dev/kvm, the qemu binary and the kernel stay what they were, so
it is kept per boot
(`/proc/sys/kernel/random/boot_id`) in `~/.cache/kchaos/vagrant/kvm-probe.json`; a change of any of them
probes again, and deleting the file does too.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from harness.backends.shell import BackendError
from harness.backends.vm_box import Box, cache_root

PROBE_TIMEOUT_S = 60.0
PROBE_FILE = "kvm-probe.json"
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
KVM_DEVICE = "/dev/kvm"


def qemu_binary() -> str:
    found = shutil.which("qemu-system-x86_64")
    if found is None:
        raise BackendError("qemu-system-x86_64 not found (apt-get install qemu-system-x86)")
    return found


def choose_accel(box: Box, timeout: float = PROBE_TIMEOUT_S) -> tuple[str, str]:
    """ "kvm" or "tcg", and the line that says why (the probe's, or this boot's earlier probe's)."""
    if not os.access(KVM_DEVICE, os.R_OK | os.W_OK):
        return "tcg", f"{KVM_DEVICE} is missing or not accessible"
    key = probe_key(box)
    path = cache_root() / PROBE_FILE
    kept = _read(path)
    if kept.get("key") == key and kept.get("accel") in ("kvm", "tcg"):
        return kept["accel"], f"{kept['why']} (probed earlier since this boot; delete {path} to probe again)"
    works, why = probe_kvm(box, timeout)
    accel = "kvm" if works else "tcg"
    _write(path, {"key": key, "accel": accel, "why": why})
    return accel, why


def probe_key(box: Box) -> dict[str, str]:
    """What the probe's answer depends on: this boot, the KVM device, the qemu binary and the kernel."""

    def stamp(path: str | Path) -> str:
        st = os.stat(path)
        return f"{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"

    qemu = qemu_binary()
    return {
        "boot_id": BOOT_ID.read_text().strip(),
        "kvm": stamp(KVM_DEVICE),
        "qemu": f"{os.path.realpath(qemu)}:{stamp(qemu)}",
        "kernel": f"{box.kernel}:{stamp(box.kernel)}",
    }


def probe_kvm(box: Box, timeout: float = PROBE_TIMEOUT_S) -> tuple[bool, str]:
    """Whether KVM runs this box's kernel here, and the line that says why (see the module docstring)."""
    argv = [qemu_binary(), "-accel", "kvm", "-cpu", "host", "-m", "256", "-nodefaults", "-no-user-config"]
    argv += ["-display", "none", "-serial", "stdio", "-no-reboot", "-kernel", str(box.kernel)]
    argv += ["-append", "console=ttyS0 panic=-1 root=/dev/kchaos-none rootwait=0"]
    ended = True
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
        out = done.stdout + done.stderr
    except subprocess.TimeoutExpired as exc:
        ended = False
        out = (exc.stdout or b"").decode(errors="replace") if isinstance(exc.stdout, bytes) else str(exc.stdout or "")
        out += "\n(timed out)"
    for line in out.splitlines():
        if "KVM internal error" in line or "emulation failure" in line:
            return False, line.strip()
    if "Kernel panic" in out:
        return True, "the kernel booted under KVM to its expected panic (no root file system)"
    last = ([line for line in out.splitlines() if line.strip()][-1:] or ["no output"])[0].strip()
    if ended:  # e.g. qemu 7.2 in a nested guest: "kvm_buf_set_msrs: Assertion ... failed"
        return False, f"qemu ended before the kernel panicked under KVM: {last}"
    return False, f"the kernel did not reach its panic under KVM within {timeout:.0f} s: {last}"


def _read(path: Path) -> dict:
    try:
        kept = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}  # none yet, or unreadable: probe again and write it anew
    return kept if isinstance(kept, dict) else {}


def _write(path: Path, doc: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    staged = path.with_suffix(f".{os.getpid()}.tmp")
    staged.write_text(json.dumps(doc, indent=1) + "\n")
    os.replace(staged, path)
