"""lazyfs on a real FUSE mount: what survives a power loss, what does not, and what a crash keeps."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from tests.lazyfs.conftest import fsync_path, needs_root, write_file

pytestmark = [pytest.mark.root, needs_root]


def test_fsynced_data_survives_and_the_unsynced_tail_does_not_though_readers_saw_it(mounted):
    path = mounted.root / "segment"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, b"durable;")
    os.fsync(fd)
    os.write(fd, b"volatile")
    os.close(fd)  # closing syncs nothing
    fsync_path(mounted.root)
    assert path.read_bytes() == b"durable;volatile"
    assert mounted.status()["unsynced_bytes"] == len(b"volatile")

    lost = mounted.power_loss()

    assert path.read_bytes() == b"durable;"
    assert os.stat(path).st_size == len(b"durable;")
    assert lost["lost_bytes"] == len(b"volatile")
    assert mounted.status()["unsynced_bytes"] == 0


def test_fdatasync_through_another_descriptor_makes_the_data_durable(mounted):
    path = mounted.root / "f"
    write_file(path, b"abc")
    fsync_path(mounted.root)
    fd = os.open(path, os.O_RDONLY)
    os.fdatasync(fd)
    os.close(fd)
    mounted.power_loss()
    assert path.read_bytes() == b"abc"


def test_an_unsynced_truncate_and_overwrite_revert_and_synced_ones_stay(mounted):
    path = mounted.root / "f"
    write_file(path, b"0123456789", sync=True)
    fsync_path(mounted.root)
    with open(path, "r+b") as f:
        f.seek(2)
        f.write(b"XY")
        f.truncate(6)
        f.seek(20)
        f.write(b"far")
    assert path.read_bytes() == b"01XY45" + b"\0" * 14 + b"far"
    mounted.power_loss()
    assert path.read_bytes() == b"0123456789"

    os.truncate(path, 4)
    fsync_path(path)
    mounted.power_loss()
    assert path.read_bytes() == b"0123"


def test_a_created_file_vanishes_unless_its_directory_was_fsynced(mounted):
    synced_data = mounted.root / "synced-data-only"
    write_file(synced_data, b"data", sync=True)
    mounted.power_loss()
    assert not synced_data.exists()  # the file's fsync does not make its name durable

    named = mounted.root / "named-only"
    write_file(named, b"data")
    fsync_path(mounted.root)
    mounted.power_loss()
    assert named.read_bytes() == b""  # the name is durable, the data never was

    both = mounted.root / "both"
    write_file(both, b"data", sync=True)
    fsync_path(mounted.root)
    mounted.power_loss()
    assert both.read_bytes() == b"data"


def test_the_quorum_state_replace_pattern_reverts_without_the_dir_fsync_and_stays_with_it(mounted):
    final, tmp = mounted.root / "quorum-state", mounted.root / "quorum-state.tmp"
    write_file(final, b"epoch=1", sync=True)
    fsync_path(mounted.root)

    write_file(tmp, b"epoch=2", sync=True)
    os.replace(tmp, final)
    assert final.read_bytes() == b"epoch=2"
    mounted.power_loss()
    assert final.read_bytes() == b"epoch=1"
    assert not tmp.exists()

    write_file(tmp, b"epoch=3", sync=True)
    os.replace(tmp, final)
    fsync_path(mounted.root)
    mounted.power_loss()
    assert final.read_bytes() == b"epoch=3"
    assert sorted(os.listdir(mounted.root)) == ["quorum-state"]


def test_an_unlink_not_dir_fsynced_comes_back_with_its_durable_data(mounted):
    path = mounted.root / "old-segment"
    write_file(path, b"kept", sync=True)
    fsync_path(mounted.root)
    with open(path, "ab") as f:
        f.write(b"+lost")
    os.unlink(path)
    assert not path.exists()
    mounted.power_loss()
    assert path.read_bytes() == b"kept"

    os.unlink(path)
    fsync_path(mounted.root)
    mounted.power_loss()
    assert not path.exists()
    assert mounted.status()["limbo"] == 0


def test_a_file_unlinked_while_open_stays_readable_and_comes_back(mounted):
    path = mounted.root / "f"
    write_file(path, b"durable", sync=True)
    fsync_path(mounted.root)
    with open(path, "r+b") as f:
        os.unlink(path)
        f.seek(0, os.SEEK_END)
        f.write(b"+more")
        f.flush()
        f.seek(0)
        assert f.read() == b"durable+more"
        mounted.power_loss()
    assert path.read_bytes() == b"durable"


def test_directories_follow_their_parent(mounted):
    d = mounted.root / "d"
    d.mkdir()
    write_file(d / "f", b"x", sync=True)
    fsync_path(d)
    mounted.power_loss()
    assert not d.exists()  # the root was never fsynced: the directory and all it holds are gone

    d.mkdir()
    fsync_path(mounted.root)
    write_file(d / "f", b"x", sync=True)
    fsync_path(d)
    os.unlink(d / "f")
    d.rmdir()
    fsync_path(mounted.root)  # the rmdir is durable, the unlink inside d is not: d stays gone
    mounted.power_loss()
    assert not d.exists()


def test_a_rmdir_not_synced_brings_the_directory_and_its_durable_contents_back(mounted):
    d = mounted.root / "d"
    d.mkdir()
    write_file(d / "f", b"x", sync=True)
    fsync_path(d)
    fsync_path(mounted.root)
    os.unlink(d / "f")
    fsync_path(d)
    write_file(d / "g", b"y", sync=True)
    os.unlink(d / "g")
    d.rmdir()
    mounted.power_loss()
    assert os.listdir(d) == []  # d is back; its durable entries (no f, no g) came with it


def test_a_cross_directory_rename_synced_on_one_side_only(mounted):
    a, b = mounted.root / "a", mounted.root / "b"
    a.mkdir()
    b.mkdir()
    write_file(a / "f", b"data", sync=True)
    for d in (a, b, mounted.root):
        fsync_path(d)

    os.rename(a / "f", b / "f")
    fsync_path(b)  # the new name is durable, the removal of the old one is not
    mounted.power_loss()
    assert (a / "f").read_bytes() == (b / "f").read_bytes() == b"data"
    assert os.stat(a / "f").st_nlink == 2  # one file under two names, as after a crash without a journal

    os.rename(a / "f", b / "g")
    fsync_path(a)  # now the removal from a is durable, the new name in b is not
    mounted.power_loss()
    assert not (a / "f").exists() and not (b / "g").exists()
    assert (b / "f").read_bytes() == b"data"


def test_append_mode_writes_at_the_restored_end(mounted):
    path = mounted.root / "log"
    write_file(path, b"abc", sync=True)
    fsync_path(mounted.root)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    os.write(fd, b"lost")
    mounted.power_loss()
    os.write(fd, b"d")  # same descriptor: the kernel still believes the file is 7 bytes long
    os.close(fd)
    assert path.read_bytes() == b"abcd"


def test_o_dsync_writes_are_durable_when_they_return(mounted):
    path = mounted.root / "f"
    write_file(path, b"")
    fsync_path(mounted.root)
    fd = os.open(path, os.O_WRONLY | os.O_DSYNC)
    os.write(fd, b"synced")
    os.close(fd)
    mounted.power_loss()
    assert path.read_bytes() == b"synced"


def test_kill_9_of_a_writer_loses_nothing_until_the_power_goes(mounted):
    path = mounted.root / "f"
    write_file(path, b"synced;", sync=True)
    fsync_path(mounted.root)
    writer = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import os, sys, time
            fd = os.open({str(path)!r}, os.O_WRONLY | os.O_APPEND)
            os.write(fd, b"unsynced")
            print("written", flush=True)
            time.sleep(600)
        """)],
        stdout=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert writer.stdout is not None and writer.stdout.readline() == b"written\n"
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=30)
    assert path.read_bytes() == b"synced;unsynced"  # the "page cache" outlives the process
    assert mounted.status()["unsynced_bytes"] == len(b"unsynced")
    mounted.power_loss()
    assert path.read_bytes() == b"synced;"


