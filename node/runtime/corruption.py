"""The `corrupt` fault: damage a stopped node's log or snapshot where a correct node must notice, and undo it.

`FileStorage` treats a damaged *tail* of the log as a torn write and cuts it away silently; damage
there would make a single node lose acknowledged data without anyone being able to tell a bug from
bad luck. So the damage is placed where detection is certain:

- `bitflip-log`: one bit of a batch that has a valid batch after it, in a byte its CRC32C or magic
  check covers (not its length field). A correct node refuses to start.
- `truncate-log`: a segment that is not the last cut short, leaving a gap before the next one. A
  correct node refuses to start.
- `bitflip-snapshot` / `truncate-snapshot`: one bit of a snapshot file flipped (its CRC32C covers
  every other byte) or the file cut short. A correct node sets the file aside if an older snapshot
  and the log still hold every record it held, else refuses to start.

The choice of file, batch, byte and bit comes from the caller's seeded RNG. Works on any
`FileSystem` (the OS for real nodes, `SimFS` in the simulator); edits are durable when they return.
`restore_corruption` puts the original bytes back, but only while the file still holds exactly the
damaged content (a node that set a snapshot aside has renamed it; nothing is then restored).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from node.runtime.file_storage import LOG_DIR_NAME, scan_segment, segment_base, snapshot_id_of
from node.runtime.fs import FileSystem

CORRUPT_MODES = ("bitflip-log", "truncate-log", "bitflip-snapshot", "truncate-snapshot")
_LENGTH_FIELD = range(8, 12)  # batch_length: a flip there moves the batch's end; every other byte is checked


class NothingToCorrupt(Exception):
    """The data dir holds nothing the mode could damage detectably (the message says why)."""


@dataclass(frozen=True)
class Corruption:
    """What `corrupt_data_dir` changed, with the bytes it replaced."""

    mode: str
    path: str  # the damaged file
    position: int  # the byte flipped, or the length the file was cut to
    original: bytes  # the byte before the flip, or the tail cut off
    damaged: bytes  # the flipped byte, or b"" for a cut
    detail: str  # where, in the file format's terms

    @property
    def is_log(self) -> bool:
        return self.mode.endswith("-log")

    def describe(self) -> dict[str, object]:
        """For the history: mode, file, byte position and a sentence."""
        return {"mode": self.mode, "file": self.path, "position": self.position, "detail": self.detail}

    def __str__(self) -> str:
        return f"{self.mode} of {self.path}: {self.detail}"


def corrupt_data_dir(fs: FileSystem, data_dir: str | Path, mode: str, rng: random.Random) -> Corruption:
    """Damage the data dir of a stopped node (see the module docstring); NothingToCorrupt if the
    mode finds nothing to damage detectably, ValueError for an unknown mode."""
    if mode not in CORRUPT_MODES:
        raise ValueError(f"unknown corrupt mode {mode!r}; choose from {', '.join(CORRUPT_MODES)}")
    log_dir = Path(data_dir) / LOG_DIR_NAME
    names = fs.listdir(log_dir) if fs.is_dir(log_dir) else []
    if mode == "bitflip-log":
        return _bitflip_log(fs, log_dir, names, rng)
    if mode == "truncate-log":
        return _truncate_log(fs, log_dir, names, rng)
    return _damage_snapshot(fs, log_dir, names, mode, rng)


def restore_corruption(fs: FileSystem, corruption: Corruption) -> bool:
    """Put back what `corruption` changed; False (and nothing touched) if the file is gone or differs
    from what the corruption left."""
    path = corruption.path
    if not fs.exists(path) or fs.is_dir(path):
        return False
    raw = fs.read_file(path)
    at = corruption.position
    if corruption.damaged:  # a flipped byte
        if raw[at : at + len(corruption.damaged)] != corruption.damaged:
            return False
        fs.overwrite(path, at, corruption.original)
        return True
    if len(raw) != at:  # a cut: the file must still end where it was cut
        return False
    fs.overwrite(path, at, corruption.original)
    return True


def _segments(fs: FileSystem, log_dir: Path, names: list[str]) -> list[tuple[int, Path, bytes]]:
    found = sorted((base, name) for name in names if (base := segment_base(name)) is not None)
    return [(base, log_dir / name, fs.read_file(log_dir / name)) for base, name in found]


def _bitflip_log(fs: FileSystem, log_dir: Path, names: list[str], rng: random.Random) -> Corruption:
    batches: list[tuple[Path, int, int, int]] = []  # segment, start, stop, base offset
    last_epoch = -1
    for base, path, data in _segments(fs, log_dir, names):
        valid, bad_pos = scan_segment(data, base, last_epoch)
        for batch, start, stop in valid:
            batches.append((path, start, stop, batch.base_offset))
            last_epoch = batch.epoch
        if bad_pos is not None:
            break  # a torn tail already: nothing after it counts as a valid batch
    if len(batches) < 2:
        raise NothingToCorrupt(
            f"nothing to corrupt: {log_dir} holds {len(batches)} valid batch(es); a bit flip needs a batch with a "
            "valid batch after it (damage to the last one looks like a torn write)"
        )
    path, start, stop, offset = batches[rng.randrange(len(batches) - 1)]
    positions = [p for p in range(start, stop) if p - start not in _LENGTH_FIELD]
    at = positions[rng.randrange(len(positions))]
    bit = rng.randrange(8)
    original = fs.read_file(path)[at : at + 1]
    damaged = bytes([original[0] ^ (1 << bit)])
    fs.overwrite(path, at, damaged)
    detail = f"bit {bit} of byte {at} flipped, in the batch at offset {offset} (bytes {start}-{stop})"
    return Corruption("bitflip-log", str(path), at, original, damaged, detail)


def _truncate_log(fs: FileSystem, log_dir: Path, names: list[str], rng: random.Random) -> Corruption:
    segments = _segments(fs, log_dir, names)
    later_has_data = [any(data for _, _, data in segments[i + 1 :]) for i in range(len(segments))]
    candidates = [i for i, (_, _, data) in enumerate(segments) if data and later_has_data[i]]
    if not candidates:
        raise NothingToCorrupt(
            f"nothing to corrupt: {log_dir} has {len(segments)} log segment(s) and no non-empty one before "
            "another; cutting the last segment looks like a torn write"
        )
    base, path, data = segments[candidates[rng.randrange(len(candidates))]]
    cut = rng.randrange(len(data))
    fs.truncate_file(path, cut)
    detail = f"segment {path.name} (base offset {base}) cut from {len(data)} to {cut} bytes, before a later segment"
    return Corruption("truncate-log", str(path), cut, data[cut:], b"", detail)


def _damage_snapshot(fs: FileSystem, log_dir: Path, names: list[str], mode: str, rng: random.Random) -> Corruption:
    found = sorted(((sid.end_offset, sid.epoch), name) for name in names if (sid := snapshot_id_of(name)) is not None)
    snapshots = [(log_dir / name, raw) for _, name in found if (raw := fs.read_file(log_dir / name))]
    if not snapshots:
        raise NothingToCorrupt(f"nothing to corrupt: {log_dir} holds no snapshot file")
    path, raw = snapshots[rng.randrange(len(snapshots))]
    if mode == "truncate-snapshot":
        cut = rng.randrange(len(raw))
        fs.truncate_file(path, cut)
        detail = f"snapshot {path.name} cut from {len(raw)} to {cut} bytes"
        return Corruption(mode, str(path), cut, raw[cut:], b"", detail)
    at = rng.randrange(len(raw))
    bit = rng.randrange(8)
    original = raw[at : at + 1]
    damaged = bytes([original[0] ^ (1 << bit)])
    fs.overwrite(path, at, damaged)
    detail = f"bit {bit} of byte {at} of snapshot {path.name} flipped"
    return Corruption(mode, str(path), at, original, damaged, detail)


__all__ = ["CORRUPT_MODES", "Corruption", "NothingToCorrupt", "corrupt_data_dir", "restore_corruption"]
