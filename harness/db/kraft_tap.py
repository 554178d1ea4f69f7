"""The log tap: committed records copied from live nodes while a run goes on, into `log-tap.jsonl`.

A node's committed log starts after its latest snapshot, so the dumps taken at the end of a run no
longer hold the records a snapshot replaced, and a broker read that reflects one of those offsets
could not be checked against the log. The tap closes that gap: every time it is called it takes, from
every live node's view (its snapshot and the committed records after it), the records that extend
what it already holds, and writes them (with their bytes) as flushed JSON lines. When no node holds
the next offset any more, it writes the smallest snapshot past it and goes on from that snapshot's
end: the file is then a sequence of stretches, each starting at offset 0 or at a snapshot.

The records are committed ones only (below a node's high watermark), so the `image-replay` check may
demand that every one of them is still what the final logs hold at that offset.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

TAP_FILE = "log-tap.jsonl"

# A node's view: its snapshot dump ({"end_offset", "epoch", "data"}) and committed-log entries with
# records (node/metadata/dump.py), as `GET /v1/dump` serves them.
View = tuple[Mapping[str, Any], list[Mapping[str, Any]]]


class LogTap:
    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir) / TAP_FILE
        self.end = 0  # every committed offset below this is in the file (since its last snapshot)

    def add(self, views: Iterable[View]) -> int:
        """Extend the tap from these views; returns how many lines were written."""
        views = list(views)
        by_offset: dict[int, Mapping[str, Any]] = {}
        for _, entries in views:
            for entry in entries:
                if entry["offset"] >= self.end:
                    by_offset.setdefault(entry["offset"], entry)
        lines: list[Mapping[str, Any]] = []
        while True:
            while self.end in by_offset:
                lines.append(by_offset[self.end])
                self.end += 1
            # nobody holds the next offset: if a snapshot covers it, it was committed and replaced
            later = [s for s, _ in views if s.get("data") is not None and s["end_offset"] > self.end]
            if not later:
                break
            snapshot = min(later, key=lambda s: s["end_offset"])
            lines.append({"snapshot": snapshot})
            self.end = snapshot["end_offset"]
        if lines:
            with open(self.path, "a", encoding="utf-8") as f:
                f.write("".join(json.dumps(line, sort_keys=True, separators=(",", ":")) + "\n" for line in lines))
                f.flush()
        return len(lines)
