"""The FUSE side of lazyfs: fusepy operations that pass every call to a `LazyStore` (needs libfuse2).

Every operation is counted while it runs, so a power loss can wait until the requests the kernel had
already handed over (say, a write of a process killed a moment ago) are done: a write must not land
on the state the power loss just restored.
"""

from __future__ import annotations

import errno
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import fuse  # fusepy

from harness.backends.lazyfs.store import LazyStore

log = logging.getLogger("lazyfs")

# Mount options: no kernel caching of data or names, so what the store restores is what readers see.
MOUNT_OPTIONS: dict[str, Any] = {
    "fsname": "kchaos-lazyfs",
    "subtype": "lazyfs",
    "direct_io": True,
    "attr_timeout": 0,
    "entry_timeout": 0,
    "negative_timeout": 0,
    "hard_remove": True,
    "big_writes": True,
    "max_write": 131072,
    "max_read": 131072,
}
QUIESCE_TIMEOUT_S = 10.0
_STAT_FIELDS = ("st_mode", "st_nlink", "st_size", "st_uid", "st_gid", "st_blocks", "st_rdev")


def _fd(fi: Any) -> int | None:
    return None if fi is None else int(fi.fh)


class LazyOperations(fuse.Operations):
    """fusepy's operations (raw_fi: the fuse_file_info struct is passed, its `fh` is the backing fd)."""

    use_ns = True
    flag_nullpath_ok = 1  # an unlinked file that is still open is reached by its descriptor alone

    def __init__(self, store: LazyStore, on_init: Callable[[], None] | None = None) -> None:
        self.store = store
        self._on_init = on_init
        self._running = 0
        self._idle = threading.Condition()

    def __call__(self, op: str, *args: Any) -> Any:
        with self._idle:
            self._running += 1
        try:
            return getattr(self, op)(*args)
        finally:
            with self._idle:
                self._running -= 1
                self._idle.notify_all()

    def quiet(self, action: Callable[[], Any], timeout: float = QUIESCE_TIMEOUT_S) -> Any:
        """Run `action` under the store's lock once no operation is running (or after `timeout`)."""
        deadline = time.monotonic() + timeout
        while True:
            with self.store.lock:
                with self._idle:
                    busy = self._running
                if busy == 0 or time.monotonic() > deadline:
                    if busy:
                        log.warning("%d operation(s) still running after %.0f s; going ahead", busy, timeout)
                    return action()
            time.sleep(0.002)

    # -- lifecycle -------------------------------------------------------------------------------------

    def init(self, path: str) -> None:
        if self._on_init is not None:
            self._on_init()

    def destroy(self, path: str) -> None:
        self.store.close_all()

    # -- attributes and listing ------------------------------------------------------------------------

    def getattr(self, path: str | None, fh: Any = None) -> dict[str, Any]:
        st = self.store.getattr(path, _fd(fh))
        attrs = {k: getattr(st, k) for k in _STAT_FIELDS}
        attrs.update(st_atime=st.st_atime_ns, st_mtime=st.st_mtime_ns, st_ctime=st.st_ctime_ns)
        return attrs

    def readdir(self, path: str, fh: int) -> list[str]:
        return [".", "..", *self.store.readdir(path)]

    def statfs(self, path: str) -> dict[str, int]:
        sv = self.store.statfs(path)
        keys = ("f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail", "f_files", "f_ffree", "f_favail")
        return {k: getattr(sv, k) for k in (*keys, "f_flag", "f_namemax")}

    def access(self, path: str, amode: int) -> int:
        self.store.getattr(path)
        return 0

    # -- files ----------------------------------------------------------------------------------------

    def open(self, path: str, fi: Any) -> int:
        fi.fh = self.store.open(path, fi.flags)
        return 0

    def create(self, path: str, mode: int, fi: Any) -> int:
        fi.fh = self.store.create(path, fi.flags, mode)
        return 0

    def read(self, path: str | None, size: int, offset: int, fi: Any) -> bytes:
        return self.store.read(int(fi.fh), size, offset)

    def write(self, path: str | None, data: bytes, offset: int, fi: Any) -> int:
        return self.store.write(int(fi.fh), data, offset)

    def truncate(self, path: str | None, length: int, fi: Any = None) -> None:
        self.store.truncate(path, length, _fd(fi))

    def fsync(self, path: str | None, datasync: int, fi: Any) -> None:
        self.store.fsync(int(fi.fh), bool(datasync))

    def flush(self, path: str | None, fi: Any) -> int:
        return 0  # close(2) makes nothing durable

    def release(self, path: str | None, fi: Any) -> None:
        self.store.release(int(fi.fh))

    def chmod(self, path: str, mode: int) -> None:
        self.store.chmod(path, mode)

    def chown(self, path: str, uid: int, gid: int) -> None:
        self.store.chown(path, uid, gid)

    def utimens(self, path: str, times: tuple[int, int] | None = None) -> None:
        self.store.utimens(path, times)

    # -- directories ------------------------------------------------------------------------------------

    def opendir(self, path: str) -> int:
        self.store.getattr(path)
        return 0

    def releasedir(self, path: str | None, fh: int) -> int:
        return 0

    def fsyncdir(self, path: str | None, datasync: int, fh: int) -> None:
        if path is None:
            raise fuse.FuseOSError(errno.EBADF)
        self.store.fsyncdir(path)

    def mkdir(self, path: str, mode: int) -> None:
        self.store.mkdir(path, mode)

    def rmdir(self, path: str) -> None:
        self.store.rmdir(path)

    def unlink(self, path: str) -> None:
        self.store.unlink(path)

    def rename(self, old: str, new: str) -> None:
        self.store.rename(old, new)

    # -- not supported (documented limits) --------------------------------------------------------------

    def link(self, target: str, source: str) -> None:
        raise fuse.FuseOSError(errno.ENOTSUP)

    def symlink(self, target: str, source: str) -> None:
        raise fuse.FuseOSError(errno.ENOTSUP)

    def mknod(self, path: str, mode: int, dev: int) -> None:
        raise fuse.FuseOSError(errno.ENOTSUP)


def mount(ops: LazyOperations, mountpoint: str) -> None:
    """Serve `mountpoint` until it is unmounted (or SIGTERM/SIGINT/SIGHUP, which unmount it)."""
    fuse.FUSE(ops, mountpoint, raw_fi=True, foreground=True, nothreads=False, **MOUNT_OPTIONS)
