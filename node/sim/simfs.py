"""SimFS: an in-memory, deterministic filesystem with a page cache / platter split, for the simulator.

It implements `node.runtime.fs.FileSystem`, so the simulator runs the real `FileStorage` on it. Every
file and directory keeps two states: what reads see (the page cache) and what survives a power loss
(the platter):

- file data: a write changes the page cache; `fsync`/`fdatasync` of the file makes its current
  content durable. Durable content is kept as a prefix length while the file only grows (the cheap
  common case) and as a copy ("shadow") once an overwrite or a truncation touches durable bytes.
- directory entries: creating, renaming and unlinking a name changes the directory at once; only an
  `fsync` of that directory makes its current entries durable (a new file's data may be durable
  while its name is not, and the other way round).

Crashes: `drop_process()` is kill -9 (the page cache survives: nothing is forgotten, descriptors,
locks and fsyncs still in flight go); `power_loss(rng)` reverts every directory to its durable
entries and every file to its durable content, except that with an `rng` a random byte prefix of a
file's un-synced appends survives (a torn tail, as a disk that wrote some pages of a write does).

Asynchronous fsync, as the simulator's flush model needs it: between `begin_deferred()` and
`end_deferred()` fsyncs are recorded instead of applied, and `apply_syncs()` applies them later (when
the simulated fsync returns). A recorded file sync covers the bytes present when it was issued; one
overtaken by a truncation or overwrite of that file is dropped (the later synchronous fsync that
such a change is followed by decides); a recorded directory sync never undoes a later one.

Marks: a writer may label the byte range ending at `end` of a file with an object (the simulator
labels each record batch and snapshot with what it wrote). Marks follow truncations and power losses,
so `durable_marks()` tells what survives without parsing bytes; raw edits (`overwrite`,
`truncate_file`, the `corrupt` fault) leave them alone: corruption is judged by whether the node
detects it, not by the durability invariants. Durable marks that a sync takes away (a durable
truncation or unlink) are collected in `lost_marks`.

Disk faults: `fault` (a `DiskFault`: kind "fail", ops "fsync"/"write", errno, probability) makes the
matching calls raise `OSError`; `injected` counts the errors raised, `take_injected()` hands over the
last one. Stalls are the simulator's
business (they delay when a flush completes), not SimFS's.
"""

from __future__ import annotations

import errno as errnos
import os
import random
from bisect import bisect_right
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from vocab.faults.kinds import DiskFault

PathLike = str | os.PathLike[str]
_Node = TypeVar("_Node", "SimFile", "SimDir")
_ACCESS = os.O_RDONLY | os.O_WRONLY | os.O_RDWR


class SimFile:
    __slots__ = ("data", "gen", "lock", "mark_ends", "mark_items", "shadow", "shadow_marks", "synced")

    def __init__(self) -> None:
        self.data = bytearray()
        self.synced = 0  # data[:synced] is durable, while shadow is None
        self.shadow: bytes | None = None  # the durable content when it is not a prefix of data
        self.shadow_marks: tuple[list[int], list[Any]] | None = None
        self.gen = 0  # bumped by every change other than an append at the end
        self.mark_ends: list[int] = []
        self.mark_items: list[Any] = []
        self.lock: int | None = None  # the descriptor holding the flock

    def add_mark(self, end: int, item: Any) -> None:
        """Label the bytes up to `end` (after the previous mark) with `item`."""
        if end > len(self.data) or (self.mark_ends and end < self.mark_ends[-1]):
            raise ValueError(f"mark at byte {end} outside the file ({len(self.data)} bytes) or before the last mark")
        self.mark_ends.append(end)
        self.mark_items.append(item)

    def durable_marks(self) -> tuple[list[Any], int]:
        """The marks a power loss now would leave: (items, count); the first `count` items count."""
        if self.shadow_marks is not None:
            items = self.shadow_marks[1]
            return items, len(items)
        return self.mark_items, bisect_right(self.mark_ends, self.synced)

    def durable_content(self) -> bytes:
        return self.shadow if self.shadow is not None else bytes(self.data[: self.synced])

    @property
    def dirty(self) -> bool:
        return self.shadow is not None or self.synced < len(self.data)

    def _keep_durable_copy(self) -> None:
        """Before durable bytes are changed in the page cache: remember the durable content."""
        if self.shadow is None:
            self.shadow = bytes(self.data[: self.synced])
            k = bisect_right(self.mark_ends, self.synced)
            self.shadow_marks = (self.mark_ends[:k], self.mark_items[:k])

    def _cut_marks(self, size: int) -> None:
        k = bisect_right(self.mark_ends, size)
        del self.mark_ends[k:]
        del self.mark_items[k:]


