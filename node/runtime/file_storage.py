"""`RaftStorage` on real files with real fsync: segment files, quorum-state and meta.properties.

Layout of a data dir (the names Kafka uses, so an operator recognises it):

    <data_dir>/.lock                                   flock'ed while a node owns the dir
    <data_dir>/meta.properties                         version=1, node.id, cluster.id (once committed)
    <data_dir>/__cluster_metadata-0/<base offset>.log  segments: concatenated record batches
    <data_dir>/__cluster_metadata-0/quorum-state       JSON QuorumStateMessage + data_version + crc32c
    <data_dir>/__cluster_metadata-0/<end offset>-<epoch>.checkpoint   snapshots (KIP-630), newest two

Start-up never silently drops data that may have been acknowledged: a torn or corrupt tail (bad bytes
with no valid batch after them) is truncated away and reported, anything corrupt before a valid batch
refuses to start with the file, byte position and offset.

A snapshot file wraps the state machine's opaque bytes in a checksummed header (see
`encode_snapshot_file`); it is written to a temp file, fsynced, renamed and the dir fsynced, so a crash
leaves the old snapshot or the new one. A corrupt snapshot is set aside (renamed `.corrupt`) only if an
older snapshot or the log still covers every record it held; otherwise the node refuses to start.

Every file operation goes through a `FileSystem` (`node.runtime.fs`): the operating system by default,
the simulator's `SimFS` when the simulator runs this same code.
"""

from __future__ import annotations

import errno
import json
import os
import re
import struct
from array import array
from bisect import bisect_right
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import crc32c

from node.bugs import NO_BUGS, Bugs
from node.protocol.messages import SnapshotId
from node.raft.quorum_state import QuorumStateData
from node.raft.records import (
    HEADER_SIZE,
    MAGIC,
    MAX_BATCH_BYTES,
    CorruptBatchError,
    RecordBatch,
    decode_batch,
    encode_batch,
)
from node.raft.storage import LoadedSnapshot, LoadedState, RaftStorage, StorageError
from node.runtime.fs import OS_FS, FileSystem

LOG_DIR_NAME = "__cluster_metadata-0"
QUORUM_STATE_NAME = "quorum-state"
META_NAME = "meta.properties"
LOCK_NAME = ".lock"
DEFAULT_SEGMENT_BYTES = 64 << 20
QUORUM_STATE_VERSION = 0
META_VERSION = 1
_SEGMENT_RE = re.compile(r"^(\d{20})\.log$")
_SNAPSHOT_RE = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")
SNAPSHOT_MAGIC = b"KCRS"
SNAPSHOT_VERSION = 0
_SNAPSHOT_HEADER = struct.Struct(">4shqiqI")  # magic, version, end offset, epoch, data length, crc32c
SNAPSHOTS_KEPT = 2
_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}.log"


@contextmanager
def io_failure(what: str, path: Path) -> Iterator[None]:
    """An OSError inside becomes a StorageError naming the operation, the file and the errno: a write
    or fsync that failed must stop the node (never retried: after a failed fsync the kernel may have
    dropped the dirty pages, so a later fsync that succeeds proves nothing)."""
    try:
        yield
    except OSError as exc:
        code = errno.errorcode.get(exc.errno or 0, str(exc.errno))
        raise StorageError(f"{what} {path}: {code} ({exc.strerror})") from exc


def segment_base(name: str) -> int | None:
    """The base offset a segment file name stands for, or None if `name` is no segment's."""
    m = _SEGMENT_RE.match(name)
    return int(m.group(1)) if m else None


def snapshot_id_of(name: str) -> SnapshotId | None:
    """The snapshot id a snapshot file name stands for, or None if `name` is no snapshot's."""
    m = _SNAPSHOT_RE.match(name)
    return SnapshotId(int(m.group(1)), int(m.group(2))) if m else None


def fsync_dir(path: Path, fs: FileSystem = OS_FS) -> None:
    """Make creations, renames and deletions inside `path` durable."""
    with io_failure("fsync of directory", path):
        fs.fsync_dir(path)