def test_torn_writes_keep_a_seeded_prefix_of_the_unsynced_tail(mounted):
    path = mounted.root / "f"
    tail = bytes(range(200))
    kept = set()
    for seed in range(8):
        write_file(path, b"head", sync=True)
        fsync_path(mounted.root)
        with open(path, "ab") as f:
            f.write(tail)
        result = mounted.power_loss(torn_seed=seed)
        data = path.read_bytes()
        assert data.startswith(b"head") and tail.startswith(data[4:])
        assert result["kept_torn_bytes"] == len(data) - 4
        assert result["lost_bytes"] == len(tail) - result["kept_torn_bytes"]
        kept.add(len(data))
    assert len(kept) > 1  # the seed decides how much of the tail made it to the "disk"


def test_sync_makes_everything_durable(mounted):
    write_file(mounted.root / "f", b"data")
    (mounted.root / "d").mkdir()
    assert mounted.status()["unsynced_entries"] == 2
    mounted.lazy.client.sync()
    assert mounted.status() == {**mounted.status(), "unsynced_bytes": 0, "unsynced_entries": 0}
    mounted.power_loss()
    assert (mounted.root / "f").read_bytes() == b"data" and (mounted.root / "d").is_dir()


def test_unsupported_operations_say_so(mounted):
    write_file(mounted.root / "f", b"")
    with pytest.raises(OSError) as info:
        os.link(mounted.root / "f", mounted.root / "g")
    assert info.value.errno == 95  # EOPNOTSUPP
