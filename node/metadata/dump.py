"""What a node dumps for the checkers: its committed log (one line per record) and its metadata image.

Committed-log lines are what `checkers/log_agreement.py` reads, in offset order:

    {"offset": 7, "epoch": 2, "digest": "<sha256 hex of the record bytes>", "control": false}
    {"offset": 8, "epoch": 3, "digest": "...", "control": true, "leader_id": 1}

One line per record, not per batch, so nodes that batched the same records differently still agree
record by record; a LeaderChange control record carries the `leader_id` that wrote it. The digest is
over the record's bytes alone; the checker compares (epoch, digest) at each offset.

The image dump is one canonical JSON document: the image (`MetadataImage.as_dict()`) with its
position and its SHA-256 digest, so a checker can compare nodes' states by digest and show the diff.

Nodes write their committed log `with_records`: each line then also carries the record's bytes
(`"record"`, base64) and its batch's base offset (`"batch"`), and `metadata-snapshot.json` holds the
snapshot the log starts after (its id and bytes, base64; `null` data when the log starts at offset
0). Together they let a harness replay the committed log into an image and compare it with the
node's own (`harness/db/kraft_checks.py`), and know the value of every config at every committed
offset. `node_dump` is all three taken at one instant (the `GET /v1/dump` endpoint), so they are
consistent with each other.
The runtime writes the files; nothing here touches the disk.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterable, Iterator
from typing import Any

from node.metadata.image import MetadataImage
from node.raft.records import CorruptBatchError, LeaderChangeMessage, RecordBatch, decode_control

COMMITTED_LOG_DUMP = "committed-log.jsonl"
IMAGE_DUMP = "metadata-image.json"
SNAPSHOT_DUMP = "metadata-snapshot.json"


def log_entries(batches: Iterable[RecordBatch], with_records: bool = False) -> Iterator[dict[str, Any]]:
    """One dump entry per record of the given batches, in order (`with_records`: its bytes too)."""
    for batch in batches:
        offset = batch.base_offset
        for record in batch.records:
            entry: dict[str, Any] = {
                "offset": offset,
                "epoch": batch.epoch,
                "digest": hashlib.sha256(record).hexdigest(),
                "control": batch.control,
            }
            if with_records:  # the batch too: a batch applies atomically, so a replay needs its bounds
                entry["record"] = base64.b64encode(record).decode("ascii")
                entry["batch"] = batch.base_offset
            if batch.control:
                try:
                    message = decode_control(record)
                except CorruptBatchError:
                    message = None
                if isinstance(message, LeaderChangeMessage):
                    entry["leader_id"] = message.leader_id
            yield entry
            offset += 1


def committed_log_jsonl(batches: Iterable[RecordBatch], with_records: bool = False) -> str:
    """The whole committed-log dump as JSON lines (each line ends with a newline)."""
    return "".join(_line(e) for e in log_entries(batches, with_records))


def _line(entry: dict[str, Any]) -> str:
    return json.dumps(entry, sort_keys=True, separators=(",", ":")) + "\n"


def snapshot_dump(snapshot: Any) -> dict[str, Any]:
    """The snapshot a log starts after (`node.raft.storage.LoadedSnapshot`, or None: it starts at 0)."""
    if snapshot is None:
        return {"end_offset": 0, "epoch": 0, "data": None}
    return {
        "end_offset": snapshot.snapshot_id.end_offset,
        "epoch": snapshot.snapshot_id.epoch,
        "data": base64.b64encode(snapshot.data).decode("ascii"),
    }


def snapshot_dump_json(snapshot: Any) -> str:
    return _line(snapshot_dump(snapshot))


def node_dump(image: MetadataImage, snapshot: Any, batches: Iterable[RecordBatch]) -> dict[str, Any]:
    """The image, snapshot and committed log (with records) of one node at one instant."""
    return {
        "image": image_dump(image),
        "snapshot": snapshot_dump(snapshot),
        "committed_log": list(log_entries(batches, with_records=True)),
    }


def image_dump(image: MetadataImage) -> dict[str, Any]:
    return {
        "last_offset": image.last_offset,
        "last_epoch": image.last_epoch,
        "digest": image.digest(),
        "state_digest": image.digest(with_position=False),
        "image": image.as_dict(with_position=False),
    }


def image_dump_json(image: MetadataImage) -> str:
    return json.dumps(image_dump(image), sort_keys=True, separators=(",", ":")) + "\n"
