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

Given the run's clock, the tap also writes when it saw the committed log grow: `commit-times.jsonl`
(format in `checkers/quorum_progress.py`), a header with the facts the quorum-progress check needs about the
cluster, then one `{"time", "end"}` line per call that moved the end. The time is read after the
views were taken, so it is an upper bound of when those offsets committed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from checkers.quorum_progress import COMMITS_NAME, point_line

TAP_FILE = "log-tap.jsonl"

# A node's view: its snapshot dump ({"end_offset", "epoch", "data"}) and committed-log entries with
# records (node/metadata/dump.py), as `GET /v1/dump` serves them.
View = tuple[Mapping[str, Any], list[Mapping[str, Any]]]


class LogTap:
    def __init__(self, run_dir: Path, commit_header: Mapping[str, Any] | None = None) -> None:
        self.path = Path(run_dir) / TAP_FILE
        self.end = 0  # every committed offset below this is in the file (since its last snapshot)
        self.commits_path = Path(run_dir) / COMMITS_NAME
        self._commit_header = commit_header  # written before the first commit time
        self._timed_end = -1  # the end the last commit-times line gave

    def mark(self, time_ns: int) -> None:
        """Record that by `time_ns` (the run's clock, read after the last `add`) every offset below the
        tap's end was committed; nothing when the end has not moved (or without a header)."""
        if self._commit_header is None or self.end == self._timed_end:
            return
        lines = []
        if self._timed_end < 0:
            lines.append(dict(self._commit_header))
        lines.append(point_line(time_ns, self.end))
        self._timed_end = self.end
        with open(self.commits_path, "a", encoding="utf-8") as f:
            f.write("".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines))
            f.flush()

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
