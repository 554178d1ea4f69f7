"""Elections: how many epochs the quorum went through per leader it got, and how long it was without
a leader after its active controller was stopped (KIP-595 leader election and EndQuorumEpoch).

A measure, not a safety check: its verdict is true whenever it could read its inputs (unknown else);
the release gate puts thresholds on its figures (harness/gate.py), so that a quorum that keeps electing
(a live-lock) fails even while every write eventually commits and every other checker is content.

Inputs, all written by the run itself on every backend that dumps committed logs:
- the committed metadata log: every node's `committed-log.jsonl` and the log tap (`log-tap.jsonl`,
  the records snapshots later replaced, and those snapshots' ends and epochs). Only a leader appends,
  and its first record in its epoch is its LeaderChange: an epoch *elected a leader* when a record of
  it committed (or a node still leads it at the end);
- the last epoch the nodes knew (`nodes/*/node-stats.json` `epoch`, else the log's last epoch). Every
  candidacy bumps the epoch by one (pre-votes, KIP-996, do not), so epochs 1..E were E elections;
- `commit-times.jsonl` (when the adapter timed the committed log): by which time which offsets were
  committed, on the history's clock;
- the history's nemesis events: the stops of the active controller (`start-kill` with mode `leader`,
  kill -9 or a graceful TERM).

Figures:
- `elections`: epochs started (E); `leader_epochs`: those that elected a leader; `split_votes`: the
  others (an epoch that elected nobody: split votes, lost races, or a leader deposed before its
  LeaderChange committed); `elections_per_leader_change`: E / leader_epochs;
- `leaderless_s`: the worst, over the stops of the leader, of the time from the stop to the commit
  of the next epoch's first record, its LeaderChange (the new leader is in office); separately
  for kill -9 (`leaderless_after_kill_s`) and graceful stops (`leaderless_after_resign_s`);
  `leaderless_unrecovered` counts stops after which no leader committed before the run ended.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from checkers.history import History
from checkers.quorum_progress import COMMITS_NAME, CommitTimes, CommitTimesError, read_commit_times
from checkers.verdict import UNKNOWN, Verdict

CHECKER = "elections"
DUMP_NAME = "committed-log.jsonl"
TAP_NAME = "log-tap.jsonl"
STATS_NAME = "node-stats.json"
NS_PER_S = 1_000_000_000


class ElectionsInputError(ValueError):
    """An input file that cannot be read (the message names the file and line)."""


@dataclass(frozen=True)
class LeaderStop:
    """The active controller stopped at `time` (ns): kill -9 or a graceful TERM."""

    time: int
    node: str
    graceful: bool


def _entries(path: Path) -> Iterable[Mapping[str, Any]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ElectionsInputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            if number == len(lines):
                break  # a torn last line
            raise ElectionsInputError(f"{path}:{number}: not valid JSON") from None
        if isinstance(obj, dict):
            yield obj


def leader_epochs(run_dir: Path) -> dict[int, int]:
    """Epoch -> the first committed offset known to be of that epoch, from the dumps and the log tap.
    Only a leader appends, so an epoch with any committed record (its LeaderChange first) had one. The
    tap skips what snapshots replaced (a snapshot line: `end_offset` and the `epoch` of its last
    record), so an epoch may be known only from a snapshot, at its last offset (an upper bound)."""
    out: dict[int, int] = {}

    def seen(epoch: Any, offset: Any) -> None:
        if type(epoch) is int and type(offset) is int and offset < out.get(epoch, offset + 1):
            out[epoch] = offset

    for path in [*sorted(run_dir.glob(f"nodes/*/{DUMP_NAME}")), run_dir / TAP_NAME]:
        if not path.is_file():
            continue
        for entry in _entries(path):
            snapshot = entry.get("snapshot")
            if isinstance(snapshot, dict):
                end = snapshot.get("end_offset")
                seen(snapshot.get("epoch"), end - 1 if type(end) is int else None)
            else:
                seen(entry.get("epoch"), entry.get("offset"))
    return out


def last_epoch(run_dir: Path, changes: Mapping[int, int]) -> tuple[int, bool]:
    """The highest epoch any node reported at the end (node-stats), or the log's; and whether a node
    led in it then (its LeaderChange may not have reached the dumps yet)."""
    epochs = list(changes)
    led: set[int] = set()
    for path in run_dir.glob(f"nodes/*/{STATS_NAME}"):
        try:
            stats = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            raise ElectionsInputError(f"{path}: not a JSON document") from None
        if isinstance(stats, dict) and isinstance(stats.get("epoch"), int):
            epochs.append(stats["epoch"])
            if stats.get("role") == "leader":
                led.add(stats["epoch"])
    last = max(epochs, default=0)
    return last, last in led


def leader_stops(history: History) -> list[LeaderStop]:
    """Completed `start-kill` events of mode `leader` (a failed start stopped nothing)."""
    out = []
    for ev in history.nemesis:
        if ev.f != "start-kill" or ev.type not in ("info", "ok") or not isinstance(ev.value, dict):
            continue
        if ev.value.get("mode") != "leader":
            continue
        for node in ev.value.get("targets") or ():
            out.append(LeaderStop(ev.time, str(node), ev.value.get("signal") == "TERM"))
    return out


def leaderless_ns(stop: LeaderStop, changes: Mapping[int, int], commits: CommitTimes) -> int | None:
    """From the stop to the commit of the first record of a later epoch than the one in office then
    (None: none committed before the run ended)."""
    end = commits.end_at(stop.time)
    in_office = max((e for e, off in changes.items() if off < end), default=0)
    later = [off for e, off in changes.items() if e > in_office and off >= end]
    if not later:
        return None
    committed = commits.committed_at(min(later))
    return None if committed is None else max(0, committed - stop.time)


def measure(history: History, run_dir: Path) -> dict[str, Any]:
    changes = leader_epochs(run_dir)
    elections, leads_now = last_epoch(run_dir, changes)
    leaders = len(changes) + (1 if leads_now and elections not in changes else 0)
    out: dict[str, Any] = {
        "elections": elections,
        "leader_epochs": leaders,
        "split_votes": max(0, elections - leaders),
        "elections_per_leader_change": round(elections / leaders, 3) if leaders else None,
    }
    stops = leader_stops(history)
    out["leader_stops"] = len(stops)
    commits_path = run_dir / COMMITS_NAME
    if not stops or not commits_path.is_file():
        out.update(leaderless_s=None, leaderless_after_kill_s=None, leaderless_after_resign_s=None)
        out["leaderless_unrecovered"] = 0
        return out
    commits = read_commit_times(commits_path)
    gaps = [(stop, leaderless_ns(stop, changes, commits)) for stop in stops]

    def worst(graceful: bool | None) -> float | None:
        values = [g for s, g in gaps if g is not None and (graceful is None or s.graceful == graceful)]
        return round(max(values) / NS_PER_S, 3) if values else None

    out["leaderless_s"] = worst(None)
    out["leaderless_after_kill_s"] = worst(False)
    out["leaderless_after_resign_s"] = worst(True)
    out["leaderless_unrecovered"] = sum(1 for _, g in gaps if g is None)
    out["stops"] = [
        {"time_s": s.time / NS_PER_S, "node": s.node, "graceful": s.graceful, "leaderless_s": g and g / NS_PER_S}
        for s, g in gaps
    ]
    return out


def check_elections(history: History, run_dir: str | Path) -> Verdict:
    try:
        details = measure(history, Path(run_dir))
    except (ElectionsInputError, CommitTimesError) as exc:
        return Verdict(CHECKER, UNKNOWN, {"error": str(exc)})
    return Verdict(CHECKER, True, details)


def check_from_args(history: Any, args: Any) -> Verdict:
    dumps = getattr(args, "dumps", None)
    if dumps is None:
        source = getattr(args, "history", None) or getattr(history, "source", None)
        dumps = Path(source).parent if source else Path(".")
    return check_elections(history, dumps)


def summarize(verdict: Verdict) -> list[str]:
    d = verdict.details
    if "elections" not in d:
        return [f"{verdict.checker}: {verdict.valid} ({d.get('error', '')})"]

    def s(value: float | None) -> str:
        return "-" if value is None else f"{value:.3f} s"

    return [
        f"{verdict.checker}: {verdict.valid} ({d['elections']} epochs, {d['leader_epochs']} elected a leader, "
        f"{d['split_votes']} split; {d['leader_stops']} leader stops: leaderless after kill "
        f"{s(d['leaderless_after_kill_s'])}, after graceful stop {s(d['leaderless_after_resign_s'])}"
        + (f", {d['leaderless_unrecovered']} never recovered" if d["leaderless_unrecovered"] else "")
        + ")"
    ]


__all__ = ["CHECKER", "check_elections", "check_from_args", "leader_epochs", "measure", "summarize"]
