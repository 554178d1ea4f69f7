"""`kchaos reproduce` across backends (root): a netns run with a planted bug fails again when reproduced
in the simulator and on docker, with the same faults at the same times; a valid run stays valid."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.backends.ledger import LEDGER_NAME
from harness.cli import main
from harness.runner import run_test
from harness.test_spec import Cluster
from tests.harness_netns.conftest import heal_if_left, needs_root
from tests.harness_run.helpers import one_cell_suite, sim_spec
from vocab.faults.catalogue import TARGETED_KIND

pytestmark = [pytest.mark.root, needs_root]


def _faults(run: Path) -> list[tuple[float, str, list[str]]]:
    """The fault starts that did something: (seconds, f, targets)."""
    out = []
    for line in (run / "history.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event["process"] == "nemesis" and event["type"] == "info" and event["f"].startswith("start-"):
            out.append((event["time"] / 1e9, event["f"], event["value"].get("targets")))
    return out


def _reproduce(run: Path, backend: str, root: Path, capsys) -> tuple[int, str, Path]:
    try:
        code = main(["reproduce", str(run), "--backend", backend, "--results", str(root), "--no-progress"])
    finally:
        for ledger in root.glob(f"*/*/{LEDGER_NAME}"):
            heal_if_left(ledger.parent)
    return code, capsys.readouterr().out, next(p for p in root.glob("*/2*") if p.is_dir())


def _same_timeline(original: Path, reproduction: Path) -> None:
    a, b = _faults(original), _faults(reproduction)
    assert [(f, targets) for _, f, targets in a] == [(f, targets) for _, f, targets in b]
    # each fault at the same offset, give or take how long the previous fault took to carry out
    assert all(abs(ta - tb) < 2.0 for (ta, _, _), (tb, _, _) in zip(a, b, strict=True)), (a, b)


def test_a_planted_bug_caught_on_netns_is_caught_again_in_the_simulator_and_on_docker(tmp_path, capsys):
    # One controller, so the forger's Envelope always reaches the active one: the bug shows whatever
    # the faults do, and what the test checks of the faults is that they come back as they were.
    spec = sim_spec(
        seed=32,
        backend="netns",
        cluster=Cluster(controllers=1, brokers=2),
        nemesis=("partition", "pause"),
        nemesis_interval_s=2.0,
        nemesis_duration_s=2.0,
        time_limit_s=14.0,
        bugs=("ctl-envelope-unauthorized",),
    )
    try:
        original = run_test(spec, root=tmp_path / "netns", say=lambda _: None, progress=False)
    finally:
        for ledger in (tmp_path / "netns").glob(f"*/*/{LEDGER_NAME}"):
            heal_if_left(ledger.parent)
    assert original.error is None, original.error
    assert original.valid is False and len(_faults(original.run.path)) >= 3
    for backend in ("sim", "docker"):
        code, out, run = _reproduce(original.run.path, backend, tmp_path / backend, capsys)
        assert code == 1, out
        assert "reproduced: yes" in out and "forgery" in out
        starts = len([f for _, f, _ in _faults(original.run.path) if f.startswith("start-")])
        assert f"faults: {starts} of the {starts} recorded fault starts carried out" in out, out
        test = json.loads((run / "test.json").read_text())
        assert test["backend"] == backend and test["reproduces"] == str(original.run.path)
        _same_timeline(original.run.path, run)


def test_a_valid_netns_run_reproduced_in_the_simulator_stays_valid(tmp_path, capsys):
    spec = sim_spec(seed=8, backend="netns", time_limit_s=10.0)
    try:
        original = run_test(spec, root=tmp_path / "netns", say=lambda _: None, progress=False)
    finally:
        for ledger in (tmp_path / "netns").glob(f"*/*/{LEDGER_NAME}"):
            heal_if_left(ledger.parent)
    assert original.valid is True, original.checker_lines
    code, out, run = _reproduce(original.run.path, "sim", tmp_path / "sim", capsys)
    assert code == 0 and "reproduced: yes" in out
    _same_timeline(original.run.path, run)


def test_a_simulated_suite_run_reproduced_on_netns_gets_a_verdict(tmp_path, capsys):
    """A run recorded by `kchaos suite` (test.json names its suite, cell and seed) replays its fault
    timeline on netns. Before, it was refused: "test.json: suite: unknown key"."""
    short = dict(time_limit_s=8, nemesis_interval_s=2, nemesis_duration_s=2, recovery_s=5, rate=40, concurrency=4)
    suite = one_cell_suite(tmp_path / "short.toml", "config-register", "partition-kill", ("partition", "kill"), **short)
    assert main(["suite", str(suite), "--results", str(tmp_path / "suite"), "--quiet"]) in (0, 1)
    capsys.readouterr()
    (original,) = (tmp_path / "suite" / "suites" / "short").glob("2*/*/2*")
    assert json.loads((original / "test.json").read_text())["suite"]["seed"] == 1
    code, out, run = _reproduce(original, "netns", tmp_path / "netns", capsys)
    assert code in (0, 1), out
    assert "verdict:" in out and "reproduced:" in out
    test = json.loads((run / "test.json").read_text())
    assert test["backend"] == "netns" and test["reproduces"] == str(original) and "suite" not in test
    # the simulator's own targeted faults (buggify) are not replayed elsewhere; every other start is
    replayed = [(f, t) for _, f, t in _faults(original) if f != f"start-{TARGETED_KIND}"]
    assert replayed and replayed == [(f, t) for _, f, t in _faults(run)]