class SimDir:
    __slots__ = ("durable", "entries", "seq", "synced_seq")

    def __init__(self) -> None:
        self.entries: dict[str, SimFile | SimDir] = {}
        self.durable: dict[str, SimFile | SimDir] | None = None  # None: the same as `entries`
        self.seq = 0  # bumped by every change of `entries`
        self.synced_seq = 0  # the `seq` the durable entries were taken at

    def durable_entries(self) -> dict[str, SimFile | SimDir]:
        return self.entries if self.durable is None else self.durable

    def _change(self) -> None:
        if self.durable is None:
            self.durable = dict(self.entries)
        self.seq += 1


@dataclass(slots=True)
class _Open:
    node: SimFile | SimDir
    path: str
    flags: int
    pos: int = 0


@dataclass(frozen=True, slots=True)
class _FileSync:
    file: SimFile
    gen: int
    length: int


@dataclass(frozen=True, slots=True)
class _DirSync:
    dir: SimDir
    seq: int
    entries: dict[str, SimFile | SimDir]


def _parts(path: PathLike) -> list[str]:
    return [p for p in os.fspath(path).split("/") if p and p != "."]


def _error(code: int, path: PathLike | None = None) -> OSError:
    if path is None:
        return OSError(code, os.strerror(code))
    return OSError(code, os.strerror(code), os.fspath(path))