def write_atomically(path: Path, data: bytes, fs: FileSystem = OS_FS, *, sync_data: bool = True) -> None:
    """Replace `path` so that a crash leaves either the old or the new content, never a mix.
    (`sync_data=False` exists only for a planted bug: without it a crash may leave an empty file.)"""
    tmp = path.with_name(path.name + ".tmp")
    with io_failure("write", tmp):
        fd = fs.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        with io_failure("write", tmp):
            _write_all(fs, fd, data)
        if sync_data:
            with io_failure("fsync", tmp):
                fs.fsync(fd)
    finally:
        fs.close(fd)
    with io_failure("rename to", path):
        fs.replace(tmp, path)
    fsync_dir(path.parent, fs)


def _write_all(fs: FileSystem, fd: int, data: bytes | memoryview) -> None:
    written = fs.write(fd, data)
    if written < len(data):  # a short write: rare, so the common case makes no memoryview
        view = memoryview(data)[written:]
        while view:
            view = view[fs.write(fd, view) :]


# --- quorum-state ----------------------------------------------------------------------------------


def _canonical(obj: object) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def encode_quorum_state(state: QuorumStateData) -> bytes:
    body = {
        "leaderId": state.leader_id,
        "leaderEpoch": state.leader_epoch,
        "votedId": state.voted_id,
        "appliedOffset": state.applied_offset,
        "currentVoters": [{"voterId": v} for v in state.current_voters],
        "data_version": QUORUM_STATE_VERSION,
    }
    return _canonical({**body, "crc32c": crc32c.crc32c(_canonical(body))}) + b"\n"


def decode_quorum_state(raw: bytes, where: str) -> QuorumStateData:
    """Parse a quorum-state file; anything unexpected raises StorageError naming `where`."""

    def bad(reason: str) -> StorageError:
        return StorageError(f"corrupt quorum-state file {where}: {reason}; refusing to start (never reset a vote)")

    try:
        doc = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise bad(f"not valid JSON ({e})") from None
    if not isinstance(doc, dict):
        raise bad("not a JSON object")
    crc = doc.pop("crc32c", None)
    if not _is_int(crc):
        raise bad("missing crc32c")
    if crc32c.crc32c(_canonical(doc)) != crc:
        raise bad("crc32c mismatch")
    if doc.get("data_version") != QUORUM_STATE_VERSION:
        raise bad(f"unsupported data_version {doc.get('data_version')!r}")
    expected = {"leaderId", "leaderEpoch", "votedId", "appliedOffset", "currentVoters", "data_version"}
    if set(doc) != expected:
        raise bad(f"fields {sorted(doc)} instead of {sorted(expected)}")
    for name, (lo, hi) in {
        "leaderId": (-1, _INT32[1]),
        "leaderEpoch": (0, _INT32[1]),
        "votedId": (-1, _INT32[1]),
        "appliedOffset": (0, _INT64[1]),
    }.items():
        if not _is_int(doc[name]) or not lo <= doc[name] <= hi:
            raise bad(f"{name} is {doc[name]!r}")
    voters = doc["currentVoters"]
    if not isinstance(voters, list) or not all(
        isinstance(v, dict) and set(v) == {"voterId"} and _is_int(v["voterId"]) and v["voterId"] >= 0 for v in voters
    ):
        raise bad(f"currentVoters is {voters!r}")
    return QuorumStateData(
        leader_id=doc["leaderId"],
        leader_epoch=doc["leaderEpoch"],
        voted_id=doc["votedId"],
        applied_offset=doc["appliedOffset"],
        current_voters=tuple(v["voterId"] for v in voters),
    )


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


# --- snapshot files ----------------------------------------------------------------------------------


def snapshot_name(snapshot_id: SnapshotId) -> str:
    """Kafka's naming: `<20-digit end offset>-<10-digit epoch>.checkpoint`."""
    return f"{snapshot_id.end_offset:020d}-{snapshot_id.epoch:010d}.checkpoint"


def encode_snapshot_file(snapshot_id: SnapshotId, data: bytes) -> bytes:
    """Header (magic `KCRS`, version, end offset, epoch, data length, CRC32C of the header fields
    before it and of the data), then the data."""
    fields = (SNAPSHOT_MAGIC, SNAPSHOT_VERSION, snapshot_id.end_offset, snapshot_id.epoch, len(data))
    covered = _SNAPSHOT_HEADER.pack(*fields, 0)[:-4]
    return covered + struct.pack(">I", crc32c.crc32c(data, crc32c.crc32c(covered))) + data


