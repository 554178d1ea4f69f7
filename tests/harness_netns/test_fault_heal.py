"""Every packet, clock, pause and disk fault at once, then the harness dies: SIGKILLed (heal from the
ledger) or SIGTERMed (it cleans up itself). Either way nothing is left: no namespaces, links or
rules, no delay daemons, no stopped or other processes, clocks and disks healthy, no files outside
the run dir."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from harness.backends import clocks, disks
from harness.backends.ledger import Ledger
from harness.backends.packets import CHAIN
from harness.backends.procs import read_stat
from harness.backends.shell import succeeds
from harness.cli import main
from tests.harness_netns.conftest import HERE, heal_if_left, leftovers, marked_pids, needs_root, new_marker

pytestmark = [pytest.mark.root, needs_root]
REPO = HERE.parent.parent


def start(run_dir: Path, marker: str, tmpdir: Path) -> tuple[subprocess.Popen[str], dict]:
    driver = subprocess.Popen(
        [sys.executable, str(HERE / "fault_driver.py"), str(run_dir), marker],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "TMPDIR": str(tmpdir)},
    )
    assert driver.stdout is not None
    line = driver.stdout.readline()
    assert line, f"driver exited with {driver.wait()} before it was ready"
    return driver, json.loads(line)


def delay_daemons() -> list[int]:
    return marked_pids("harness.backends.delayd")


def assert_nothing_left(run_dir: Path, info: dict, marker: str, tmpdir: Path) -> None:
    assert not leftovers(info["bridge"])
    assert not marked_pids(marker) and not delay_daemons()
    assert all(read_stat(pid) is None or read_stat(pid).state not in "Tt" for pid in info["pids"].values())
    assert all(Path(f).read_text() == clocks.TRUE_TIME for f in info["clock_files"])
    assert not any(disks.is_on(Path(f)) for f in info["disk_files"])
    assert not Ledger.load(run_dir / "ledger.jsonl").outstanding()
    assert list(tmpdir.iterdir()) == []  # nothing was put anywhere but the run dir


def test_a_sigkilled_harness_with_every_fault_on_is_healed_from_its_ledger(tmp_path, capsys):
    run_dir, tmpdir, marker = tmp_path / "run", tmp_path / "tmp", new_marker()
    tmpdir.mkdir()
    try:
        driver, info = start(run_dir, marker, tmpdir)
        try:
            assert len(delay_daemons()) == 3
            assert read_stat(info["pids"]["n2"]).state in "Tt"
        finally:
            driver.kill()
            driver.wait()
        # the faults outlive the harness
        assert len(delay_daemons()) == 3 and read_stat(info["pids"]["n2"]).state in "Tt"
        assert Path(info["clock_files"][0]).read_text() != clocks.TRUE_TIME
        assert disks.is_on(Path(info["disk_files"][1]))
        assert succeeds(["ip", "netns", "exec", info["netns"][0], "iptables", "-w", "-S", CHAIN])

        capsys.readouterr()
        assert main(["heal", str(run_dir)]) == 0
        out = capsys.readouterr().out
        for what in ("delay daemon", "paused process", "clock of n1", "disk fault on n2", f"chain {CHAIN}"):
            assert what in out, what
        assert_nothing_left(run_dir, info, marker, tmpdir)
        assert main(["heal", str(run_dir)]) == 0
        assert "nothing to heal" in capsys.readouterr().out
    finally:
        heal_if_left(run_dir)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signalled_harness_with_every_fault_on_cleans_up_itself(tmp_path, sig):
    run_dir, tmpdir, marker = tmp_path / "run", tmp_path / "tmp", new_marker()
    tmpdir.mkdir()
    try:
        driver, info = start(run_dir, marker, tmpdir)
        try:
            driver.send_signal(sig)
            assert driver.wait(timeout=60) != 0
        finally:
            driver.kill()
            driver.wait()
        assert_nothing_left(run_dir, info, marker, tmpdir)
    finally:
        heal_if_left(run_dir)
