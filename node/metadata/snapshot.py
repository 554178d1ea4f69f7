"""Metadata snapshots (KIP-630, as KIP-595 and KIP-631 refer to it): the image at (end offset, epoch).

A snapshot replaces the log before its end offset: a replica loads it and fetches the log from there.
It is produced and parsed as bytes; the runtime writes the file (`snapshot_file_name`) with fsync.

Layout (big-endian):

    magic           4 bytes  b"KCSN"
    version         int16    = 0
    end_offset      int64    offset after the last record the snapshot covers (Kafka's snapshot id)
    epoch           int32    epoch of that last record
    record_count    int64    metadata records in the body
    body_length     int64
    crc             uint32   CRC32C of the header fields above, then of the body
    body            raft record batches (`node.raft.records` format, each with its own CRC32C):
                    first, if the cluster has an id, a control batch holding its ClusterId record;
                    then the image as metadata records (`MetadataImage.to_records()`), which recreate
                    it when replayed into an empty image.

Every defect (short file, bad magic/version, checksum, batch, record, or a body that does not
replay) raises `SnapshotError` with a one-line reason. For FetchSnapshot-style transfer the bytes are
served in chunks (`read_chunk`) and reassembled in order by a `SnapshotAssembler`.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass

import crc32c

from node.bugs import NO_BUGS, Bugs
from node.metadata.image import MetadataDelta, MetadataImage, MetadataImageError
from node.metadata.records import ConfigRecord, MetadataRecordError, encode_record
from node.protocol.broker_api import SnapshotId  # the id Raft's messages and storage carry: one class
from node.raft.records import (
    MAX_BATCH_BYTES,
    ClusterIdMessage,
    CorruptBatchError,
    RecordBatch,
    decode_batch,
    encode_batch,
    encode_control,
)

MAGIC = b"KCSN"
VERSION = 0
SUFFIX = ".checkpoint"
_HEADER = struct.Struct(">4shqiqqI")
_CRC_COVERED = _HEADER.size - 4
HEADER_SIZE = _HEADER.size
RECORDS_PER_BATCH = 1000
_BATCH_BUDGET = MAX_BATCH_BYTES // 2
_NAME = re.compile(r"(\d{20})-(\d{10})\.checkpoint")


class SnapshotError(ValueError):
    """A snapshot (or snapshot file name, or chunk) that cannot be trusted."""


def snapshot_id(image: MetadataImage) -> SnapshotId:
    return SnapshotId(image.last_offset + 1, image.last_epoch)


def snapshot_file_name(end_offset: int, epoch: int) -> str:
    """Kafka's naming: `<20-digit end offset>-<10-digit epoch>.checkpoint`."""
    if end_offset < 0 or epoch < 0:
        raise SnapshotError(f"snapshot id ({end_offset}, {epoch}) is negative")
    return f"{end_offset:020d}-{epoch:010d}{SUFFIX}"


def parse_snapshot_file_name(name: str) -> SnapshotId:
    match = _NAME.fullmatch(name)
    if match is None:
        raise SnapshotError(f"{name!r} is not a snapshot file name (<20 digits>-<10 digits>{SUFFIX})")
    return SnapshotId(int(match[1]), int(match[2]))


# --- writing -----------------------------------------------------------------------------------


def _batches(image: MetadataImage, bugs: Bugs = NO_BUGS) -> Iterator[RecordBatch]:
    offset = 0
    if image.cluster_id is not None:
        yield RecordBatch(offset, image.last_epoch, (encode_control(ClusterIdMessage(image.cluster_id)),), True)
        offset += 1
    pending: list[bytes] = []
    size = 0
    for record in image.to_records():
        if isinstance(record, ConfigRecord) and "metadata-snapshot-omits-configs" in bugs:
            continue
        payload = encode_record(record)
        if pending and (len(pending) >= RECORDS_PER_BATCH or size + len(payload) > _BATCH_BUDGET):
            yield RecordBatch(offset, image.last_epoch, tuple(pending))
            offset += len(pending)
            pending, size = [], 0
        pending.append(payload)
        size += len(payload) + 4
    if pending:
        yield RecordBatch(offset, image.last_epoch, tuple(pending))


def snapshot_bytes(image: MetadataImage, bugs: Bugs = NO_BUGS) -> bytes:
    """The snapshot of `image` at (last_offset + 1, last_epoch)."""
    if image.last_offset < 0:
        raise SnapshotError("cannot snapshot an image that has applied nothing")
    parts = []
    count = 0
    for batch in _batches(image, bugs):
        parts.append(encode_batch(batch))
        count += 0 if batch.control else len(batch.records)
    body = b"".join(parts)
    sid = snapshot_id(image)
    covered = _HEADER.pack(MAGIC, VERSION, sid.end_offset, sid.epoch, count, len(body), 0)[:_CRC_COVERED]
    crc = crc32c.crc32c(body, crc32c.crc32c(covered))
    return covered + struct.pack(">I", crc) + body


# --- reading -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SnapshotHeader:
    snapshot_id: SnapshotId
    record_count: int
    body_length: int


