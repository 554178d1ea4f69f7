"""SimFS, the simulator's filesystem: what survives a power loss, what does not, what kill -9 keeps.

The scenarios follow the lazyfs task's tests on a real FUSE mount (tests/lazyfs), so the simulator
and real nodes forget the same things."""

from __future__ import annotations

import os
import random

import pytest

from node.sim.simfs import SimFS
from vocab.faults.kinds import DiskFault

W = os.O_WRONLY | os.O_CREAT


def write_file(fs: SimFS, path: str, data: bytes, *, sync: bool = False, flags: int = W | os.O_TRUNC) -> None:
    fd = fs.open(path, flags)
    fs.write(fd, data)
    if sync:
        fs.fsync(fd)
    fs.close(fd)


@pytest.fixture
def fs() -> SimFS:
    fs = SimFS()
    fs.mkdir("/d")
    fs.fsync_dir("/")
    return fs


def test_fsynced_data_survives_and_the_unsynced_tail_does_not_though_readers_saw_it(fs):
    fd = fs.open("/d/segment", W)
    fs.write(fd, b"durable;")
    fs.fsync(fd)
    fs.write(fd, b"volatile")
    fs.close(fd)
    fs.fsync_dir("/d")
    assert fs.read_file("/d/segment") == b"durable;volatile"
    fs.power_loss()
    assert fs.read_file("/d/segment") == b"durable;"


def test_fdatasync_through_another_descriptor_makes_the_data_durable(fs):
    write_file(fs, "/d/f", b"abc")
    fs.fsync_dir("/d")
    fd = fs.open("/d/f", os.O_RDONLY)
    fs.fdatasync(fd)
    fs.close(fd)
    fs.power_loss()
    assert fs.read_file("/d/f") == b"abc"


def test_an_unsynced_truncate_and_overwrite_revert_and_synced_ones_stay(fs):
    write_file(fs, "/d/f", b"0123456789", sync=True)
    fs.fsync_dir("/d")
    fd = fs.open("/d/f", os.O_WRONLY)
    fs.pwrite(fd, b"XY", 2)
    fs.ftruncate(fd, 6)
    fs.pwrite(fd, b"far", 20)
    assert fs.read_file("/d/f") == b"01XY45" + b"\0" * 14 + b"far"
    fs.power_loss()
    assert fs.read_file("/d/f") == b"0123456789"

    fd = fs.open("/d/f", os.O_WRONLY)
    fs.ftruncate(fd, 4)
    fs.fsync(fd)
    fs.close(fd)
    fs.power_loss()
    assert fs.read_file("/d/f") == b"0123"


def test_a_created_file_vanishes_unless_its_directory_was_fsynced(fs):
    write_file(fs, "/d/synced-data-only", b"data", sync=True)
    fs.power_loss()
    assert not fs.exists("/d/synced-data-only")  # the file's fsync does not make its name durable

    write_file(fs, "/d/named-only", b"data")
    fs.fsync_dir("/d")
    fs.power_loss()
    assert fs.read_file("/d/named-only") == b""  # the name is durable, the data never was

    write_file(fs, "/d/both", b"data", sync=True)
    fs.fsync_dir("/d")
    fs.power_loss()
    assert fs.read_file("/d/both") == b"data"


def test_the_quorum_state_replace_pattern_reverts_without_the_dir_fsync_and_stays_with_it(fs):
    write_file(fs, "/d/quorum-state", b"epoch=1", sync=True)
    fs.fsync_dir("/d")

    write_file(fs, "/d/quorum-state.tmp", b"epoch=2", sync=True)
    fs.replace("/d/quorum-state.tmp", "/d/quorum-state")
    assert fs.read_file("/d/quorum-state") == b"epoch=2"
    fs.power_loss()
    assert fs.read_file("/d/quorum-state") == b"epoch=1"
    assert not fs.exists("/d/quorum-state.tmp")

    write_file(fs, "/d/quorum-state.tmp", b"epoch=3", sync=True)
    fs.replace("/d/quorum-state.tmp", "/d/quorum-state")
    fs.fsync_dir("/d")
    fs.power_loss()
    assert fs.read_file("/d/quorum-state") == b"epoch=3"
    assert fs.listdir("/d") == ["quorum-state"]


def test_a_replace_without_fsync_of_the_temp_file_leaves_an_empty_file(fs):
    """The storage bug a missing fsync before the rename is: the name is durable, the data is not."""
    write_file(fs, "/d/quorum-state", b"epoch=1", sync=True)
    fs.fsync_dir("/d")
    write_file(fs, "/d/quorum-state.tmp", b"epoch=2")  # no fsync
    fs.replace("/d/quorum-state.tmp", "/d/quorum-state")
    fs.fsync_dir("/d")
    fs.power_loss()
    assert fs.read_file("/d/quorum-state") == b""


