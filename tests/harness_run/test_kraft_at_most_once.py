"""at-most-once (KIP-590): every unique written value is applied at most once in the committed log. Both
verdicts on committed logs built with the node's own record codec, across a snapshot and the log tap."""

from __future__ import annotations

import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from harness.db.kraft_at_most_once import check_at_most_once, check_from_args, summarize, unique_writes
from harness.db.kraft_tap import LogTap
from node.metadata.dump import committed_log_jsonl, log_entries, snapshot_dump, snapshot_dump_json
from node.metadata.image import build_image
from node.metadata.records import ConfigRecord, TopicRecord, encode_records
from node.metadata.snapshot import snapshot_bytes, snapshot_id
from node.protocol.admin import ConfigResourceType
from node.raft.records import RecordBatch
from tests.checkers.events import Events

TOPIC = int(ConfigResourceType.TOPIC)
LIST = "leader.replication.throttled.replicas"


class Log:
    """Committed batches, one request's ConfigRecords per batch."""

    def __init__(self) -> None:
        self.batches: list[RecordBatch] = []
        self.next = 0
        self.batch(*(TopicRecord(name, str(uuid.UUID(int=i + 1))) for i, name in enumerate(("t", "other"))))

    def write(self, *changes: tuple[str, str]) -> Log:
        """One batch: ("topic/config", value) per record."""
        return self.batch(*(ConfigRecord(TOPIC, key.split("/")[0], key.split("/")[1], value) for key, value in changes))

    def batch(self, *records: Any) -> Log:
        batch = RecordBatch(self.next, 1, encode_records(records))
        self.batches.append(batch)
        self.next = batch.next_offset
        return self


def dump(run: Path, node: str, batches: list[RecordBatch], snapshot_at: int = 0) -> None:
    directory = run / "nodes" / node
    directory.mkdir(parents=True, exist_ok=True)
    snapshot = None
    if snapshot_at:
        image = build_image(batches[:snapshot_at])
        snapshot = SimpleNamespace(snapshot_id=snapshot_id(image), data=snapshot_bytes(image))
    (directory / "metadata-snapshot.json").write_text(snapshot_dump_json(snapshot))
    (directory / "committed-log.jsonl").write_text(committed_log_jsonl(batches[snapshot_at:], with_records=True))


def register_writes(*values: tuple[str, int, str]) -> Any:
    """config-register's writes: (key, value, outcome)."""
    e = Events()
    for i, (key, value, kind) in enumerate(values):
        e.op(i, "write", i * 10, i * 10 + 5, invoke=value, value=None, kind=kind, key=key)
    return e.history()


def append_txns(*txns: list[tuple[str, str]]) -> Any:
    """config-append's append transactions: [(key, element), ...] each."""
    e = Events()
    for i, mops in enumerate(txns):
        e.op(i, "txn", i * 10, i * 10 + 5, invoke=[["append", k, x] for k, x in mops], value=None)
    return e.history()


def test_unique_values_are_the_ones_a_single_op_writes() -> None:
    history = register_writes(("t/a", 1, "ok"), ("t/a", 2, "info"), ("t/a", 2, "ok"), ("t/b", 3, "fail"))
    ids = [op.id for op in history.ops]
    sets, appends = unique_writes(history.ops)
    assert sets == {"t/a": {"1": ids[0]}, "t/b": {"3": ids[3]}} and appends == {}  # 2 is written twice
    history = append_txns([("t/x", "1:0"), ("t/y", "2:0")], [("t/x", "3:0")])
    first, second = (op.id for op in history.ops)
    sets, appends = unique_writes(history.ops)
    assert appends == {"t/x": {"1:0": first, "3:0": second}, "t/y": {"2:0": first}}


def test_each_register_value_once_is_valid(tmp_path: Path) -> None:
    log = Log().write(("t/a", "1")).write(("t/a", "2"), ("t/b", "3")).write(("t/a", "4"))
    dump(tmp_path, "c1", log.batches)
    history = register_writes(("t/a", 1, "ok"), ("t/a", 2, "ok"), ("t/b", 3, "info"), ("t/a", 4, "ok"))
    verdict = check_at_most_once(history, tmp_path)
    assert verdict.valid is True and verdict.details["records_checked"] == 4, verdict.details


def test_a_register_value_applied_again_after_another_write_is_caught(tmp_path: Path) -> None:
    """The resent Envelope lands after the next write: the register goes back to an older value."""
    log = Log().write(("t/a", "1")).write(("t/a", "2")).write(("t/a", "1"))
    dump(tmp_path, "c1", log.batches)
    verdict = check_at_most_once(register_writes(("t/a", 1, "info"), ("t/a", 2, "ok")), tmp_path)
    assert verdict.valid is False and verdict.details["anomaly_types"] == ["applied-twice"]
    (example,) = verdict.details["anomalies"]["applied-twice"]
    assert example == {"key": "t/a", "value": "1", "op": 0, "offsets": [2, 4], "how": "one value in two records"}
    assert "applied-twice: t/a = 1 (op 0) at offsets [2, 4]" in "\n".join(summarize(verdict))


def test_an_append_applied_again_is_a_record_that_changes_nothing(tmp_path: Path) -> None:
    log = Log().write((f"t/{LIST}", "1:0")).write((f"t/{LIST}", "1:0,2:0")).write((f"t/{LIST}", "1:0,2:0"))
    dump(tmp_path, "c1", log.batches)
    history = append_txns([(f"t/{LIST}", "1:0")], [(f"t/{LIST}", "2:0")])
    verdict = check_at_most_once(history, tmp_path)
    assert verdict.valid is False
    assert verdict.details["anomalies"]["applied-twice"] == [
        {"key": f"t/{LIST}", "offset": 4, "how": "a record that changes nothing"}
    ]
    dump(tmp_path, "c1", log.batches[:3])
    assert check_at_most_once(history, tmp_path).valid is True


def test_a_duplicate_is_found_across_a_snapshot_from_what_the_tap_saw(tmp_path: Path) -> None:
    """Every final log starts after a snapshot that covers the first copy; the tap saw it committed."""
    log = Log().write(("t/a", "1")).write(("t/b", "5")).write(("t/a", "2")).write(("t/a", "1")).write(("t/a", "6"))
    dump(tmp_path, "c1", log.batches, snapshot_at=5)
    history = register_writes(("t/a", 1, "info"), ("t/b", 5, "ok"), ("t/a", 2, "ok"), ("t/a", 6, "ok"))
    assert check_at_most_once(history, tmp_path).valid is True  # the snapshot alone hides it
    LogTap(tmp_path).add([(snapshot_dump(None), list(log_entries(log.batches[:5], with_records=True)))])
    verdict = check_at_most_once(history, tmp_path)
    assert verdict.valid is False and verdict.details["anomalies"]["applied-twice"][0]["offsets"] == [2, 5]


def test_values_written_twice_and_other_keys_are_not_judged(tmp_path: Path) -> None:
    log = Log().write(("t/a", "7")).write(("t/a", "7")).write(("other/x", "1")).write(("other/x", "1"))
    dump(tmp_path, "c1", log.batches)
    history = register_writes(("t/a", 7, "ok"), ("t/a", 7, "ok"))  # not unique: nothing to hold it to
    verdict = check_from_args(history, SimpleNamespace(dumps=tmp_path, history=tmp_path / "history.jsonl"))
    assert verdict.valid is True and verdict.details["records_checked"] == 0
