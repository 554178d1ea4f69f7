"""KIP-595's raft-manager metrics, rendered in Prometheus text format.

The core reports what it knows (`RaftNode.metrics(now)`: the gauges, latencies and record rates); the
runtime adds what only it can see: how idle its event loop was, and the unknown-voter count. Each KIP
metric `name` (tags `type=raft-manager`) becomes `kafka_raft_manager_<name with '-' -> '_'>{node_id="N"}`,
e.g. `high-watermark` -> `kafka_raft_manager_high_watermark`. The enum `current-state` becomes one
series per state with a `state` label, 1 for the current state and 0 otherwise.
"""

from __future__ import annotations

from collections import deque

PREFIX = "kafka_raft_manager_"
STATES = ("leader", "candidate", "prospective", "voted", "follower", "unattached", "resigned", "observer")

GAUGES: dict[str, str] = {
    "current-leader": "The current quorum leader's id; -1 means unknown.",
    "current-epoch": "The current quorum epoch; 0 means unknown.",
    "current-vote": "The id this node voted for in the current epoch; -1 means none.",
    "log-end-offset": "The offset after the last record in the local log.",
    "log-end-epoch": "The epoch of the last record in the local log.",
    "high-watermark": "The high watermark (offsets below it are committed); -1 when unknown.",
    "number-unknown-voter-connections": "Voters whose connection information is not known.",
    "election-latency-max": "Longest election (candidate until a leader is known) in the window, ms.",
    "election-latency-avg": "Average election latency in the window, ms.",
    "commit-latency-max": "Longest append-to-commit time on the leader in the window, ms.",
    "commit-latency-avg": "Average append-to-commit time on the leader in the window, ms.",
    "fetch-records-rate": "Records fetched from the leader per second (followers and observers).",
    "append-records-rate": "Records appended per second (leader only).",
    "poll-idle-ratio-avg": "Fraction of the window the node's event loop spent waiting for work.",
    "wall-clock-ms": "The wall clock as the node's process reads it (ms since the epoch; may be skewed).",
    "node-clock-ms": "The node's clock: the largest wall-clock reading so far (never goes back).",
    "fsync-latency-avg": "Average time of the log's fsyncs in the window, ms.",
    "fsync-latency-max": "Longest fsync of the log in the window, ms.",
    "fsync-total": "fsyncs of the log since the node started.",
}


class Window:
    """Samples of the last `window_ms`: sums, averages and maxima over a sliding window."""

    def __init__(self, window_ms: int) -> None:
        self.window_ms = window_ms
        self._samples: deque[tuple[int, float]] = deque()

    def record(self, now: int, value: float) -> None:
        self._samples.append((now, value))
        self._prune(now)

    def _prune(self, now: int) -> None:
        horizon = now - self.window_ms
        while self._samples and self._samples[0][0] < horizon:
            self._samples.popleft()

    def total(self, now: int) -> float:
        self._prune(now)
        return sum(v for _, v in self._samples)

    def avg(self, now: int) -> float:
        self._prune(now)
        return self.total(now) / len(self._samples) if self._samples else 0.0

    def max(self, now: int) -> float:
        self._prune(now)
        return max((v for _, v in self._samples), default=0.0)


class RuntimeMetrics:
    """What only the runtime sees: how busy its event loop is (`poll-idle-ratio-avg`) and how long the
    log's fsyncs take (`fsync-latency-*`, the effect of a slow or stalled disk).

    The core measures the rest (elections, commit latency, record rates: `RaftNode.metrics`).
    """

    def __init__(self, window_ms: int, start_ms: int) -> None:
        self.window_ms = window_ms
        self.start_ms = start_ms
        self.busy = Window(window_ms)  # ms spent handling each event
        self.fsync = Window(window_ms)  # ms each fsync of the log took
        self.fsync_total = 0

    def record_fsync(self, now: int, elapsed_ms: float) -> None:
        self.fsync.record(now, elapsed_ms)
        self.fsync_total += 1

    def poll_idle_ratio(self, now: int) -> float:
        elapsed = min(self.window_ms, max(1, now - self.start_ms))
        return max(0.0, 1.0 - self.busy.total(now) / elapsed)

    def snapshot(self, now: int) -> dict[str, float]:
        return {
            "poll-idle-ratio-avg": self.poll_idle_ratio(now),
            "fsync-latency-avg": self.fsync.avg(now),
            "fsync-latency-max": self.fsync.max(now),
            "fsync-total": self.fsync_total,
        }


def metric_name(kip_name: str) -> str:
    return PREFIX + kip_name.replace("-", "_").replace(".", "_")


def _number(value: float | int) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int) or float(value).is_integer():
        return str(int(value))
    return repr(float(value))


def render_prometheus(node_id: int, values: dict[str, float | int | str]) -> str:
    """Prometheus text exposition (format 0.0.4) of KIP-named values; `current-state` is an enum."""
    label = f'node_id="{node_id}"'
    lines: list[str] = []
    for kip_name, value in sorted(values.items()):
        name = metric_name(kip_name)
        help_text = GAUGES.get(kip_name, f"KIP-595 raft-manager metric {kip_name}.")
        if kip_name == "current-state":
            lines.append(f"# HELP {name} The node's quorum state (1 for the current one).")
            lines.append(f"# TYPE {name} gauge")
            states = STATES if value in STATES else (*STATES, str(value))
            lines.extend(f'{name}{{{label},state="{s}"}} {1 if s == value else 0}' for s in states)
            continue
        if isinstance(value, str):
            continue  # other strings have no numeric series
        lines.append(f"# HELP {name} {help_text}")
        lines.append(f"# TYPE {name} gauge")
        lines.append(f"{name}{{{label}}} {_number(value)}")
    return "\n".join(lines) + "\n"


def parse_prometheus(text: str) -> dict[str, float | str]:
    """Read our own exposition back into KIP names (for tests and `quorum` tooling)."""
    out: dict[str, float | str] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        series, _, value = line.rpartition(" ")
        name = series.split("{", 1)[0]
        if not name.startswith(PREFIX):
            continue
        kip_name = name.removeprefix(PREFIX).replace("_", "-")
        if kip_name == "current-state":
            if float(value) == 1:
                out[kip_name] = series.split('state="', 1)[1].split('"', 1)[0]
            continue
        out[kip_name] = float(value)
    return out
