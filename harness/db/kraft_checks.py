"""End-of-run checks that need the reference cluster's own code (`node/metadata`): image replay, and
the committed-value timeline the `image-reads` checker judges broker reads against.

`checkers/` knows nothing of `node/`, so what needs to decode records lives here, next to the kraft
adapter. Inputs, all in the run directory:

- `nodes/<node>/committed-log.jsonl` (one line per committed record, with its bytes and batch),
  `metadata-snapshot.json` (the snapshot that log starts after) and `metadata-image.json` (the node's
  image): written by a node on a clean stop, by the simulator's collection, or fetched over HTTP
  (`GET /v1/dump`) from a running node;
- `log-tap.jsonl`: committed records and snapshots read from live nodes while the run went on
  (`KraftDB.tap`), so that offsets a snapshot later replaced are still known.

`image-replay` (registered as a checker; `kchaos analyze` runs it on kraft runs with dumps):
- **digest-mismatch**: a dumped record's bytes do not hash to its digest (the dump is not evidence);
- **image-mismatch**: a node's image differs from its snapshot plus its committed log replayed up to
  the image's offset, by the same rules the node applies (a batch that does not replay is skipped
  whole, as every node skips it);
- **image-outside-log**: the image's offset is before the node's snapshot or past its committed log;
- **log-gap**: the committed log does not start at the node's snapshot or skips an offset (nothing
  to replay it by);
- **committed-entry-changed**: a record the tap saw committed during the run is not the record a
  node's final log holds at that offset (committed data was overwritten).

The timeline (`config-timeline.jsonl`, format in `checkers/image_reads.py`) is the union of every
dump and the tap, replayed from the earliest known state; each stretch of offsets the records cover
without a gap (from offset 0 or from a snapshot) is one interval.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from checkers.image_reads import TIMELINE_NAME
from checkers.log_agreement import DUMP_NAME
from checkers.verdict import UNKNOWN, Verdict
from harness.db.kraft_tap import TAP_FILE

CHECKER = "image-replay"
IMAGE_NAME = "metadata-image.json"
SNAPSHOT_NAME = "metadata-snapshot.json"
MAX_EXAMPLES = 8
TOPIC = 2  # ConfigResourceType.TOPIC


class DumpFormatError(ValueError):
    """A dump file that cannot be read (the message names the file and line)."""


@dataclass(frozen=True, slots=True)
class LogRecord:
    offset: int
    epoch: int
    digest: str
    record: bytes
    batch: int
    control: bool


@dataclass(frozen=True, slots=True)
class Snapshot:
    end_offset: int
    epoch: int
    data: bytes | None  # None: the log starts at offset 0


@dataclass
class NodeDump:
    node: str
    snapshot: Snapshot
    log: list[LogRecord]
    image: dict[str, Any] | None


# --- reading ----------------------------------------------------------------------------------------


def _b64(text: Any, where: str) -> bytes:
    if not isinstance(text, str):
        raise DumpFormatError(f"{where}: expected base64 text, got {text!r}")
    try:
        return base64.b64decode(text, validate=True)
    except binascii.Error as exc:
        raise DumpFormatError(f"{where}: bad base64 ({exc})") from None


def record_from(obj: Mapping[str, Any], where: str) -> LogRecord:
    try:
        offset, epoch, digest = obj["offset"], obj["epoch"], obj["digest"]
        raw = obj["record"]
    except KeyError as exc:
        raise DumpFormatError(f"{where}: missing {exc.args[0]!r} (a dump without record bytes?)") from None
    if type(offset) is not int or type(epoch) is not int or not isinstance(digest, str):
        raise DumpFormatError(f"{where}: offset and epoch must be integers and digest a string")
    batch = obj.get("batch", offset)
    return LogRecord(offset, epoch, digest, _b64(raw, where), int(batch), bool(obj.get("control", False)))


def snapshot_from(obj: Any, where: str) -> Snapshot:
    if not isinstance(obj, Mapping) or type(obj.get("end_offset")) is not int:
        raise DumpFormatError(f"{where}: a snapshot needs an integer 'end_offset'")
    data = obj.get("data")
    return Snapshot(obj["end_offset"], int(obj.get("epoch", 0)), None if data is None else _b64(data, where))


def _jsonl(path: Path) -> Iterator[tuple[str, Any]]:
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            yield where, json.loads(line)
        except ValueError as exc:
            raise DumpFormatError(f"{where}: not valid JSON ({exc})") from None


def read_node_dump(directory: Path) -> NodeDump | None:
    """A node's dumps, or None when it left no committed log (or one without record bytes)."""
    log_path = directory / DUMP_NAME
    if not log_path.is_file():
        return None
    records = [record_from(obj, where) for where, obj in _jsonl(log_path)]
    snapshot_path = directory / SNAPSHOT_NAME
    if snapshot_path.is_file():
        snapshot = snapshot_from(json.loads(snapshot_path.read_text(encoding="utf-8")), str(snapshot_path))
    else:
        snapshot = Snapshot(records[0].offset if records else 0, 0, None)
    image_path = directory / IMAGE_NAME
    image = json.loads(image_path.read_text(encoding="utf-8")) if image_path.is_file() else None
    return NodeDump(directory.name, snapshot, records, image)


