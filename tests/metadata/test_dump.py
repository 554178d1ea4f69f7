"""Dumps: one committed-log line per record (read by the log-agreement checker) and the image dump."""

from __future__ import annotations

import hashlib
import json
import random

from checkers.log_agreement import check_log_agreement
from node.metadata.dump import committed_log_jsonl, image_dump_json, log_entries
from node.metadata.image import build_image
from node.metadata.records import FeatureLevelRecord, encode_records
from node.raft.records import LeaderChangeMessage, RecordBatch, encode_control
from tests.metadata.random_controller import RandomController


def test_one_line_per_record_with_offset_epoch_digest_and_leader() -> None:
    records = encode_records([FeatureLevelRecord("a", 1), FeatureLevelRecord("b", 2)])
    batches = [
        RecordBatch(0, 1, (encode_control(LeaderChangeMessage(3, (1, 2, 3))),), control=True),
        RecordBatch(1, 1, records),
    ]
    lines = [json.loads(line) for line in committed_log_jsonl(batches).splitlines()]
    assert lines == [
        {
            "offset": 0,
            "epoch": 1,
            "digest": hashlib.sha256(batches[0].records[0]).hexdigest(),
            "control": True,
            "leader_id": 3,
        },
        {"offset": 1, "epoch": 1, "digest": hashlib.sha256(records[0]).hexdigest(), "control": False},
        {"offset": 2, "epoch": 1, "digest": hashlib.sha256(records[1]).hexdigest(), "control": False},
    ]


def test_the_log_agreement_checker_accepts_equal_logs_batched_differently_and_flags_a_divergence() -> None:
    log = RandomController(random.Random(2)).batches(40)
    rebatched = []
    for batch in log:  # same records, one per batch: the per-record dump must not care
        for i, record in enumerate(batch.records):
            rebatched.append(RecordBatch(batch.base_offset + i, batch.epoch, (record,), batch.control))
    a, b = list(log_entries(log)), list(log_entries(rebatched))
    assert a == b
    assert check_log_agreement({"n1": a, "n2": b}).valid is True
    diverged = [dict(e) for e in b]
    diverged[-1]["digest"] = "0" * 64
    assert check_log_agreement({"n1": a, "n2": diverged}).valid is False


def test_image_dump_is_canonical_json_with_its_digest() -> None:
    image = build_image(RandomController(random.Random(4)).batches(60))
    doc = json.loads(image_dump_json(image))
    assert doc["digest"] == image.digest()
    assert doc["state_digest"] == image.digest(with_position=False)
    assert (doc["last_offset"], doc["last_epoch"]) == (image.last_offset, image.last_epoch)
    assert doc["image"] == json.loads(image.to_json(with_position=False))
    assert hashlib.sha256(image.to_json().encode()).hexdigest() == image.digest()


def test_dumps_with_records_carry_each_record_and_its_batch_and_the_snapshot_they_follow() -> None:
    import base64
    from types import SimpleNamespace

    from node.metadata.dump import node_dump, snapshot_dump
    from node.metadata.snapshot import load_snapshot, snapshot_bytes, snapshot_id

    log = RandomController(random.Random(5)).batches(30)
    entries = list(log_entries(log[10:], with_records=True))
    assert [base64.b64decode(e["record"]) for e in entries] == [r for b in log[10:] for r in b.records]
    assert [e["batch"] for e in entries] == [b.base_offset for b in log[10:] for _ in b.records]
    assert all(e["digest"] == hashlib.sha256(base64.b64decode(e["record"])).hexdigest() for e in entries)
    image = build_image(log[:10])
    snapshot = SimpleNamespace(snapshot_id=snapshot_id(image), data=snapshot_bytes(image))
    doc = snapshot_dump(snapshot)
    assert doc["end_offset"] == log[9].last_offset + 1 and load_snapshot(base64.b64decode(doc["data"])) == image
    assert snapshot_dump(None) == {"end_offset": 0, "epoch": 0, "data": None}
    whole = node_dump(build_image(log), snapshot, log[10:])
    assert whole["committed_log"] == entries and whole["snapshot"] == doc
    assert whole["image"]["digest"] == build_image(log).digest()
