"""`kchaos doctor`'s fault checks: OK here (each probe really carried out), and a failure that says
what to install when a piece is missing."""

from __future__ import annotations

import pytest

from harness import doctor_cli
from harness.backends import fault_checks
from harness.backends.shell import BackendError
from tests.harness_netns.conftest import needs_root

ROWS = ("packet faults (loss, delay)", "clock faults (libfaketime)", "disk faults (preload shim)")


@pytest.mark.root
@needs_root
def test_doctor_checks_every_fault_mechanism_for_real():
    checks = {c.name: c for c in doctor_cli.run_checks()}
    for name in ROWS:
        assert checks[name].ok, (name, checks[name].detail)
    assert "delay daemon" in checks[ROWS[0]].detail
    assert "+1 h skew" in checks[ROWS[1]].detail


def test_the_clock_check_fails_and_says_what_to_install_without_libfaketime(monkeypatch, tmp_path):
    monkeypatch.setenv("KCHAOS_LIBFAKETIME", str(tmp_path / "missing.so"))
    with pytest.raises(BackendError, match="no such file"):
        fault_checks.clock_probe()
    monkeypatch.delenv("KCHAOS_LIBFAKETIME")
    monkeypatch.setattr(fault_checks.clocks, "LIBFAKETIME_GLOBS", (str(tmp_path / "*.so.1"),))
    with pytest.raises(BackendError, match="apt-get install faketime"):
        fault_checks.clock_probe()
    check = next(c for c in doctor_cli.run_checks() if c.name == "clock faults (libfaketime)")
    assert check.status == "WARN" and "apt-get install faketime" in check.fix


def test_the_disk_check_fails_without_gcc_when_the_shim_is_not_built(monkeypatch, tmp_path):
    monkeypatch.setenv("KCHAOS_NATIVE_CACHE", str(tmp_path / "cache"))  # nothing built here yet
    monkeypatch.setenv("PATH", str(tmp_path))  # and no gcc
    with pytest.raises(BackendError, match=r"gcc not found.*apt-get install gcc"):
        fault_checks.disk_probe()
