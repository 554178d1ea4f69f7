"""Record batches of the metadata log and their byte format.

A batch is the unit of append, fsync, replication and checksum, as in Kafka's v2 message format.
The layout (big-endian) is shared by the on-disk log and the wire:

    base_offset     int64
    batch_length    int32   bytes that follow this field
    epoch           int32   the leader epoch that appended the batch
    magic           int8    = 2
    crc             uint32  CRC32C of base_offset and epoch, then of every byte after this field
                            (unlike Kafka v2, a flipped offset or epoch is caught too)
    attributes      int16   bit 5: control batch
    last_offset_delta int32
    timestamp_ms    int64
    record_count    int32
    records         record_count x (length int32, bytes)
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

import crc32c

MAGIC = 2
CONTROL_FLAG = 0x20
_HEAD = struct.Struct(">qi")  # base_offset, batch_length
_BODY = struct.Struct(">ibIhiqi")  # epoch, magic, crc, attributes, last_offset_delta, ts, count
_AFTER_CRC = struct.Struct(">hiqi")
_LEN = struct.Struct(">i")
_SEED = struct.Struct(">qi")
HEADER_SIZE = _HEAD.size + _BODY.size
MAX_BATCH_BYTES = 8 << 20


@dataclass(frozen=True, slots=True)
class RecordBatch:
    base_offset: int
    epoch: int
    records: tuple[bytes, ...]
    control: bool = False
    timestamp_ms: int = 0

    @property
    def last_offset(self) -> int:
        return self.base_offset + len(self.records) - 1

    @property
    def next_offset(self) -> int:
        return self.base_offset + len(self.records)

    def rebased(self, base_offset: int) -> RecordBatch:
        return RecordBatch(base_offset, self.epoch, self.records, self.control, self.timestamp_ms)


class CorruptBatchError(ValueError):
    """A batch failed its length, magic or CRC32C check."""


def encode_batch(batch: RecordBatch) -> bytes:
    """The batch's bytes; ValueError (as from every encoder here) for one the format cannot hold."""
    if not batch.records:
        raise ValueError("a record batch holds at least one record")
    count = len(batch.records)
    parts = [b""]  # placeholder for the header, filled in once the CRC is known
    try:
        parts.append(_AFTER_CRC.pack(CONTROL_FLAG if batch.control else 0, count - 1, batch.timestamp_ms, count))
        for record in batch.records:
            parts.append(_LEN.pack(len(record)))
            parts.append(record)
        after_crc = b"".join(parts)
        crc = crc32c.crc32c(after_crc, _crc_seed(batch.base_offset, batch.epoch))
        header = _HEAD.pack(batch.base_offset, len(after_crc) + 9) + struct.pack(">ibI", batch.epoch, MAGIC, crc)
    except struct.error as exc:
        raise ValueError(f"cannot encode the batch at offset {batch.base_offset}, epoch {batch.epoch}: {exc}") from None
    return header + after_crc


def _crc_seed(base_offset: int, epoch: int) -> int:
    return crc32c.crc32c(_SEED.pack(base_offset, epoch))


def encoded_size(batch: RecordBatch) -> int:
    return HEADER_SIZE + sum(4 + len(r) for r in batch.records)


