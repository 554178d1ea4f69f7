"""A node's metadata image and committed log, written beside its data for the harness's checkers.

`metadata-image.json` is the image as `node.metadata.dump.image_dump` renders it; `committed-log.jsonl` has one
line per committed record (offset, epoch, digest, and the record's bytes), the format the
log-agreement checker reads; `metadata-snapshot.json` is the snapshot that log starts after. Each is
replaced atomically, so a reader never sees half a file.
"""

from __future__ import annotations

import os
from pathlib import Path

from node.metadata.dump import (
    COMMITTED_LOG_DUMP,
    IMAGE_DUMP,
    SNAPSHOT_DUMP,
    committed_log_jsonl,
    image_dump_json,
    snapshot_dump_json,
)
from node.process.process import NodeProcess


def _replace(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def write_dumps(directory: Path, process: NodeProcess) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    _replace(directory / IMAGE_DUMP, image_dump_json(process.image))
    _replace(directory / SNAPSHOT_DUMP, snapshot_dump_json(process.raft.snapshot))
    _replace(directory / COMMITTED_LOG_DUMP, committed_log_jsonl(process.committed_batches(), with_records=True))


__all__ = ["write_dumps"]