def read_node_dumps(run_dir: Path) -> tuple[dict[str, NodeDump], list[str]]:
    """Every node's dump under run_dir/nodes/ (nodes without one, or with an old digest-only dump, are
    listed apart)."""
    dumps: dict[str, NodeDump] = {}
    missing: list[str] = []
    nodes = Path(run_dir) / "nodes"
    directories = sorted(p for p in nodes.iterdir() if p.is_dir()) if nodes.is_dir() else []
    for directory in (d for d in directories if not d.name.startswith("_")):
        try:
            dump = read_node_dump(directory)
        except DumpFormatError:
            dump = None
        if dump is None:
            missing.append(directory.name)
        else:
            dumps[directory.name] = dump
    return dumps, missing


def read_tap(run_dir: Path) -> tuple[list[LogRecord], list[Snapshot]]:
    path = Path(run_dir) / TAP_FILE
    records: list[LogRecord] = []
    snapshots: list[Snapshot] = []
    if not path.is_file():
        return records, snapshots
    lines = path.read_text(encoding="utf-8").splitlines()
    if lines and not lines[-1].endswith("}"):
        lines = lines[:-1]  # a harness killed mid-line
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            obj = json.loads(line)
        except ValueError:
            continue  # a torn line: the rest of the tap still counts
        if "snapshot" in obj:
            snapshots.append(snapshot_from(obj["snapshot"], where))
        else:
            records.append(record_from(obj, where))
    return records, snapshots


# --- replay -----------------------------------------------------------------------------------------


def batches_of(records: Iterable[LogRecord]) -> Iterator[Any]:
    """RecordBatches rebuilt from consecutive records that share a batch base offset."""
    from node.raft.records import RecordBatch

    group: list[LogRecord] = []
    for r in records:
        if group and (r.batch != group[0].batch or r.offset != group[-1].offset + 1):
            yield RecordBatch(group[0].batch, group[0].epoch, tuple(g.record for g in group), group[0].control)
            group = []
        group.append(r)
    if group:
        yield RecordBatch(group[0].batch, group[0].epoch, tuple(g.record for g in group), group[0].control)


def apply_committed(image: Any, batch: Any) -> None:
    """What a node does with a committed batch (node/process/process.py `_apply_committed`): apply it
    atomically; a batch the image refuses is skipped whole and only moves the position."""
    from node.metadata.image import MetadataImageError

    try:
        image.apply_batch(batch)
    except MetadataImageError:
        image.set_position(batch.last_offset, batch.epoch)


def base_image(snapshot: Snapshot) -> Any:
    from node.metadata.image import MetadataImage
    from node.metadata.snapshot import load_snapshot

    return MetadataImage() if snapshot.data is None else load_snapshot(snapshot.data)


def _digest_ok(r: LogRecord) -> bool:
    return hashlib.sha256(r.record).hexdigest() == r.digest


# --- image-replay -----------------------------------------------------------------------------------


class _Log:
    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.examples: dict[str, list[dict[str, Any]]] = {}

    def add(self, name: str, example: dict[str, Any]) -> None:
        self.counts[name] = self.counts.get(name, 0) + 1
        examples = self.examples.setdefault(name, [])
        if len(examples) < MAX_EXAMPLES:
            examples.append(example)


def _sections_differing(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))


