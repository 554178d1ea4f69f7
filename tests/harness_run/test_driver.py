"""The driver's Jepsen semantics, with in-process handlers on the real-time scheduler."""

from __future__ import annotations

from typing import Any

import pytest

from harness.driver import Driver
from vocab.generators import Op, clients, limit, map_ops, nemesis, once, repeat
from vocab.invocation import Completion, DoneFn
from vocab.schedulers import RealtimeScheduler


class Scripted:
    """Completes ops from a script of types (cycled); 'hang' never completes, 'raise' raises."""

    def __init__(self, script: list[str]) -> None:
        self.script = script
        self.calls = 0

    def invoke(self, op: Op, done: DoneFn) -> None:
        kind = self.script[self.calls % len(self.script)]
        self.calls += 1
        if kind == "raise":
            raise RuntimeError("client blew up")
        if kind != "hang":
            done(Completion(kind, value="seen" if kind == "ok" else None))


def drive(gen: Any, client: Any, *, concurrency: int = 2, nemesis_handler: Any = None, timeout: float = 5.0):
    events: list[dict] = []
    scheduler = RealtimeScheduler()
    try:
        driver = Driver(
            scheduler, client, nemesis_handler, concurrency=concurrency, sink=events.append, op_timeout_s=timeout
        )
        stats = driver.run(gen, seed=1)
    finally:
        scheduler.close()
    return events, stats


def test_info_moves_the_worker_to_a_fresh_process_and_fail_does_not():
    events, stats = drive(clients(limit(6, repeat(once("write", 1)))), Scripted(["info", "fail", "ok"]), concurrency=1)
    completions = [e for e in events if e["type"] != "invoke"]
    assert [e["type"] for e in completions] == ["info", "fail", "ok", "info", "fail", "ok"]
    invokes = [e["process"] for e in events if e["type"] == "invoke"]
    assert invokes == [0, 1, 1, 1, 2, 2]
    assert stats.completed == {"ok": 2, "fail": 2, "info": 2}


def test_every_invoke_is_completed_by_the_same_process_before_it_invokes_again():
    events, _ = drive(clients(limit(40, repeat(once("read")))), Scripted(["ok", "ok", "info"]), concurrency=4)
    open_ops: dict[Any, dict] = {}
    for e in events:
        if e["type"] == "invoke":
            assert e["process"] not in open_ops
            open_ops[e["process"]] = e
        else:
            assert open_ops.pop(e["process"])["f"] == e["f"]
    assert not open_ops and len(events) == 80


def test_an_op_that_never_completes_times_out_as_info_and_a_raising_client_is_info():
    events, stats = drive(clients(limit(2, repeat(once("write", 5)))), Scripted(["hang", "raise"]), timeout=0.05)
    completions = [e for e in events if e["type"] != "invoke"]
    assert [e["type"] for e in completions] == ["info", "info"]
    errors = sorted(str(e["error"]) for e in completions)
    assert errors[0].startswith("RuntimeError: client blew up") and errors[1].startswith("timeout")
    assert stats.timed_out == 1


def test_nemesis_ops_go_to_the_nemesis_and_keep_its_process():
    seen: list[str] = []

    class Recorder:
        def invoke(self, op: Op, done: DoneFn) -> None:
            seen.append(op.f)
            done(Completion("info", {"targets": ["n1"]}))

    gen = nemesis([once("start-kill"), once("stop-kill")])
    events, _ = drive(gen, Scripted(["ok"]), nemesis_handler=Recorder())
    assert seen == ["start-kill", "stop-kill"]
    assert {e["process"] for e in events} == {"nemesis"}
    assert events[1]["value"] == {"targets": ["n1"]}


@pytest.mark.timeout(60)
def test_an_exception_in_the_generator_ends_the_run_with_it_instead_of_hanging():
    handed = []

    def first_blows_up(op: Op) -> Op:  # a bug in a workload's generator, before any op went out
        handed.append(op)
        raise ValueError("generator blew up")

    with pytest.raises(ValueError, match="generator blew up"):
        drive(clients(map_ops(first_blows_up, limit(5, repeat(once("read"))))), Scripted(["ok"]))
    assert len(handed) == 1
