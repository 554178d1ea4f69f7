"""Image reads: a read served from a metadata image is exactly the committed log's image at its offset.

A broker answers reads from its own metadata image, not after a read barrier, so its answers may be
stale and checking them for linearizability would raise false alarms. What such a read does promise
(it carries the `metadata_offset` it reflects) is checked here, at that level:

- **image-mismatch**: the answer is not the committed log's image at that offset. Needs a timeline of
  the committed values (below); a read whose offset the timeline does not cover is *unverified*.
- **offset-beyond-log**: the offset is past the end of every node's committed log, in a run whose
  cluster recovered and dumped every node (so the dumps hold everything ever committed): the server
  showed records that are not committed, or committed records were lost.
- **offset-regression**: a server's answers go backwards: a read that began after another read from
  the same node had completed reflects an earlier offset.
- **offset-disagreement**: two answers that reflect the same offset differ (history only, no timeline
  needed).
- **non-monotonic-image** (`value_kind` "list", append-only keys): an answer at a higher offset is not
  an extension of an answer at a lower one (history only).

History ops (`f` in `read_fs`, default "read-broker"), `ok` ones judged:
`{"metadata_offset": 17, "reads": [["r", key, value], ...]}`; `node` names the server.

The timeline (`config-timeline.jsonl`, written by the system's adapter from its committed-log dumps):

    {"intervals": [[-1, 120], [300, 410]], "end": 410, "complete": true}
    {"offset": 7, "key": "append-0/leader.replication.throttled.replicas", "value": "1:0,2:0"}

An interval [a, b] says the image is known at every offset a..b; its entries at offset a are the
whole state there (keys absent: no value), later entries are changes. Values are the raw config
strings (null: no value); `value_kind` says how a read shows them: "list" (Kafka's comma-separated
list: null is []), "int" (null is null) or "raw".
"""

from __future__ import annotations

import bisect
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkers.history import History, HistoryError, Op
from checkers.verdict import UNKNOWN, Verdict

CHECKER = "image-reads"
TIMELINE_NAME = "config-timeline.jsonl"
VALUE_KINDS = ("list", "int", "raw")
MAX_EXAMPLES = 8


class TimelineError(ValueError):
    """A timeline file that cannot be read (the message names the file and line)."""


@dataclass
class Timeline:
    """The committed values of every key at every offset of some intervals."""

    intervals: list[tuple[int, int]]
    end: int | None = None  # the highest committed offset any dump holds
    complete: bool = False  # every node dumped after a recovered cluster: `end` bounds every commit
    changes: dict[tuple[int, Any], tuple[list[int], list[Any]]] = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        intervals: Iterable[Iterable[int]],
        entries: Iterable[tuple[int, Any, Any]],
        end: int | None = None,
        complete: bool = False,
    ) -> Timeline:
        spans = sorted((int(a), int(b)) for a, b in intervals)
        timeline = cls(spans, end, complete)
        starts = [a for a, _ in spans]
        staged: dict[tuple[int, Any], list[tuple[int, Any]]] = defaultdict(list)
        for offset, key, value in entries:
            i = bisect.bisect_right(starts, offset) - 1
            if i >= 0 and offset <= spans[i][1]:
                staged[(i, key)].append((offset, value))
        for slot, items in staged.items():
            items.sort(key=lambda item: item[0])
            timeline.changes[slot] = ([o for o, _ in items], [v for _, v in items])
        return timeline

    def covers(self, offset: int) -> int | None:
        """The index of the interval holding `offset`, or None."""
        i = bisect.bisect_right([a for a, _ in self.intervals], offset) - 1
        return i if i >= 0 and offset <= self.intervals[i][1] else None

    def value(self, interval: int, key: Any, offset: int) -> Any:
        """The raw value of `key` at `offset` (which interval `interval` covers); None: no value."""
        offsets, values = self.changes.get((interval, key), ((), ()))
        i = bisect.bisect_right(offsets, offset) - 1
        return values[i] if i >= 0 else None