def replay_node(dump: NodeDump, log: _Log) -> bool | None:
    """Check one node's image against its replayed log; None when it has no image to compare."""
    for r in dump.log:
        if not _digest_ok(r):
            log.add("digest-mismatch", {"node": dump.node, "offset": r.offset})
            return False
    start = dump.snapshot.end_offset
    records = [r for r in dump.log if r.offset >= start]  # below its end, the snapshot already has them
    offsets = [r.offset for r in records]
    if offsets and offsets != list(range(start, start + len(offsets))):
        first = next(o for i, o in enumerate(offsets) if o != start + i)
        log.add("log-gap", {"node": dump.node, "snapshot_end": start, "first_unexpected_offset": first})
        return False
    if dump.image is None:
        return None
    target = int(dump.image["last_offset"])
    end = records[-1].offset if records else start - 1
    if not start - 1 <= target <= end:
        log.add(
            "image-outside-log",
            {"node": dump.node, "image_offset": target, "snapshot_end": start, "log_end": end},
        )
        return False
    image = base_image(dump.snapshot)
    for batch in batches_of(r for r in records if r.offset <= target):
        apply_committed(image, batch)
    ours = image.as_dict(with_position=False)
    if image.digest(with_position=False) != dump.image.get("state_digest") or (
        image.last_offset,
        image.last_epoch,
    ) != (target, dump.image.get("last_epoch")):
        log.add(
            "image-mismatch",
            {
                "node": dump.node,
                "offset": target,
                "differs_in": _sections_differing(ours, dump.image.get("image", {})),
                "replay_position": [image.last_offset, image.last_epoch],
                "image_position": [target, dump.image.get("last_epoch")],
            },
        )
        return False
    return True


def check_image_replay(run_dir: str | Path) -> Verdict:
    """See the module docstring."""
    run_dir = Path(run_dir)
    log = _Log()
    dumps, missing = read_node_dumps(run_dir)
    replayed: list[str] = []
    for node, dump in dumps.items():
        if replay_node(dump, log) is not None:
            replayed.append(node)
    tap_records, _ = read_tap(run_dir)
    final = {node: {r.offset: r for r in dump.log} for node, dump in dumps.items()}
    for seen in tap_records:
        for node, by_offset in final.items():
            held = by_offset.get(seen.offset)
            if held is not None and (held.epoch, held.digest) != (seen.epoch, seen.digest):
                log.add(
                    "committed-entry-changed",
                    {
                        "offset": seen.offset,
                        "seen_during_run": {"epoch": seen.epoch, "digest": seen.digest},
                        "node": node,
                        "final": {"epoch": held.epoch, "digest": held.digest},
                    },
                )
    found = sorted(log.counts)
    valid: bool | str = False if found else (True if replayed else UNKNOWN)
    details: dict[str, Any] = {
        "nodes_replayed": replayed,
        "nodes_without_dumps": missing,
        "tap_records": len(tap_records),
        "anomaly_types": found,
        "anomaly_counts": dict(sorted(log.counts.items())),
        "anomalies": log.examples,
    }
    if not replayed and not found:
        details["reason"] = "no node left an image and a committed log with record bytes"
    return Verdict(CHECKER, valid, details)


def check_from_args(_history: Any, args: Any) -> Verdict:
    return check_image_replay(getattr(args, "dumps", None) or Path(args.history).parent)


def summarize(verdict: Verdict) -> list[str]:
    d = verdict.details
    lines = [
        f"{verdict.checker}: {verdict.valid} (images replayed: {', '.join(d['nodes_replayed']) or 'none'}"
        + (f"; no dump: {', '.join(d['nodes_without_dumps'])}" if d["nodes_without_dumps"] else "")
        + f"; {d['tap_records']} records tapped during the run)"
    ]
    lines += [f"  {name}: {count}" for name, count in d["anomaly_counts"].items()]
    if d.get("reason"):
        lines.append(f"  {d['reason']}")
    return lines


# --- the committed-value timeline -----------------------------------------------------------------


Tap = tuple[list[LogRecord], list[Snapshot]]


