"""What a node dumps for the checkers: its committed log (one line per record) and its metadata image.

Committed-log lines are what `checkers/log_agreement.py` reads, in offset order:

    {"offset": 7, "epoch": 2, "digest": "<sha256 hex of the record bytes>", "control": false}
    {"offset": 8, "epoch": 3, "digest": "...", "control": true, "leader_id": 1}

One line per record, not per batch, so nodes that batched the same records differently still agree
record by record; a LeaderChange control record carries the `leader_id` that wrote it. The digest is
over the record's bytes alone; the checker compares (epoch, digest) at each offset.

The image dump is one canonical JSON document: the image (`MetadataImage.as_dict()`) with its
position and its SHA-256 digest, so a checker can compare nodes' states by digest and show the diff.
The runtime writes both files; nothing here touches the disk.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from typing import Any

from node.metadata.image import MetadataImage
from node.raft.records import CorruptBatchError, LeaderChangeMessage, RecordBatch, decode_control

COMMITTED_LOG_DUMP = "committed-log.jsonl"
IMAGE_DUMP = "metadata-image.json"


def log_entries(batches: Iterable[RecordBatch]) -> Iterator[dict[str, Any]]:
    """One dump entry per record of the given batches, in order."""
    for batch in batches:
        offset = batch.base_offset
        for record in batch.records:
            entry: dict[str, Any] = {
                "offset": offset,
                "epoch": batch.epoch,
                "digest": hashlib.sha256(record).hexdigest(),
                "control": batch.control,
            }
            if batch.control:
                try:
                    message = decode_control(record)
                except CorruptBatchError:
                    message = None
                if isinstance(message, LeaderChangeMessage):
                    entry["leader_id"] = message.leader_id
            yield entry
            offset += 1


def committed_log_jsonl(batches: Iterable[RecordBatch]) -> str:
    """The whole committed-log dump as JSON lines (each line ends with a newline)."""
    return "".join(json.dumps(e, sort_keys=True, separators=(",", ":")) + "\n" for e in log_entries(batches))


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