def test_an_unlink_not_dir_fsynced_comes_back_with_its_durable_data(fs):
    write_file(fs, "/d/old-segment", b"kept", sync=True)
    fs.fsync_dir("/d")
    write_file(fs, "/d/old-segment", b"+lost", flags=os.O_WRONLY | os.O_APPEND)
    fs.unlink("/d/old-segment")
    assert not fs.exists("/d/old-segment")
    fs.power_loss()
    assert fs.read_file("/d/old-segment") == b"kept"

    fs.unlink("/d/old-segment")
    fs.fsync_dir("/d")
    fs.power_loss()
    assert not fs.exists("/d/old-segment")


def test_a_file_unlinked_while_open_stays_writable_and_comes_back(fs):
    write_file(fs, "/d/f", b"durable", sync=True)
    fs.fsync_dir("/d")
    fd = fs.open("/d/f", os.O_RDWR | os.O_APPEND)
    fs.unlink("/d/f")
    fs.write(fd, b"+more")
    assert fs.pread(fd, 100, 0) == b"durable+more"
    fs.power_loss()
    assert fs.read_file("/d/f") == b"durable"


def test_directories_follow_their_parent(fs):
    fs.mkdir("/d/sub/deeper")
    write_file(fs, "/d/sub/deeper/f", b"x", sync=True)
    fs.fsync_dir("/d/sub/deeper")
    fs.fsync_dir("/d/sub")
    fs.power_loss()  # /d was never fsynced after sub was made: sub and everything in it go
    assert fs.listdir("/d") == []
    fs.mkdir("/d/sub")
    fs.fsync_dir("/d")
    fs.power_loss()
    assert fs.listdir("/d/sub") == []


def test_a_cross_directory_rename_synced_on_one_side_only(fs):
    fs.mkdir("/a")
    fs.mkdir("/b")
    write_file(fs, "/a/f", b"data", sync=True)
    for d in ("/a", "/b", "/"):
        fs.fsync_dir(d)
    fs.replace("/a/f", "/b/f")
    fs.fsync_dir("/b")  # the new name is durable, the removal of the old one is not
    fs.power_loss()
    assert fs.read_file("/a/f") == fs.read_file("/b/f") == b"data"
    assert fs.file_at("/a/f") is fs.file_at("/b/f")  # one file under two names


def test_kill_9_loses_nothing_until_the_power_goes(fs):
    write_file(fs, "/d/f", b"synced;", sync=True)
    fs.fsync_dir("/d")
    fd = fs.open("/d/f", os.O_WRONLY | os.O_APPEND)
    fs.write(fd, b"unsynced")
    write_file(fs, "/d/new", b"new file")
    fs.drop_process()  # kill -9: its descriptors go, the page cache stays
    with pytest.raises(OSError, match="Bad file descriptor"):
        fs.write(fd, b"more")
    assert fs.read_file("/d/f") == b"synced;unsynced"
    assert fs.read_file("/d/new") == b"new file"
    fs.power_loss()
    assert fs.read_file("/d/f") == b"synced;"
    assert not fs.exists("/d/new")


def test_torn_writes_keep_a_seeded_prefix_of_the_unsynced_tail():
    tail = bytes(range(200))
    kept = set()
    for seed in range(8):
        fs = SimFS()
        write_file(fs, "/f", b"head", sync=True)
        fs.fsync_dir("/")
        write_file(fs, "/f", tail, flags=os.O_WRONLY | os.O_APPEND)
        fs.power_loss(random.Random(seed))
        data = fs.read_file("/f")
        assert data.startswith(b"head") and tail.startswith(data[4:])
        kept.add(len(data))
    assert len(kept) > 1  # the seed decides how much of the tail made it to the "disk"


def test_deferred_fsyncs_cover_what_was_written_before_them_and_only_when_applied(fs):
    fd = fs.open("/d/log", W)
    fs.fsync_dir("/d")
    fs.write(fd, b"first;")
    fs.begin_deferred()
    fs.fdatasync(fd)
    syncs = fs.end_deferred()
    fs.write(fd, b"second")  # after the fsync began: not covered
    assert fs.file_at("/d/log").durable_content() == b""
    fs.apply_syncs(syncs)
    assert fs.file_at("/d/log").durable_content() == b"first;"
    fs.power_loss()
    assert fs.read_file("/d/log") == b"first;"