def read_header(data: bytes | bytearray | memoryview) -> SnapshotHeader:
    """Check the header and the whole-file CRC32C; returns what the header says."""
    view = memoryview(data)
    if len(view) < HEADER_SIZE:
        raise SnapshotError(f"snapshot is {len(view)} bytes, shorter than its {HEADER_SIZE}-byte header")
    magic, version, end_offset, epoch, count, body_length, crc = _HEADER.unpack_from(view)
    if magic != MAGIC:
        raise SnapshotError(f"bad snapshot magic {bytes(magic)!r}")
    if version != VERSION:
        raise SnapshotError(f"snapshot version {version} is not supported (knows {VERSION})")
    if body_length != len(view) - HEADER_SIZE:
        raise SnapshotError(f"snapshot body is {len(view) - HEADER_SIZE} bytes, header says {body_length}")
    if crc32c.crc32c(view[HEADER_SIZE:], crc32c.crc32c(view[:_CRC_COVERED])) != crc:
        raise SnapshotError(f"snapshot CRC32C mismatch (end offset {end_offset}, epoch {epoch})")
    if end_offset <= 0 or epoch < 0 or count < 0:
        raise SnapshotError(f"implausible snapshot id ({end_offset}, {epoch}) or record count {count}")
    return SnapshotHeader(SnapshotId(end_offset, epoch), count, body_length)


def load_snapshot(data: bytes | bytearray | memoryview) -> MetadataImage:
    """Rebuild the image a snapshot holds; any defect raises SnapshotError."""
    header = read_header(data)
    view = memoryview(data)
    image = MetadataImage()
    delta = MetadataDelta(image)
    pos = HEADER_SIZE
    count = 0
    try:
        while pos < len(view):
            batch, pos = decode_batch(view, pos)
            delta.replay_batch(batch)
            count += 0 if batch.control else len(batch.records)
    except (CorruptBatchError, MetadataImageError, MetadataRecordError) as exc:
        raise SnapshotError(f"snapshot {header.snapshot_id.end_offset}-{header.snapshot_id.epoch}: {exc}") from None
    if count != header.record_count:
        raise SnapshotError(f"snapshot holds {count} records, header says {header.record_count}")
    delta.set_position(header.snapshot_id.end_offset - 1, header.snapshot_id.epoch)
    image.apply_delta(delta)
    return image


# --- FetchSnapshot-style transfer --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SnapshotChunk:
    """Bytes [position, position + len(data)) of a snapshot of `size` bytes."""

    snapshot_id: SnapshotId
    position: int
    size: int
    data: bytes


def read_chunk(snapshot: bytes, sid: SnapshotId, position: int, max_bytes: int) -> SnapshotChunk:
    """What a leader answers to FetchSnapshot(snapshot id, position)."""
    if position < 0 or position > len(snapshot):
        raise SnapshotError(f"position {position} is outside the {len(snapshot)}-byte snapshot {sid}")
    if max_bytes <= 0:
        raise SnapshotError(f"max_bytes {max_bytes} must be positive")
    return SnapshotChunk(sid, position, len(snapshot), bytes(snapshot[position : position + max_bytes]))


def chunks(snapshot: bytes, sid: SnapshotId, max_bytes: int) -> Iterator[SnapshotChunk]:
    position = 0
    while True:
        chunk = read_chunk(snapshot, sid, position, max_bytes)
        yield chunk
        position += len(chunk.data)
        if position >= len(snapshot):
            return


class SnapshotAssembler:
    """The follower's side: accepts chunks in order, then verifies and loads the whole snapshot."""

    def __init__(self, sid: SnapshotId) -> None:
        self.snapshot_id = sid
        self.size: int | None = None
        self._parts: list[bytes] = []
        self.position = 0

    @property
    def done(self) -> bool:
        return self.size is not None and self.position == self.size

    def add(self, chunk: SnapshotChunk) -> None:
        if chunk.snapshot_id != self.snapshot_id:
            raise SnapshotError(f"chunk of snapshot {chunk.snapshot_id}, expected {self.snapshot_id}")
        if self.size is not None and chunk.size != self.size:
            raise SnapshotError(f"chunk says the snapshot is {chunk.size} bytes, earlier ones said {self.size}")
        if chunk.position != self.position:
            raise SnapshotError(f"chunk at position {chunk.position}, expected {self.position}")
        if self.position + len(chunk.data) > chunk.size or (not chunk.data and self.position < chunk.size):
            raise SnapshotError(f"chunk of {len(chunk.data)} bytes at {chunk.position} does not fit {chunk.size}")
        self.size = chunk.size
        self._parts.append(chunk.data)
        self.position += len(chunk.data)

    def data(self) -> bytes:
        if not self.done:
            raise SnapshotError(f"snapshot {self.snapshot_id} incomplete: {self.position} of {self.size} bytes")
        return b"".join(self._parts)

    def load(self) -> MetadataImage:
        """Verify the assembled snapshot against its id and load it."""
        data = self.data()
        found = read_header(data).snapshot_id
        if found != self.snapshot_id:
            raise SnapshotError(f"assembled snapshot is {found}, expected {self.snapshot_id}")
        return load_snapshot(data)
