"""The results store: run directories, latest links, history reading, Parquet, listing."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from harness import store
from reports.schema import HISTORY_ARROW_SCHEMA, parquet_schema_problem
from tests.harness_store.histories import register_history, write_run
from vocab.errors import UserError

T0 = datetime(2026, 11, 23, 10, 15, 0, tzinfo=UTC)


def test_root_from_argument_env_or_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(store.ENV_ROOT, raising=False)
    assert store.results_root() == Path("results")
    monkeypatch.setenv(store.ENV_ROOT, str(tmp_path / "env"))
    assert store.results_root() == tmp_path / "env"
    assert store.results_root(tmp_path / "arg") == tmp_path / "arg"


def test_create_run_names_by_utc_second_and_moves_latest(root: Path) -> None:
    first = store.create_run("set-kill", root, now=T0)
    assert first.path == root / "set-kill" / "20261123T101500Z"
    assert os.readlink(root / "latest") == "set-kill/20261123T101500Z"
    assert os.readlink(root / "set-kill" / "latest") == "20261123T101500Z"
    # same second: the next free one, and both links follow the newest run
    second = store.create_run("set-kill", root, now=T0)
    assert second.path.name == "20261123T101501Z"
    assert (root / "latest").resolve() == second.path.resolve()
    assert (root / "set-kill" / "latest").resolve() == second.path.resolve()
    other = store.create_run("register", root, now=T0)
    assert os.readlink(root / "latest") == "register/20261123T101500Z"
    assert os.readlink(root / "set-kill" / "latest") == "20261123T101501Z"  # per-test link untouched
    assert not [p for p in root.rglob(".*tmp")]  # no temporary links left behind
    assert other.run_id == "register/20261123T101500Z"


@pytest.mark.parametrize("name", ["../escape", ".hidden", "_report", "latest", "a/b", ""])
def test_bad_test_names_are_refused(root: Path, name: str) -> None:
    with pytest.raises(UserError, match="test name"):
        store.create_run(name, root)


def test_write_test_fills_schema_fields(root: Path) -> None:
    run = store.create_run("reg", root, now=T0)
    store.write_test(run, {"workload": "config-register", "seed": 7}, started_at=T0)
    test = store.read_test(run)
    assert test == {
        "schema_version": 1,
        "name": "reg",
        "workload": "config-register",
        "seed": 7,
        "started_at": "2026-11-23T10:15:00Z",
    }


def test_torn_last_line_is_dropped_and_reported(tmp_path: Path) -> None:
    events = register_history(seed=2, ops_per_process=3)
    path = tmp_path / "history.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events) + '{"index": 99, "time": 12', encoding="utf-8")
    read = store.read_history(path)
    assert read.events == events
    assert read.truncated is not None
    assert f"history.jsonl:{len(events) + 1}: incomplete last line" in read.truncated
    assert len(read.paired().ops) == len(events) // 2


def test_complete_history_is_not_truncated(tmp_path: Path) -> None:
    events = register_history(seed=2, ops_per_process=3)
    path = tmp_path / "history.jsonl"
    path.write_text("\n".join(json.dumps(e) for e in events), encoding="utf-8")  # no final newline
    read = store.read_history(path)
    assert read.truncated is None and read.events == events


def test_bad_line_in_the_middle_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    path.write_text('{"index": 0, "time": 0, "process": 0, "type": "invoke", "f": "read"}\n{oops\n{}\n')
    with pytest.raises(UserError, match=r"history.jsonl:2: not valid JSON"):
        store.read_history(path)


def test_parquet_has_the_schema_the_reports_read(tmp_path: Path) -> None:
    events = register_history(seed=4, ops_per_process=4, nemesis=[(10, "start-partition", {"targets": ["n1"]})])
    events[1]["error"] = {"code": 7}
    events[3]["error"] = "timeout"
    target = store.write_history_parquet(store.history_table(events), tmp_path / "history.parquet")
    table = pq.read_table(target)
    assert table.schema.equals(HISTORY_ARROW_SCHEMA)
    assert parquet_schema_problem(table.schema) is None
    rows = table.to_pylist()
    assert [r["index"] for r in rows] == [e["index"] for e in events]
    assert [r["time"] for r in rows] == [e["time"] for e in events]
    assert [json.loads(r["value"]) if r["value"] is not None else None for r in rows] == [e["value"] for e in events]
    nemesis = [r for r in rows if r["process"] == "nemesis"]
    assert nemesis[0]["f"] == "start-partition" and json.loads(nemesis[0]["value"]) == {"targets": ["n1"]}
    assert rows[1]["error"] == '{"code":7}' and rows[3]["error"] == "timeout"
    assert all(r["process"] == str(e["process"]) for r, e in zip(rows, events))


def _results(run: store.RunDir, valid, ops: int) -> None:
    store.write_json_atomic(run.results_json, {"valid": valid, "checkers": {}, "stats": {"ops": ops}})


def test_list_runs_newest_first_with_verdicts(root: Path) -> None:
    a = write_run(root, [], name="reg", started_at="2026-11-23T10:00:00Z")
    b = write_run(root, [], name="reg", started_at="2026-11-23T11:00:00Z")
    c = write_run(root, [], name="kill", started_at="2026-11-23T10:30:00Z")
    _results(a, True, 10)
    _results(b, False, 20)
    (root / "_report").mkdir()  # the reports pipeline's output: ignored
    (root / "README.md").write_text("x")
    runs = store.list_runs(root)
    assert [r.path for r in runs] == [b.path, c.path, a.path]
    assert [r.verdict for r in runs] == ["invalid", "incomplete", "valid"]
    assert [r.ops for r in runs] == [20, None, 10]
    assert [r.path for r in store.list_runs(root, test="reg")] == [b.path, a.path]
    assert [r.path for r in store.list_runs(root, limit=1)] == [b.path]


def test_unreadable_results_are_listed_not_fatal(root: Path) -> None:
    run = write_run(root, [], name="reg")
    run.results_json.write_text("{not json")
    (listed,) = store.list_runs(root)
    assert listed.verdict == "unreadable" and "results.json" in (listed.problem or "")


def test_open_run_errors_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="does not exist"):
        store.open_run(tmp_path / "nope")
    (tmp_path / "file").write_text("")
    with pytest.raises(UserError, match="not a directory"):
        store.open_run(tmp_path / "file")
    with pytest.raises(UserError, match=r"no test\.json"):
        store.read_test(store.open_run(tmp_path))
    (tmp_path / "test.json").write_text("[1]")
    with pytest.raises(UserError, match="must be a JSON object"):
        store.read_test(store.open_run(tmp_path))
