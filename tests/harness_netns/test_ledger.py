"""The ledger: written before creation, read back after a crash, undone once, PIDs checked by start time."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

from harness.backends.ledger import Ledger, LedgerError, heal, register_undo
from harness.backends.procs import is_same_process, kill_verified, read_stat, start_time
from harness.backends.resources import create_tmpdir


def test_entries_survive_reload_and_undo_newest_first(tmp_path):
    calls: list[str] = []

    @register_undo("test-thing")
    def undo_thing(fields):
        calls.append(fields["name"])
        return f"thing {fields['name']}" if fields["name"] != "gone" else None

    ledger = Ledger.create(tmp_path / "ledger.jsonl")
    a = ledger.record("test-thing", name="a")
    ledger.record("test-thing", name="gone")
    c = ledger.record("test-thing", name="c")
    ledger.update(c, extra=1)
    ledger.mark_done(a)

    reloaded = Ledger.load(tmp_path / "ledger.jsonl")
    assert [e.fields for e in reloaded.outstanding()] == [{"name": "c", "extra": 1}, {"name": "gone"}]
    report = heal(tmp_path / "ledger.jsonl")
    assert calls == ["c", "gone"]
    assert report.removed == ["thing c"] and len(report.already_gone) == 1 and report.ok
    # healed entries are marked done on disk: a second heal undoes nothing
    assert heal(tmp_path / "ledger.jsonl").removed == []
    assert calls == ["c", "gone"]


def test_a_torn_last_line_is_ignored_but_corruption_elsewhere_is_an_error(tmp_path):
    path = tmp_path / "ledger.jsonl"
    ledger = Ledger.create(path)
    ledger.record("tmpdir", path=str(tmp_path / "kchaos-x"))
    with open(path, "a") as f:
        f.write('{"op":"add","id":2,"kind":"tmp')  # the writer died mid-line
    assert [e.id for e in Ledger.load(path).outstanding()] == [1]
    with open(path, "a") as f:
        f.write("\n" + json.dumps({"op": "done", "id": 1}) + "\n")
    with pytest.raises(LedgerError, match=r"ledger.jsonl:3: not valid JSON"):
        Ledger.load(path)


def test_not_a_ledger(tmp_path):
    (tmp_path / "x.jsonl").write_text('{"index": 0}\n')
    with pytest.raises(LedgerError, match="not a ledger record"):
        Ledger.load(tmp_path / "x.jsonl")
    with pytest.raises(LedgerError, match="no such ledger"):
        Ledger.load(tmp_path / "missing.jsonl")


def test_create_refuses_a_ledger_with_outstanding_entries(tmp_path):
    ledger = Ledger.create(tmp_path / "ledger.jsonl")
    rid = ledger.record("tmpdir", path=str(tmp_path / "kchaos-y"))
    with pytest.raises(LedgerError, match="kchaos heal"):
        Ledger.create(tmp_path / "ledger.jsonl")
    ledger.mark_done(rid)
    Ledger.create(tmp_path / "ledger.jsonl")  # all done: a new run may reuse the file


def test_unknown_kind_and_raising_undo_are_reported_not_fatal(tmp_path):
    @register_undo("test-broken")
    def broken(fields):
        raise RuntimeError("device busy")

    ledger = Ledger.create(tmp_path / "ledger.jsonl")
    ledger.record("test-from-the-future")
    ledger.record("test-broken")
    _, made = create_tmpdir(ledger, tmp_path)
    report = ledger.undo_all()
    assert not made.exists()  # the others still ran
    assert len(report.failed) == 2
    assert "device busy" in report.failed[0] and "no undo known" in report.failed[1]
    assert len(Ledger.load(ledger.path).outstanding()) == 2  # failures stay for the next heal


def test_tmpdir_undo_refuses_paths_it_did_not_name(tmp_path):
    ledger = Ledger.create(tmp_path / "ledger.jsonl")
    victim = tmp_path / "precious"
    victim.mkdir()
    ledger.record("tmpdir", path=str(victim))
    assert "refusing" in ledger.undo_all().failed[0]
    assert victim.is_dir()


def test_process_undo_checks_start_time(tmp_path):
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        start = start_time(sleeper.pid)
        assert start is not None and is_same_process(sleeper.pid, start)
        ledger = Ledger.create(tmp_path / "ledger.jsonl")
        # a PID whose start time differs is somebody else's process (PID reuse): never killed
        ledger.record("process", node="n", pid=sleeper.pid, starttime=start + 1)
        assert ledger.undo_all().removed == []
        assert sleeper.poll() is None
        ledger.record("process", node="n", pid=sleeper.pid, starttime=start)
        assert ledger.undo_all().removed == [f"process {sleeper.pid} (n)"]
        assert sleeper.wait(timeout=10) == -signal.SIGKILL
        assert Ledger.load(ledger.path).outstanding() == []
    finally:
        if sleeper.poll() is None:
            sleeper.kill()
            sleeper.wait()


def test_kill_verified_reaches_a_group_whose_leader_is_gone():
    # leader (session leader) starts a child in its group, then exits; the child must still be killable
    leader = subprocess.Popen(
        ["sh", "-c", "sleep 60 & echo $!"], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    assert leader.stdout is not None
    child = int(leader.stdout.readline())
    leader.wait(timeout=10)
    stat = read_stat(child)
    try:
        assert stat is not None and stat.pgid == leader.pid
        assert kill_verified(leader.pid, 0)  # leader's /proc entry is gone: its group is still ours
        for _ in range(500):
            if read_stat(child) is None or read_stat(child).state == "Z":
                break
            time.sleep(0.01)
        assert read_stat(child) is None or read_stat(child).state == "Z"
    finally:
        if read_stat(child) is not None:
            kill_verified(child, stat.starttime)
