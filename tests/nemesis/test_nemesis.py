"""The nemesis's translation of start/stop ops into Backend and DB calls (a recording backend: the
unit under test is the nemesis; the real effects are tested on the sim backend in test_sim_effects)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from nemesis.nemesis import Nemesis
from vocab.backend import Backend
from vocab.db import DB
from vocab.faults.kinds import FAULT_KINDS, ClockFault, DiskFault, FaultNotSupported, PacketFault, RedeliverFault
from vocab.faults.options import all_options
from vocab.generators import Op
from vocab.invocation import Completion

NODES = ("c1", "c2", "c3", "b1", "b2")


class Recorder(Backend):
    """Every call recorded; processes are up/down flags."""

    def __init__(self, faults: frozenset[str] = frozenset(FAULT_KINDS), fail_on: dict[str, Exception] | None = None):
        self.faults = faults
        self.calls: list[tuple[Any, ...]] = []
        self.up = dict.fromkeys(NODES, True)
        self.fail_on = fail_on or {}

    def _call(self, *call: Any) -> None:
        key = f"{call[0]}:{call[1]}" if len(call) > 1 else call[0]
        if key in self.fail_on:
            raise self.fail_on[key]
        self.calls.append(call)

    node_ids = NODES

    def setup(self) -> None: ...
    def teardown(self) -> None: ...
    def address(self, node: str) -> str:
        return node

    def partition(self, grudge):  # type: ignore[no-untyped-def]
        self._call("partition", dict(grudge))

    def heal_network(self) -> None:
        self._call("heal_network")

    def kill(self, node: str) -> None:
        self._call("kill", node)
        self.up[node] = False

    def restart(self, node: str) -> None:
        self._call("restart", node)
        self.up[node] = True

    def is_alive(self, node: str) -> bool:
        return self.up[node]

    def packet(self, links, fault: PacketFault) -> None:  # type: ignore[no-untyped-def]
        self._call("packet", links, fault)

    def heal_packet(self) -> None:
        self._call("heal_packet")

    def redeliver(self, links, fault: RedeliverFault) -> None:  # type: ignore[no-untyped-def]
        self._call("redeliver", links, fault)

    def heal_redeliver(self) -> None:
        self._call("heal_redeliver")

    def clock(self, node: str, fault: ClockFault) -> None:
        self._call("clock", node, fault)

    def clock_reset(self, node: str) -> None:
        self._call("clock_reset", node)

    def pause(self, node: str) -> None:
        self._call("pause", node)

    def resume(self, node: str) -> None:
        self._call("resume", node)

    def disk(self, node: str, fault: DiskFault) -> None:
        self._call("disk", node, fault)

    def disk_heal(self, node: str) -> None:
        self._call("disk_heal", node)

    def lose_unsynced(self, node: str) -> None:
        self._call("lose_unsynced", node)
        self.up[node] = False


class FakeDB(DB):
    def __init__(self, backend: Recorder, leader: str | None = "c2", corrupt_error: Exception | None = None) -> None:
        self.backend = backend
        self._leader = leader
        self.corrupt_error = corrupt_error

    nodes = NODES

    def roles(self, node: str) -> frozenset[str]:
        return frozenset({"controller"}) if node[0] == "c" else frozenset({"broker"})

    def leader(self) -> str | None:
        return self._leader

    def restart_node(self, node: str) -> None:
        self.backend.restart(node)

    def corrupt(self, node: str, mode: str, rng: random.Random) -> dict[str, Any]:
        if self.corrupt_error is not None:
            raise self.corrupt_error
        self.backend.calls.append(("corrupt", node, mode, self.backend.up[node]))
        return {"file": "00000000.log", "offset": rng.randrange(100)}

    def uncorrupt(self, node: str) -> None:
        self.backend.calls.append(("uncorrupt", node, self.backend.up[node]))

    def install(self, backend, run_dir) -> None: ...  # type: ignore[no-untyped-def]
    def wait_ready(self, timeout_s: float) -> None: ...
    def recover(self, timeout_s: float) -> bool:
        return True

    def collect(self, run_dir, *, stop: bool) -> list[str]:  # type: ignore[no-untyped-def]
        return []

    def teardown(self) -> None: ...


class Inline:
    t = 0  # the scheduler's clock (ns), moved by hand

    def now(self) -> int:
        return self.t

    def blocking(self, fn, done):  # type: ignore[no-untyped-def]
        try:
            done(fn(), None)
        except Exception as exc:
            done(None, exc)


def make(options: dict[str, dict[str, Any]] | None = None, **backend: Any) -> tuple[Nemesis, Recorder]:
    rec = Recorder(**backend)
    opts = all_options(list(options or FAULT_KINDS), None, options)
    return Nemesis(rec, FakeDB(rec), Inline(), seed=1, options=opts), rec  # type: ignore[arg-type]


def test_partition_start_and_stop():
    nem, rec = make()
    done = nem.start("partition", {"mode": "isolate-leader"})
    assert done.type == "info"
    assert done.value["kind"] == "partition" and done.value["mode"] == "isolate-leader"
    assert done.value["targets"] == ["c2"] and done.value["leader"] == "c2"
    kind, grudge = rec.calls[-1]
    assert kind == "partition" and grudge["c2"] == frozenset({"c1", "c3", "b1", "b2"})
    assert nem.active == ["partition"]
    stop = nem.stop("partition")
    assert stop.type == "info" and stop.value == {"kind": "partition", "targets": ["c2"]}
    assert rec.calls[-1] == ("heal_network",) and nem.active == []


def test_stopping_an_inactive_kind_is_a_noop_and_a_second_start_fails():
    nem, rec = make()
    assert nem.stop("kill").value == {"kind": "kill", "targets": [], "noop": True} and rec.calls == []
    assert nem.start("pause", {"mode": "one"}).type == "info"
    again = nem.start("pause", {"mode": "one"})
    assert again.type == "fail" and "already active" in again.error
    assert len([c for c in rec.calls if c[0] == "pause"]) == 1


def test_packet_on_the_links_of_the_targets_with_drawn_parameters():
    nem, rec = make({"packet": {"loss": 0.25, "delay_ms": [100, 300], "jitter_ms": 500}})
    done = nem.start("packet", {"mode": "leader"})
    _, links, fault = rec.calls[-1]
    assert done.value["targets"] == ["c2"]
    assert links["c2"] == frozenset({"c1", "c3", "b1", "b2"}) and links["c1"] == frozenset({"c2"})
    assert fault.loss == 0.25 and fault.delay_ms in (100, 300) and fault.jitter_ms == fault.delay_ms  # clamped
    assert done.value["loss"] == 0.25 and done.value["jitter_ms"] == fault.jitter_ms
    nem.stop("packet")
    nem.start("packet", {"mode": "all"})
    assert rec.calls[-1][1] is None  # every link
    assert nem.stop("packet").value["targets"] == list(NODES) and rec.calls[-1] == ("heal_packet",)


def test_redeliver_on_the_links_of_its_target_mode_with_the_lag_of_its_mode():
    nem, rec = make({"redeliver": {"targets": ["leader"], "probability": 0.5, "late_ms": 4_000}})
    done = nem.start("redeliver", {"mode": "stale"})
    _, links, fault = rec.calls[-1]
    assert done.value == {
        "kind": "redeliver", "mode": "stale", "targets": ["c2"], "target_mode": "leader", "probability": 0.5,
        "late_ms": 4_000,
    }  # fmt: skip
    assert links["c2"] == frozenset({"c1", "c3", "b1", "b2"}) and links["c1"] == frozenset({"c2"})
    assert fault == RedeliverFault("stale", 0.5, 4_000)
    nem.stop("redeliver")
    assert rec.calls[-1] == ("heal_redeliver",)
    nem, rec = make({"redeliver": {"targets": ["all"], "copy_delay_ms": 30}})
    assert "late_ms" not in nem.start("redeliver", {"mode": "duplicate"}).value
    assert rec.calls[-1][1] is None and rec.calls[-1][2].mode == "duplicate" and rec.calls[-1][2].lag_ms == 30


def test_netns_and_docker_refuse_redeliver_in_one_line_naming_why(tmp_path):
    from harness.backends.docker import DockerBackend
    from harness.backends.netns import NetnsBackend

    for backend in (NetnsBackend(tmp_path, ["c1", "c2"]), DockerBackend(tmp_path, ["c1", "c2"])):
        assert "redeliver" not in backend.faults
        with pytest.raises(FaultNotSupported) as refused:
            backend.redeliver(None, RedeliverFault("duplicate", 0.5, 10))
        name = type(backend).__name__.removesuffix("Backend").lower()
        message = str(refused.value)
        assert message.startswith(f"the {name} backend cannot do 'redeliver' faults: the nodes talk over TCP")
        assert "\n" not in message


def test_clock_bump_on_its_targets_then_reset():
    nem, rec = make({"clock": {"targets": ["minority"], "delta_ms": -90_000}})
    done = nem.start("clock", {"mode": "bump"})
    assert done.value == {
        "kind": "clock", "mode": "bump", "targets": done.value["targets"], "target_mode": "minority",
        "delta_ms": -90_000,
    }  # fmt: skip
    (target,) = done.value["targets"]
    assert target in ("c1", "c2", "c3")
    assert rec.calls[-1] == ("clock", target, ClockFault("bump", delta_ms=-90_000))
    nem.stop("clock")
    assert rec.calls[-1] == ("clock_reset", target)
    strobe = nem.start("clock", {"mode": "strobe"}).value
    assert {"delta_ms", "period_ms", "duration_ms"} <= set(strobe) and "rate" not in strobe
    assert rec.calls[-1][2].mode == "strobe" and rec.calls[-1][2].period_ms == strobe["period_ms"]


def test_a_reset_of_a_clock_that_was_ahead_makes_the_run_wait_until_it_caught_up():
    nem, _ = make({"clock": {"targets": ["one"], "delta_ms": 60_000}})
    clock = nem.scheduler
    clock.t = 5 * 10**9
    nem.start("clock", {"mode": "bump"})
    clock.t = 9 * 10**9
    nem.stop("clock")
    assert nem.settled_at_ns == 69 * 10**9  # the node's clock stands still for the bump's 60 s
    nem.start("clock", {"mode": "bump"})
    nem.stop("clock")
    assert nem.settled_at_ns == 69 * 10**9  # never earlier than an earlier reset's
    assert ClockFault("bump", delta_ms=-5_000).lag_after_reset_ns(10**9) == 0  # it was behind: runs on
    assert ClockFault("rate", rate=1.5).lag_after_reset_ns(4 * 10**9) == 2 * 10**9  # the fast clock's gain
    assert ClockFault("rate", rate=0.5).lag_after_reset_ns(4 * 10**9) == 0
    assert ClockFault("strobe", delta_ms=300, period_ms=10, duration_ms=100).lag_after_reset_ns(1) == 300_000_000


def test_kill_and_lose_unsynced_restart_only_their_own_nodes_and_pick_only_live_ones():
    nem, rec = make()
    kill = nem.start("kill", {"mode": "majority"}).value["targets"]
    assert len(kill) == 2 and all(not rec.up[n] for n in kill)
    power = nem.start("lose_unsynced", {"mode": "one"}).value["targets"]
    assert not set(power) & set(kill)  # a node already down is no target
    paused = nem.start("pause", {"mode": "all"}).value["targets"]
    assert set(paused) == set(NODES) - set(kill) - set(power)
    stop = nem.stop("kill")
    assert stop.value["restarted"] == kill and all(rec.up[n] for n in kill)
    assert not rec.up[power[0]]  # still held by lose_unsynced
    assert nem.stop("lose_unsynced").value["restarted"] == power
    assert [c for c in rec.calls if c[0] == "lose_unsynced"] == [("lose_unsynced", power[0])]


def test_disk_faults_pass_their_parameters_and_a_failure_restarts_stopped_targets():
    nem, rec = make({"disk_stall": {"ops": "fsync+write", "delay_ms": 700}, "disk_fail": {"errno": "ENOSPC"}})
    nem.start("disk_stall", {"mode": "leader"})
    assert rec.calls[-1] == ("disk", "c2", DiskFault("stall", ("fsync", "write"), delay_ms=700))
    nem.stop("disk_stall")
    assert rec.calls[-1] == ("disk_heal", "c2")
    done = nem.start("disk_fail", {"mode": "leader"})
    fault = rec.calls[-1][2]
    assert fault.kind == "fail" and fault.errno == "ENOSPC" and done.value["errno"] == "ENOSPC"
    rec.up["c2"] = False  # the node fail-stopped on the error
    stop = nem.stop("disk_fail")
    assert stop.value["restarted"] == ["c2"] and rec.calls[-2:] == [("disk_heal", "c2"), ("restart", "c2")]


def test_corrupt_kills_damages_tries_to_start_then_undoes():
    nem, rec = make({"corrupt": {"targets": ["leader"]}})
    done = nem.start("corrupt", {"mode": "truncate-log"})
    assert done.type == "info" and done.value["targets"] == ["c2"]
    assert done.value["damage"]["c2"]["file"] == "00000000.log"
    calls = [c for c in rec.calls if c[1] == "c2"]
    assert calls[:3] == [("kill", "c2"), ("corrupt", "c2", "truncate-log", False), ("restart", "c2")]
    assert done.value["alive_after_start"] == {"c2": True}
    nem.stop("corrupt")
    assert [c for c in rec.calls if c[1] == "c2"][3:] == [("kill", "c2"), ("uncorrupt", "c2", False), ("restart", "c2")]


def test_a_kind_the_backend_lacks_fails_and_does_nothing():
    nem, rec = make(faults=frozenset({"partition", "kill"}))
    done = nem.start("pause", {"mode": "one"})
    assert done.type == "fail" and "cannot do 'pause'" in done.error and rec.calls == []
    assert nem.active == [] and nem.stop("pause").value["noop"]


def test_a_db_that_cannot_corrupt_leaves_the_node_as_it_was():
    rec = Recorder()
    nem = Nemesis(rec, FakeDB(rec, corrupt_error=FaultNotSupported("nothing to corrupt")), Inline(), seed=1)  # type: ignore[arg-type]
    done = nem.start("corrupt", {"mode": "bitflip-snapshot"})
    assert done.type == "fail" and "nothing to corrupt" in done.error
    victim = rec.calls[0][1]
    assert rec.calls == [("kill", victim), ("restart", victim)] and all(rec.up.values())
    assert nem.down == {} and nem.active == []


def test_errors_on_some_targets_complete_info_and_the_stop_undoes_the_rest():
    nem, rec = make(fail_on={"pause:c1": OSError("no such process")})
    done = nem.start("pause", {"mode": "controllers"})
    assert (
        done.type == "info" and done.value["targets"] == ["c2", "c3"] and "c1: OSError: no such process" in done.error
    )
    nem.stop("pause")
    assert [c for c in rec.calls if c[0] == "resume"] == [("resume", "c2"), ("resume", "c3")]


def test_no_target_is_a_fail():
    nem, _rec = make()
    nem.start("kill", {"mode": "all"})
    done = nem.start("lose_unsynced", {"mode": "one"})
    assert done.type == "fail" and "no node" in done.error


def test_the_handler_runs_ops_through_the_scheduler_and_refuses_unknown_ones():
    nem, _rec = make()
    got: list[Completion] = []
    nem.invoke(Op("start-kill", {"mode": "leader"}, "nemesis"), got.append)
    nem.invoke(Op("stop-kill", None, "nemesis"), got.append)
    nem.invoke(Op("start-meteor", None, "nemesis"), got.append)
    nem.invoke(Op("stop-buggify", None, "nemesis"), got.append)  # a backend without targeted faults
    assert [c.type for c in got] == ["info", "info", "fail", "info"]
    assert got[0].value["targets"] == ["c2"] and got[1].value["restarted"] == ["c2"]
    assert "start-meteor" in got[2].error
    assert got[3].value == {"kind": "buggify", "targets": []}


@pytest.mark.parametrize("kind", FAULT_KINDS)
def test_every_kind_starts_and_stops_with_its_default_options(kind):
    nem, rec = make()
    done = nem.start(kind)
    assert done.type == "info", done.error
    assert done.value["kind"] == kind and done.value["mode"] and done.value["targets"]
    assert nem.stop(kind).type == "info" and nem.active == []
    assert all(rec.up.values())  # everything taken down came back


# -- replaying a recorded start (`kchaos reproduce`) -------------------------------------------------


def test_a_replayed_start_hits_the_recorded_nodes_with_the_recorded_parameters():
    """What an earlier run did is done again, whatever this nemesis's own random choices would be."""
    recorded = {"kind": "clock", "mode": "bump", "targets": ["c3", "b1"], "target_mode": "minority", "delta_ms": -4321}
    nem, rec = make()
    done = nem.start("clock", {"mode": "bump", "replay": recorded})
    assert done.type == "info", done.error
    assert done.value["targets"] == ["c3", "b1"] and done.value["delta_ms"] == -4321
    assert done.value["target_mode"] == "minority"
    assert [c[1] for c in rec.calls if c[0] == "clock"] == ["c3", "b1"]
    assert {c[2].delta_ms for c in rec.calls if c[0] == "clock"} == {-4321}