def decode_snapshot_file(raw: bytes, where: str) -> LoadedSnapshot:
    """Check a snapshot file; any defect raises StorageError naming `where`."""

    def bad(reason: str) -> StorageError:
        return StorageError(f"corrupt snapshot file {where}: {reason}")

    if len(raw) < _SNAPSHOT_HEADER.size:
        raise bad(f"{len(raw)} bytes, shorter than the {_SNAPSHOT_HEADER.size}-byte header")
    magic, version, end_offset, epoch, length, crc = _SNAPSHOT_HEADER.unpack_from(raw)
    if magic != SNAPSHOT_MAGIC:
        raise bad(f"bad magic {magic!r}")
    if version != SNAPSHOT_VERSION:
        raise bad(f"unsupported version {version}")
    if length != len(raw) - _SNAPSHOT_HEADER.size:
        raise bad(f"holds {len(raw) - _SNAPSHOT_HEADER.size} data bytes, header says {length}")
    view = memoryview(raw)
    if crc32c.crc32c(view[_SNAPSHOT_HEADER.size :], crc32c.crc32c(view[: _SNAPSHOT_HEADER.size - 4])) != crc:
        raise bad("crc32c mismatch")
    if end_offset <= 0 or epoch < 0:
        raise bad(f"implausible snapshot id ({end_offset}, {epoch})")
    return LoadedSnapshot(SnapshotId(end_offset, epoch), bytes(view[_SNAPSHOT_HEADER.size :]))


def read_snapshot_file(path: Path, fs: FileSystem = OS_FS) -> LoadedSnapshot:
    """Read and check one snapshot file, whose name must match the id inside it."""
    try:
        raw = fs.read_file(path)
    except OSError as e:
        raise StorageError(f"cannot read snapshot file {path}: {e.strerror}") from None
    snapshot = decode_snapshot_file(raw, str(path))
    if snapshot_name(snapshot.snapshot_id) != path.name:
        sid = snapshot.snapshot_id
        raise StorageError(f"corrupt snapshot file {path}: holds snapshot {sid.end_offset}-{sid.epoch}")
    return snapshot


# --- meta.properties -------------------------------------------------------------------------------


def parse_properties(text: str, where: str) -> dict[str, str]:
    """The subset of Java properties that meta.properties uses: `key=value` lines and comments."""
    props: dict[str, str] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        key, sep, value = line.partition("=")
        if not sep:
            key, sep, value = line.partition(":")
        if not sep or not key.strip():
            raise StorageError(f"{where}:{lineno}: not a key=value line: {line!r}")
        props[key.strip()] = value.strip()
    return props


def format_properties(props: dict[str, str]) -> bytes:
    lines = ["#kraft-chaos metadata directory properties", *(f"{k}={v}" for k, v in props.items())]
    return ("\n".join(lines) + "\n").encode()


# --- the log -----------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Segment:
    """One segment file and the index of its batches: base offsets and byte positions."""

    base_offset: int
    path: Path
    size: int = 0
    next_offset: int = -1  # offset after its last batch; == base_offset when empty
    offsets: array = field(default_factory=lambda: array("q"))
    positions: array = field(default_factory=lambda: array("q"))

    def __post_init__(self) -> None:
        if self.next_offset < 0:
            self.next_offset = self.base_offset

    def add(self, batch: RecordBatch, position: int, size: int) -> None:
        self.offsets.append(batch.base_offset)
        self.positions.append(position)
        self.size = position + size
        self.next_offset = batch.next_offset


@dataclass(slots=True)
class _ScanResult:
    batches: list[tuple[RecordBatch, int, int]]  # batch, start and end byte position
    bad_pos: int | None = None  # first byte that is not a valid, contiguous batch
    reason: str = ""


