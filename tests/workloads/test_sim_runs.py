"""Whole runs of the played-broker workloads on the sim backend: valid and deterministic under
partition + kill; invalid, with the right anomaly, when the controller breaks a KIP rule; selected by
`--workload`, TOML and workload options; bad options are one-line errors."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.cli import main
from harness.runner import run_test
from tests.harness_run.helpers import END_OF_RUN, history_lines, sim_spec
from tests.workloads import planted
from vocab.errors import EXIT_ERROR, EXIT_INVALID, EXIT_VALID

CHECKERS = {
    "registrations": {"registrations", "partition-state", "metadata-answers"} | END_OF_RUN,
    "isr-changes": {"partition-cas", "partition-state", "registrations", "metadata-answers"} | END_OF_RUN,
}


def spec(workload: str, seed: int, **changes: Any) -> Any:
    return sim_spec(seed=seed, workload=workload, time_limit_s=20.0, rate=50.0, concurrency=5, **changes)


def events(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in history_lines(run_dir)]


@pytest.mark.parametrize("workload", ["registrations", "isr-changes"])
def test_valid_and_deterministic_under_partition_and_kill(tmp_path, workload):
    first = run_test(spec(workload, 11), root=tmp_path / "a", say=lambda _: None)
    second = run_test(spec(workload, 11), root=tmp_path / "b", say=lambda _: None)
    assert first.error is None and first.exit_code == EXIT_VALID, first.checker_lines
    history = (first.run.path / "history.jsonl").read_bytes()
    assert history == (second.run.path / "history.jsonl").read_bytes()
    results = json.loads((first.run.path / "results.json").read_text())
    assert set(results["checkers"]) == CHECKERS[workload]
    assert results["checkers"]["availability"]["valid"] is True  # played brokers heartbeat after the heal
    ops = events(first.run.path)
    assert {"start-partition", "start-kill"} <= {e["f"] for e in ops if e["process"] == "nemesis"}
    done = [e for e in ops if e["process"] != "nemesis" and e["type"] != "invoke"]
    assert done[0]["f"] == "setup" and len(done[0]["value"]["brokers"]) == 4
    kinds = {(e["f"], e["type"]) for e in done}
    assert {("heartbeat", "ok"), ("metadata", "ok"), ("describe-cluster", "ok"), ("quorum", "ok")} <= kinds
    if workload == "isr-changes":
        assert ("alter", "ok") in kinds and ("alter", "fail") in kinds
    assert results["checkers"]["registrations"]["counts"]["image_dumps"] == 5


REG, ISR = "registrations", "isr-changes"
BUGS: list[tuple[str, Callable[[Any], None], str, dict[str, Any], str, str]] = [
    # (name, planter, workload, options, checker, anomaly)
    ("stale partition epoch", planted.accept_stale_partition_epoch, ISR, {}, "partition-cas", ""),
    ("fenced replica joins", planted.admit_fenced_replicas, ISR, {}, REG, "ineligible-replica-added"),
    ("never fenced", planted.never_fence_expired_sessions, REG, {"mix": "crash=1"}, REG, "not-fenced-after-session"),
    ("unfenced early", planted.unfence_before_catch_up, REG, {}, REG, "unfenced-before-catch-up"),
    ("duplicates", planted.accept_duplicate_incarnations, REG, {"mix": "duplicate=1"}, REG,
     "duplicate-registration-accepted"),
    ("epoch reuse", planted.reuse_broker_epochs, REG, {"mix": "reregister=1"}, REG, "epoch-reuse"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "plant", "workload", "options", "checker", "anomaly"), BUGS, ids=[b[0] for b in BUGS])
def test_a_planted_controller_bug_makes_the_run_invalid(
    tmp_path, monkeypatch, name, plant, workload, options, checker, anomaly
):
    plant(monkeypatch)
    tried = []
    for seed in range(1, 5):  # the simulation is deterministic: a seed catches it or it does not
        result = run_test(
            spec(workload, seed, workload_options=options, nemesis=("partition",), nemesis_interval_s=6.0),
            root=tmp_path,
            say=lambda _: None,
        )
        assert result.error is None, result.error
        checkers = json.loads((result.run.path / "results.json").read_text())["checkers"]
        # a planter out of step with the code it patches makes the node raise: no verdict, not a catch
        assert "raised" not in str(checkers.get("sim-invariants", {}).get("violation")), checkers["sim-invariants"]
        verdict = checkers[checker]
        tried.append((seed, verdict["valid"]))
        if verdict["valid"] is False:
            assert result.exit_code == EXIT_INVALID
            if anomaly:
                assert anomaly in verdict["anomalies"], verdict["anomalies"]
            return
    pytest.fail(f"{name}: no seed caught it: {tried}")


def test_cli_and_toml_select_the_workloads_and_their_options(tmp_path, capsys):
    test_file = tmp_path / "isr.toml"
    test_file.write_text(
        'workload = "isr-changes"\nbackend = "sim"\ntime_limit_s = "4s"\nrecovery_s = 1\nnemesis = []\n'
        "[workload_options]\nbrokers = 3\npartitions = 1\nmix = { alter = 5, metadata = 1, crash = 0 }\n"
    )
    code = main(["run", "--test", str(test_file), "--seed", "3", "--results", str(tmp_path / "r"), "--no-progress"])
    out = capsys.readouterr().out
    assert code == 0, out
    run_dir = Path(out.split("run directory: ")[1].split()[0])
    setup = events(run_dir)[1]
    assert setup["f"] == "setup" and setup["value"]["brokers"] == [1000, 1001, 1002]
    assert list(setup["value"]["topics"]["played-0"]["replicas"]) == ["0"]
    argv = ["run", "--backend", "sim", "--workload", "registrations", "--workload-option", "brokers=2",
            "--time-limit", "3s", "--nemesis", "none", "--results", str(tmp_path / "r2"), "--no-progress"]  # fmt: skip
    code = main(argv)
    out = capsys.readouterr().out
    assert code == 0 and "registrations: valid" in out


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("brokers=x", "workload option brokers must be an integer"),
        ("brokers=0", "workload option brokers must be >= 1"),
        ("mix=crash", "'crash' is not kind=weight"),
        ("mix=nap=1", "unknown op kind 'nap'"),
        ("mix=metadata=0,describe-cluster=0,quorum=0,barrier=0", "needs a read kind"),
    ],
)
def test_bad_workload_options_are_one_line_errors(tmp_path, capsys, option, message):
    code = main(["run", "--backend", "sim", "--workload", "registrations", "--workload-option", option,
                 "--time-limit", "2s", "--results", str(tmp_path), "--no-progress"])  # fmt: skip
    _, err = capsys.readouterr()
    assert code == EXIT_ERROR
    errors = [line for line in err.splitlines() if "error" in line]
    assert len(errors) == 1 and message in errors[0] and "Traceback" not in err


def test_clock_faults_raise_no_session_false_alarm(tmp_path):
    """Regression: a forward bump then a reset leaves the controller's clock standing still for the
    bump's size, so its session timers lag past the fault's stop; the checker once judged them."""
    result = run_test(
        dataclasses.replace(
            spec("registrations", 16, nemesis=("clock",), nemesis_interval_s=3.0, nemesis_duration_s=3.0),
            time_limit_s=30.0,
        ),
        root=tmp_path,
        say=lambda _: None,
    )
    assert result.exit_code == EXIT_VALID, result.checker_lines