def test_a_replayed_partition_is_the_recorded_grudge_and_a_role_aimed_one_is_aimed_by_role():
    nem, rec = make()
    grudge = {"b1": ["c1"], "c1": ["b1"]}
    done = nem.start(
        "partition", {"mode": "one-way", "replay": {"mode": "one-way", "targets": ["c1"], "grudge": grudge}}
    )
    assert done.type == "info" and done.value["grudge"] == grudge
    assert rec.calls[-1] == ("partition", {"b1": frozenset({"c1"}), "c1": frozenset({"b1"})})
    nem.stop("partition")
    # Recorded against c1, the leader then; the leader now is c2 (FakeDB): the replay isolates c2.
    recorded = {"mode": "isolate-leader", "targets": ["c1"], "leader": "c1", "grudge": {"c1": ["c2", "c3", "b1", "b2"]}}
    done = nem.start("partition", {"mode": "isolate-leader", "replay": recorded})
    assert done.value["targets"] == ["c2"] and done.value["leader"] == "c2"


def test_a_replayed_kill_aimed_at_the_leader_kills_the_leader_of_now_and_one_aimed_by_name_waits_for_its_node():
    nem, rec = make()
    done = nem.start("kill", {"mode": "leader", "replay": {"mode": "leader", "targets": ["c1"]}})
    assert done.value["targets"] == ["c2"]  # FakeDB's leader
    nem.stop("kill")
    rec.up["c3"] = False  # down for another reason: a recorded target that cannot be hit now
    done = nem.start("pause", {"mode": "one", "replay": {"mode": "one", "targets": ["c3"]}})
    assert done.type == "fail" and "recorded targets c3" in done.error