class FileStorage(RaftStorage):
    """The real runtime's storage. Owns its data dir exclusively (flock) until `close()`."""

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        node_id: int,
        cluster_id: str | None = None,
        *,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        fs: FileSystem = OS_FS,
        bugs: Bugs = NO_BUGS,
    ) -> None:
        if segment_bytes <= 0:
            raise ValueError(f"segment_bytes must be positive, got {segment_bytes}")
        self.fs = fs
        self.data_dir = Path(data_dir)
        self.node_id = node_id
        self.expected_cluster_id = cluster_id
        self.segment_bytes = segment_bytes
        self.bugs = bugs  # planted bugs switched on (node/bugs.py); empty in every real deployment
        self.log_dir = self.data_dir / LOG_DIR_NAME
        self.quorum_state_path = self.log_dir / QUORUM_STATE_NAME
        self.meta_path = self.data_dir / META_NAME
        self._segments: list[_Segment] = []
        self._fd: int | None = None  # the active (last) segment, opened for append
        self._dirty = False
        self._dir_dirty = False
        self._loaded = False
        self._empty_end = 0  # the log end offset while there is no segment at all
        self._lock_fd: int | None = None
        self._make_dirs()
        self._lock()
        try:
            self.cluster_id = self._check_meta()
        except BaseException:
            self.close()
            raise

    # --- ownership and identity ---

    def _make_dirs(self) -> None:
        created = []
        fs = self.fs
        for d in (self.data_dir, self.log_dir):
            if not fs.is_dir(d):
                try:
                    fs.mkdir(d)
                except OSError as e:
                    raise StorageError(f"cannot create data dir {d}: {e.strerror}") from None
                created.append(d)
        for d in created:
            fsync_dir(d.parent, fs)

    def _lock(self) -> None:
        fs = self.fs
        path = self.data_dir / LOCK_NAME
        try:
            fd = fs.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise StorageError(f"cannot open lock file {path}: {e.strerror}") from None
        try:
            fs.flock(fd)
        except BlockingIOError:
            holder = fs.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            fs.close(fd)
            raise StorageError(
                f"data dir {self.data_dir} is in use by another process (pid {holder}, lock {path})"
            ) from None
        try:
            fs.ftruncate(fd, 0)
            fs.pwrite(fd, f"{fs.getpid()}\n".encode(), 0)
        except BaseException:
            fs.close(fd)
            raise
        self._lock_fd = fd

    def _check_meta(self) -> str | None:
        if not self.fs.exists(self.meta_path):
            write_atomically(
                self.meta_path,
                format_properties({"version": str(META_VERSION), "node.id": str(self.node_id)}),
                self.fs,
            )
            return None
        try:
            text = self.fs.read_file(self.meta_path).decode()
        except (OSError, UnicodeDecodeError) as e:
            raise StorageError(f"cannot read {self.meta_path}: {e}") from None
        props = parse_properties(text, str(self.meta_path))
        if props.get("version") != str(META_VERSION):
            raise StorageError(f"{self.meta_path}: unsupported version {props.get('version')!r}")
        if "node.id" not in props:
            raise StorageError(f"{self.meta_path} has no node.id; refusing to start")
        if props["node.id"] != str(self.node_id):
            raise StorageError(
                f"data dir {self.data_dir} belongs to node {props['node.id']}, "
                f"but this node is configured as node {self.node_id}"
            )
        found = props.get("cluster.id") or None
        if found is not None and self.expected_cluster_id is not None and found != self.expected_cluster_id:
            raise StorageError(
                f"data dir {self.data_dir} belongs to cluster {found}, "
                f"but this node is configured for cluster {self.expected_cluster_id}"
            )
        return found

    def write_cluster_id(self, cluster_id: str) -> None:
        if self.expected_cluster_id is not None and cluster_id != self.expected_cluster_id:
            raise StorageError(
                f"the quorum committed cluster {cluster_id}, "
                f"but this node is configured for cluster {self.expected_cluster_id}"
            )
        if self.cluster_id == cluster_id:
            return
        if self.cluster_id is not None:
            raise StorageError(
                f"data dir {self.data_dir} belongs to cluster {self.cluster_id}; refusing to change it to {cluster_id}"
            )
        props = {"version": str(META_VERSION), "node.id": str(self.node_id), "cluster.id": cluster_id}
        write_atomically(self.meta_path, format_properties(props), self.fs)
        self.cluster_id = cluster_id

    # --- quorum state ---

    def write_quorum_state(self, state: QuorumStateData) -> None:
        sync = "storage-quorum-state-rename-without-fsync" not in self.bugs
        write_atomically(self.quorum_state_path, encode_quorum_state(state), self.fs, sync_data=sync)

    def _read_quorum_state(self) -> QuorumStateData | None:
        fs = self.fs
        tmp = self.quorum_state_path.with_name(QUORUM_STATE_NAME + ".tmp")
        if fs.exists(tmp):  # a write that crashed before its rename: the old file is still the truth
            fs.unlink(tmp)
            fsync_dir(self.log_dir, fs)
        try:
            raw = fs.read_file(self.quorum_state_path)
        except FileNotFoundError:
            return None
        return decode_quorum_state(raw, str(self.quorum_state_path))

    # --- load and recovery ---

    def load(self) -> LoadedState:
        if self._loaded:
            raise RuntimeError("FileStorage.load() may only be called once")
        quorum_state = self._read_quorum_state()
        batches, recovered = self._load_log()
        snapshot, snapshot_notes = self._load_snapshot(batches)
        if snapshot is not None and not batches:
            snapshot_notes.extend(self._drop_empty_segments(snapshot.snapshot_id.end_offset))
            self._empty_end = snapshot.snapshot_id.end_offset
        notes = "; ".join(n for n in (recovered, *snapshot_notes) if n) or None
        self._loaded = True
        return LoadedState(quorum_state, tuple(batches), self.cluster_id, notes, snapshot)

    def _drop_empty_segments(self, snapshot_end: int) -> list[str]:
        """A log that holds no record beside a snapshot starts at the snapshot's end. An empty segment
        file left at a lower base (a power loss took every unsynced record of it, while the snapshot,
        written and fsynced on its own, survived) would make the next append land at the wrong offset."""
        if not self._segments:
            return []
        self._close_active()
        names = [seg.path.name for seg in self._segments]
        for seg in reversed(self._segments):
            self.fs.unlink(seg.path)
        self._segments.clear()
        fsync_dir(self.log_dir, self.fs)
        return [f"removed empty segment {', '.join(names)}: the log starts at the snapshot's end {snapshot_end}"]

    # --- snapshots ---

    def snapshot_paths(self) -> list[Path]:
        """The snapshot files, oldest first."""
        return [p for _, p in self._snapshot_files()]

    def _snapshot_files(self) -> list[tuple[tuple[int, int], Path]]:
        found = []
        for name in self.fs.listdir(self.log_dir):
            m = _SNAPSHOT_RE.match(name)
            if m:
                found.append(((int(m.group(1)), int(m.group(2))), self.log_dir / name))
        return sorted(found)

    def _load_snapshot(self, batches: list[RecordBatch]) -> tuple[LoadedSnapshot | None, list[str]]:
        """The newest valid snapshot. A corrupt newer one is set aside only if what remains (an older
        snapshot and the log) still holds every record below its end; else StorageError."""
        fs = self.fs
        notes = []
        leftovers = sorted(self.log_dir / n for n in fs.listdir(self.log_dir) if n.endswith(".checkpoint.tmp"))
        for p in leftovers:  # a write that crashed before its rename: the older snapshot is the truth
            fs.unlink(p)
            notes.append(f"removed unfinished snapshot {p.name}")
        corrupt: list[tuple[int, Path, StorageError]] = []  # newest first
        chosen: LoadedSnapshot | None = None
        for (end, _), path in reversed(self._snapshot_files()):
            try:
                chosen = read_snapshot_file(path, fs)
                break
            except StorageError as e:
                corrupt.append((end, path, e))
        if corrupt:
            newest_end, path, error = corrupt[0]
            covered_to = chosen.snapshot_id.end_offset if chosen is not None else 0
            log_start = batches[0].base_offset if batches else None
            log_end = batches[-1].next_offset if batches else None
            if log_start is None or log_end is None or log_start > covered_to or log_end < newest_end:
                older = f"the older snapshot (end {covered_to})" if chosen is not None else "no older snapshot"
                held = f"offsets {log_start}-{log_end}" if batches else "no records"
                raise StorageError(
                    f"{error}; {older} and the log ({held}) do not hold every record below {newest_end}; "
                    "refusing to start"
                )
            for _, path, error in corrupt:
                fs.replace(path, path.with_name(path.name + ".corrupt"))
                notes.append(f"set aside {error} (renamed to {path.name}.corrupt)")
        if leftovers or corrupt:
            fsync_dir(self.log_dir, fs)
        return chosen, notes

    def write_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        """Durable when it returns; keeps the newest SNAPSHOTS_KEPT snapshot files."""
        self._require_loaded()
        fs = self.fs
        write_atomically(self.log_dir / snapshot_name(snapshot_id), encode_snapshot_file(snapshot_id, data), fs)
        files = self._snapshot_files()
        if len(files) > SNAPSHOTS_KEPT:
            for _, path in files[:-SNAPSHOTS_KEPT]:
                fs.unlink(path)
            fsync_dir(self.log_dir, fs)

    def delete_before(self, offset: int) -> None:
        """Delete the segments entirely below `offset`, except the active one."""
        self._require_loaded()
        doomed = [s for s in self._segments[:-1] if s.next_offset <= offset]
        if not doomed:
            return
        for seg in doomed:
            self.fs.unlink(seg.path)
        del self._segments[: len(doomed)]
        fsync_dir(self.log_dir, self.fs)

    def reset(self, offset: int) -> None:
        """Delete every segment, newest first (a crash leaves a prefix of the log, which start-up
        discards below the snapshot); the next append starts a segment at `offset`."""
        self._require_loaded()
        if offset < 0:
            raise ValueError(f"cannot reset the log to negative offset {offset}")
        self._close_active()
        for seg in reversed(self._segments):
            self.fs.unlink(seg.path)
        self._segments.clear()
        self._empty_end = offset
        self._dirty = False
        fsync_dir(self.log_dir, self.fs)

    def _segment_files(self) -> list[tuple[int, Path]]:
        found = []
        for name in self.fs.listdir(self.log_dir):
            m = _SEGMENT_RE.match(name)
            if m:
                found.append((int(m.group(1)), self.log_dir / name))
        return sorted(found)

    def _load_log(self) -> tuple[list[RecordBatch], str | None]:
        files = self._segment_files()
        batches: list[RecordBatch] = []
        notes: list[str] = []
        last_epoch = -1
        for i, (base, path) in enumerate(files):
            if self._segments and base != self._segments[-1].next_offset:
                prev = self._segments[-1]
                raise StorageError(
                    f"segment {path} starts at offset {base}, but the previous segment ends at offset "
                    f"{prev.next_offset} ({prev.path.name} is short or a segment is missing); refusing to start"
                )
            data = self.fs.read_file(path)
            scan = _scan(data, base, last_epoch, verify_crc="storage-crc-not-checked-on-load" not in self.bugs)
            seg = _Segment(base, path)
            for batch, pos, stop in scan.batches:
                seg.add(batch, pos, stop - pos)
                batches.append(batch)
                last_epoch = batch.epoch
            self._segments.append(seg)
            if scan.bad_pos is not None:
                notes.extend(self._truncate_torn_tail(seg, data, scan, [p for _, p in files[i + 1 :]]))
                break
        if len(self._segments) > 1 and self._segments[-1].size == 0:
            # An empty last segment (a roll that crashed before its first write): drop it.
            empty = self._segments.pop()
            self.fs.unlink(empty.path)
            fsync_dir(self.log_dir, self.fs)
            notes.append(f"removed empty segment {empty.path.name}")
        if self._segments:
            self._fd = self.fs.open(self._segments[-1].path, os.O_WRONLY | os.O_APPEND)
        self._make_loaded_log_durable()
        return batches, "; ".join(notes) or None

    def _make_loaded_log_durable(self) -> None:
        """fsync what was read: after a kill -9 the page cache may hold writes that never reached the
        disk, and the node treats what it loads as durable (it acknowledges it at once). Without this,
        a power loss after the restart could take data the quorum already counted as committed."""
        fs = self.fs
        for seg in self._segments:
            fd = fs.open(seg.path, os.O_RDONLY)
            try:
                fs.fsync(fd)
            finally:
                fs.close(fd)
        fsync_dir(self.log_dir, fs)

    def _truncate_torn_tail(self, seg: _Segment, data: bytes, scan: _ScanResult, later: list[Path]) -> list[str]:
        """Cut the log at `scan.bad_pos` if nothing valid follows; otherwise refuse to start."""
        bad_pos, offset = scan.bad_pos, seg.next_offset
        assert bad_pos is not None
        where = f"corrupt log segment {seg.path} at byte {bad_pos} (offset {offset}): {scan.reason}"
        at = _first_valid_batch(data, bad_pos + 1)
        if at is not None:
            raise StorageError(
                f"{where}; a valid batch follows at byte {at}, so it is not a torn tail; refusing to start"
            )
        fs = self.fs
        for path in later:
            at = _first_valid_batch(fs.read_file(path), 0)
            if at is not None:
                raise StorageError(f"{where}; segment {path.name} after it holds a valid batch; refusing to start")
        notes = [f"truncated {len(data) - bad_pos} torn bytes at offset {offset} in {seg.path.name} ({scan.reason})"]
        fd = fs.open(seg.path, os.O_WRONLY)
        try:
            fs.ftruncate(fd, bad_pos)
            fs.fsync(fd)
        finally:
            fs.close(fd)
        for path in later:
            fs.unlink(path)
            notes.append(f"removed segment {path.name} after the torn tail (it held no valid batch)")
        if later:
            fsync_dir(self.log_dir, fs)
        return notes

    # --- appends and truncation ---

    @property
    def end_offset(self) -> int:
        """The offset the next appended batch must have."""
        return self._segments[-1].next_offset if self._segments else self._empty_end

    def append(self, batches: tuple[RecordBatch, ...]) -> None:
        self._require_loaded()
        for batch in batches:
            if batch.base_offset != self.end_offset:
                raise ValueError(f"batch at offset {batch.base_offset} does not continue the log at {self.end_offset}")
            data = encode_batch(batch)
            seg = self._segments[-1] if self._segments else None
            if seg is None or (seg.size > 0 and seg.size + len(data) > self.segment_bytes):
                seg = self._roll(batch.base_offset)
            assert self._fd is not None
            with io_failure("write", seg.path):
                _write_all(self.fs, self._fd, data)
            seg.add(batch, seg.size, len(data))
            self._dirty = True

    def _roll(self, base_offset: int) -> _Segment:
        """Start a new segment. The old one is fsynced first, so only the last segment can be torn."""
        fs = self.fs
        if self._fd is not None:
            if self._dirty:
                with io_failure("fsync", self._segments[-1].path):
                    fs.fsync(self._fd)
            fs.close(self._fd)
            self._fd = None
        seg = _Segment(base_offset, self.log_dir / segment_name(base_offset))
        with io_failure("create", seg.path):
            self._fd = fs.open(seg.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_EXCL, 0o644)
        self._segments.append(seg)
        self._dir_dirty = "storage-segment-roll-no-dir-fsync" not in self.bugs
        return seg

    def truncate(self, offset: int) -> None:
        """Cut the log at a batch boundary, durably before returning.

        Syncing here (truncation is rare: only after a divergence) means a crash can never bring back
        old batches behind newer appends, which start-up would take for mid-log corruption.
        """
        self._require_loaded()
        if offset < 0:
            raise ValueError(f"cannot truncate to negative offset {offset}")
        if offset >= self.end_offset:
            return
        doomed = [s for s in self._segments if s.base_offset >= offset]
        keep = self._segments[-len(doomed) - 1] if len(doomed) < len(self._segments) else None
        cut: int | None = None  # index of the first batch to drop from `keep`
        if keep is not None and keep.next_offset > offset:
            cut = bisect_right(keep.offsets, offset) - 1
            if keep.offsets[cut] != offset:
                raise ValueError(
                    f"truncation offset {offset} is inside the batch at offset {keep.offsets[cut]} in {keep.path.name}"
                )
        fs = self.fs
        if doomed:
            self._close_active()
            for seg in doomed:
                fs.unlink(seg.path)
            del self._segments[-len(doomed) :]
        if keep is None:
            self._empty_end = offset
        elif self._fd is None:  # the kept segment becomes the active one again
            self._fd = fs.open(keep.path, os.O_WRONLY | os.O_APPEND)
        if keep is not None and cut is not None:
            assert self._fd is not None
            position = keep.positions[cut]
            with io_failure("truncate", keep.path):
                fs.ftruncate(self._fd, position)
                fs.fsync(self._fd)
            del keep.offsets[cut:]
            del keep.positions[cut:]
            keep.size = position
            keep.next_offset = offset
        if doomed:
            fsync_dir(self.log_dir, fs)

    def _close_active(self) -> None:
        if self._fd is not None:
            self.fs.close(self._fd)
            self._fd = None

    def flush(self) -> None:
        self._require_loaded()
        if self._dirty and self._fd is not None and "storage-flush-skips-fsync" not in self.bugs:
            # fdatasync: appends only need the data and the file size durable, not the mtime.
            with io_failure("fdatasync", self._segments[-1].path if self._segments else self.log_dir):
                self.fs.fdatasync(self._fd)
        self._dirty = False
        if self._dir_dirty:
            fsync_dir(self.log_dir, self.fs)
            self._dir_dirty = False

    def _require_loaded(self) -> None:
        if not self._loaded:
            raise RuntimeError("FileStorage.load() must be called before the log is used")
        if self._lock_fd is None:
            raise RuntimeError("FileStorage is closed")

    def segment_paths(self) -> list[Path]:
        """The current segment files, oldest first (for data-dir listings and tests)."""
        return [s.path for s in self._segments]

    def close(self) -> None:
        """Release the files and the lock; un-flushed appends are not made durable."""
        self._close_active()
        if self._lock_fd is not None:
            self.fs.close(self._lock_fd)
            self._lock_fd = None

    def __enter__(self) -> FileStorage:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def scan_segment(
    data: bytes, base_offset: int, last_epoch: int = -1
) -> tuple[list[tuple[RecordBatch, int, int]], int | None]:
    """The valid batches at the start of a segment file's bytes as (batch, start, stop), and the first
    byte that does not continue them (None: the whole file is valid), by the rules of start-up."""
    result = _scan(data, base_offset, last_epoch)
    return result.batches, result.bad_pos