def decode_batch(buf: bytes | memoryview, pos: int = 0, *, verify_crc: bool = True) -> tuple[RecordBatch, int]:
    """Decode one batch at `pos`; returns it and the position after it. Raises CorruptBatchError.
    (`verify_crc=False` exists only for a planted bug: every real caller checks the CRC.)"""
    view = memoryview(buf)
    end = len(view)
    if end - pos < HEADER_SIZE:
        raise CorruptBatchError(f"truncated batch header at byte {pos}")
    base_offset, length = _HEAD.unpack_from(view, pos)
    if length < _BODY.size or length > MAX_BATCH_BYTES:
        raise CorruptBatchError(f"implausible batch length {length} at byte {pos}")
    stop = pos + _HEAD.size + length
    if stop > end:
        raise CorruptBatchError(f"truncated batch at byte {pos}: needs {length} bytes, has {end - pos - 12}")
    epoch, magic, crc, attributes, last_delta, ts, count = _BODY.unpack_from(view, pos + _HEAD.size)
    if magic != MAGIC:
        raise CorruptBatchError(f"bad magic {magic} at byte {pos}")
    crc_start = pos + _HEAD.size + 9
    if verify_crc and crc32c.crc32c(view[crc_start:stop], _crc_seed(base_offset, epoch)) != crc:
        raise CorruptBatchError(f"CRC32C mismatch in batch at byte {pos} (base offset {base_offset})")
    if count <= 0 or last_delta != count - 1:
        raise CorruptBatchError(f"bad record count {count} at byte {pos}")
    records = []
    p = pos + HEADER_SIZE
    for _ in range(count):
        if p + 4 > stop:
            raise CorruptBatchError(f"record overruns batch at byte {pos}")
        (rlen,) = _LEN.unpack_from(view, p)
        p += 4
        if rlen < 0 or p + rlen > stop:
            raise CorruptBatchError(f"record overruns batch at byte {pos}")
        records.append(bytes(view[p : p + rlen]))
        p += rlen
    if p != stop:
        raise CorruptBatchError(f"trailing bytes inside batch at byte {pos}")
    return RecordBatch(base_offset, epoch, tuple(records), bool(attributes & CONTROL_FLAG), ts), stop


def decode_batches(buf: bytes | memoryview) -> list[RecordBatch]:
    """Decode a concatenation of batches; any defect raises CorruptBatchError."""
    out = []
    pos = 0
    while pos < len(buf):
        batch, pos = decode_batch(buf, pos)
        out.append(batch)
    return out


# --- control records ---------------------------------------------------------------------------


class ControlType(IntEnum):
    LEADER_CHANGE = 3  # KIP-595: the "dummy" record a new leader appends
    CLUSTER_ID = 100  # kraft-chaos: the clusterId generated by the first leader (KIP-595 bootstrapping)
    READ_MARKER = 101  # kraft-chaos: an entry whose commit confirms a read barrier (read_barrier.py)


_CTRL = struct.Struct(">hh")  # type, version


@dataclass(frozen=True, slots=True)
class LeaderChangeMessage:
    leader_id: int
    voted_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ClusterIdMessage:
    cluster_id: str


@dataclass(frozen=True, slots=True)
class ReadMarkerMessage:
    """Carries nothing: only its commit matters (a linearizable read's proof of leadership)."""


ControlMessage = LeaderChangeMessage | ClusterIdMessage | ReadMarkerMessage


def encode_control(msg: ControlMessage) -> bytes:
    if isinstance(msg, LeaderChangeMessage):
        ids = msg.voted_ids
        return _CTRL.pack(ControlType.LEADER_CHANGE, 0) + struct.pack(f">ii{len(ids)}i", msg.leader_id, len(ids), *ids)
    if isinstance(msg, ReadMarkerMessage):
        return _CTRL.pack(ControlType.READ_MARKER, 0)
    return _CTRL.pack(ControlType.CLUSTER_ID, 0) + msg.cluster_id.encode()


def decode_control(record: bytes) -> ControlMessage | None:
    """Decode a control record; None for a type this version does not know (skipped, not fatal)."""
    if len(record) < _CTRL.size:
        raise CorruptBatchError("control record shorter than its header")
    ctype, _version = _CTRL.unpack_from(record)
    body = record[_CTRL.size :]
    try:
        if ctype == ControlType.LEADER_CHANGE:
            leader_id, n = struct.unpack_from(">ii", body)
            if n < 0 or len(body) != 8 + 4 * n:
                raise CorruptBatchError(f"LeaderChange record with {n} voters in {len(body)} bytes")
            return LeaderChangeMessage(leader_id, struct.unpack_from(f">{n}i", body, 8))
        if ctype == ControlType.CLUSTER_ID:
            return ClusterIdMessage(body.decode())
        if ctype == ControlType.READ_MARKER:
            return ReadMarkerMessage()
    except (struct.error, UnicodeDecodeError) as exc:
        raise CorruptBatchError(f"malformed control record of type {ctype}: {exc}") from None
    return None
