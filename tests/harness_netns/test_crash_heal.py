"""A harness killed with SIGKILL leaves resources that `kchaos heal` removes; SIGTERM/Ctrl-C clean up at once."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from harness import heal_cli
from harness.backends.ledger import Ledger, heal
from harness.backends.resources import create_netns, netns_names, netns_pids
from node.runtime.local_cluster import wait_for
from tests.harness_netns.conftest import HERE, heal_if_left, marked_pids, needs_root, new_marker, new_tag, snapshot

pytestmark = [pytest.mark.root, needs_root]
REPO = HERE.parent.parent


def run_heal(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="kchaos")
    heal_cli.register(parser.add_subparsers())
    args = parser.parse_args(["heal", *argv])
    return args.func(args)


def start_driver(
    run_dir: Path, marker: str, tag: str, sigint_ignored: bool = False
) -> tuple[subprocess.Popen[str], dict]:
    def ignore_sigint() -> None:  # as a background job of a non-interactive shell starts
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    driver = subprocess.Popen(
        [sys.executable, str(HERE / "driver.py"), str(run_dir), marker, tag],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
        preexec_fn=ignore_sigint if sigint_ignored else None,
    )
    assert driver.stdout is not None
    line = driver.stdout.readline()
    assert line, f"driver exited with {driver.wait()} before it was ready"
    return driver, json.loads(line)


def test_sigkilled_driver_is_healed_from_its_ledger(tmp_path, capsys, monkeypatch):
    run_dir = tmp_path / "results" / "t" / "20250101T000000Z"
    try:
        check_sigkilled_driver_is_healed(tmp_path, run_dir, capsys, monkeypatch)
    finally:
        heal_if_left(run_dir)


def check_sigkilled_driver_is_healed(tmp_path: Path, run_dir: Path, capsys, monkeypatch) -> None:
    marker, tag = new_marker(), new_tag()
    prefix = f"kc{tag}"  # NetnsBackend names everything of its run kcTAG...
    before = snapshot(prefix, marker)
    driver, info = start_driver(run_dir, marker, tag)
    try:
        assert set(info["netns"]) <= netns_names()
        assert set(marked_pids(marker)) - {driver.pid} == set(info["pids"].values())
        # while the driver lives, heal refuses (it would pull the hosts from under a running test)
        latest = tmp_path / "results" / "latest"
        latest.symlink_to(run_dir)
        with pytest.raises(Exception, match="still going"):
            run_heal(str(latest))
    finally:
        driver.kill()
        driver.wait()
    assert snapshot(prefix, marker) != before  # the killed driver left its namespaces, bridge and processes
    assert Path(info["tmpdir"]).is_dir()

    capsys.readouterr()
    monkeypatch.chdir(tmp_path)  # the default RUN_DIR is results/latest, a symlink to the run
    assert run_heal() == 0
    out = capsys.readouterr().out
    assert f"namespace {info['netns'][0]}" in out and f"bridge {info['bridge']}" in out
    assert snapshot(prefix, marker) == before
    assert not marked_pids(marker)
    assert not Path(info["tmpdir"]).exists()

    # a second heal finds nothing to do
    assert run_heal(str(run_dir)) == 0
    assert "nothing to heal" in capsys.readouterr().out
    assert heal(run_dir / "ledger.jsonl").removed == []
    assert snapshot(prefix, marker) == before


@pytest.mark.parametrize(
    ("sig", "sigint_ignored"), [(signal.SIGTERM, False), (signal.SIGINT, False), (signal.SIGINT, True)]
)
def test_signalled_driver_cleans_up_itself(tmp_path, sig, sigint_ignored):
    """Also when the driver inherited SIGINT ignored (Python then keeps it ignored): the backend's
    `with` block restores it, so `kill -INT` still tears everything down."""
    marker, tag = new_marker(), new_tag()
    prefix = f"kc{tag}"
    before = snapshot(prefix, marker)
    driver, _ = start_driver(tmp_path / "run", marker, tag, sigint_ignored)
    try:
        driver.send_signal(sig)
        assert driver.wait(timeout=30) != 0
    finally:
        driver.kill()
        driver.wait()
        leftover = snapshot(prefix, marker)
        heal_if_left(tmp_path / "run")
    assert leftover == before
    assert not marked_pids(marker)
    assert not Ledger.load(tmp_path / "run" / "ledger.jsonl").outstanding()


def test_heal_kills_a_process_started_before_its_pid_was_ledgered(tmp_path):
    """The gap between spawning a node and writing its PID: the namespace's undo catches the process."""
    ledger = Ledger.create(tmp_path / "ledger.jsonl")
    name = f"kc{os.urandom(3).hex()}-x"
    sleeper = None
    try:  # the namespace is made inside: whatever fails from here on, the finally removes it
        create_netns(ledger, name)
        ledger.record("process", node="x", netns=name, argv=["sleep", "300"])  # no pid: "crashed" right here
        sleeper = subprocess.Popen(["ip", "netns", "exec", name, "sleep", "300"], start_new_session=True)
        # `ip netns exec` enters the namespace, then execs sleep: wait until it is in (a loaded machine
        # may take a while), as heal would find it
        inside = wait_for(lambda: netns_pids(name) == [sleeper.pid], 30, what="the process in the namespace")
        assert inside
        report = heal(ledger.path)
        assert report.ok and any("killed 1 process" in r for r in report.removed)
        assert sleeper.wait(timeout=10) == -signal.SIGKILL
        assert name not in netns_names()
    finally:
        if sleeper is not None and sleeper.poll() is None:
            sleeper.kill()
        subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)
