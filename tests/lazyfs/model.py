"""An in-memory reference model of lazyfs's durability rules, written from the rules alone (no undo
records, no limbo): every inode has a current and a durable copy of its data or entries, and a power
loss rebuilds the tree from the durable copies. The property test compares a real mount against it."""

from __future__ import annotations

import errno
from dataclasses import dataclass, field

Path = tuple[str, ...]


@dataclass
class Inode:
    is_dir: bool
    data: bytearray = field(default_factory=bytearray)
    durable_data: bytes = b""
    entries: dict[str, int] = field(default_factory=dict)
    durable_entries: dict[str, int] = field(default_factory=dict)


class ModelError(Exception):
    """The operation fails; `errnos` are the error numbers POSIX allows for it here."""

    def __init__(self, *errnos: int) -> None:
        super().__init__(errnos)
        self.errnos = set(errnos)


class FsModel:
    def __init__(self) -> None:
        self.inodes: dict[int, Inode] = {0: Inode(is_dir=True)}
        self._next = 1

    # -- lookups --------------------------------------------------------------------------------------

    def _dir_of(self, path: Path) -> int:
        """The inode of the directory holding path[-1]."""
        ino = 0
        for name in path[:-1]:
            node = self.inodes[ino]
            if not node.is_dir:
                raise ModelError(errno.ENOTDIR)
            if name not in node.entries:
                raise ModelError(errno.ENOENT)
            ino = node.entries[name]
        if not self.inodes[ino].is_dir:
            raise ModelError(errno.ENOTDIR)
        return ino

    def lookup(self, path: Path) -> int:
        if not path:
            return 0
        parent = self._dir_of(path)
        if path[-1] not in self.inodes[parent].entries:
            raise ModelError(errno.ENOENT)
        return self.inodes[parent].entries[path[-1]]

    def _new(self, is_dir: bool) -> int:
        ino = self._next
        self._next += 1
        self.inodes[ino] = Inode(is_dir=is_dir)
        return ino

    def _file(self, path: Path) -> Inode:
        node = self.inodes[self.lookup(path)]
        if node.is_dir:
            raise ModelError(errno.EISDIR)
        return node

    # -- operations -------------------------------------------------------------------------------------

    def create(self, path: Path, data: bytes) -> None:
        parent = self._dir_of(path)
        if path[-1] in self.inodes[parent].entries:
            raise ModelError(errno.EEXIST)
        ino = self._new(is_dir=False)
        self.inodes[parent].entries[path[-1]] = ino
        self.inodes[ino].data[:] = data

    def write(self, path: Path, offset: int, data: bytes) -> None:
        node = self._file(path)
        if not data:
            return
        if len(node.data) < offset:
            node.data.extend(b"\0" * (offset - len(node.data)))
        node.data[offset : offset + len(data)] = data

    def truncate(self, path: Path, length: int) -> None:
        node = self._file(path)
        del node.data[length:]
        node.data.extend(b"\0" * (length - len(node.data)))

    def fsync(self, path: Path) -> None:
        node = self.inodes[self.lookup(path)]
        if node.is_dir:
            node.durable_entries = dict(node.entries)
        else:
            node.durable_data = bytes(node.data)

    def mkdir(self, path: Path) -> None:
        parent = self._dir_of(path)
        if path[-1] in self.inodes[parent].entries:
            raise ModelError(errno.EEXIST)
        self.inodes[parent].entries[path[-1]] = self._new(is_dir=True)

    def rmdir(self, path: Path) -> None:
        node = self.inodes[self.lookup(path)]
        if not node.is_dir:
            raise ModelError(errno.ENOTDIR)
        if node.entries:
            raise ModelError(errno.ENOTEMPTY)
        del self.inodes[self._dir_of(path)].entries[path[-1]]

    def unlink(self, path: Path) -> None:
        if self.inodes[self.lookup(path)].is_dir:
            raise ModelError(errno.EISDIR)
        del self.inodes[self._dir_of(path)].entries[path[-1]]

    def rename(self, old: Path, new: Path) -> None:
        resolved = []
        for lookup, path in ((self.lookup, old), (self._dir_of, new)):
            try:
                resolved.append(lookup(path))
            except ModelError as e:
                resolved.append(e)
        failed = [r for r in resolved if isinstance(r, ModelError)]
        if failed:  # the kernel resolves both paths before it reports either
            raise ModelError(*set().union(*(e.errnos for e in failed)))
        src, new_parent = resolved
        target = self.inodes[new_parent].entries.get(new[-1])
        if target == src:
            return
        problems = set()
        if self.inodes[src].is_dir and new[: len(old)] == old:
            problems.add(errno.EINVAL)  # into itself
        if target is not None and old[: len(new)] == new:
            problems.add(errno.ENOTEMPTY)  # onto one of its own ancestors
        if target is not None:
            if self.inodes[src].is_dir and not self.inodes[target].is_dir:
                problems.add(errno.ENOTDIR)
            if not self.inodes[src].is_dir and self.inodes[target].is_dir:
                problems.add(errno.EISDIR)
            if self.inodes[target].is_dir and self.inodes[target].entries:
                problems.update((errno.ENOTEMPTY, errno.EEXIST))
        if problems:
            raise ModelError(*problems)
        del self.inodes[self._dir_of(old)].entries[old[-1]]
        self.inodes[new_parent].entries[new[-1]] = src

    def power_loss(self) -> None:
        """Data back to the durable copy; entries rebuilt from the root's durable entries, a directory
        named twice kept only where a depth-first walk in name order meets it first."""
        for node in self.inodes.values():
            if not node.is_dir:
                node.data = bytearray(node.durable_data)
        placed = {0}
        rebuilt: dict[int, dict[str, int]] = {}

        def place(d: int) -> None:
            kept: dict[str, int] = {}
            for name in sorted(self.inodes[d].durable_entries):
                ino = self.inodes[d].durable_entries[name]
                if self.inodes[ino].is_dir:
                    if ino in placed:
                        continue
                    placed.add(ino)
                    kept[name] = ino
                    place(ino)
                else:
                    kept[name] = ino
            rebuilt[d] = kept

        place(0)
        for d, entries in rebuilt.items():
            self.inodes[d].entries = dict(entries)
            self.inodes[d].durable_entries = dict(entries)

    # -- what a reader sees ------------------------------------------------------------------------------

    def tree(self) -> dict[str, bytes | None]:
        """Path -> file content, or None for a directory."""
        found: dict[str, bytes | None] = {}

        def walk(d: int, prefix: str) -> None:
            for name, ino in self.inodes[d].entries.items():
                path = f"{prefix}/{name}"
                if self.inodes[ino].is_dir:
                    found[path] = None
                    walk(ino, path)
                else:
                    found[path] = bytes(self.inodes[ino].data)

        walk(0, "")
        return found