def load_timeline(path: str | Path) -> Timeline:
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise TimelineError(f"{path}: cannot read: {exc.strerror or exc}") from None
    header: Mapping[str, Any] | None = None
    entries = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise TimelineError(f"{path}:{number}: not valid JSON ({exc})") from None
        if not isinstance(obj, dict):
            raise TimelineError(f"{path}:{number}: expected a JSON object")
        if header is None:
            if not isinstance(obj.get("intervals"), list):
                raise TimelineError(f"{path}:{number}: the first line must hold 'intervals'")
            header = obj
            continue
        if type(obj.get("offset")) is not int or "key" not in obj:
            raise TimelineError(f"{path}:{number}: an entry needs an integer 'offset' and a 'key'")
        entries.append((obj["offset"], obj["key"], obj.get("value")))
    if header is None:
        raise TimelineError(f"{path}: empty timeline")
    return Timeline.build(header["intervals"], entries, header.get("end"), bool(header.get("complete")))


def shown(raw: Any, kind: str) -> Any:
    """A committed raw value as a read of kind `kind` shows it."""
    if kind == "list":
        return [item.strip() for item in (raw or "").split(",") if item.strip()]
    if kind == "int" and raw is not None:
        try:
            return int(raw)
        except ValueError:
            return raw  # not a number: whatever the read showed cannot equal it
    return None if kind == "int" else raw


@dataclass(frozen=True)
class ImageRead:
    op: Op
    offset: int
    values: dict[Any, Any]  # key -> what the read showed

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.op.invoke_index,
            "process": self.op.process,
            "node": self.op.node,
            "metadata_offset": self.offset,
            "reads": [["r", k, v] for k, v in self.values.items()],
        }


def image_reads(history: History, read_fs: Iterable[str]) -> list[ImageRead]:
    fs = frozenset(read_fs)
    out = []
    for op in history.ops:
        if op.f not in fs or op.type != "ok":
            continue
        value = op.value
        where = f"{history.source}: op at index {op.invoke_index}"
        if not isinstance(value, dict) or type(value.get("metadata_offset")) is not int:
            raise HistoryError(f"{where}: an image read's value needs an integer 'metadata_offset'")
        reads = value.get("reads")
        if not isinstance(reads, list):
            raise HistoryError(f"{where}: an image read's value needs 'reads', a list of micro-ops")
        values = {}
        for mop in reads:
            if not isinstance(mop, list | tuple) or len(mop) != 3 or mop[0] != "r":
                raise HistoryError(f"{where}: micro-op {mop!r} is not ['r', key, value]")
            values[mop[1]] = mop[2]
        out.append(ImageRead(op, value["metadata_offset"], values))
    return out


class _Log:
    def __init__(self) -> None:
        self.counts: dict[str, int] = defaultdict(int)
        self.examples: dict[str, list[dict[str, Any]]] = defaultdict(list)

    def add(self, name: str, example: dict[str, Any]) -> None:
        self.counts[name] += 1
        if len(self.examples[name]) < MAX_EXAMPLES:
            self.examples[name].append(example)


def _history_checks(reads: list[ImageRead], kind: str, log: _Log) -> None:
    # regression: per node, in real-time order (a read that began after another completed)
    by_node: dict[Any, list[ImageRead]] = defaultdict(list)
    for r in reads:
        by_node[r.op.node].append(r)
    for node, items in by_node.items():
        done = sorted(items, key=lambda r: r.op.complete_time or 0)
        highest: ImageRead | None = None
        j = 0
        for r in sorted(items, key=lambda r: r.op.invoke_time):
            while j < len(done) and (done[j].op.complete_time or 0) < r.op.invoke_time:
                if highest is None or done[j].offset > highest.offset:
                    highest = done[j]
                j += 1
            if highest is not None and r.offset < highest.offset:
                log.add("offset-regression", {"node": node, "earlier": highest.to_json(), "later": r.to_json()})
    # the same offset, the same answer; and (append-only lists) a higher offset extends a lower one
    latest: dict[Any, tuple[int, Any, ImageRead]] = {}
    for r in sorted(reads, key=lambda r: (r.offset, r.op.invoke_index)):
        for key, value in r.values.items():
            seen = latest.get(key)
            if seen is not None:
                offset, before, other = seen
                if offset == r.offset and before != value:
                    log.add("offset-disagreement", {"key": key, "a": other.to_json(), "b": r.to_json()})
                elif (
                    kind == "list"
                    and offset < r.offset
                    and isinstance(before, list)
                    and isinstance(value, list)
                    and value[: len(before)] != before
                ):
                    log.add("non-monotonic-image", {"key": key, "lower": other.to_json(), "higher": r.to_json()})
            latest[key] = (r.offset, value, r)


