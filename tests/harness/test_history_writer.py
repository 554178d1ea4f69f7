"""history.jsonl writing (each line flushed, indexed), reading back, Parquet, partial last lines."""

from __future__ import annotations

import json
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from checkers.history import HistoryError, fault_windows, load_history, pair, read_events
from harness.history_writer import HistoryWriter, repair_tail, to_parquet
from reports.schema import HISTORY_ARROW_SCHEMA, parquet_schema_problem
from vocab.generators import NEMESIS, Op, Outcome, each_worker, nemesis_schedule, once, rate, run_virtual, whole_run
from vocab.generators.core import NS_PER_MS, Rng

EVENTS = [
    {"time": 0, "process": "nemesis", "type": "invoke", "f": "start-partition", "value": None},
    {"time": 10, "process": 0, "type": "invoke", "f": "write", "value": 3, "key": "retention.ms"},
    {"time": 12, "process": "nemesis", "type": "info", "f": "start-partition", "value": {"targets": ["n1"]}},
    {"time": 30, "process": 0, "type": "ok", "f": "write", "value": 3, "key": "retention.ms", "node": "n2"},
    {"time": 31, "process": 1, "type": "invoke", "f": "read", "value": None, "key": "retention.ms"},
    {"time": 90, "process": 1, "type": "info", "f": "read", "value": None, "error": "timeout"},
    {"time": 95, "process": "nemesis", "type": "invoke", "f": "stop-partition", "value": None},
    {"time": 99, "process": "nemesis", "type": "info", "f": "stop-partition", "value": {"targets": ["n1"]}},
    {"time": 100, "process": 4, "type": "invoke", "f": "read", "value": None, "key": "retention.ms"},
    {"time": 120, "process": 4, "type": "fail", "f": "read", "value": None, "error": {"code": 41}},
]


def test_lines_follow_the_schema_and_read_back_through_the_checkers(tmp_path):
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path) as writer:
        for event in EVENTS:
            writer.write({**event, "index": 999})  # the writer numbers events itself
    lines = path.read_text().splitlines()
    first = json.loads(lines[1])
    assert list(first) == ["index", "time", "process", "type", "f", "value", "key"]
    assert [json.loads(line)["index"] for line in lines] == list(range(len(EVENTS)))
    history = load_history(path)
    assert [(op.f, op.type, op.key) for op in history.ops] == [
        ("write", "ok", "retention.ms"),
        ("read", "info", "retention.ms"),
        ("read", "fail", "retention.ms"),
    ]
    assert history.ops[0].node == "n2" and history.ops[2].error == {"code": 41}
    assert [(w.kind, w.start, w.end) for w in fault_windows(history)] == [("partition", 12, 99)]
    assert pair(read_events(path)).ops == history.ops


def test_each_line_is_on_disk_before_write_returns(tmp_path):
    path = tmp_path / "history.jsonl"
    writer = HistoryWriter(path)
    writer.write(EVENTS[0])
    writer.write(EVENTS[1])
    assert [json.loads(line)["f"] for line in path.read_text().splitlines()] == ["start-partition", "write"]
    assert writer.count == 2
    writer.close()


def test_a_bad_event_is_refused_and_nothing_is_written(tmp_path):
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path) as writer:
        for bad in ({**EVENTS[0], "time": 1.5}, {**EVENTS[0], "type": "done"}, {**EVENTS[0], "process": None}):
            with pytest.raises(ValueError, match="history event"):
                writer.write(bad)
        writer.write(EVENTS[0])
    assert json.loads(path.read_text())["index"] == 0
    with pytest.raises(FileExistsError):
        HistoryWriter(path)  # never clobbers a history


def test_odd_values_are_still_json(tmp_path):
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path) as writer:
        writer.write({**EVENTS[2], "value": {"targets": {"n3", "n1"}, "op": Op("x")}})
    value = json.loads(path.read_text())["value"]
    assert value["targets"] == ["n1", "n3"] and value["op"]["f"] == "x"


