"""Whole `kchaos run --backend sim` runs with every fault kind: valid, deterministic, and every start and
stop in the history with its kind, mode, targets and parameters, windows as the reports derive them."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter

import pandas as pd

from harness.backends.sim import SimBackend
from harness.runner import run_test
from harness.test_spec import Cluster
from reports import metrics
from tests.harness_run.helpers import sim_spec
from vocab.faults.kinds import FAULT_KINDS

ALL = sim_spec(
    seed=11,
    nemesis=FAULT_KINDS,
    nemesis_interval_s=1.0,
    nemesis_duration_s=3.0,
    time_limit_s=60.0,
)


def events(result) -> list[dict]:
    return [json.loads(line) for line in (result.run.path / "history.jsonl").read_text().splitlines()]


def test_every_kind_at_once_is_valid_and_recorded_with_what_it_did(tmp_path):
    result = run_test(ALL, root=tmp_path, say=lambda _: None)
    assert result.exit_code == 0 and result.valid is True, (result.error, result.checker_lines)
    assert not result.warnings, result.warnings
    history = events(result)
    nem = [e for e in history if e["process"] == "nemesis"]
    # the nemesis does one thing at a time: each invoke is followed by its own completion
    for invoke, done in zip(nem[::2], nem[1::2], strict=True):
        assert invoke["type"] == "invoke" and done["type"] != "invoke" and invoke["f"] == done["f"]
    starts = [e for e in nem if e["type"] != "invoke" and e["f"].startswith("start-")]
    supported = {k for k in FAULT_KINDS if k in SimBackend.faults}
    done_kinds = {e["value"]["kind"] for e in starts if e["type"] == "info" and e["value"]["kind"] in FAULT_KINDS}
    assert done_kinds == supported
    for e in starts:
        value = e["value"]
        assert value["kind"] == e["f"].removeprefix("start-")
        if e["type"] == "fail":  # nothing happened, and it says why (a kind this backend lacks, no target…)
            assert e["error"] and not value.get("targets")
            assert ("cannot do" in e["error"]) == (value["kind"] not in supported)
            continue
        assert value["targets"] and ("mode" in value or value["kind"] == "buggify")
        if value["kind"] == "clock":
            assert value["mode"] in ("bump", "strobe", "rate") and value["target_mode"]
            assert {"bump": "delta_ms", "strobe": "period_ms", "rate": "rate"}[value["mode"]] in value
        if value["kind"] == "packet":
            assert {"loss", "delay_ms", "jitter_ms"} <= set(value)
        if value["kind"] == "partition":
            assert value["grudge"]
    assert any(e["f"] == "start-buggify" for e in starts)  # the targeted faults are part of the mix
    # overlapping kinds: the reports' windows pair each start with its own kind's stop
    frame = pd.DataFrame(history)
    frame["value"] = [json.dumps(v) if v is not None else None for v in frame["value"]]
    windows = metrics.fault_windows(frame, metrics.run_end_ns(frame))
    assert set(windows["kind"]) == supported | {"buggify"}
    assert windows["healed"].all()
    assert (windows["end_ns"] > windows["start_ns"]).all()
    by_kind = Counter(windows["kind"])
    assert by_kind == Counter(e["value"]["kind"] for e in starts if e["type"] == "info")
    active = max(sum((w.start_ns <= t < w.end_ns) for w in windows.itertuples()) for t in windows["start_ns"].tolist())
    assert active >= 3  # several kinds were active at once


def test_same_seed_same_history_with_every_fault_on(tmp_path):
    spec = dataclasses.replace(ALL, time_limit_s=10.0)
    first = run_test(spec, root=tmp_path / "a", say=lambda _: None)
    second = run_test(spec, root=tmp_path / "b", say=lambda _: None)
    other = run_test(dataclasses.replace(spec, seed=12), root=tmp_path / "c", say=lambda _: None)
    a = (first.run.path / "history.jsonl").read_bytes()
    assert a == (second.run.path / "history.jsonl").read_bytes()
    assert a != (other.run.path / "history.jsonl").read_bytes()


def test_kill_all_on_combined_nodes_recovers(tmp_path):
    """Regression: with DUPLICATE_BROKER_REGISTRATION fatal, 3 combined nodes killed together never
    recovered ("did not recover within 90 s", nodes down at the end)."""
    spec = dataclasses.replace(
        sim_spec(seed=1),
        cluster=Cluster(combined=3),
        nemesis=("kill",),
        nemesis_modes={"kill": ("all",)},
        time_limit_s=12.0,
        nemesis_buggify=False,
    )
    result = run_test(spec, root=tmp_path, say=lambda _: None)
    assert result.exit_code == 0 and not result.warnings, result.warnings
    kills = [e for e in events(result) if e["f"] == "start-kill" and e["type"] == "info"]
    assert kills and all(e["value"]["targets"] == ["n1", "n2", "n3"] for e in kills)


def test_no_buggify_means_no_targeted_faults(tmp_path):
    spec = dataclasses.replace(ALL, time_limit_s=10.0, nemesis_buggify=False)
    result = run_test(spec, root=tmp_path, say=lambda _: None)
    assert result.exit_code == 0
    assert not [e for e in events(result) if "buggify" in e["f"]]
