"""`kchaos reproduce` in the simulator, and the timeline a history yields (the netns and docker
reproductions of a planted bug are in tests/harness_docker/test_reproduce.py)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from harness.cli import main
from harness.reproduce import attempts_allowed, compare, keep_trying, plan, timeline_of
from harness.runner import make_backend, run_test
from harness.test_spec import Cluster
from tests.harness_run.helpers import one_cell_suite, sim_spec
from vocab.errors import UserError
from vocab.generators import Op, Outcome, fault_timeline, main_phase, nemesis, rate, replay_phase, run_virtual

S = 1_000_000_000


def _nemesis(f: str, type_: str, t: float, value=None) -> dict:
    return {"process": "nemesis", "type": type_, "f": f, "time": int(t * S), "value": value}


def test_the_timeline_of_a_history_pairs_each_start_with_what_it_did():
    events = [
        _nemesis("start-kill", "invoke", 1.0, {"mode": "leader"}),
        {"process": 0, "type": "invoke", "f": "write", "time": int(1.1 * S), "value": 1},
        _nemesis("start-kill", "info", 1.2, {"kind": "kill", "mode": "leader", "targets": ["c2"]}),
        _nemesis("start-buggify", "info", 1.5, {"kind": "buggify", "targets": ["c1"]}),  # the simulator's own
        _nemesis("start-pause", "invoke", 2.0, {"mode": "one"}),
        _nemesis("start-pause", "fail", 2.0, {"kind": "pause", "mode": "one"}),  # did nothing: left out
        _nemesis("stop-kill", "invoke", 3.0),
        _nemesis("stop-kill", "info", 3.5, {"kind": "kill", "targets": ["c2"]}),
        _nemesis("stop-pause", "invoke", 10.0),  # the final heal, after the main phase
        _nemesis("stop-pause", "info", 10.0, {"kind": "pause", "targets": [], "noop": True}),
    ]
    timeline, targeted = timeline_of(events, time_limit_s=8.0)
    assert targeted == 1
    assert timeline == [
        (1 * S, "start-kill", {"mode": "leader", "replay": {"kind": "kill", "mode": "leader", "targets": ["c2"]}}),
        (3 * S, "stop-kill", None),
    ]


def test_a_fault_timeline_generator_emits_each_op_at_its_time_one_after_another():
    """Sorted by time; an op due while the previous one is still in flight waits for its completion."""
    gen = fault_timeline(
        [(5 * S, "stop-kill", None), (1 * S, "start-kill", {"mode": "one"}), (2 * S, "start-pause", None)]
    )

    def execute(op: Op, rng) -> Outcome:
        return Outcome("info", 3 * S if op.f == "start-kill" else 0)

    history = run_virtual(nemesis(gen), execute, concurrency=0, seed=1)
    invokes = [(e["f"], e["time"] / S) for e in history if e["type"] == "invoke"]
    assert invokes == [("start-kill", 1.0), ("start-pause", 4.0), ("stop-kill", 5.0)]


RECORDED = [
    (1 * S, "start-kill", None),
    (2 * S, "stop-kill", None),
    (8 * S, "start-pause", None),
    (9 * S, "stop-pause", None),
]


def _replayed(main, kill_s: float) -> tuple[list[tuple[str, float]], list[float], float]:
    """Run `main` (clients writing at 10/s beside a replayed RECORDED) with a kill that takes `kill_s`:
    the nemesis invokes (f, s), the clients' invoke times (s) and the last nemesis completion (s)."""

    def execute(op: Op, rng) -> Outcome:
        if not op.f.startswith(("start-", "stop-")):
            return Outcome("ok", S // 100)
        return Outcome("info", int(kill_s * S) if op.f == "start-kill" else 0)

    history = run_virtual(main, execute, concurrency=2, seed=1)
    invokes = [(e["f"], e["time"] / S) for e in history if e["process"] == "nemesis" and e["type"] == "invoke"]
    writes = [e["time"] / S for e in history if e["process"] != "nemesis" and e["type"] == "invoke"]
    done = max(e["time"] / S for e in history if e["process"] == "nemesis" and e["type"] != "invoke")
    return invokes, writes, done


def _writes():
    return rate(10, lambda rng, i: Op("write", i))


def test_a_replay_on_time_ends_at_the_time_limit_as_a_recorded_run_does():
    """No op falls behind: the replay phase is the main phase, op for op."""
    replay = _replayed(replay_phase(_writes(), fault_timeline(RECORDED), 10.0, 30.0), kill_s=0.5)
    assert replay == _replayed(main_phase(_writes(), fault_timeline(RECORDED), 10.0), kill_s=0.5)
    invokes, writes, _ = replay
    assert [f for f, _ in invokes] == ["start-kill", "stop-kill", "start-pause", "stop-pause"]
    assert 9.8 <= max(writes) < 10.0


def test_a_replay_that_falls_behind_runs_on_until_its_last_fault_and_no_further():
    """A kill that takes 9.5 s where it is replayed: cut at the time limit, the pause would be lost.
    The clients run on until the last recorded op has completed, then the phase ends."""
    cut, _, _ = _replayed(main_phase(_writes(), fault_timeline(RECORDED), 10.0), kill_s=9.5)
    assert [f for f, _ in cut] == ["start-kill"]  # what the time limit alone kept
    invokes, writes, done = _replayed(replay_phase(_writes(), fault_timeline(RECORDED), 10.0, 30.0), kill_s=9.5)
    assert invokes == [("start-kill", 1.0), ("stop-kill", 10.5), ("start-pause", 10.5), ("stop-pause", 10.5)]
    assert max(writes) > 10.0
    # Then it ends: only ops already handed out while the last fault was in flight come after it.
    assert len([t for t in writes if t > done]) <= 2, (done, writes[-5:])


def test_a_replay_that_falls_too_far_behind_is_cut_at_its_bound():
    invokes, writes, _ = _replayed(replay_phase(_writes(), fault_timeline(RECORDED), 10.0, 30.0), kill_s=60.0)
    assert [f for f, _ in invokes] == ["start-kill"]
    assert 29.8 <= max(writes) < 30.0


def test_a_simulated_run_reproduced_in_the_simulator_is_byte_identical(tmp_path, capsys):
    first = run_test(sim_spec(seed=21, bugs=("raft-vote-not-persisted",)), root=tmp_path / "a", say=lambda _: None)
    assert first.valid is False  # the planted bug is caught
    p = plan(first.run.path)
    assert p.timeline is None and p.spec.seed == 21 and p.spec.bugs == ("raft-vote-not-persisted",)
    code = main(["reproduce", str(first.run.path), "--results", str(tmp_path / "b"), "--no-progress"])
    out = capsys.readouterr().out
    assert code == 1
    assert "history: byte-identical from the original's" in out and "reproduced: yes" in out
    second = next((tmp_path / "b").glob("*/2*"))
    assert compare(first.run.path, second, same_seed_sim=True).identical_history is True


def test_a_valid_run_reproduced_stays_valid_and_a_missing_run_is_one_line(tmp_path, capsys):
    first = run_test(sim_spec(seed=3), root=tmp_path / "a", say=lambda _: None)
    assert first.valid is True
    assert main(["reproduce", str(first.run.path), "--results", str(tmp_path / "b"), "--no-progress"]) == 0
    assert "reproduced: yes" in capsys.readouterr().out
    assert main(["reproduce", str(tmp_path / "nope")]) == 254
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "does not exist" in err[0]


# One cell of suites/gate.toml (every fault kind, a fault every 2 s for 2 s), one seed: the runs `kchaos gate`
# records are the ones an engineer is asked to reproduce.
GATE_DEFAULTS = dict(time_limit_s=25, nemesis_interval_s=2, nemesis_duration_s=2, recovery_s=10, rate=50, concurrency=5)
ALL_KINDS = ("partition", "packet", "clock", "kill", "pause", "disk_stall", "disk_fail", "lose_unsynced", "corrupt")


def _anomalies(run: Path) -> list[str]:
    results = json.loads((run / "results.json").read_text())
    return results["checkers"]["elle-list-append"]["anomaly_types"]


def test_a_failing_gate_run_reproduces_in_the_simulator_with_the_same_anomaly(tmp_path, capsys):
    """A run that `kchaos gate` recorded carries which suite, cell and seed it was (test.json's `suite`).
    Before, `kchaos reproduce` refused it: "test.json: suite: unknown key"."""
    suite = one_cell_suite(tmp_path / "gate-cell.toml", "config-append", "all", ALL_KINDS, **GATE_DEFAULTS)
    bug = "ctl-config-change-not-atomic"
    argv = ["gate", str(suite), "--bug", bug, "--results", str(tmp_path / "gate"), "--quiet"]
    assert main(argv) == 1  # the gate fails: the planted bug is caught
    capsys.readouterr()
    (original,) = (tmp_path / "gate" / "suites" / "gate-cell").glob("2*/config-append.all.3+2.sim/2*")
    test = json.loads((original / "test.json").read_text())
    assert test["suite"]["cell"] == "config-append/all/3+2/sim" and test["bugs"] == [bug]
    assert _anomalies(original)  # elle-list-append found the split change
    code = main(["reproduce", str(original), "--results", str(tmp_path / "again"), "--no-progress"])
    out, err = capsys.readouterr()
    assert code == 1, err
    assert "history: byte-identical from the original's" in out and "reproduced: yes" in out
    (reproduction,) = (tmp_path / "again").glob("*/2*")
    again = json.loads((reproduction / "test.json").read_text())
    assert again["reproduces"] == str(original) and again["bugs"] == [bug] and again["seed"] == test["seed"]
    assert _anomalies(reproduction) == _anomalies(original)
    # and a reproduction, which names the run it reproduces, reproduces in turn
    assert main(["reproduce", str(reproduction), "--results", str(tmp_path / "third"), "--no-progress"]) == 1
    assert "reproduced: yes" in capsys.readouterr().out


def test_an_ssh_reproduction_needs_hosts_and_only_it_takes_them(tmp_path, capsys):
    first = run_test(sim_spec(seed=3, time_limit_s=2.0), root=tmp_path / "a", say=lambda _: None)
    with pytest.raises(UserError, match="--backend ssh needs --inventory FILE"):
        plan(first.run.path, "ssh")
    hosts = tmp_path / "hosts.toml"
    p = plan(first.run.path, "ssh", str(hosts))
    assert p.spec.backend == "ssh" and p.spec.inventory == str(hosts) and p.timeline is not None
    with pytest.raises(UserError, match="not of a netns one"):
        plan(first.run.path, "netns", str(hosts))
    assert main(["reproduce", str(first.run.path), "--backend", "ssh", "--results", str(tmp_path / "b")]) == 254
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "needs --inventory FILE" in err[0]


def test_a_reproduction_in_the_simulator_applies_the_runs_node_settings_it_can(tmp_path):
    """A real run's `--sut-setting`s go to the simulated nodes where they mean the same (here a quorum
    timeout); those about listeners, files or security are left out, and the plan says which."""
    first = run_test(sim_spec(seed=3, time_limit_s=2.0), root=tmp_path / "a", say=lambda _: None)
    test_json = first.run.path / "test.json"
    test = json.loads(test_json.read_text())
    settings = {"controller.quorum.fetch.timeout.ms": "1700", "metadata.log.segment.bytes": "4096"}
    test.update(backend="netns", sut_settings=settings)
    test_json.write_text(json.dumps(test))  # as if it had run on netns with those settings
    p = plan(first.run.path, "sim")
    notes = " ".join(p.notes)
    assert p.spec.sut_settings == {"controller.quorum.fetch.timeout.ms": "1700"}
    assert "left out: metadata.log.segment.bytes" in notes and "applied to the simulated nodes" in notes
    assert plan(first.run.path, "docker").spec.sut_settings == settings  # a real backend takes them all
    assert make_backend(p.spec, tmp_path).raft["fetch_timeout_ms"] == 1700
    # Fine on a real broker (30 s lag time), not on the simulated cluster's (3 s): refused, not run
    test["sut_settings"] = {"kchaos.replica.heartbeat.interval.ms": "4000"}
    test_json.write_text(json.dumps(test))
    with pytest.raises(UserError, match=r"cannot run on the simulator: kchaos.replica.heartbeat.interval.ms"):
        plan(first.run.path, "sim")


def test_a_vagrant_reproduction_runs_over_ssh_on_the_vms_of_its_cluster(tmp_path, capsys):
    """`--backend vagrant` is ssh to the VMs `kchaos vagrant up` wrote into --cluster DIR (cluster.json,
    inventory.toml); the VMs themselves are booted in tests/harness_vagrant."""
    first = run_test(sim_spec(seed=3, time_limit_s=2.0), root=tmp_path / "a", say=lambda _: None)
    cluster = tmp_path / "vms"
    with pytest.raises(UserError, match="no VM cluster here"):
        plan(first.run.path, "vagrant", cluster=str(cluster))
    cluster.mkdir()
    state = {"tag": "0", "netns": "n", "veth": "v", "subnet": "10.9.9.0/24", "accel": "tcg", "box": "b"}
    state |= {"memory_mb": 512, "cpus": 1, "vms": {"kc1": "10.9.9.11", "kc2": "10.9.9.12", "kc3": "10.9.9.13"}}
    (cluster / "cluster.json").write_text(json.dumps(state))
    with pytest.raises(UserError, match=r"has 3 VM\(s\): `kchaos vagrant up --nodes 5` there first"):
        plan(first.run.path, "vagrant", cluster=str(cluster))  # 3+2 nodes
    combined = run_test(sim_spec(seed=3, time_limit_s=2.0, cluster=Cluster(combined=3)), root=tmp_path / "c", say=print)
    capsys.readouterr()
    p = plan(combined.run.path, "vagrant", cluster=str(cluster))
    assert p.spec.backend == "ssh" and p.spec.inventory == str(cluster / "inventory.toml")
    assert p.spec.recovery_s == 60.0 and any("TCG guest" in note for note in p.notes)
    assert p.spec.recovery_tail_s is None  # the reference cluster's window is kept whole
    assert p.spec.ready_timeout_s == 90.0  # the reference cluster starts in seconds
    # Apache Kafka's JVMs: minutes to serve in a TCG guest, so the waits `kchaos vagrant up` prints
    test_json = combined.run.path / "test.json"
    test_json.write_text(json.dumps({**json.loads(test_json.read_text()), "sut": "kafka", "backend": "netns"}))
    kafka = plan(combined.run.path, "vagrant", cluster=str(cluster))
    assert (kafka.spec.sut, kafka.spec.recovery_s, kafka.spec.ready_timeout_s) == ("kafka", 300.0, 300.0)
    assert kafka.spec.recovery_tail_s == 10.0 and any("after its first committed write" in n for n in kafka.notes)
    assert any("JVMs starting at once" in note for note in kafka.notes)
    with pytest.raises(UserError, match="--cluster names the VMs of a vagrant reproduction"):
        plan(combined.run.path, "ssh", str(cluster / "inventory.toml"), cluster=str(cluster))
    code = main(["reproduce", str(combined.run.path), "--backend", "vagrant", "--cluster", str(tmp_path / "none")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 254 and len(err) == 1 and "no VM cluster here" in err[0]


def test_attempts_run_the_reproduction_again_until_one_reaches_the_original_verdict(tmp_path, capsys):
    """Off the simulator a bug with a narrow window may not show in every run: `--attempts N` runs it
    again, and stops at the first run that reaches the original's verdict (here the second), or at a
    run that failed as a run. The runs themselves are real simulated runs, handed out in order."""
    original = run_test(sim_spec(seed=21, bugs=("raft-vote-not-persisted",)), root=tmp_path / "a", say=lambda _: None)
    missed = run_test(sim_spec(seed=3, time_limit_s=2.0), root=tmp_path / "b", say=lambda _: None)
    assert original.valid is False and missed.valid is True
    p = plan(original.run.path, "netns")
    said: list[str] = []

    def runs(*results):
        calls: list[int] = []

        def run_one(number: int):
            calls.append(number)
            return results[number - 1]

        return run_one, calls

    run_one, calls = runs(missed, missed, original)
    tries = keep_trying(p, 3, run_one, said.append)
    assert calls == [1, 2, 3] and [t.comparison.reproduced for t in tries] == [False, False, True]
    assert len(said) == 2 and said[0].startswith("attempt 1 of 3: valid, the original INVALID")
    run_one, calls = runs(original, missed)
    assert [t.number for t in keep_trying(p, 3, run_one)] == [1] and calls == [1]
    run_one, calls = runs(missed, missed)
    tries = keep_trying(p, 2, run_one)
    assert calls == [1, 2] and not tries[-1].comparison.reproduced  # all tries spent, still a different verdict
    broken = dataclasses.replace(missed, valid=None, exit_code=254, error="the nodes never started")
    run_one, calls = runs(broken, original)
    tries = keep_trying(p, 3, run_one)
    assert calls == [1] and tries[-1].comparison is None  # an error is shown, not retried away
    # In the simulator one run says all: --attempts is noted and one run is made
    with pytest.raises(UserError, match="at least one run"):
        attempts_allowed(p, 0)
    argv = ["reproduce", str(original.run.path), "--attempts", "3", "--results", str(tmp_path / "c")]
    assert main([*argv, "--no-progress"]) == 1
    out, err = capsys.readouterr()
    assert "the simulator is deterministic" in err and "attempts:" not in out and "reproduced: yes" in out
    assert len(list((tmp_path / "c").glob("*/2*"))) == 1
    assert main(["reproduce", str(original.run.path), "--attempts", "0"]) == 254
    assert capsys.readouterr().err.strip().count("\n") == 0
