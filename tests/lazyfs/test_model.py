"""Random operation sequences on a real lazyfs mount agree with the in-memory model (tests/lazyfs/model.py),
before and after power losses: what readers see, which calls fail and with which error."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.lazyfs.conftest import fsync_path, needs_root
from tests.lazyfs.model import FsModel, ModelError

pytestmark = [pytest.mark.root, needs_root]

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


def apply_real(root: Path, op: tuple, mounted) -> None:
    name, *args = op

    def real(p: tuple[str, ...]) -> Path:
        return root.joinpath(*p)

    if name == "create":
        fd = os.open(real(args[0]), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.write(fd, args[1])
        finally:
            os.close(fd)
    elif name == "write":
        fd = os.open(real(args[0]), os.O_WRONLY)
        try:
            os.pwrite(fd, args[2], args[1])
        finally:
            os.close(fd)
    elif name == "truncate":
        os.truncate(real(args[0]), args[1])
    elif name == "fsync":
        fsync_path(real(args[0]))
    elif name in ("mkdir", "rmdir", "unlink"):
        getattr(os, name)(real(args[0]))
    elif name == "rename":
        os.rename(real(args[0]), real(args[1]))
    elif name == "power_loss":
        lost = mounted.power_loss()
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


@settings(
    max_examples=int(os.environ.get("LAZYFS_EXAMPLES", "300")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(ops=st.lists(operations, min_size=10, max_size=60))
def test_a_mount_agrees_with_the_model(mounted, ops):
    reset(mounted)
    model = FsModel()
    for step, op in enumerate(ops):
        try:
            apply_model(model, op)
            expected: set[int] = set()
        except ModelError as e:
            expected = e.errnos
        try:
            apply_real(mounted.root, op, mounted)
            got = None
        except OSError as e:
            got = e.errno
        where = f"step {step}: {op}"
        if op[0] == "power_loss":
            lost = mounted.lazy.client.call("status")  # after the loss: nothing may be pending
            assert lost["unsynced_bytes"] == 0 and lost["unsynced_entries"] == 0 and lost["limbo"] == 0, where
        event(f"{op[0]} {'ok' if got is None else 'failed'}")
        if expected:
            assert got in expected, f"{where}: expected one of {sorted(expected)}, got {got}"
        else:
            assert got is None, f"{where}: the model allows it, the mount said errno {got}"
        assert real_tree(mounted.root) == model.tree(), where
