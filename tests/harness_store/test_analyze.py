"""Analysing run directories: verdicts, exit codes, results.json, viewers, plots, report.html."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from PIL import Image

from harness import plots, store
from harness.run_report import analyze_run
from reports.ingest import vet_run
from tests.harness_store.histories import register_history, write_run
from vocab.errors import UserError

SERIAL = {"linearizable": {"jobs": 1}}  # no worker pool in tests
NEMESIS = [(20, "start-partition", {"targets": ["n1"]}), (120, "stop-partition", None), (200, "start-kill", None)]


def _results(run: store.RunDir) -> dict:
    return json.loads(run.results_json.read_text())


def _hrefs(report: Path) -> list[str]:
    return re.findall(r'href="([^"]+)"', report.read_text())


def _assert_pngs(run: store.RunDir) -> None:
    for name in (plots.LATENCY_RAW, plots.LATENCY_QUANTILES, plots.RATE):
        with Image.open(run.path / name) as img:
            img.verify()
            assert img.format == "PNG" and img.size[0] > 300 and img.size[1] > 200


def test_valid_register_run(root: Path) -> None:
    events = register_history(seed=11, ops_per_process=25, nemesis=NEMESIS)
    run = write_run(root, events)
    before = run.history_jsonl.read_bytes()
    analysis = analyze_run(run.path, options=SERIAL)
    assert analysis.valid is True and analysis.exit_code == 0
    results = _results(run)
    assert results["valid"] is True
    assert results["checkers"]["linearizable"]["valid"] is True
    assert results["checkers"]["linearizable"]["model"] == "register"
    ops = len(events) // 2 - len(NEMESIS)
    stats = results["stats"]
    assert stats["ops"] == ops and stats["ok"] + stats["fail"] + stats["info"] == ops
    assert stats["faults"] == 2  # partition (healed) and kill (open to the end)
    assert results["history"] == {"events": len(events), "truncated": None}
    assert not list(run.path.glob("counterexample-*.html"))
    _assert_pngs(run)
    report = run.path / "report.html"
    text = report.read_text()
    assert "valid</span></h1>" in text and "INVALID" not in text
    hrefs = _hrefs(report)
    assert {"latency-raw.png", "rate.png", "history.jsonl", "history.parquet", "results.json"} <= set(hrefs)
    assert all((run.path / h).exists() for h in hrefs)
    assert run.history_jsonl.read_bytes() == before  # the history is never rewritten
    assert not isinstance(vet_run(run.path, run.run_id), str)  # the Spark reports accept the run


def test_stale_read_is_invalid_with_a_viewer(root: Path) -> None:
    run = write_run(root, register_history(seed=11, ops_per_process=25, stale=True, nemesis=NEMESIS))
    analysis = analyze_run(run.path, options=SERIAL)
    assert analysis.valid is False and analysis.exit_code == 1
    lin = _results(run)["checkers"]["linearizable"]
    assert lin["valid"] is False and lin["invalid_keys"] == ["stale.key"]
    viewer = run.path / "counterexample-linearizable.html"
    assert viewer.is_file() and "stale.key" in viewer.read_text()
    report = run.path / "report.html"
    assert "INVALID</span></h1>" in report.read_text()
    assert "counterexample-linearizable.html" in _hrefs(report)
    _assert_pngs(run)


def test_reanalysis_replaces_results_and_stale_viewers(root: Path) -> None:
    run = write_run(root, register_history(seed=5, ops_per_process=5, stale=True))
    assert analyze_run(run.path, options=SERIAL).exit_code == 1
    assert (run.path / "counterexample-linearizable.html").exists()
    # log-agreement with no dumps cannot decide: unknown, exit 2; the old viewer goes
    analysis = analyze_run(run.path, only=["log-agreement"])
    assert analysis.valid == "unknown" and analysis.exit_code == 2
    assert list(_results(run)["checkers"]) == ["log-agreement"]
    assert not (run.path / "counterexample-linearizable.html").exists()
    assert "counterexample-linearizable.html" not in _hrefs(run.path / "report.html")


def test_torn_history_is_checked_up_to_the_tear(root: Path) -> None:
    events = register_history(seed=8, ops_per_process=10)
    run = write_run(root, events, torn_tail='{"index": 999, "time": 5, "proc')
    analysis = analyze_run(run.path, options=SERIAL)
    assert analysis.valid is True
    truncated = _results(run)["history"]["truncated"]
    assert "incomplete last line dropped" in truncated
    assert analysis.warnings == [truncated]
    assert "incomplete last line dropped" in (run.path / "report.html").read_text()
    assert store.read_history(run.history_jsonl).truncated  # left as it was


def _dump(run: store.RunDir, node: str, digests: list[str]) -> None:
    lines = [json.dumps({"offset": i, "epoch": 1, "digest": d}) for i, d in enumerate(digests)]
    (run.node_dir(node) / "committed-log.jsonl").write_text("\n".join(lines) + "\n")


def test_log_agreement_joins_when_nodes_left_dumps(root: Path) -> None:
    run = write_run(root, register_history(seed=3, ops_per_process=5))
    _dump(run, "n1", ["a", "b", "c"])
    _dump(run, "n2", ["a", "b"])
    (run.node_dir("n1") / "node.log").write_text("started\n")
    analysis = analyze_run(run.path, options=SERIAL)
    names = [v.checker for v in analysis.verdicts]
    assert names[0] == "linearizable" and "log-agreement" in names and "availability" in names
    assert "image-replay" not in names  # digest-only dumps: nothing to replay
    assert analysis.valid is True
    hrefs = _hrefs(run.path / "report.html")
    assert "nodes/n1/node.log" in hrefs and "nodes/n2/committed-log.jsonl" in hrefs
    assert all((run.path / h).exists() for h in hrefs)
    _dump(run, "n2", ["a", "X"])  # divergence at offset 1
    analysis = analyze_run(run.path, options=SERIAL)
    assert analysis.valid is False and analysis.exit_code == 1
    assert _results(run)["checkers"]["log-agreement"]["valid"] is False
    assert _results(run)["checkers"]["linearizable"]["valid"] is True


def test_workload_mapping_and_test_checkers(root: Path) -> None:
    events = register_history(seed=3, ops_per_process=5)
    run = write_run(root, events, workload="no-such-workload")
    analysis = analyze_run(run.path)
    assert analysis.valid == "unknown" and analysis.exit_code == 2 and analysis.verdicts == []
    assert any("no checker for workload" in w for w in analysis.warnings)
    analysis = analyze_run(run.path, checkers={"no-such-workload": ["linearizable"]}, options=SERIAL)
    assert analysis.valid is True
    named = write_run(root, events, checkers=["set-full"])
    assert [v.checker for v in analyze_run(named.path).verdicts] == ["set-full"]
    bad = write_run(root, events, checkers=["nope"])
    with pytest.raises(UserError, match="unknown checker 'nope'"):
        analyze_run(bad.path)


def test_a_crashing_checker_is_unknown_and_the_rest_still_run(root: Path) -> None:
    events = register_history(seed=3, ops_per_process=5)
    events += [
        {"index": len(events), "time": 10**12, "process": 77, "type": "invoke", "f": "cas", "value": 5, "key": "k"},
        {"index": len(events) + 1, "time": 10**12 + 1, "process": 77, "type": "ok", "f": "cas", "value": 5, "key": "k"},
    ]  # cas needs [from, to]: the register model raises
    run = write_run(root, events, checkers=["linearizable", "log-agreement"])
    _dump(run, "n1", ["a"])
    analysis = analyze_run(run.path, options=SERIAL)
    lin, logs = analysis.verdicts
    assert lin.valid == "unknown" and "cas value must be [from, to]" in lin.details["error"]
    assert logs.valid is True
    assert analysis.valid == "unknown" and analysis.exit_code == 2
    assert any("checker linearizable failed" in w for w in analysis.warnings)


def test_unusable_runs_are_user_errors(root: Path, tmp_path: Path) -> None:
    with pytest.raises(UserError, match="does not exist"):
        analyze_run(tmp_path / "missing")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UserError, match=r"no test\.json"):
        analyze_run(empty)
    run = store.create_run("reg", root)
    store.write_test(run, {"workload": "config-register"})
    with pytest.raises(UserError, match=r"no history\.jsonl"):
        analyze_run(run.path)
    run.history_jsonl.write_text('{"index": 0, "time": "soon", "process": 0, "type": "invoke", "f": "read"}\n')
    with pytest.raises(UserError, match="'time' must be an integer"):
        analyze_run(run.path)