class SimFS:
    """See the module docstring."""

    def __init__(self) -> None:
        self.root = SimDir()
        self.pid = 1  # what getpid() answers (the simulator sets it per incarnation)
        self.fault: DiskFault | None = None
        self.fault_rng = random.Random(0)
        self.injected = 0  # OSErrors raised by `fault`
        self.pending_error: OSError | None = None  # the last one raised, until take_injected()
        self.last_write: tuple[SimFile, int] | None = None  # the file `write` last wrote and where it stopped
        self.lost_marks: list[Any] = []  # durable marks taken away by syncs since the caller last looked
        self.dir_version = 0  # bumped whenever some directory's durable entries change
        self._fds: dict[int, _Open] = {}
        self._next_fd = 3
        self._deferred: list[_FileSync | _DirSync] | None = None

    # --- lookups ---
    def _lookup(self, path: PathLike) -> SimFile | SimDir | None:
        node: SimFile | SimDir = self.root
        for part in _parts(path):
            if not isinstance(node, SimDir):
                return None
            nxt = node.entries.get(part)
            if nxt is None:
                return None
            node = nxt
        return node

    def _parent(self, path: PathLike) -> tuple[SimDir, str]:
        parts = _parts(path)
        if not parts:
            raise _error(errnos.EBUSY, path)
        node: SimFile | SimDir = self.root
        for part in parts[:-1]:
            if not isinstance(node, SimDir):
                raise _error(errnos.ENOTDIR, path)
            nxt = node.entries.get(part)
            if nxt is None:
                raise _error(errnos.ENOENT, path)
            node = nxt
        if not isinstance(node, SimDir):
            raise _error(errnos.ENOTDIR, path)
        return node, parts[-1]

    def _dir(self, path: PathLike) -> SimDir:
        return self._existing(path, SimDir)

    def file_at(self, path: PathLike) -> SimFile:
        """The file a path names now (for the simulator's marks and checks)."""
        return self._existing(path, SimFile)

    def _existing(self, path: PathLike, kind: type[_Node]) -> _Node:
        node = self._lookup(path)
        if node is None:
            raise _error(errnos.ENOENT, path)
        if not isinstance(node, kind):
            raise _error(errnos.ENOTDIR if kind is SimDir else errnos.EISDIR, path)
        return node

    def durable_listing(self, path: PathLike) -> dict[str, SimFile | SimDir]:
        """The entries of directory `path` as a power loss now would leave them ({} if it would not exist)."""
        node: SimFile | SimDir = self.root
        for part in _parts(path):
            if not isinstance(node, SimDir):
                return {}
            nxt = node.durable_entries().get(part)
            if nxt is None:
                return {}
            node = nxt
        return dict(node.durable_entries()) if isinstance(node, SimDir) else {}

    def listing(self, path: PathLike) -> dict[str, SimFile | SimDir]:
        """The entries of directory `path` now ({} if it does not exist)."""
        node = self._lookup(path)
        return dict(node.entries) if isinstance(node, SimDir) else {}

    # --- faults ---
    def _maybe_fail(self, op: str, path: PathLike | None) -> None:
        fault = self.fault
        if fault is None or fault.kind != "fail" or op not in fault.ops:
            return
        if fault.probability < 1.0 and self.fault_rng.random() >= fault.probability:
            return
        self.injected += 1
        self.pending_error = _error(errnos.ENOSPC if fault.errno == "ENOSPC" else errnos.EIO, path)
        raise self.pending_error

    def take_injected(self) -> OSError | None:
        """The error `fault` raised since the last call, if any (so a caller can tell it from a bug)."""
        error, self.pending_error = self.pending_error, None
        return error

    # --- descriptors ---
    def _open_of(self, fd: int) -> _Open:
        try:
            return self._fds[fd]
        except KeyError:
            raise _error(errnos.EBADF) from None

    def open(self, path: PathLike, flags: int, mode: int = 0o644) -> int:
        parent, name = self._parent(path)
        node = parent.entries.get(name)
        writable = flags & _ACCESS != os.O_RDONLY
        if node is None:
            if not flags & os.O_CREAT:
                raise _error(errnos.ENOENT, path)
            node = SimFile()
            parent._change()
            parent.entries[name] = node
        elif flags & os.O_CREAT and flags & os.O_EXCL:
            raise _error(errnos.EEXIST, path)
        elif isinstance(node, SimDir):
            if writable:
                raise _error(errnos.EISDIR, path)
        elif flags & os.O_DIRECTORY:
            raise _error(errnos.ENOTDIR, path)
        elif flags & os.O_TRUNC and writable and node.data:
            self._truncate(node, 0)
        fd = self._next_fd
        self._next_fd += 1
        self._fds[fd] = _Open(node, os.fspath(path), flags)
        return fd

    def close(self, fd: int) -> None:
        o = self._fds.pop(fd, None)
        if o is None:
            raise _error(errnos.EBADF)
        if isinstance(o.node, SimFile) and o.node.lock == fd:
            o.node.lock = None

    def _writable_file(self, fd: int) -> tuple[_Open, SimFile]:
        o = self._open_of(fd)
        if o.flags & _ACCESS == os.O_RDONLY or not isinstance(o.node, SimFile):
            raise _error(errnos.EBADF, o.path)
        return o, o.node

    def write(self, fd: int, data: bytes | memoryview) -> int:
        o, f = self._writable_file(fd)
        if self.fault is not None:
            self._maybe_fail("write", o.path)
        pos = len(f.data) if o.flags & os.O_APPEND else o.pos
        n = _write_at(f, pos, data)
        o.pos = pos + n
        self.last_write = (f, o.pos)
        return n

    def pwrite(self, fd: int, data: bytes, offset: int) -> int:
        o, f = self._writable_file(fd)
        if self.fault is not None:
            self._maybe_fail("write", o.path)
        return _write_at(f, offset, data)

    def pread(self, fd: int, n: int, offset: int) -> bytes:
        o = self._open_of(fd)
        if not isinstance(o.node, SimFile):
            raise _error(errnos.EISDIR, o.path)
        return bytes(o.node.data[offset : offset + n])

    def ftruncate(self, fd: int, size: int) -> None:
        _, f = self._writable_file(fd)
        self._truncate(f, size)

    @staticmethod
    def _truncate(f: SimFile, size: int) -> None:
        if size < len(f.data):
            if size < f.synced:
                f._keep_durable_copy()
            del f.data[size:]
            f._cut_marks(size)
        elif size > len(f.data):
            f.data.extend(bytes(size - len(f.data)))
        else:
            return
        f.gen += 1

    def flock(self, fd: int) -> None:
        o = self._open_of(fd)
        f = o.node
        if not isinstance(f, SimFile):
            raise _error(errnos.EBADF, o.path)
        holder = f.lock
        if holder is not None and holder != fd and holder in self._fds:
            raise BlockingIOError(errnos.EWOULDBLOCK, os.strerror(errnos.EWOULDBLOCK))
        f.lock = fd

    def fsync(self, fd: int) -> None:
        o = self._open_of(fd)
        if self.fault is not None:
            self._maybe_fail("fsync", o.path)
        node = o.node
        if isinstance(node, SimDir):
            self._sync(_DirSync(node, node.seq, dict(node.entries) if self._deferred is not None else node.entries))
        else:
            self._sync(_FileSync(node, node.gen, len(node.data)))

    fdatasync = fsync

    def fsync_dir(self, path: PathLike) -> None:
        if self.fault is not None:
            self._maybe_fail("fsync", path)
        d = self._dir(path)
        self._sync(_DirSync(d, d.seq, dict(d.entries) if self._deferred is not None else d.entries))

    # --- names ---
    def replace(self, src: PathLike, dst: PathLike) -> None:
        sp, sname = self._parent(src)
        node = sp.entries.get(sname)
        if node is None:
            raise _error(errnos.ENOENT, src)
        dp, dname = self._parent(dst)
        if isinstance(dp.entries.get(dname), SimDir):
            raise _error(errnos.EISDIR, dst)
        sp._change()
        del sp.entries[sname]
        dp._change()
        dp.entries[dname] = node

    def unlink(self, path: PathLike) -> None:
        parent, name = self._parent(path)
        node = parent.entries.get(name)
        if node is None:
            raise _error(errnos.ENOENT, path)
        if isinstance(node, SimDir):
            raise _error(errnos.EISDIR, path)
        parent._change()
        del parent.entries[name]

    def mkdir(self, path: PathLike) -> None:
        node = self.root
        parts = _parts(path)
        for i, part in enumerate(parts):
            nxt = node.entries.get(part)
            if nxt is None:
                nxt = SimDir()
                node._change()
                node.entries[part] = nxt
            elif not isinstance(nxt, SimDir):
                raise _error(errnos.ENOTDIR if i < len(parts) - 1 else errnos.EEXIST, path)
            elif i == len(parts) - 1:
                raise _error(errnos.EEXIST, path)
            node = nxt

    def listdir(self, path: PathLike) -> list[str]:
        return sorted(self._dir(path).entries)

    def exists(self, path: PathLike) -> bool:
        return self._lookup(path) is not None

    def is_dir(self, path: PathLike) -> bool:
        return isinstance(self._lookup(path), SimDir)

    def read_file(self, path: PathLike) -> bytes:
        node = self._lookup(path)
        if node is None:
            raise FileNotFoundError(errnos.ENOENT, os.strerror(errnos.ENOENT), os.fspath(path))
        if isinstance(node, SimDir):
            raise IsADirectoryError(errnos.EISDIR, os.strerror(errnos.EISDIR), os.fspath(path))
        return bytes(node.data)

    def getpid(self) -> int:
        return self.pid

    # --- raw edits (the platter itself: durable at once, marks untouched) ---
    def overwrite(self, path: PathLike, offset: int, data: bytes) -> None:
        f = self.file_at(path)
        end = offset + len(data)
        if offset > len(f.data):
            raise _error(errnos.EINVAL, path)
        f.data[offset:end] = data
        if f.shadow is not None:
            if offset <= len(f.shadow):
                shadow = bytearray(f.shadow)
                shadow[offset:end] = data
                f.shadow = bytes(shadow)
        elif offset <= f.synced:
            f.synced = max(f.synced, end)

    def truncate_file(self, path: PathLike, size: int) -> None:
        f = self.file_at(path)
        del f.data[size:]
        f.synced = min(f.synced, size)
        if f.shadow is not None:
            f.shadow = f.shadow[:size]

    # --- syncs, deferred or not ---
    def begin_deferred(self) -> None:
        """Record fsyncs from now on instead of applying them (see the module docstring)."""
        if self._deferred is not None:
            raise RuntimeError("deferred fsyncs do not nest")
        self._deferred = []

    def end_deferred(self) -> list[_FileSync | _DirSync]:
        syncs, self._deferred = self._deferred or [], None
        return syncs

    def apply_syncs(self, syncs: list[_FileSync | _DirSync]) -> None:
        """The fsyncs recorded by a deferred call returned: make what they covered durable."""
        for sync in syncs:
            self._apply(sync)

    def _sync(self, sync: _FileSync | _DirSync) -> None:
        if self._deferred is not None:
            self._deferred.append(sync)
        else:
            self._apply(sync)

    def _apply(self, sync: _FileSync | _DirSync) -> None:
        if isinstance(sync, _FileSync):
            f = sync.file
            if sync.gen != f.gen:
                return  # overtaken by a truncation or overwrite (see the module docstring)
            if f.shadow_marks is not None:
                old, _ = f.durable_marks()
                f.shadow = f.shadow_marks = None
                f.synced = sync.length
                items, count = f.durable_marks()
                self._note_lost(old, items, count)
            elif sync.length > f.synced:
                f.synced = sync.length
            return
        d = sync.dir
        if sync.seq < d.synced_seq:
            return  # a later sync of this directory got there first
        old_entries = d.durable_entries()
        new_entries = sync.entries
        if new_entries is not old_entries:
            kept = {id(n) for n in new_entries.values()}
            for name in sorted(old_entries):
                node = old_entries[name]
                if id(node) not in kept and isinstance(node, SimFile):
                    items, count = node.durable_marks()
                    self.lost_marks.extend(items[:count])
            self.dir_version += 1
        d.synced_seq = sync.seq
        d.durable = None if sync.seq == d.seq else new_entries

    def _note_lost(self, old: list[Any], new: list[Any], count: int) -> None:
        i = 0
        n = min(len(old), count)
        while i < n and old[i] is new[i]:
            i += 1
        self.lost_marks.extend(old[i:])

    def take_lost_marks(self) -> list[Any]:
        lost, self.lost_marks = self.lost_marks, []
        return lost

    # --- crashes ---
    def drop_process(self) -> None:
        """kill -9 of the process using this filesystem: its descriptors, locks and fsyncs in flight go."""
        self._fds.clear()
        self._deferred = None

    def power_loss(self, rng: random.Random | None = None) -> int:
        """Forget everything not durable (see the module docstring). Returns how many marks (what the
        writer labelled: record batches, snapshots) the page cache held that are now gone."""
        before = self._count_marks()
        self.drop_process()
        seen: set[int] = set()
        self._restore(self.root, rng, seen)
        self.dir_version += 1
        return before - self._count_marks()

    def _restore(self, d: SimDir, rng: random.Random | None, seen: set[int]) -> None:
        if d.durable is not None:
            d.entries = d.durable
            d.durable = None
        d.synced_seq = d.seq
        for name in sorted(d.entries):
            node = d.entries[name]
            if id(node) in seen:
                continue
            seen.add(id(node))
            if isinstance(node, SimDir):
                self._restore(node, rng, seen)
            else:
                _revert(node, rng)

    def _count_marks(self) -> int:
        count = 0
        seen: set[int] = set()
        stack: list[SimDir] = [self.root]
        while stack:
            d = stack.pop()
            for node in d.entries.values():
                if id(node) in seen:
                    continue
                seen.add(id(node))
                if isinstance(node, SimDir):
                    stack.append(node)
                else:
                    count += len(node.mark_items)
        return count


def _write_at(f: SimFile, pos: int, data: bytes | memoryview) -> int:
    n = len(data)
    size = len(f.data)
    if pos >= size:
        if pos > size:
            f.data.extend(bytes(pos - size))
        f.data += data
        return n
    if pos < f.synced:
        f._keep_durable_copy()
    f.data[pos : pos + n] = data
    f.gen += 1
    return n


def _revert(f: SimFile, rng: random.Random | None) -> None:
    """A power loss: the file's content becomes what was durable (plus, with `rng`, a torn tail)."""
    if f.shadow is not None:
        f.data = bytearray(f.shadow)
        assert f.shadow_marks is not None
        f.mark_ends, f.mark_items = f.shadow_marks
        f.shadow = f.shadow_marks = None
    else:
        keep = f.synced
        extra = len(f.data) - keep
        if extra > 0 and rng is not None:
            keep += rng.randint(0, extra)
        if keep < len(f.data):
            del f.data[keep:]
            f._cut_marks(keep)
    f.synced = len(f.data)
    f.lock = None
    f.gen += 1


__all__ = ["SimDir", "SimFS", "SimFile"]