def _union(dumps: Mapping[str, NodeDump], tap: Tap) -> tuple[dict[int, LogRecord], dict[int, Snapshot]]:
    records: dict[int, LogRecord] = {}
    snapshots: dict[int, Snapshot] = {}
    sources: list[tuple[Iterable[LogRecord], Iterable[Snapshot]]] = [(tap[0], tap[1])]
    sources += [(d.log, [d.snapshot]) for d in dumps.values()]
    for recs, snaps in sources:
        for r in recs:
            if _digest_ok(r):
                records.setdefault(r.offset, r)
        for s in snaps:
            if s.data is not None or s.end_offset == 0:
                snapshots.setdefault(s.end_offset, s)
    return records, snapshots


def committed_records(run_dir: str | Path) -> tuple[dict[int, LogRecord], dict[int, Snapshot]]:
    """Every committed record (by offset) and snapshot (by end offset) the dumps and the tap hold."""
    dumps, _ = read_node_dumps(Path(run_dir))
    records, snapshots = _union(dumps, read_tap(Path(run_dir)))
    if 0 in records and 0 not in snapshots:
        snapshots[0] = Snapshot(0, 0, None)
    return records, snapshots


def stretches(
    records: Mapping[int, LogRecord], snapshots: Mapping[int, Snapshot]
) -> Iterator[tuple[Any, list[LogRecord]]]:
    """(the image a snapshot loads, the committed records that follow it without a gap), from the
    earliest start on; a start an earlier stretch already covers is skipped. The image is the
    caller's to replay the records into."""
    position = -2  # the image is known up to here
    for start in sorted(snapshots):
        if start - 1 <= position:
            continue
        image = base_image(snapshots[start])
        offset = image.last_offset + 1
        stretch = []
        while offset in records:
            stretch.append(records[offset])
            offset += 1
        position = offset - 1
        yield image, stretch


def topic_configs(image: Any) -> dict[str, str]:
    """ "topic/config" -> value, for every topic config the image holds."""
    return {
        f"{name}/{config}": value
        for rtype, name in image.config_resources
        if rtype == TOPIC
        for config, value in image.configs(rtype, name).items()
    }


def build_timeline(run_dir: str | Path) -> tuple[list[list[int]], list[dict[str, Any]], int | None]:
    """(intervals, entries, end) from every dump and the tap (see the module docstring)."""
    from node.metadata.records import ConfigRecord, MetadataRecordError, RemoveTopicRecord, decode_record

    records, snapshots = committed_records(run_dir)
    end = max([*records, *(s - 1 for s in snapshots)], default=None)
    intervals: list[list[int]] = []
    entries: list[dict[str, Any]] = []
    for image, stretch in stretches(records, snapshots):
        first = image.last_offset
        entries += [{"offset": first, "key": k, "value": v} for k, v in sorted(topic_configs(image).items())]
        i = 0
        while i < len(stretch):
            group = [stretch[i]]
            i += 1
            while i < len(stretch) and stretch[i].batch == group[0].batch:
                group.append(stretch[i])
                i += 1
            touched: set[str] = set()
            for r in group if not group[0].control else ():
                try:
                    record = decode_record(r.record)
                except MetadataRecordError:
                    continue
                if isinstance(record, ConfigRecord) and record.resource_type == TOPIC:
                    touched.add(record.resource_name)
                elif isinstance(record, RemoveTopicRecord):
                    name = image.topic_name(record.topic_id)
                    if name is not None:
                        touched.add(name)
            before = {k: v for k, v in topic_configs(image).items() if k.split("/", 1)[0] in touched}
            for batch_ in batches_of(group):
                apply_committed(image, batch_)
            after = {k: v for k, v in topic_configs(image).items() if k.split("/", 1)[0] in touched}
            at = image.last_offset
            for key in sorted(set(before) | set(after)):
                if before.get(key) != after.get(key):
                    entries.append({"offset": at, "key": key, "value": after.get(key)})
        intervals.append([first, image.last_offset])
    return intervals, entries, end


def write_timeline(run_dir: str | Path, *, complete: bool) -> Path:
    """Write run_dir/config-timeline.jsonl. `complete`: every node dumped after the cluster recovered,
    so the dumps hold every committed offset (the image-reads checker may then call an offset past
    their end a violation)."""
    intervals, entries, end = build_timeline(run_dir)
    path = Path(run_dir) / TIMELINE_NAME
    lines = [json.dumps({"intervals": intervals, "end": end, "complete": complete})]
    lines += [json.dumps(e, sort_keys=True, separators=(",", ":")) for e in entries]
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path