def _scan(data: bytes, base_offset: int, last_epoch: int, verify_crc: bool = True) -> _ScanResult:
    """Decode a segment's batches until the first defect (bad bytes, an offset gap, an epoch going back)."""
    view = memoryview(data)
    result = _ScanResult([])
    expected = base_offset
    pos = 0
    while pos < len(data):
        try:
            batch, stop = decode_batch(view, pos, verify_crc=verify_crc)
        except CorruptBatchError as e:
            result.bad_pos, result.reason = pos, str(e)
            break
        if batch.base_offset != expected:
            result.bad_pos, result.reason = pos, f"batch has offset {batch.base_offset}, expected {expected}"
            break
        if batch.epoch < last_epoch:
            result.bad_pos, result.reason = pos, f"batch epoch {batch.epoch} is below the previous {last_epoch}"
            break
        result.batches.append((batch, pos, stop))
        expected, last_epoch, pos = batch.next_offset, batch.epoch, stop
    return result


def _first_valid_batch(data: bytes, start: int) -> int | None:
    """The first byte position at or after `start` where a whole batch passes its checks, if any.

    Candidates are found by searching for the magic byte, and a plausible length is required before
    the CRC is computed, so scanning even megabytes of garbage after a torn write stays cheap.
    """
    view = memoryview(data)
    end = len(data)
    magic_at = 12 + 4  # base_offset int64 + length int32 + epoch int32
    pos = data.find(bytes([MAGIC]), start + magic_at) - magic_at
    while pos >= 0 and pos + HEADER_SIZE <= end:
        length = int.from_bytes(data[pos + 8 : pos + 12], "big", signed=True)
        if 0 < length <= MAX_BATCH_BYTES and pos + 12 + length <= end:
            try:
                decode_batch(view, pos)
                return pos
            except CorruptBatchError:
                pass
        nxt = data.find(bytes([MAGIC]), pos + magic_at + 1)
        if nxt < 0:
            return None
        pos = nxt - magic_at
    return None


__all__ = [
    "DEFAULT_SEGMENT_BYTES",
    "FileStorage",
    "decode_quorum_state",
    "decode_snapshot_file",
    "encode_quorum_state",
    "encode_snapshot_file",
    "fsync_dir",
    "read_snapshot_file",
    "scan_segment",
    "segment_base",
    "segment_name",
    "snapshot_id_of",
    "snapshot_name",
    "write_atomically",
]
