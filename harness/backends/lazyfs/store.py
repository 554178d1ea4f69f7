"""The page-cache model behind lazyfs: a backing tree that always holds what readers see, plus a record
of what is durable, so that a power loss can put the tree back to its last-synced state.

Durability rules (the POSIX minimum; ext4 and others often keep more, never less):
- File data and size are durable up to the last fsync/fdatasync of that file (through any descriptor),
  or a write on a descriptor opened with O_SYNC/O_DSYNC. Closing a file syncs nothing.
- A directory's entries (creations, mkdirs, renames in or out, unlinks, rmdirs) are durable as of the
  last fsync of that directory. Syncing a file does not make its name durable.
- Power loss: every file's data goes back to its durable content; every directory's entries go back to
  its durable entries, rebuilt from the root. So a created file whose directory was never synced
  vanishes (even if its data was), a rename reverts, an unlinked file comes back with its durable data.
  An inode durably named in two directories (a cross-directory rename where only one side was synced)
  keeps both names if it is a file (a hard link, as on a filesystem without a journal) and only the
  first one in a depth-first walk in name order if it is a directory.
- chmod, chown and utimens are passed through and not modelled (they are durable at once).

How: the backing tree ("disk") is always the visible state. Before any write or truncate changes bytes
below a file's durable size, the durable bytes are saved (once per byte); the durable size is noted.
An inode that loses its last visible name while some durable directory entry still names it is kept
in "limbo" (a sibling directory on the same filesystem, named by inode number) so it can come back.
Inode numbers of the backing filesystem identify files across renames; an inode is only forgotten when
no durable entry, no visible name and no open descriptor holds it, so a number is never reused while
this store still tracks it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import random
import shutil
import stat
import threading
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Open flags the store handles itself (creation, truncation, append position, sync-on-write) or that the
# backing file must not get (O_DIRECT's alignment rules).
_SYNC_FLAGS = os.O_SYNC | os.O_DSYNC
_STRIPPED = os.O_CREAT | os.O_EXCL | os.O_TRUNC | os.O_APPEND | os.O_NOCTTY | _SYNC_FLAGS | getattr(os, "O_DIRECT", 0)


def _err(code: int) -> OSError:
    return OSError(code, os.strerror(code))


@dataclass
class Unsynced:
    """A file changed since its last sync: the durable size, and the durable bytes since overwritten or cut
    (non-overlapping, sorted by offset, each byte saved once: the first save holds the durable value)."""

    durable_size: int
    size: int
    saved: list[tuple[int, bytes]] = field(default_factory=list)

    def save(self, fd: int, start: int, end: int) -> None:
        """Keep the durable bytes of [start, end) before they change (only what is below the durable size)."""
        end = min(end, self.durable_size)
        for a, b in self._gaps(start, end):
            data = os.pread(fd, b - a, a)
            self._insert(a, data)

    def _gaps(self, start: int, end: int) -> Iterator[tuple[int, int]]:
        pos = start
        for off, data in self.saved:
            if pos >= end:
                return
            stop = off + len(data)
            if stop <= pos:
                continue
            if off > pos:
                yield pos, min(off, end)
            pos = max(pos, stop)
        if pos < end:
            yield pos, end

    def _insert(self, offset: int, data: bytes) -> None:
        index = next((i for i, (off, _) in enumerate(self.saved) if off > offset), len(self.saved))
        self.saved.insert(index, (offset, data))

    @property
    def lost_bytes(self) -> int:
        """Bytes a power loss would change: the un-synced tail and the saved durable bytes."""
        return max(self.size - self.durable_size, 0) + sum(len(d) for _, d in self.saved)


@dataclass
class Handle:
    ino: int
    append: bool
    sync: bool


class LazyStore:
    """See the module docstring. Every public method takes the store's lock; paths are mount-relative
    ('/' is the root) and file descriptors are the backing files' own."""

    def __init__(self, disk: Path | str, limbo: Path | str, *, sync_backing: bool = True) -> None:
        self.disk = os.path.realpath(disk)
        self.limbo = os.path.realpath(limbo)
        self.sync_backing = sync_backing
        self.lock = threading.RLock()
        self._unsynced: dict[int, Unsynced] = {}
        self._durable: dict[int, dict[str, int]] = {}  # directory inode -> its durable entries
        self._refs: Counter[int] = Counter()  # inode -> how many durable entries name it
        self._handles: dict[int, Handle] = {}
        if os.stat(self.disk).st_dev != os.stat(self.limbo).st_dev:
            raise ValueError(f"{self.disk} and {self.limbo} must be on the same filesystem")
        self.root_ino = os.lstat(self.disk).st_ino
        with self.lock:
            self._empty_limbo()
            self._adopt_tree()

    # -- paths ----------------------------------------------------------------------------------------

    def real(self, path: str) -> str:
        return self.disk + path if path != "/" else self.disk

    def _limbo_path(self, ino: int) -> str:
        return os.path.join(self.limbo, str(ino))

    # -- reading ----------------------------------------------------------------------------------------

    def getattr(self, path: str | None, fd: int | None = None) -> os.stat_result:
        with self.lock:
            return os.fstat(fd) if fd is not None else os.lstat(self.real(path or "/"))

    def readdir(self, path: str) -> list[str]:
        with self.lock:
            return os.listdir(self.real(path))

    def read(self, fd: int, size: int, offset: int) -> bytes:
        with self.lock:
            return os.pread(fd, size, offset)

    # -- files ----------------------------------------------------------------------------------------

    def open(self, path: str, flags: int) -> int:
        with self.lock:
            real = self.real(path)
            # Read access too: the durable bytes a write overwrites are read first.
            access = os.O_RDONLY if flags & os.O_ACCMODE == os.O_RDONLY else os.O_RDWR
            fd = os.open(real, (flags & ~_STRIPPED & ~os.O_ACCMODE) | access)
            try:
                handle = self._register(fd, flags)
                if flags & os.O_TRUNC and flags & os.O_ACCMODE != os.O_RDONLY:
                    self._truncate_fd(fd, handle.ino, 0)
            except BaseException:
                self._release(fd)
                raise
            return fd

    def create(self, path: str, flags: int, mode: int) -> int:
        with self.lock:
            real = self.real(path)
            existed = os.path.lexists(real)
            access = flags & os.O_ACCMODE
            fd = os.open(
                real, (flags & ~_STRIPPED & ~os.O_ACCMODE) | os.O_RDWR | os.O_CREAT | (flags & os.O_EXCL), mode
            )
            handle = self._register(fd, flags)
            if existed and flags & os.O_TRUNC and access != os.O_RDONLY:
                self._truncate_fd(fd, handle.ino, 0)
            return fd

    def _register(self, fd: int, flags: int) -> Handle:
        handle = Handle(os.fstat(fd).st_ino, bool(flags & os.O_APPEND), bool(flags & _SYNC_FLAGS))
        self._handles[fd] = handle
        return handle

    def write(self, fd: int, data: bytes, offset: int) -> int:
        with self.lock:
            handle = self._handles[fd]
            if handle.append:  # the kernel's idea of the end may be stale after a power loss; ours is not
                offset = os.fstat(fd).st_size
            record = self._record(fd, handle.ino)
            record.save(fd, offset, offset + len(data))
            written = os.pwrite(fd, data, offset)
            record.size = max(record.size, offset + written)
            if handle.sync:
                self._synced(fd, handle.ino, datasync=True)
            return written

    def truncate(self, path: str | None, length: int, fd: int | None = None) -> None:
        with self.lock:
            if fd is not None:
                self._truncate_fd(fd, self._handles[fd].ino, length)
                return
            own = os.open(self.real(path or "/"), os.O_RDWR)
            try:
                self._truncate_fd(own, os.fstat(own).st_ino, length)
            finally:
                os.close(own)

    def _truncate_fd(self, fd: int, ino: int, length: int) -> None:
        record = self._record(fd, ino)
        record.save(fd, length, record.durable_size)
        os.ftruncate(fd, length)
        record.size = length

    def _record(self, fd: int, ino: int) -> Unsynced:
        record = self._unsynced.get(ino)
        if record is None:
            size = os.fstat(fd).st_size
            record = self._unsynced[ino] = Unsynced(durable_size=size, size=size)
        return record

    def fsync(self, fd: int, datasync: bool) -> None:
        with self.lock:
            self._synced(fd, self._handles[fd].ino, datasync)

    def _synced(self, fd: int, ino: int, datasync: bool) -> None:
        self._unsynced.pop(ino, None)
        if self.sync_backing:
            (os.fdatasync if datasync else os.fsync)(fd)

    def release(self, fd: int) -> None:
        with self.lock:
            self._release(fd)

    def _release(self, fd: int) -> None:
        handle = self._handles.pop(fd, None)
        try:
            nameless = os.fstat(fd).st_nlink == 0
        finally:
            os.close(fd)
        if handle is not None and nameless and not self._is_open(handle.ino):
            self._unsynced.pop(handle.ino, None)  # the inode is freed now; its number may be reused

    def _is_open(self, ino: int) -> bool:
        return any(h.ino == ino for h in self._handles.values())

    # -- metadata passed through ------------------------------------------------------------------------

    def chmod(self, path: str, mode: int) -> None:
        with self.lock:
            os.chmod(self.real(path), mode)

    def chown(self, path: str, uid: int, gid: int) -> None:
        with self.lock:
            os.lchown(self.real(path), uid, gid)

    def utimens(self, path: str, times_ns: tuple[int, int] | None) -> None:
        with self.lock:
            if times_ns is None:
                os.utime(self.real(path), follow_symlinks=False)
            else:
                os.utime(self.real(path), ns=times_ns, follow_symlinks=False)

    def statfs(self, path: str) -> os.statvfs_result:
        return os.statvfs(self.real(path))

    # -- directories ------------------------------------------------------------------------------------

    def mkdir(self, path: str, mode: int) -> None:
        with self.lock:
            real = self.real(path)
            os.mkdir(real, mode)
            self._durable[os.lstat(real).st_ino] = {}  # a new directory durably holds nothing yet

    def unlink(self, path: str) -> None:
        with self.lock:
            real = self.real(path)
            st = os.lstat(real)
            if stat.S_ISDIR(st.st_mode):
                raise _err(errno.EISDIR)
            self._drop_name(real, st)

    def rmdir(self, path: str) -> None:
        with self.lock:
            real = self.real(path)
            st = os.lstat(real)
            if not stat.S_ISDIR(st.st_mode):
                raise _err(errno.ENOTDIR)
            if os.listdir(real):
                raise _err(errno.ENOTEMPTY)
            if path == "/":
                raise _err(errno.EBUSY)
            self._drop_name(real, st)

    def _drop_name(self, real: str, st: os.stat_result) -> None:
        """Remove one visible name; keep the inode in limbo if a durable entry still names it."""
        ino = st.st_ino
        keep = self._refs[ino] > 0 and not os.path.lexists(self._limbo_path(ino))
        if keep:
            os.rename(real, self._limbo_path(ino))
        elif stat.S_ISDIR(st.st_mode):
            os.rmdir(real)
            if not os.path.lexists(self._limbo_path(ino)):
                self._forget([ino])
        else:
            os.unlink(real)
            if st.st_nlink == 1 and not os.path.lexists(self._limbo_path(ino)):
                self._forget([ino])

    def rename(self, old: str, new: str) -> None:
        with self.lock:
            src, dst = self.real(old), self.real(new)
            sst = os.lstat(src)
            try:
                tst: os.stat_result | None = os.lstat(dst)
            except FileNotFoundError:
                tst = None
            if tst is None or tst.st_ino == sst.st_ino or self._refs[tst.st_ino] == 0:
                os.rename(src, dst)
                if tst is not None and tst.st_ino != sst.st_ino and (stat.S_ISDIR(tst.st_mode) or tst.st_nlink == 1):
                    self._forget([tst.st_ino])
                return
            # The target is durably named somewhere: keep its inode in limbo before it is replaced.
            kept = self._limbo_path(tst.st_ino)
            if os.path.lexists(kept):
                os.rename(src, dst)
            elif stat.S_ISDIR(tst.st_mode):
                self._check_dir_replace(src, sst, dst)
                os.rename(dst, kept)
                try:
                    os.rename(src, dst)
                except OSError:
                    os.rename(kept, dst)
                    raise
            else:
                os.link(dst, kept, follow_symlinks=False)
                try:
                    os.rename(src, dst)
                except OSError:
                    os.unlink(kept)
                    raise

    def _check_dir_replace(self, src: str, sst: os.stat_result, dst: str) -> None:
        """The checks rename(2) makes before replacing the directory `dst` (done first, since the store
        moves `dst` aside before the rename itself)."""
        if not stat.S_ISDIR(sst.st_mode):
            raise _err(errno.EISDIR)
        if os.listdir(dst):
            raise _err(errno.ENOTEMPTY)
        if (dst + "/").startswith(src + "/"):
            raise _err(errno.EINVAL)

    def fsyncdir(self, path: str) -> None:
        with self.lock:
            real = self.real(path)
            ino = os.lstat(real).st_ino
            self._set_durable(ino, self._entries(real))
            if self.sync_backing:
                fd = os.open(real, os.O_RDONLY | os.O_DIRECTORY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)

    def _entries(self, real: str) -> dict[str, int]:
        # lstat's inode, not readdir's d_ino: on some filesystems (overlayfs) the two differ.
        return {e.name: e.stat(follow_symlinks=False).st_ino for e in os.scandir(real)}

    def _set_durable(self, ino: int, entries: dict[str, int]) -> None:
        old = self._durable.get(ino, {})
        self._refs.update(entries.values())
        self._refs.subtract(old.values())
        self._durable[ino] = entries
        self._collect(old.values())

    # -- forgetting inodes ------------------------------------------------------------------------------

    def _collect(self, candidates: Iterable[int]) -> None:
        """Remove limbo inodes that no durable entry names any more (and what only they named)."""
        work = [i for i in candidates if self._refs[i] <= 0]
        while work:
            ino = work.pop()
            if self._refs[ino] > 0:
                continue
            self._refs.pop(ino, None)
            kept = self._limbo_path(ino)
            try:
                st = os.lstat(kept)
            except FileNotFoundError:
                continue
            if stat.S_ISDIR(st.st_mode):
                os.rmdir(kept)
            else:
                os.unlink(kept)
                if st.st_nlink > 1:
                    continue  # still visible under another name
            self._forget([ino])

    def _forget(self, inos: Iterable[int]) -> None:
        """Drop what is tracked for inodes that are gone, then collect what only they named durably."""
        orphaned = []
        for ino in inos:
            if not self._is_open(ino):
                self._unsynced.pop(ino, None)
            entries = self._durable.pop(ino, None)
            if entries:
                self._refs.subtract(entries.values())
                orphaned += entries.values()
        self._collect(orphaned)

    # -- power loss, sync, status ------------------------------------------------------------------------

    def power_loss(self, torn_seed: int | None = None) -> dict[str, Any]:
        """Forget everything not durable (see the module docstring). With `torn_seed`, each file keeps a
        random prefix (seeded) of its un-synced tail, as a disk that wrote some of its pages would."""
        with self.lock:
            before = self._visible()
            lost_bytes = sum(r.lost_bytes for r in self._unsynced.values())
            self._move_all_to_limbo()
            rng = random.Random(torn_seed) if torn_seed is not None else None
            kept_tail = 0
            for ino, record in sorted(self._unsynced.items()):
                kept_tail += self._restore_data(self._limbo_path(ino), record, rng)
            self._unsynced.clear()
            self._place(self.root_ino, self.disk, {self.root_ino})
            self._empty_limbo()
            self._adopt_tree()
            after = self._visible()
        return {
            "lost_bytes": lost_bytes - kept_tail,
            "kept_torn_bytes": kept_tail,
            "vanished": sorted(set(before) - set(after)),
            "reappeared": sorted(set(after) - set(before)),
        }

    def _move_all_to_limbo(self) -> None:
        """Every inode of the tree into limbo (one name each), directories after their contents."""
        for top, dirs, files in os.walk(self.disk, topdown=False):
            for name in files + [d for d in dirs if os.path.islink(os.path.join(top, d))]:
                path = os.path.join(top, name)
                kept = self._limbo_path(os.lstat(path).st_ino)
                if os.path.lexists(kept):
                    os.unlink(path)
                else:
                    os.rename(path, kept)
            if top != self.disk:
                os.rename(top, self._limbo_path(os.lstat(top).st_ino))

    def _restore_data(self, path: str, record: Unsynced, rng: random.Random | None) -> int:
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            return 0
        try:
            tail = b""
            if rng is not None and record.size > record.durable_size:
                tail = os.pread(fd, record.size - record.durable_size, record.durable_size)
                tail = tail[: rng.randint(0, len(tail))]
            os.ftruncate(fd, record.durable_size)
            for offset, data in record.saved:
                os.pwrite(fd, data, offset)
            if tail:
                os.pwrite(fd, tail, record.durable_size)
            return len(tail)
        finally:
            os.close(fd)

    def _place(self, dir_ino: int, dir_path: str, placed: set[int]) -> None:
        for name, ino in sorted(self._durable.get(dir_ino, {}).items()):
            kept = self._limbo_path(ino)
            try:
                st = os.lstat(kept)
            except FileNotFoundError:
                continue  # cannot happen while the invariants hold; nothing to put back
            target = os.path.join(dir_path, name)
            if not stat.S_ISDIR(st.st_mode):
                os.link(kept, target, follow_symlinks=False)
            elif ino not in placed:
                placed.add(ino)
                os.rename(kept, target)
                self._place(ino, target, placed)

    def _empty_limbo(self) -> None:
        for entry in os.scandir(self.limbo):
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)

    def _adopt_tree(self) -> None:
        """Take the tree as it is now as durable (at mount, after a power loss, on sync)."""
        self._durable.clear()
        self._refs.clear()
        for top, _, _ in os.walk(self.disk):
            entries = self._entries(top)
            self._durable[os.lstat(top).st_ino] = entries
            self._refs.update(entries.values())

    def _visible(self) -> dict[str, int]:
        """Mount-relative path -> inode of everything visible (directories end with '/')."""
        found: dict[str, int] = {}
        for top, dirs, files in os.walk(self.disk):
            rel = top[len(self.disk) :] or ""
            for name in dirs:
                found[f"{rel}/{name}/"] = os.lstat(os.path.join(top, name)).st_ino
            for name in files:
                found[f"{rel}/{name}"] = os.lstat(os.path.join(top, name)).st_ino
        return found

    def sync_all(self) -> dict[str, Any]:
        """Make everything durable, like sync(2) (which FUSE does not pass to the filesystem)."""
        with self.lock:
            forgotten = sum(r.lost_bytes for r in self._unsynced.values())
            self._unsynced.clear()
            if self.sync_backing:
                os.sync()
            self._adopt_tree()
            self._collect(int(e.name) for e in os.scandir(self.limbo))
            return {"synced_bytes": forgotten}

    def status(self) -> dict[str, Any]:
        """What a power loss now would forget."""
        with self.lock:
            changed = 0
            for top, _, _ in os.walk(self.disk):
                now = self._entries(top)
                durable = self._durable.get(os.lstat(top).st_ino, {})
                changed += sum(1 for k in now.keys() | durable.keys() if now.get(k) != durable.get(k))
            return {
                "unsynced_bytes": sum(r.lost_bytes for r in self._unsynced.values()),
                "unsynced_files": sum(1 for r in self._unsynced.values() if r.lost_bytes),
                "unsynced_entries": changed,
                "limbo": sum(1 for _ in os.scandir(self.limbo)),
                "open_files": len(self._handles),
            }

    def close_all(self) -> None:
        with self.lock:
            for fd in list(self._handles):
                with contextlib.suppress(OSError):
                    self._release(fd)
