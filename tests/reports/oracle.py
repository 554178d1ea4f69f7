"""Straightforward pure-Python reference computations for the report figures.

Written independently of `reports/` (plain loops over history.jsonl read with the json module, no
pandas, no shared helpers) so the tests compare the pipeline against a second implementation.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

MS = 1_000_000


@dataclass
class Op:
    process: str
    f: str
    outcome: str
    invoke: int
    complete: int | None
    state: list[str] = field(default_factory=list)  # ["calm"] or the active fault kinds

    @property
    def latency_ms(self) -> float | None:
        return None if self.complete is None else (self.complete - self.invoke) / MS


@dataclass
class Fault:
    kind: str
    start: int
    end: int
    healed: bool


@dataclass
class Run:
    run_id: str
    test: dict
    results: dict
    ops: list[Op]
    faults: list[Fault]
    end: int

    @property
    def name(self) -> str:
        return self.test["name"]

    @property
    def date(self) -> str:
        return self.test["started_at"][:10]

    @property
    def nemesis(self) -> str:
        kinds = sorted(set(self.test.get("nemesis") or []))
        return "+".join(kinds) if kinds else "none"

    @property
    def verdict(self) -> str:
        v = self.results.get("valid")
        return "true" if v is True else "false" if v is False else "unknown"

    @property
    def lost(self) -> int:
        total = 0
        for details in self.results["checkers"].values():
            if "lost-count" in details:
                total += details["lost-count"]
            elif isinstance(details.get("lost"), list):
                total += len(details["lost"])
        return total


def load_run(run_dir: Path) -> Run:
    events = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines() if line]
    events.sort(key=lambda e: e["index"])
    end = max(e["time"] for e in events)
    faults: list[Fault] = []
    nemesis = [e for e in events if e["process"] == "nemesis"]
    for i in range(len(nemesis) - 1):
        inv, done = nemesis[i], nemesis[i + 1]
        if inv["type"] != "invoke" or done["type"] == "invoke":
            continue
        action, _, kind = inv["f"].partition("-")
        if action == "start" and done["type"] != "fail":
            faults.append(Fault(kind, done["time"], end, False))
        elif action == "stop":
            for fault in faults:
                if fault.kind == kind and not fault.healed and fault.end == end and fault.start <= done["time"]:
                    fault.end = done["time"]
                    fault.healed = True
    pending: dict[str, dict] = {}
    ops: list[Op] = []
    for e in events:
        if e["process"] == "nemesis":
            continue
        p = str(e["process"])
        if e["type"] == "invoke":
            if p in pending:  # an invoke never completed
                ops.append(_op(pending.pop(p), None, faults))
            pending[p] = e
        elif p in pending:
            ops.append(_op(pending.pop(p), e, faults))
    for inv in pending.values():
        ops.append(_op(inv, None, faults))
    return Run(
        f"{run_dir.parent.name}/{run_dir.name}",
        json.loads((run_dir / "test.json").read_text()),
        json.loads((run_dir / "results.json").read_text()),
        ops,
        faults,
        end,
    )


def _op(inv: dict, done: dict | None, faults: list[Fault]) -> Op:
    kinds = sorted({f.kind for f in faults if f.start <= inv["time"] < f.end})
    return Op(
        str(inv["process"]),
        inv["f"],
        "info" if done is None else done["type"],
        inv["time"],
        None if done is None else done["time"],
        kinds or ["calm"],
    )


def quantile(values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks, position q * (n - 1)."""
    s = sorted(values)
    pos = q * (len(s) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def latency_table(runs: list[Run]) -> dict[tuple, dict[str, float]]:
    groups: dict[tuple, list[float]] = defaultdict(list)
    for run in runs:
        for op in run.ops:
            if op.latency_ms is None:
                continue
            for kind in op.state:
                groups[(run.test["workload"], op.f, op.outcome, kind)].append(op.latency_ms)
    return {
        key: {
            "count": len(v),
            "p50_ms": quantile(v, 0.5),
            "p90_ms": quantile(v, 0.9),
            "p99_ms": quantile(v, 0.99),
            "p999_ms": quantile(v, 0.999),
            "max_ms": max(v),
        }
        for key, v in groups.items()
    }


def unavailability(run: Run, gap_ms: float) -> list[tuple[str, int, int]]:
    windows = []
    for f in sorted({op.f for op in run.ops}):
        last = min(op.invoke for op in run.ops if op.f == f)
        for t in sorted(op.complete for op in run.ops if op.f == f and op.outcome == "ok"):
            if (t - last) / MS > gap_ms:
                windows.append((f, last, t))
            last = t
        if (run.end - last) / MS > gap_ms:
            windows.append((f, last, run.end))
    return windows


def recovery(run: Run) -> list[tuple[str, str, int, str, int | None]]:
    rows = []
    for fault in sorted(run.faults, key=lambda x: x.start):
        events = [("start", fault.start)] + ([("heal", fault.end)] if fault.healed else [])
        for event, at in events:
            for f in sorted({op.f for op in run.ops}):
                after = [op.complete for op in run.ops if op.f == f and op.outcome == "ok" and op.invoke >= at]
                rows.append((fault.kind, event, at, f, min(after) if after else None))
    return rows


def throughput(run: Run) -> dict[tuple, int]:
    counts: dict[tuple, int] = defaultdict(int)
    for op in run.ops:
        if op.complete is not None:
            counts[(op.complete // 1_000_000_000, op.f, op.outcome)] += 1
    return dict(counts)


def pass_rates(runs: list[Run], key) -> dict[str, tuple[int, int, float]]:
    groups: dict[str, list[str]] = defaultdict(list)
    for run in runs:
        groups[key(run)].append(run.verdict)
    return {k: (len(v), v.count("true"), v.count("true") / len(v)) for k, v in groups.items()}


def flaky(runs: list[Run]) -> set[str]:
    seen: dict[str, set[str]] = defaultdict(set)
    for run in runs:
        seen[run.name].add(run.verdict)
    return {name for name, verdicts in seen.items() if {"true", "false"} <= verdicts}
