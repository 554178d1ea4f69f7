"""Windowed figures behind KIP-595's raft-manager metrics, kept by the core (it alone sees `now`)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

WINDOW_MS = 30_000


@dataclass(slots=True)
class _Window:
    """(time, value) samples of the last WINDOW_MS."""

    samples: deque[tuple[int, float]] = field(default_factory=deque)

    def add(self, now: int, value: float) -> None:
        self.samples.append((now, value))
        self._trim(now)

    def _trim(self, now: int) -> None:
        while self.samples and self.samples[0][0] < now - WINDOW_MS:
            self.samples.popleft()

    def avg_max(self, now: int) -> tuple[float, float]:
        self._trim(now)
        if not self.samples:
            return 0.0, 0.0
        values = [v for _, v in self.samples]
        return sum(values) / len(values), max(values)

    def rate_per_s(self, now: int) -> float:
        self._trim(now)
        return sum(v for _, v in self.samples) * 1000.0 / WINDOW_MS


@dataclass(slots=True)
class RaftMetrics:
    elections: _Window = field(default_factory=_Window)
    commits: _Window = field(default_factory=_Window)
    fetched_records: _Window = field(default_factory=_Window)
    appended_records: _Window = field(default_factory=_Window)
    elections_total: int = 0
    committed_appends_total: int = 0
    snapshots_fetched_total: int = 0  # snapshots copied from the leader and installed (KIP-630 catch-up)
    snapshots_written_total: int = 0  # snapshots of its own state this node wrote

    def record_election(self, now: int, latency_ms: int) -> None:
        self.elections_total += 1
        self.elections.add(now, latency_ms)

    def committed(self, now: int, latency_ms: int) -> None:
        self.committed_appends_total += 1
        self.commits.add(now, latency_ms)

    def fetched(self, now: int, records: int) -> None:
        self.fetched_records.add(now, records)

    def appended(self, now: int, records: int) -> None:
        self.appended_records.add(now, records)

    def snapshot(self, now: int) -> dict[str, float]:
        election_avg, election_max = self.elections.avg_max(now)
        commit_avg, commit_max = self.commits.avg_max(now)
        return {
            "election-latency-avg": election_avg,
            "election-latency-max": election_max,
            "commit-latency-avg": commit_avg,
            "commit-latency-max": commit_max,
            "fetch-records-rate": self.fetched_records.rate_per_s(now),
            "append-records-rate": self.appended_records.rate_per_s(now),
            "elections-total": self.elections_total,
            "committed-appends-total": self.committed_appends_total,
            "snapshots-fetched-total": self.snapshots_fetched_total,
            "snapshots-written-total": self.snapshots_written_total,
        }
