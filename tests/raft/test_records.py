"""Record batch and control record codecs: round trips and CRC32C / framing checks."""

from __future__ import annotations

import random

import pytest

from node.raft.records import (
    ClusterIdMessage,
    CorruptBatchError,
    LeaderChangeMessage,
    RecordBatch,
    decode_batch,
    decode_batches,
    decode_control,
    encode_batch,
    encode_control,
    encoded_size,
)


def random_batch(rng: random.Random, base: int) -> RecordBatch:
    records = tuple(rng.randbytes(rng.randint(0, 40)) for _ in range(rng.randint(1, 6)))
    return RecordBatch(base, rng.randint(0, 1 << 20), records, rng.random() < 0.3, rng.randint(0, 1 << 40))


def test_records_codec_round_trip():
    rng = random.Random(595)
    batches, base = [], 0
    for _ in range(50):
        batches.append(random_batch(rng, base))
        base = batches[-1].next_offset
    data = b"".join(encode_batch(b) for b in batches)
    assert decode_batches(data) == batches
    assert all(len(encode_batch(b)) == encoded_size(b) for b in batches)


def test_records_codec_crc_detects_any_flipped_byte_after_the_crc():
    data = encode_batch(RecordBatch(7, 3, (b"hello", b"world"), False, 42))
    rng = random.Random(1)
    for pos in rng.sample(range(21, len(data)), 10):  # everything after base, length, epoch, magic, crc
        corrupt = bytearray(data)
        corrupt[pos] ^= 0x40
        with pytest.raises(CorruptBatchError):
            decode_batch(bytes(corrupt))


def test_records_codec_rejects_truncated_and_bad_magic():
    data = encode_batch(RecordBatch(0, 1, (b"abc",)))
    with pytest.raises(CorruptBatchError):
        decode_batch(data[:-1])
    with pytest.raises(CorruptBatchError):
        decode_batch(data[:10])
    bad_magic = bytearray(data)
    bad_magic[16] = 1
    with pytest.raises(CorruptBatchError, match="magic"):
        decode_batch(bytes(bad_magic))


def test_records_codec_refuses_empty_batch():
    with pytest.raises(ValueError):
        encode_batch(RecordBatch(0, 1, ()))


def test_records_control_round_trip():
    for message in (LeaderChangeMessage(3, (1, 3, 5)), LeaderChangeMessage(1, ()), ClusterIdMessage("Zq-9_x")):
        assert decode_control(encode_control(message)) == message


def test_records_unknown_control_type_is_skipped():
    assert decode_control(b"\x00\x07\x00\x00whatever") is None
    with pytest.raises(CorruptBatchError):
        decode_control(b"\x00")


def test_records_batch_offsets():
    b = RecordBatch(10, 2, (b"a", b"b", b"c"))
    assert (b.last_offset, b.next_offset, b.rebased(4).base_offset) == (12, 13, 4)


@pytest.mark.parametrize("pos", [0, 7, 12, 15], ids=["offset-high", "offset-low", "epoch-high", "epoch-low"])
def test_records_codec_crc_covers_base_offset_and_epoch(pos):
    corrupt = bytearray(encode_batch(RecordBatch(7, 3, (b"hello",), False, 42)))
    corrupt[pos] ^= 0x01
    with pytest.raises(CorruptBatchError, match="CRC32C"):
        decode_batch(bytes(corrupt))


@pytest.mark.parametrize(
    "record",
    [b"\x00\x03\x00\x00\x00", b"\x00\x03\x00\x00" + b"\x00\x00\x00\x01\x00\x00\x00\x05", b"\x00\x64\x00\x00\xff\xfe"],
    ids=["short-leader-change", "voter-count-overruns", "cluster-id-not-utf8"],
)
def test_records_malformed_control_record_is_a_corrupt_batch(record):
    with pytest.raises(CorruptBatchError):
        decode_control(record)


@pytest.mark.parametrize(
    "batch",
    [
        RecordBatch(0, 2**31, (b"a",)),  # an epoch past int32 (the fuzzer's peers target met it)
        RecordBatch(2**63, 1, (b"a",)),
        RecordBatch(0, 1, (b"a",), timestamp_ms=2**63),
    ],
    ids=["epoch", "offset", "timestamp"],
)
def test_a_batch_the_format_cannot_hold_is_a_value_error_naming_it(batch):
    """Callers (the codec, the log writer, the fuzzer) catch ValueError for what cannot be encoded; a
    bare struct.error used to escape them."""
    with pytest.raises(ValueError, match=f"cannot encode the batch at offset {batch.base_offset}, epoch {batch.epoch}"):
        encode_batch(batch)
