"""Snapshots: image -> bytes -> image, corruption detection, file names, chunked transfer, and
replay of the log == load of a snapshot + replay of the suffix."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from node.metadata.image import MetadataImage, build_image
from node.metadata.records import ConfigRecord, FeatureLevelRecord, encode_records
from node.metadata.snapshot import (
    HEADER_SIZE,
    SnapshotAssembler,
    SnapshotError,
    SnapshotId,
    chunks,
    load_snapshot,
    parse_snapshot_file_name,
    read_chunk,
    read_header,
    snapshot_bytes,
    snapshot_file_name,
    snapshot_id,
)
from node.protocol.admin import ConfigResourceType
from node.protocol.broker_api import FetchSnapshotRequest
from node.protocol.broker_api import SnapshotId as MessageSnapshotId
from node.raft.records import RecordBatch
from tests.metadata.random_controller import RandomController


def random_log(seed: int, batches: int) -> list[RecordBatch]:
    return RandomController(random.Random(seed)).batches(batches)


@pytest.fixture(scope="module")
def image() -> MetadataImage:
    return build_image(random_log(2, 300))


def test_round_trip_gives_an_equal_image_with_an_equal_digest(image: MetadataImage) -> None:
    assert image.topics and image.brokers and image.acls and image.config_resources and image.cluster_id
    data = snapshot_bytes(image)
    loaded = load_snapshot(data)
    assert loaded == image
    assert loaded.digest() == image.digest()
    assert loaded.fingerprint() == image.fingerprint()  # what the simulator compares
    assert loaded.to_json() == image.to_json()
    assert snapshot_bytes(loaded) == data  # deterministic
    header = read_header(data)
    assert header.snapshot_id == SnapshotId(image.last_offset + 1, image.last_epoch) == snapshot_id(image)
    assert header.record_count == image.record_count()


def test_a_large_image_spans_many_batches() -> None:
    many = [ConfigRecord(ConfigResourceType.BROKER, "", f"k{i}", "v" * (i % 50)) for i in range(2500)]
    big = build_image([RecordBatch(0, 3, encode_records(many))])
    data = snapshot_bytes(big)
    assert data.count(b"k1") >= 1 and big.record_count() == 2500  # more than two snapshot batches
    assert load_snapshot(data) == big


def test_every_flipped_byte_is_a_snapshot_error() -> None:
    small = build_image(random_log(11, 25))
    data = snapshot_bytes(small)
    rng = random.Random(5)
    for pos in range(len(data)):
        corrupt = bytearray(data)
        corrupt[pos] ^= rng.randrange(1, 256)
        with pytest.raises(SnapshotError) as caught:
            load_snapshot(bytes(corrupt))
        assert "\n" not in str(caught.value)


@pytest.mark.parametrize("cut", [0, 5, HEADER_SIZE - 1, HEADER_SIZE, HEADER_SIZE + 7, -1])
def test_truncated_or_extended_snapshots_are_refused(image: MetadataImage, cut: int) -> None:
    data = snapshot_bytes(image)
    with pytest.raises(SnapshotError):
        load_snapshot(data[:cut])
    with pytest.raises(SnapshotError, match="body is"):
        load_snapshot(data + b"\x00")


def test_empty_image_cannot_be_snapshotted() -> None:
    with pytest.raises(SnapshotError, match="applied nothing"):
        snapshot_bytes(MetadataImage())


def test_a_snapshot_id_is_the_one_raft_and_its_messages_carry(image: MetadataImage) -> None:
    """One class: an id read from a snapshot's header equals the id a FetchSnapshot names (two
    look-alike classes had compared unequal whatever their values)."""
    held = read_header(snapshot_bytes(image)).snapshot_id
    asked = FetchSnapshotRequest(None, 2, 1 << 20, 1, MessageSnapshotId(held.end_offset, held.epoch), 0)
    assert held == asked.snapshot_id and held == snapshot_id(image)
    assert held != MessageSnapshotId(held.end_offset, held.epoch + 1)


def test_file_names_follow_kafka() -> None:
    name = snapshot_file_name(1234, 7)
    assert name == "00000000000000001234-0000000007.checkpoint"
    assert parse_snapshot_file_name(name) == SnapshotId(1234, 7)
    for bad in ["1234-7.checkpoint", "00000000000000001234-0000000007.log", "x" + name]:
        with pytest.raises(SnapshotError, match="not a snapshot file name"):
            parse_snapshot_file_name(bad)
    with pytest.raises(SnapshotError):
        snapshot_file_name(-1, 0)


def test_chunked_transfer_reassembles_and_verifies(image: MetadataImage) -> None:
    data = snapshot_bytes(image)
    sid = snapshot_id(image)
    assembler = SnapshotAssembler(sid)
    for chunk in chunks(data, sid, 1000):
        assert not assembler.done
        assembler.add(chunk)
    assert assembler.done
    assert assembler.load() == image


def test_assembler_refuses_out_of_order_foreign_and_inconsistent_chunks(image: MetadataImage) -> None:
    data = snapshot_bytes(image)
    sid = snapshot_id(image)
    assembler = SnapshotAssembler(sid)
    with pytest.raises(SnapshotError, match="expected 0"):
        assembler.add(read_chunk(data, sid, 100, 100))
    with pytest.raises(SnapshotError, match="expected SnapshotId"):
        assembler.add(read_chunk(data, SnapshotId(sid.end_offset + 1, sid.epoch), 0, 100))
    assembler.add(read_chunk(data, sid, 0, 100))
    with pytest.raises(SnapshotError, match="incomplete"):
        assembler.load()
    with pytest.raises(SnapshotError, match="earlier ones said"):
        assembler.add(read_chunk(data + b"x", sid, 100, 100))
    with pytest.raises(SnapshotError, match="outside"):
        read_chunk(data, sid, len(data) + 1, 10)


def test_assembled_snapshot_with_a_different_id_or_bad_bytes_is_refused(image: MetadataImage) -> None:
    data = snapshot_bytes(image)
    wrong = SnapshotId(5, 1)
    assembler = SnapshotAssembler(wrong)
    for chunk in chunks(data, wrong, 4096):
        assembler.add(chunk)
    with pytest.raises(SnapshotError, match="expected SnapshotId"):
        assembler.load()
    sid = snapshot_id(image)
    corrupt = bytearray(data)
    corrupt[-3] ^= 1
    assembler = SnapshotAssembler(sid)
    for chunk in chunks(bytes(corrupt), sid, 4096):
        assembler.add(chunk)
    with pytest.raises(SnapshotError, match="CRC32C"):
        assembler.load()


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), length=st.integers(2, 120), data=st.data())
def test_replay_of_the_log_equals_snapshot_plus_suffix(seed: int, length: int, data: st.DataObject) -> None:
    log = random_log(seed, length)
    whole = build_image(log)
    cut = data.draw(st.integers(1, len(log) - 1))
    prefix = build_image(log[:cut])
    restored = load_snapshot(snapshot_bytes(prefix))
    assert restored == prefix
    restored.apply_batches(log[cut:])
    assert restored == whole
    assert restored.digest() == whole.digest()


def test_after_loading_a_snapshot_the_log_continues_at_its_end_offset(image: MetadataImage) -> None:
    restored = load_snapshot(snapshot_bytes(image))
    end = snapshot_id(image).end_offset
    restored.apply_batch(RecordBatch(end, image.last_epoch, encode_records([FeatureLevelRecord("f", 2)])))
    assert restored.last_offset == end and restored.features["f"] == 2
