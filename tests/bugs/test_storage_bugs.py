"""Each planted metadata / storage bug changes what the node writes or loads; the correct code does not.

The storage tests run the real `FileStorage` on real files; fsyncs are observed by wrapping os.fsync
and os.fdatasync (the real call still runs), as tests/runtime/test_file_storage.py does.
"""

from __future__ import annotations

import pytest

from node.bugs import Bugs
from node.metadata.image import MetadataImage
from node.metadata.records import ConfigRecord, TopicRecord, encode_records
from node.metadata.snapshot import load_snapshot, snapshot_bytes
from node.raft.quorum_state import QuorumStateData
from node.raft.records import HEADER_SIZE, RecordBatch, encode_batch
from node.raft.storage import StorageError
from node.runtime.file_storage import FileStorage, segment_name
from tests.runtime.test_file_storage import fsynced, log_dir, log_of, reload, write_log  # noqa: F401 - fixture

TOPIC = 2  # ConfigResourceType.TOPIC


def bugs(*names: str) -> Bugs:
    return Bugs(frozenset(names))


def test_snapshot_omits_configs() -> None:
    image = MetadataImage()
    records = (
        TopicRecord("t", "00000000-0000-4000-8000-000000000001"),
        ConfigRecord(TOPIC, "t", "retention.ms", "1234"),
    )
    image.apply_batch(RecordBatch(0, 1, encode_records(records)))
    assert load_snapshot(snapshot_bytes(image)).digest() == image.digest()
    lossy = load_snapshot(snapshot_bytes(image, bugs("metadata-snapshot-omits-configs")))
    assert lossy.config(TOPIC, "t", "retention.ms") is None and lossy.topic_id("t") is not None
    assert lossy.digest() != image.digest()


def test_flush_skips_fsync(tmp_path, fsynced) -> None:  # noqa: F811 - the fixture
    for name, expected in ((None, True), ("storage-flush-skips-fsync", False)):
        data = tmp_path / str(name)
        with FileStorage(data, 1, bugs=bugs(name) if name else Bugs()) as s:
            s.load()
            s.append(tuple(log_of(1, 1)))
            fsynced.clear()
            s.flush()
        assert (str(log_dir(data) / segment_name(0)) in fsynced) is expected, (name, fsynced)


def test_quorum_state_renamed_without_fsync(tmp_path, fsynced) -> None:  # noqa: F811
    state = QuorumStateData(-1, 2, 3, 0, (1, 2, 3))
    for name, expected in ((None, True), ("storage-quorum-state-rename-without-fsync", False)):
        data = tmp_path / str(name)
        with FileStorage(data, 1, bugs=bugs(name) if name else Bugs()) as s:
            s.load()
            fsynced.clear()
            s.write_quorum_state(state)
        tmp = str(log_dir(data) / "quorum-state") + ".tmp"
        assert (tmp in fsynced) is expected, (name, fsynced)
        assert reload(data).quorum_state == state  # without a crash the file reads back the same


def test_segment_roll_without_a_directory_fsync(tmp_path, fsynced) -> None:  # noqa: F811
    for name, expected in ((None, True), ("storage-segment-roll-no-dir-fsync", False)):
        data = tmp_path / str(name)
        with FileStorage(data, 1, bugs=bugs(name) if name else Bugs()) as s:
            s.load()
            fsynced.clear()
            s.append(tuple(log_of(1, 1)))  # creates the first segment file
            s.flush()
        assert (str(log_dir(data)) in fsynced) is expected, (name, fsynced)


def test_crc_not_checked_on_load(tmp_path) -> None:
    """A bit flip inside a record of a batch that is followed by a valid one."""
    batches = log_of(2, 3, 2)
    for name in (None, "storage-crc-not-checked-on-load"):
        data = tmp_path / str(name)
        write_log(data, batches)
        seg = log_dir(data) / segment_name(0)
        raw = bytearray(seg.read_bytes())
        raw[len(encode_batch(batches[0])) + HEADER_SIZE + 4 + 3] ^= 0x10  # in the first record of offset 2
        seg.write_bytes(bytes(raw))
        if name is None:
            with pytest.raises(StorageError, match="CRC32C mismatch"):
                reload(data)
        else:
            loaded = reload(data, bugs=bugs(name))
            assert len(loaded.batches) == 3 and loaded.batches[1] != batches[1]  # the flipped byte is served
