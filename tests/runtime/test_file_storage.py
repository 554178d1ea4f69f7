"""FileStorage on real files in temp dirs: durability, recovery and refusal to start."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from node.raft.quorum_state import QuorumStateData
from node.raft.records import RecordBatch, encode_batch
from node.raft.storage import StorageError
from node.runtime import file_storage
from node.runtime.file_storage import FileStorage, segment_name

SEG0 = segment_name(0)


def batch(offset: int, epoch: int = 1, n: int = 2, size: int = 10) -> RecordBatch:
    return RecordBatch(offset, epoch, tuple(bytes([offset % 256 + i]) * size for i in range(n)), timestamp_ms=offset)


def big_batches(count: int) -> list[RecordBatch]:
    """Equal-sized batches of two records each, so segment sizes are easy to reason about."""
    return [batch(i * 2, n=2, size=40) for i in range(count)]


BIG_BATCH_BYTES = len(encode_batch(big_batches(1)[0]))
TWO_PER_SEGMENT = 2 * BIG_BATCH_BYTES


def log_of(*sizes: int, epoch: int = 1) -> list[RecordBatch]:
    """Contiguous batches with the given record counts."""
    out, offset = [], 0
    for n in sizes:
        out.append(batch(offset, epoch, n))
        offset += n
    return out


def log_dir(data_dir: Path) -> Path:
    return data_dir / "__cluster_metadata-0"


def write_log(data_dir: Path, batches: list[RecordBatch], **kw) -> None:
    with FileStorage(data_dir, 1, **kw) as s:
        s.load()
        s.append(tuple(batches))
        s.flush()


def reload(data_dir: Path, **kw):
    with FileStorage(data_dir, 1, **kw) as s:
        return s.load()


def test_round_trip_of_log_quorum_state_and_cluster_id(tmp_path):
    batches = log_of(3, 1, 4)
    qs = QuorumStateData(leader_id=2, leader_epoch=5, voted_id=2, applied_offset=7, current_voters=(1, 2, 3))
    with FileStorage(tmp_path, 1) as s:
        fresh = s.load()
        assert (fresh.quorum_state, fresh.batches, fresh.cluster_id, fresh.recovered) == (None, (), None, None)
        s.append(tuple(batches[:2]))
        s.append((batches[2],))
        s.flush()
        s.write_quorum_state(qs)
        s.write_cluster_id("AAAAAAAAAAAAAAAAAAAAAA")
        assert s.end_offset == 8
    loaded = reload(tmp_path)
    assert loaded.batches == tuple(batches)
    assert loaded.quorum_state == qs
    assert loaded.cluster_id == "AAAAAAAAAAAAAAAAAAAAAA"
    assert loaded.recovered is None
    assert (log_dir(tmp_path) / SEG0).read_bytes() == b"".join(encode_batch(b) for b in batches)
    props = (tmp_path / "meta.properties").read_text().splitlines()
    assert {"version=1", "node.id=1", "cluster.id=AAAAAAAAAAAAAAAAAAAAAA"} <= set(props)


def test_appends_continue_after_reload(tmp_path):
    write_log(tmp_path, log_of(2, 2))
    with FileStorage(tmp_path, 1) as s:
        s.load()
        with pytest.raises(ValueError, match="does not continue the log at 4"):
            s.append((batch(5),))
        s.append((batch(4, epoch=2),))
        s.flush()
    assert [b.base_offset for b in reload(tmp_path).batches] == [0, 2, 4]


@pytest.fixture
def fsynced(monkeypatch) -> list[str]:
    """Paths passed to os.fsync or os.fdatasync, in order; the real call still runs."""
    calls: list[str] = []

    def counting(real):
        def sync(fd: int) -> None:
            calls.append(os.readlink(f"/proc/self/fd/{fd}"))
            real(fd)

        return sync

    monkeypatch.setattr(os, "fsync", counting(os.fsync))
    monkeypatch.setattr(os, "fdatasync", counting(os.fdatasync))
    return calls


def test_flush_fsyncs_the_segment_and_its_new_directory_entry(tmp_path, fsynced):
    with FileStorage(tmp_path, 1) as s:
        s.load()
        fsynced.clear()
        s.append(tuple(log_of(1, 1)))
        assert fsynced == [], "append alone must not pay for an fsync"
        s.flush()
        seg, d = str(log_dir(tmp_path) / SEG0), str(log_dir(tmp_path))
        assert sorted(fsynced) == sorted([seg, d])
        fsynced.clear()
        s.append((batch(2),))
        s.flush()
        assert fsynced == [seg], "no new segment, so no directory fsync"
        fsynced.clear()
        s.flush()
        assert fsynced == [], "nothing new to make durable"


def test_quorum_state_is_written_by_temp_file_fsync_rename_dir_fsync(tmp_path, fsynced):
    with FileStorage(tmp_path, 1) as s:
        s.load()
        s.write_quorum_state(QuorumStateData(1, 1, 1, 0, (1,)))
        first_inode = (log_dir(tmp_path) / "quorum-state").stat().st_ino
        fsynced.clear()
        s.write_quorum_state(QuorumStateData(-1, 2, 3, 0, (1, 2, 3)))
    qs = log_dir(tmp_path) / "quorum-state"
    assert fsynced == [str(qs) + ".tmp", str(log_dir(tmp_path))]
    assert qs.stat().st_ino != first_inode, "replaced by rename, not rewritten in place"
    assert not (log_dir(tmp_path) / "quorum-state.tmp").exists()
    doc = json.loads(qs.read_text())
    assert doc["leaderId"] == -1 and doc["leaderEpoch"] == 2 and doc["votedId"] == 3
    assert doc["appliedOffset"] == 0 and doc["currentVoters"] == [{"voterId": 1}, {"voterId": 2}, {"voterId": 3}]
    assert doc["data_version"] == 0 and isinstance(doc["crc32c"], int)


def test_a_crashed_quorum_state_write_leaves_the_old_state(tmp_path):
    old = QuorumStateData(1, 4, 1, 0, (1, 2, 3))
    with FileStorage(tmp_path, 1) as s:
        s.load()
        s.write_quorum_state(old)
    (log_dir(tmp_path) / "quorum-state.tmp").write_bytes(b'{"leaderId": 2, "leaderEp')  # died mid-write
    assert reload(tmp_path).quorum_state == old
    assert not (log_dir(tmp_path) / "quorum-state.tmp").exists()


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (lambda raw: b"", "not valid JSON"),
        (lambda raw: raw[: len(raw) // 2], "not valid JSON"),
        (lambda raw: b"\xff\xfe garbage", "not valid JSON"),
        (lambda raw: b"[1, 2]", "not a JSON object"),
        (lambda raw: raw.replace(b'"votedId":2', b'"votedId":3'), "crc32c mismatch"),
        (lambda raw: raw.replace(b',"crc32c":', b',"crc":'), "missing crc32c"),
    ],
)
def test_corrupt_quorum_state_refuses_to_start(tmp_path, edit, reason):
    with FileStorage(tmp_path, 1) as s:
        s.load()
        s.write_quorum_state(QuorumStateData(2, 3, 2, 0, (1, 2, 3)))
    qs = log_dir(tmp_path) / "quorum-state"
    raw = qs.read_bytes()
    qs.write_bytes(edit(raw))
    with pytest.raises(StorageError, match=reason) as e:
        reload(tmp_path)
    assert f"corrupt quorum-state file {qs}" in str(e.value) and "\n" not in str(e.value)
    assert qs.read_bytes() == edit(raw), "a corrupt vote is never reset"


def test_quorum_state_with_a_valid_crc_but_bad_values_is_refused(tmp_path):
    body = {"leaderId": 1, "leaderEpoch": -4, "votedId": 1, "appliedOffset": 0, "currentVoters": [], "data_version": 0}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    doc = {**body, "crc32c": file_storage.crc32c.crc32c(canonical)}
    log_dir(tmp_path).mkdir(parents=True)
    (log_dir(tmp_path) / "quorum-state").write_text(json.dumps(doc))
    with pytest.raises(StorageError, match="leaderEpoch is -4"):
        reload(tmp_path)


def test_torn_tail_at_every_byte_of_the_last_batch_is_recovered(tmp_path):
    batches = log_of(2, 3, 2)
    write_log(tmp_path, batches)
    seg = log_dir(tmp_path) / SEG0
    full = seg.read_bytes()
    boundary = len(full) - len(encode_batch(batches[-1]))
    for cut in range(boundary + 1, len(full)):
        seg.write_bytes(full[:cut])
        loaded = reload(tmp_path)
        assert loaded.batches == tuple(batches[:-1]), cut
        assert loaded.recovered is not None
        assert loaded.recovered.startswith(f"truncated {cut - boundary} torn bytes at offset 5 in {SEG0}")
        assert seg.stat().st_size == boundary
    seg.write_bytes(full[:boundary])
    assert reload(tmp_path).recovered is None


@pytest.mark.parametrize(
    "tail",
    [b"\x00" * 4096, b"\xff" * 100, b"\x02" * 300, b"partial"],
    ids=["zeros", "ones", "magic-bytes", "text"],
)
def test_garbage_after_the_last_batch_is_recovered(tmp_path, tail):
    batches = log_of(2, 2)
    write_log(tmp_path, batches)
    seg = log_dir(tmp_path) / SEG0
    good = seg.read_bytes()
    seg.write_bytes(good + tail)
    loaded = reload(tmp_path)
    assert loaded.batches == tuple(batches)
    assert loaded.recovered is not None and f"truncated {len(tail)} torn bytes at offset 4" in loaded.recovered
    assert seg.read_bytes() == good


def test_a_bit_flip_in_the_last_batch_is_a_corrupt_tail(tmp_path):
    batches = log_of(2, 2)
    write_log(tmp_path, batches)
    seg = log_dir(tmp_path) / SEG0
    raw = bytearray(seg.read_bytes())
    raw[-1] ^= 0x01
    seg.write_bytes(bytes(raw))
    loaded = reload(tmp_path)
    assert loaded.batches == tuple(batches[:1])
    assert "CRC32C mismatch" in (loaded.recovered or "")


@pytest.mark.parametrize("flip", ["record byte", "length field"])
def test_corrupt_middle_batch_refuses_to_start_naming_file_position_and_offset(tmp_path, flip):
    batches = log_of(2, 3, 2)
    write_log(tmp_path, batches)
    seg = log_dir(tmp_path) / SEG0
    raw = bytearray(seg.read_bytes())
    pos = len(encode_batch(batches[0]))  # the second batch starts here, at offset 2
    raw[pos + (40 if flip == "record byte" else 10)] ^= 0x10
    seg.write_bytes(bytes(raw))
    with pytest.raises(StorageError) as e:
        reload(tmp_path)
    message = str(e.value)
    assert f"corrupt log segment {seg} at byte {pos} (offset 2)" in message
    assert "refusing to start" in message and "\n" not in message
    assert seg.read_bytes() == bytes(raw), "nothing may be dropped when refusing"


def test_corruption_in_a_non_last_segment_refuses_to_start(tmp_path):
    batches = big_batches(6)
    write_log(tmp_path, batches, segment_bytes=TWO_PER_SEGMENT)
    segs = sorted(log_dir(tmp_path).glob("*.log"))
    assert len(segs) == 3
    raw = bytearray(segs[0].read_bytes())
    raw[-1] ^= 0x01  # the last batch of the FIRST segment
    segs[0].write_bytes(bytes(raw))
    with pytest.raises(StorageError, match=rf"corrupt log segment {segs[0]} at byte \d+ \(offset 2\).*refusing"):
        reload(tmp_path, segment_bytes=TWO_PER_SEGMENT)


def test_torn_tail_before_an_empty_rolled_segment_is_recovered(tmp_path):
    """A crash right after a roll: the new segment holds nothing valid, so the tail is still torn."""
    batches = big_batches(4)
    write_log(tmp_path, batches, segment_bytes=TWO_PER_SEGMENT)
    segs = sorted(log_dir(tmp_path).glob("*.log"))
    assert [p.name for p in segs] == [segment_name(0), segment_name(4)]
    segs[1].write_bytes(b"\x00" * 50)
    loaded = reload(tmp_path, segment_bytes=TWO_PER_SEGMENT)
    assert loaded.batches == tuple(batches[:2])
    assert [p.name for p in log_dir(tmp_path).glob("*.log")] == [segment_name(0)]
    assert "50 torn bytes at offset 4" in (loaded.recovered or "")


def test_a_missing_segment_refuses_to_start(tmp_path):
    batches = big_batches(6)
    write_log(tmp_path, batches, segment_bytes=TWO_PER_SEGMENT)
    sorted(log_dir(tmp_path).glob("*.log"))[1].unlink()
    with pytest.raises(StorageError, match="starts at offset 8, but the previous segment ends at offset 4"):
        reload(tmp_path, segment_bytes=TWO_PER_SEGMENT)


def test_segments_roll_at_the_configured_size(tmp_path):
    batches = big_batches(7)
    with FileStorage(tmp_path, 1, segment_bytes=TWO_PER_SEGMENT) as s:
        s.load()
        for b in batches:
            s.append((b,))
        s.flush()
        paths = s.segment_paths()
    assert [p.name for p in paths] == [segment_name(o) for o in (0, 4, 8, 12)]
    assert [p.stat().st_size for p in paths] == [TWO_PER_SEGMENT] * 3 + [BIG_BATCH_BYTES]
    assert reload(tmp_path).batches == tuple(batches)


def test_truncate_across_segments(tmp_path):
    batches = big_batches(7)
    with FileStorage(tmp_path, 1, segment_bytes=TWO_PER_SEGMENT) as s:
        s.load()
        s.append(tuple(batches))
        with pytest.raises(ValueError, match="offset 7 is inside the batch at offset 6"):
            s.truncate(7)
        s.truncate(6)  # the second batch of the second segment: drops two later segments too
        assert [p.name for p in s.segment_paths()] == [segment_name(0), segment_name(4)]
        assert s.end_offset == 6
        s.truncate(100)  # past the end: nothing to do
        s.append((batch(6, epoch=2),))
        s.flush()
    assert sorted(p.name for p in log_dir(tmp_path).glob("*.log")) == [segment_name(0), segment_name(4)]
    assert reload(tmp_path).batches == (*batches[:3], batch(6, epoch=2))


def test_truncate_at_a_segment_base_and_to_zero(tmp_path):
    batches = big_batches(4)
    with FileStorage(tmp_path, 1, segment_bytes=TWO_PER_SEGMENT) as s:
        s.load()
        s.append(tuple(batches))
        s.truncate(4)
        assert [p.name for p in s.segment_paths()] == [segment_name(0)]
        s.truncate(0)
        assert s.segment_paths() == [] and s.end_offset == 0
        assert list(log_dir(tmp_path).glob("*.log")) == []
        s.append((batch(0, epoch=3),))
        s.flush()
    assert reload(tmp_path).batches == (batch(0, epoch=3),)


def test_truncate_is_durable_when_it_returns(tmp_path, fsynced):
    write_log(tmp_path, log_of(2, 2, 2))
    with FileStorage(tmp_path, 1) as s:
        s.load()
        fsynced.clear()
        s.truncate(2)
        assert fsynced == [str(log_dir(tmp_path) / SEG0)]
    assert [b.base_offset for b in reload(tmp_path).batches] == [0]


def test_an_epoch_going_backwards_mid_log_refuses_to_start(tmp_path):
    raw = encode_batch(batch(0, epoch=5)) + encode_batch(batch(2, epoch=3)) + encode_batch(batch(4, epoch=5))
    log_dir(tmp_path).mkdir(parents=True)
    (log_dir(tmp_path) / SEG0).write_bytes(raw)
    with pytest.raises(StorageError, match="epoch 3 is below the previous 5"):
        reload(tmp_path)


def test_wrong_cluster_id_is_refused_naming_both(tmp_path):
    with FileStorage(tmp_path, 1, cluster_id="AAA") as s:
        s.load()
        s.write_cluster_id("AAA")
    with pytest.raises(StorageError) as e:
        FileStorage(tmp_path, 1, cluster_id="BBB")
    assert str(e.value) == f"data dir {tmp_path} belongs to cluster AAA, but this node is configured for cluster BBB"
    assert reload(tmp_path, cluster_id="AAA").cluster_id == "AAA"
    with FileStorage(tmp_path, 1) as s, pytest.raises(StorageError, match="refusing to change it to CCC"):
        s.write_cluster_id("CCC")


def test_a_committed_cluster_id_other_than_the_configured_one_is_refused(tmp_path):
    with FileStorage(tmp_path, 1, cluster_id="AAA") as s:
        s.load()
        with pytest.raises(StorageError, match="committed cluster XYZ, but this node is configured for cluster AAA"):
            s.write_cluster_id("XYZ")
    assert "cluster.id" not in (tmp_path / "meta.properties").read_text()


def test_wrong_node_id_and_bad_meta_properties_are_refused(tmp_path):
    FileStorage(tmp_path, 1).close()
    with pytest.raises(StorageError, match="belongs to node 1, but this node is configured as node 2"):
        FileStorage(tmp_path, 2)
    (tmp_path / "meta.properties").write_text("version=1\nthis line is broken\n")
    with pytest.raises(StorageError, match=r"meta.properties:2: not a key=value line"):
        FileStorage(tmp_path, 1)
    (tmp_path / "meta.properties").write_text("version=0\nnode.id=1\n")
    with pytest.raises(StorageError, match="unsupported version '0'"):
        FileStorage(tmp_path, 1)


def test_a_second_opener_in_this_process_is_refused(tmp_path):
    with (
        FileStorage(tmp_path, 1),
        pytest.raises(StorageError, match=f"in use by another process \\(pid {os.getpid()}"),
    ):
        FileStorage(tmp_path, 1)
    FileStorage(tmp_path, 1).close()  # released on close


def test_lock_contention_between_processes(tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from node.runtime.file_storage import FileStorage; "
         f"s = FileStorage({str(tmp_path)!r}, 1); print('locked', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=Path(__file__).parents[2],
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(StorageError, match=f"in use by another process \\(pid {holder.pid}, lock "):
            FileStorage(tmp_path, 1)
    finally:
        holder.communicate("", timeout=30)
    assert holder.returncode == 0
    FileStorage(tmp_path, 1).close()  # the holder exited: the lock is free


def test_use_before_load_is_an_error(tmp_path):
    with FileStorage(tmp_path, 1) as s, pytest.raises(RuntimeError, match="load"):
        s.append((batch(0),))


ops = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 4), st.integers(0, 60)),
        st.tuples(st.just("truncate"), st.integers(0, 40), st.just(0)),
        st.tuples(st.just("reopen"), st.just(0), st.just(0)),
    ),
    max_size=14,
)


@settings(max_examples=40, deadline=None)
@given(steps=ops, segment_bytes=st.sampled_from([60, 150, 1 << 20]))
def test_log_matches_a_list_model_across_appends_truncations_and_reopens(steps, segment_bytes):
    with tempfile.TemporaryDirectory() as d:
        model: list[RecordBatch] = []
        s = FileStorage(d, 1, segment_bytes=segment_bytes)
        try:
            assert s.load().batches == ()
            for op, a, b in steps:
                end = model[-1].next_offset if model else 0
                if op == "append":
                    new = RecordBatch(end, 1, tuple(bytes([i]) * b for i in range(a)))
                    s.append((new,))
                    model.append(new)
                elif op == "truncate":
                    boundaries = [x.base_offset for x in model]
                    if a < end and a not in boundaries:
                        with pytest.raises(ValueError, match="inside the batch"):
                            s.truncate(a)
                        continue
                    s.truncate(a)
                    model = [x for x in model if x.base_offset < a]
                else:
                    s.flush()
                    s.close()
                    s = FileStorage(d, 1, segment_bytes=segment_bytes)
                    loaded = s.load()
                    assert loaded.batches == tuple(model)
                    assert loaded.recovered is None
                assert s.end_offset == (model[-1].next_offset if model else 0)
            s.flush()
        finally:
            s.close()
        assert reload(Path(d), segment_bytes=segment_bytes).batches == tuple(model)


def test_load_makes_what_it_read_durable(tmp_path, fsynced):
    """A killed process may leave writes in the page cache only; the node acknowledges what it loads
    at once, so load() must fsync every segment (and the directory) before handing it over."""
    with FileStorage(tmp_path, 1, segment_bytes=200) as s:
        s.load()
        s.append(tuple(log_of(1, 1, 1, 1, 1, 1)))
        s.flush()
    segments = sorted(str(p) for p in log_dir(tmp_path).glob("*.log"))
    assert len(segments) > 1
    fsynced.clear()
    with FileStorage(tmp_path, 1, segment_bytes=200) as s:
        s.load()
    assert set(segments) <= set(fsynced) and str(log_dir(tmp_path)) in fsynced
