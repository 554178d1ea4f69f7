"""The filesystem seam under `FileStorage`: the few file operations it uses, behind one small interface.

Two implementations: `OsFileSystem` (the default, `OS_FS`) calls the operating system and adds one
Python call per operation; `node.sim.simfs.SimFS` keeps files in memory with a page cache / platter
split, so the simulator runs the very same `FileStorage` and a power loss forgets exactly what a real
disk would. The operations take paths and integer descriptors with the `os` module's meaning (flags
such as `os.O_CREAT | os.O_EXCL`, `OSError` with an errno on failure), so `FileStorage` reads like
plain POSIX code whichever filesystem is underneath.

`OsFileSystem` looks every `os` function up at call time (tests count fsyncs by patching `os.fsync`).
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import Protocol

PathLike = str | os.PathLike[str]


class FileSystem(Protocol):
    """What `FileStorage` (and the `corrupt` fault) may do to a data dir."""

    # --- descriptors ---
    def open(self, path: PathLike, flags: int, mode: int = 0o644) -> int: ...
    def close(self, fd: int) -> None: ...
    def write(self, fd: int, data: bytes | memoryview) -> int: ...
    def pread(self, fd: int, n: int, offset: int) -> bytes: ...
    def pwrite(self, fd: int, data: bytes, offset: int) -> int: ...
    def ftruncate(self, fd: int, size: int) -> None: ...
    def fsync(self, fd: int) -> None: ...
    def fdatasync(self, fd: int) -> None: ...
    def flock(self, fd: int) -> None:
        """Exclusive, non-blocking (BlockingIOError when another descriptor holds it)."""

    # --- names ---
    def fsync_dir(self, path: PathLike) -> None:
        """Make creations, renames and deletions inside `path` durable."""

    def replace(self, src: PathLike, dst: PathLike) -> None: ...
    def unlink(self, path: PathLike) -> None: ...
    def mkdir(self, path: PathLike) -> None:
        """Create `path` and any missing parents (FileExistsError if `path` exists)."""

    def listdir(self, path: PathLike) -> list[str]: ...
    def exists(self, path: PathLike) -> bool: ...
    def is_dir(self, path: PathLike) -> bool: ...
    def read_file(self, path: PathLike) -> bytes: ...
    def getpid(self) -> int:
        """The owning process's id (written into the lock file)."""

    # --- raw edits of a stopped node's files (the `corrupt` fault), durable when they return ---
    def overwrite(self, path: PathLike, offset: int, data: bytes) -> None: ...
    def truncate_file(self, path: PathLike, size: int) -> None: ...


class OsFileSystem:
    """The operating system's filesystem (see the module docstring)."""

    def open(self, path: PathLike, flags: int, mode: int = 0o644) -> int:
        return os.open(path, flags, mode)

    def close(self, fd: int) -> None:
        os.close(fd)

    def write(self, fd: int, data: bytes | memoryview) -> int:
        return os.write(fd, data)

    def pread(self, fd: int, n: int, offset: int) -> bytes:
        return os.pread(fd, n, offset)

    def pwrite(self, fd: int, data: bytes, offset: int) -> int:
        return os.pwrite(fd, data, offset)

    def ftruncate(self, fd: int, size: int) -> None:
        os.ftruncate(fd, size)

    def fsync(self, fd: int) -> None:
        os.fsync(fd)

    def fdatasync(self, fd: int) -> None:
        os.fdatasync(fd)

    def flock(self, fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)

    def fsync_dir(self, path: PathLike) -> None:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def replace(self, src: PathLike, dst: PathLike) -> None:
        os.replace(src, dst)

    def unlink(self, path: PathLike) -> None:
        os.unlink(path)

    def mkdir(self, path: PathLike) -> None:
        Path(path).mkdir(parents=True)

    def listdir(self, path: PathLike) -> list[str]:
        return os.listdir(path)

    def exists(self, path: PathLike) -> bool:
        return os.path.exists(path)

    def is_dir(self, path: PathLike) -> bool:
        return os.path.isdir(path)

    def read_file(self, path: PathLike) -> bytes:
        with open(path, "rb") as f:
            return f.read()

    def getpid(self) -> int:
        return os.getpid()

    def overwrite(self, path: PathLike, offset: int, data: bytes) -> None:
        fd = os.open(path, os.O_WRONLY)
        try:
            view = memoryview(data)
            while view:
                view = view[os.pwrite(fd, view, offset + len(data) - len(view)) :]
            os.fsync(fd)
        finally:
            os.close(fd)

    def truncate_file(self, path: PathLike, size: int) -> None:
        fd = os.open(path, os.O_WRONLY)
        try:
            os.ftruncate(fd, size)
            os.fsync(fd)
        finally:
            os.close(fd)


OS_FS = OsFileSystem()

__all__ = ["OS_FS", "FileSystem", "OsFileSystem"]