def check_image_reads(
    history: History,
    timeline: Timeline | None,
    value_kind: str = "list",
    read_fs: Iterable[str] = ("read-broker",),
) -> Verdict:
    """See the module docstring."""
    if value_kind not in VALUE_KINDS:
        raise ValueError(f"unknown value kind {value_kind!r} (known: {', '.join(VALUE_KINDS)})")
    reads = image_reads(history, read_fs)
    log = _Log()
    _history_checks(reads, value_kind, log)
    verified = unverified = 0
    for r in reads:
        if timeline is None:
            unverified += 1
            continue
        interval = timeline.covers(r.offset)
        if interval is None:
            if timeline.complete and timeline.end is not None and r.offset > timeline.end:
                log.add("offset-beyond-log", {"read": r.to_json(), "log_end": timeline.end})
            else:
                unverified += 1
            continue
        verified += 1
        for key, value in r.values.items():
            expected = shown(timeline.value(interval, key, r.offset), value_kind)
            if value != expected:
                log.add("image-mismatch", {"key": key, "read": r.to_json(), "expected": expected})
    found = sorted(log.counts)
    if found:
        valid: bool | str = False
    elif reads and verified == 0:
        valid = UNKNOWN  # there was something to check, and nothing to check it against
    else:
        valid = True  # (with no image reads at all, vacuously)
    details: dict[str, Any] = {
        "value_kind": value_kind,
        "reads": len(reads),
        "verified": verified,
        "unverified": unverified,
        "nodes": sorted({str(r.op.node) for r in reads}),
        "anomaly_types": found,
        "anomaly_counts": dict(sorted(log.counts.items())),
        "anomalies": {name: log.examples[name] for name in found},
    }
    if timeline is not None:
        details["timeline"] = {"intervals": len(timeline.intervals), "end": timeline.end, "complete": timeline.complete}
    if not reads:
        details["reason"] = "no image reads: nothing to check"
    elif verified == 0 and not found:
        details["reason"] = "no read's offset is covered by the committed-log timeline"
    return Verdict(CHECKER, valid, details)


def add_check_arguments(parser: Any) -> None:
    group = parser.add_argument_group("image-reads")
    group.add_argument(
        "--timeline", help=f"committed-value timeline (default: {TIMELINE_NAME} in --dumps or beside the history)"
    )
    group.add_argument("--value-kind", choices=VALUE_KINDS, default="list", help="how reads show values (list)")
    group.add_argument("--image-read-f", action="append", help="f of the image reads (repeatable; default read-broker)")


def _timeline_path(args: Any) -> Path:
    explicit = getattr(args, "timeline", None)
    if explicit:
        return Path(explicit)
    base = getattr(args, "dumps", None)
    if base:
        return Path(base) / TIMELINE_NAME
    return Path(args.history).parent / TIMELINE_NAME


def check_from_args(history: History, args: Any) -> Verdict:
    path = _timeline_path(args)
    timeline = load_timeline(path) if path.is_file() else None
    verdict = check_image_reads(
        history,
        timeline,
        value_kind=getattr(args, "value_kind", "list") or "list",
        read_fs=getattr(args, "image_read_f", None) or ("read-broker",),
    )
    if timeline is None:
        verdict.details["timeline_missing"] = str(path)
        if verdict.details.get("reason"):
            verdict.details["reason"] = f"no committed-value timeline ({path} does not exist)"
    return verdict


def summarize(verdict: Verdict) -> list[str]:
    d = verdict.details
    if "reads" not in d:
        return [f"{verdict.checker}: {verdict.valid}"]
    lines = [
        f"{verdict.checker}: {verdict.valid} ({d['reads']} image reads from {', '.join(d['nodes']) or 'no node'}: "
        f"{d['verified']} checked against the committed log, {d['unverified']} not covered)"
    ]
    for name, count in d["anomaly_counts"].items():
        lines.append(f"  {name}: {count}")
    if d.get("reason"):
        lines.append(f"  {d['reason']}")
    return lines
