"""`ProgramDB`: a member of someone else's program (Kafka, etcd) that exits while the cluster is awaited
fails the wait at once, quoting the line of its output that says why.

The backend here is a stand-in for the process table only (which members run); the logs are files in
the layout the local backends write. The same path on a real Kafka is in tests/kafka/test_kafka_run.py.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from harness.db.program import ProgramDB
from vocab.db import DBError

JVM_DEATH = """\
[2026-11-29 23:46:21,585] INFO [ControllerServer id=2] Starting up (kafka.server.ControllerServer)
[2026-11-29 23:46:21,585] ERROR Unable to start acceptor for CONTROLLER (kafka.network.DataPlaneAcceptor)
org.apache.kafka.common.KafkaException: Socket server failed to bind to 192.0.2.1:9093: Cannot assign requested address.
\tat kafka.network.Acceptor.openServerSocket(SocketServer.scala:761) ~[kafka_2.13-4.1.1.jar:?]
Caused by: java.net.BindException: Cannot assign requested address
\tat java.base/sun.nio.ch.Net.bind0(Native Method) ~[?:?]
\t... 6 more
"""
GO_FLAG_DEATH = """\
invalid value "soon" for flag -heartbeat-interval: parse error
Usage:

  etcd [flags]
    Start an etcd server.
"""
ZAP_DEATH = (
    '{"level":"info","msg":"starting an etcd server"}\n'
    '{"level":"fatal","msg":"discovery failed","error":"listen tcp 10.0.0.1:2380: bind: address already in use"}\n'
)


class Members:
    """Which members run: all of them, but for those in `down`."""

    def __init__(self) -> None:
        self.down: set[str] = set()

    def is_alive(self, node: str) -> bool:
        return node not in self.down


class Program(ProgramDB):
    name = "prog"

    def __init__(self, run_dir: Path, backend: Members) -> None:
        self.run_dir, self.backend = run_dir, backend  # type: ignore[assignment]

    @property
    def nodes(self) -> tuple[str, ...]:
        return ("n1", "n2", "n3")

    def install(self, backend, run_dir) -> None:  # pragma: no cover - not used here
        raise AssertionError

    def _unready(self) -> str | None:
        return "no leader yet"

    def leader(self) -> str | None:  # pragma: no cover - not used here
        return None

    def collect(self, run_dir: Path, *, stop: bool) -> list[str]:  # pragma: no cover - not used here
        return []


def _program(tmp_path: Path, logs: dict[tuple[str, str], str]) -> Program:
    for (node, name), text in logs.items():
        (tmp_path / "nodes" / node).mkdir(parents=True, exist_ok=True)
        (tmp_path / "nodes" / node / name).write_text(text)
    return Program(tmp_path, Members())


def test_last_words_are_the_root_cause_of_a_java_trace_or_a_fatal_log_line(tmp_path):
    db = _program(
        tmp_path,
        {
            ("n1", "stdout.log"): JVM_DEATH,
            ("n2", "stderr.log"): ZAP_DEATH,
            ("n3", "stdout.log"): "starting\nlistening on 9092\n\n",
            ("n4", "stderr.log"): GO_FLAG_DEATH,
        },
    )
    assert db.last_words("n4") == 'invalid value "soon" for flag -heartbeat-interval: parse error'  # not the usage
    assert db.last_words("n1") == "Caused by: java.net.BindException: Cannot assign requested address"
    assert "address already in use" in (db.last_words("n2") or "") and '"level":"fatal"' in db.last_words("n2")
    assert db.last_words("n3") == "listening on 9092"  # nothing names an error: the last line
    (tmp_path / "nodes" / "n3" / "stdout.log").unlink()
    assert db.last_words("n3") is None


def test_last_words_of_a_large_log_read_its_end_and_are_cut_to_one_short_line(tmp_path):
    noise = "".join(f"INFO line {i} {'x' * 80}\n" for i in range(20_000))  # ~1.8 MB
    db = _program(tmp_path, {("n1", "stdout.log"): noise + "ERROR " + "y" * 1000 + "\n"})
    words = db.last_words("n1")
    assert words is not None and words.startswith("ERROR yyy") and len(words) == 300 and words.endswith("…")


def test_a_member_that_exits_fails_the_wait_at_once_with_its_last_words(tmp_path):
    db = _program(tmp_path, {("n2", "stdout.log"): JVM_DEATH})
    db.backend.down.add("n2")  # type: ignore[union-attr]
    start = time.monotonic()
    with pytest.raises(DBError) as caught:
        db.wait_ready_unless_exited(lambda: "not ready yet", timeout_s=60)
    assert time.monotonic() - start < 30  # not the whole timeout
    assert str(caught.value) == (
        "prog node n2 exited; its output ends: Caused by: java.net.BindException: Cannot assign requested address"
    )


def test_a_member_down_for_less_than_the_grace_is_waited_for(tmp_path, monkeypatch):
    monkeypatch.setattr("harness.db.program.EXITED_AFTER_S", 30.0)  # however slow this machine is today
    db = _program(tmp_path, {})
    members: Members = db.backend  # type: ignore[assignment]
    members.down.add("n1")
    answers = iter(["starting", "starting", None])

    def unready() -> str | None:
        answer = next(answers)
        if answer is None:
            members.down.clear()  # it came up (a restart under way): no failure
        return answer

    db.wait_ready_unless_exited(unready, timeout_s=60)
    with pytest.raises(DBError, match=r"prog cluster not ready after 1 s: still starting"):
        db.wait_ready_unless_exited(lambda: "still starting", timeout_s=1)


def test_a_recovery_that_fails_keeps_the_reason_for_the_runs_warnings(tmp_path):
    db = _program(tmp_path, {("n2", "stdout.log"): JVM_DEATH})
    db.backend.down.add("n2")  # type: ignore[union-attr]  # and the stand-in cannot restart it
    assert db.recover(60) is False and db.recovered is False
    assert db.recovery_problem == (
        "prog node n2 exited; its output ends: Caused by: java.net.BindException: Cannot assign requested address"
    )
    db.backend.down.clear()  # type: ignore[union-attr]
    with pytest.raises(DBError):  # up, but never ready: the readiness check's own last answer
        db.wait_ready(0.5)
    assert db.recover(0.5) is False and db.recovery_problem == "prog cluster not ready after 0 s: no leader yet"