def test_a_killed_writer_leaves_every_finished_line_readable(tmp_path):
    path = tmp_path / "history.jsonl"
    script = (
        "import os, sys\n"
        "from harness.history_writer import HistoryWriter\n"
        f"w = HistoryWriter({str(path)!r})\n"
        "for i in range(50):\n"
        "    w.write({'time': i, 'process': i // 2, 'type': 'invoke' if i % 2 == 0 else 'ok', 'f': 'read'})\n"
        'w._file.write(\'{"index": 50, "ti\')\n'  # a write cut short by the kill
        "w._file.flush()\n"
        "os.kill(os.getpid(), 9)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    assert proc.returncode == -9
    with pytest.raises(HistoryError, match=r"history.jsonl:51: not valid JSON"):
        load_history(path)  # documented: the checkers' reader does not skip a partial line
    assert repair_tail(path) is True
    assert repair_tail(path) is False
    assert len(load_history(path).ops) == 25


def test_parquet_has_the_report_schema_and_skips_a_partial_tail(tmp_path):
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path) as writer:
        for event in EVENTS:
            writer.write(event)
    with path.open("a") as fh:
        fh.write('{"index": 10, "time"')
    out = tmp_path / "history.parquet"
    assert to_parquet(path, out) == len(EVENTS)
    table = pq.read_table(out)
    assert table.schema.equals(HISTORY_ARROW_SCHEMA, check_metadata=False)
    assert parquet_schema_problem(table.schema) is None
    rows = table.to_pylist()
    assert rows[0]["process"] == "nemesis" and rows[1]["process"] == "0"
    assert rows[2]["value"] == '{"targets":["n1"]}' and rows[0]["value"] is None
    assert rows[5]["error"] == "timeout" and rows[9]["error"] == '{"code":41}'
    assert rows[3]["key"] == "retention.ms" and rows[3]["node"] == "n2"
    assert [r["index"] for r in rows] == list(range(10))


def test_parquet_refuses_a_corrupt_middle_line(tmp_path):
    path = tmp_path / "history.jsonl"
    path.write_text('{"index":0,"time":0,"process":0,"type":"invoke","f":"r","value":null}\nnot json\n{}\n')
    with pytest.raises(ValueError, match=r"history.jsonl:2: not a complete JSON event"):
        to_parquet(path, tmp_path / "h.parquet")
    assert not (tmp_path / "h.parquet").exists()


def test_a_generated_run_streams_to_a_history_the_checkers_accept(tmp_path):
    def model(op: Op, rng: Rng) -> Outcome:
        if op.process == NEMESIS:
            return Outcome("info", 3 * NS_PER_MS, {"targets": ["n2"]})
        roll = rng.random()
        kind = "ok" if roll < 0.85 else "fail" if roll < 0.93 else "info"
        return Outcome(kind, rng.randint(NS_PER_MS, 20 * NS_PER_MS), op.value, node="n1")

    client = rate(100, lambda rng, i: Op("write", i, key="k") if rng.random() < 0.5 else Op("read", key="k"))
    gen = whole_run(client, nemesis_schedule(["kill"], 1.0, 0.5), 5.0, ["kill"], 0.5, each_worker(once("read")))
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path) as writer:
        events = run_virtual(gen, model, concurrency=4, seed=5, sink=writer.write)
    history = load_history(path)
    assert len(history.ops) == sum(e["type"] == "invoke" and e["process"] != NEMESIS for e in events)
    assert {op.type for op in history.ops} == {"ok", "fail", "info"}
    assert [w.kind for w in fault_windows(history)] == ["kill"] * len(fault_windows(history))
    assert all(w.end is not None for w in fault_windows(history))  # the final phase healed every fault
    assert [json.loads(line) for line in path.read_text().splitlines()] == events
