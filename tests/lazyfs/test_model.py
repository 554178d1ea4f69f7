"""Random operation sequences agree with the in-memory model (tests/lazyfs/model.py), before and after power
losses: what readers see, which calls fail and with which error. Once on a real lazyfs mount (root), once
on the store alone (the model without FUSE: fast, and runs without root)."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from harness.backends.lazyfs.store import LazyStore
from tests.lazyfs.conftest import fsync_path, needs_root
from tests.lazyfs.model import FsModel, ModelError

# Few names, shallow trees: most operations then hit something that exists.
paths = st.lists(st.sampled_from("ab"), min_size=1, max_size=2).map(tuple) | st.sampled_from([("a",), ("b",)])
data = st.binary(max_size=24)
offsets = st.integers(0, 40)
operations = st.one_of(
    st.tuples(st.just("create"), paths, data),
    st.tuples(st.just("write"), paths, offsets, data),
    st.tuples(st.just("write"), paths, offsets, data),
    st.tuples(st.just("create"), paths, data),
    st.tuples(st.just("truncate"), paths, offsets),
    st.tuples(st.just("fsync"), paths | st.just(())),
    st.tuples(st.just("fsync"), paths | st.just(())),
    st.tuples(st.just("mkdir"), paths),
    st.tuples(st.just("mkdir"), paths),
    st.tuples(st.just("rmdir"), paths),
    st.tuples(st.just("unlink"), paths),
    st.tuples(st.just("rename"), paths, paths),
    st.tuples(st.just("rename"), paths, paths),
    st.tuples(st.just("power_loss")),
)


class MountTarget:
    """The operations as system calls on a real lazyfs mount."""

    def __init__(self, mounted) -> None:
        self.mounted = mounted
        self.root = mounted.root

    def path(self, p: tuple[str, ...]) -> Path:
        return self.root.joinpath(*p)

    def create(self, p, data: bytes) -> None:
        fd = os.open(self.path(p), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)

    def write(self, p, offset: int, data: bytes) -> None:
        fd = os.open(self.path(p), os.O_WRONLY)
        try:
            os.pwrite(fd, data, offset)
        finally:
            os.close(fd)

    def truncate(self, p, length: int) -> None:
        os.truncate(self.path(p), length)

    def fsync(self, p) -> None:
        fsync_path(self.path(p))

    def mkdir(self, p) -> None:
        os.mkdir(self.path(p))

    def rmdir(self, p) -> None:
        os.rmdir(self.path(p))

    def unlink(self, p) -> None:
        os.unlink(self.path(p))

    def rename(self, a, b) -> None:
        os.rename(self.path(a), self.path(b))

    def power_loss(self) -> dict:
        return self.mounted.power_loss()

    def status(self) -> dict:
        return self.mounted.status()

    def tree(self) -> dict[str, bytes | None]:
        return real_tree(self.root)


class StoreTarget:
    """The same operations straight on a LazyStore (what the FUSE layer would call; no mount, no root)."""

    def __init__(self, base: Path) -> None:
        (base / "disk").mkdir()
        (base / "limbo").mkdir()
        self.store = LazyStore(base / "disk", base / "limbo", sync_backing=False)

    @staticmethod
    def path(p: tuple[str, ...]) -> str:
        return "/" + "/".join(p)

    def _with_fd(self, fd: int, action) -> None:
        try:
            action(fd)
        finally:
            self.store.release(fd)

    def create(self, p, data: bytes) -> None:
        fd = self.store.create(self.path(p), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        self._with_fd(fd, lambda fd: data and self.store.write(fd, data, 0))

    def write(self, p, offset: int, data: bytes) -> None:
        fd = self.store.open(self.path(p), os.O_WRONLY)
        self._with_fd(fd, lambda fd: data and self.store.write(fd, data, offset))

    def truncate(self, p, length: int) -> None:
        self.store.truncate(self.path(p), length)

    def fsync(self, p) -> None:
        if stat.S_ISDIR(self.store.getattr(self.path(p)).st_mode):
            self.store.fsyncdir(self.path(p))
        else:
            self._with_fd(self.store.open(self.path(p), os.O_RDONLY), lambda fd: self.store.fsync(fd, False))

    def mkdir(self, p) -> None:
        self.store.mkdir(self.path(p), 0o755)

    def rmdir(self, p) -> None:
        self.store.rmdir(self.path(p))

    def unlink(self, p) -> None:
        self.store.unlink(self.path(p))

    def rename(self, a, b) -> None:
        self.store.rename(self.path(a), self.path(b))

    def power_loss(self) -> dict:
        return self.store.power_loss()

    def status(self) -> dict:
        return self.store.status()

    def tree(self) -> dict[str, bytes | None]:
        return real_tree(Path(self.store.disk))


def apply_real(target, op: tuple) -> None:
    name, *args = op
    if name != "power_loss":
        getattr(target, name)(*args)
        return
    lost = target.power_loss()
    for what in ("vanished", "reappeared"):
        if lost[what]:
            event(f"power loss: something {what}")
    if lost["lost_bytes"]:
        event("power loss: data reverted")


def apply_model(model: FsModel, op: tuple) -> None:
    name, *args = op
    if name == "write":
        model.write(args[0], args[1], args[2])
    else:
        getattr(model, name)(*args)


def real_tree(root: Path) -> dict[str, bytes | None]:
    found: dict[str, bytes | None] = {}
    for top, dirs, files in os.walk(root):
        rel = top[len(str(root)) :]
        for d in dirs:
            found[f"{rel}/{d}"] = None
        for f in files:
            found[f"{rel}/{f}"] = Path(top, f).read_bytes()
    return found


def reset(mounted) -> None:
    """An empty, durable root for the next example."""
    for entry in mounted.root.iterdir():
        shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
    mounted.lazy.client.sync()
    assert mounted.status()["limbo"] == 0


def check_against_the_model(target, ops: list[tuple]) -> None:
    model = FsModel()
    for step, op in enumerate(ops):
        try:
            apply_model(model, op)
            expected: set[int] = set()
        except ModelError as e:
            expected = e.errnos
        try:
            apply_real(target, op)
            got = None
        except OSError as e:
            got = e.errno
        where = f"step {step}: {op}"
        if op[0] == "power_loss":
            after = target.status()  # nothing may be pending right after a power loss
            assert after["unsynced_bytes"] == 0 and after["unsynced_entries"] == 0 and after["limbo"] == 0, where
        event(f"{op[0]} {'ok' if got is None else 'failed'}")
        if expected:
            assert got in expected, f"{where}: expected one of {sorted(expected)}, got {got}"
        else:
            assert got is None, f"{where}: the model allows it, the target said errno {got}"
        assert target.tree() == model.tree(), where


EXAMPLES = int(os.environ.get("LAZYFS_EXAMPLES", "300"))
sequences = st.lists(operations, min_size=10, max_size=60)


@pytest.mark.root
@needs_root
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=sequences)
def test_a_mount_agrees_with_the_model(mounted, ops):
    reset(mounted)
    check_against_the_model(MountTarget(mounted), ops)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=sequences)
def test_the_store_alone_agrees_with_the_model(tmp_path, ops):
    check_against_the_model(StoreTarget(Path(tempfile.mkdtemp(dir=tmp_path))), ops)