def test_a_deferred_fsync_overtaken_by_a_synced_truncation_is_dropped(fs):
    fd = fs.open("/d/log", W)
    fs.fsync_dir("/d")
    fs.write(fd, b"abcdef")
    fs.begin_deferred()
    fs.fsync(fd)
    syncs = fs.end_deferred()
    fs.ftruncate(fd, 2)
    fs.fsync(fd)
    fs.write(fd, b"XYZ")
    fs.apply_syncs(syncs)  # must not make "XYZ" (written after the fsync began) durable
    fs.power_loss()
    assert fs.read_file("/d/log") == b"ab"


def test_a_deferred_directory_fsync_never_undoes_a_later_one(fs):
    fs.begin_deferred()
    fs.fsync_dir("/d")  # taken while /d is empty
    early = fs.end_deferred()
    write_file(fs, "/d/f", b"x", sync=True)
    fs.fsync_dir("/d")
    fs.apply_syncs(early)
    fs.power_loss()
    assert fs.listdir("/d") == ["f"]


def test_marks_follow_truncations_and_power_losses_and_durable_losses_are_collected(fs):
    fd = fs.open("/d/seg", W)
    fs.fsync_dir("/d")
    f = fs.file_at("/d/seg")
    for label in ("a", "b", "c"):
        fs.write(fd, label.encode() * 10)
        f.add_mark(len(f.data), label)
    fs.fsync(fd)
    fs.write(fd, b"d" * 10)
    f.add_mark(len(f.data), "d")
    assert f.durable_marks()[1] == 3
    fs.ftruncate(fd, 15)  # cuts b (and c, d) from the page cache; durable still holds a, b, c
    assert f.mark_items == ["a"]
    items, count = f.durable_marks()
    assert items[:count] == ["a", "b", "c"] and fs.take_lost_marks() == []
    fs.fsync(fd)
    assert fs.take_lost_marks() == ["b", "c"]
    fs.unlink("/d/seg")
    fs.fsync_dir("/d")
    assert fs.take_lost_marks() == ["a"]


def test_raw_edits_are_durable_and_leave_marks_alone(fs):
    write_file(fs, "/d/f", b"0123456789", sync=True)
    fs.fsync_dir("/d")
    f = fs.file_at("/d/f")
    f.add_mark(10, "whole")
    fs.overwrite("/d/f", 3, b"X")
    fs.truncate_file("/d/f", 8)
    fs.power_loss()
    assert fs.read_file("/d/f") == b"012X4567"
    assert f.mark_items == ["whole"]
    fs.overwrite("/d/f", 8, b"89")
    fs.power_loss()
    assert fs.read_file("/d/f") == b"012X456789"


def test_a_disk_fault_fails_the_chosen_calls_with_the_chosen_errno(fs):
    fd = fs.open("/d/f", W)
    fs.fault = DiskFault("fail", ops=("fsync",), errno="EIO")
    fs.write(fd, b"written")  # writes still work
    with pytest.raises(OSError, match="Input/output error") as raised:
        fs.fsync(fd)
    assert fs.take_injected() is raised.value and fs.take_injected() is None
    with pytest.raises(OSError):
        fs.fsync_dir("/d")
    fs.fault = DiskFault("fail", ops=("write",), errno="ENOSPC")
    with pytest.raises(OSError, match="No space left on device"):
        fs.write(fd, b"more")
    fs.fsync(fd)
    fs.fault = DiskFault("fail", ops=("write",), probability=0.5)
    fs.fault_rng = random.Random(4)
    outcomes = []
    for _ in range(40):
        try:
            fs.write(fd, b"x")
            outcomes.append(True)
        except OSError:
            outcomes.append(False)
    assert 5 < outcomes.count(False) < 35
    assert fs.injected == 3 + outcomes.count(False)


def test_flock_is_exclusive_per_open_file_and_released_by_close_or_kill(fs):
    a = fs.open("/d/.lock", os.O_RDWR | os.O_CREAT)
    b = fs.open("/d/.lock", os.O_RDWR)
    fs.flock(a)
    with pytest.raises(BlockingIOError):
        fs.flock(b)
    fs.close(a)
    fs.flock(b)
    fs.drop_process()
    c = fs.open("/d/.lock", os.O_RDWR)
    fs.flock(c)


def test_posix_errors_for_bad_names(fs):
    with pytest.raises(FileNotFoundError):
        fs.read_file("/d/missing")
    with pytest.raises(FileExistsError):
        fs.open("/d", W | os.O_EXCL)
    with pytest.raises(FileExistsError):
        fs.mkdir("/d")
    with pytest.raises(IsADirectoryError):
        fs.unlink("/d")
    with pytest.raises(NotADirectoryError):
        write_file(fs, "/d/f", b"")
        fs.listdir("/d/f")
