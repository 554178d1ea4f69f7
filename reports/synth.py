"""Synthetic results roots for tests and benchmarks: realistic runs in the results-store layout.

Each run has closed-loop client workers, a nemesis schedule with fault windows, latency that rises under
faults, a failover period after each disruptive fault in which ops fail or time out (`info`, after which
the worker continues under a new process id), and verdicts with lost writes or anomalies on some runs,
spread over several nights. Histories are written with pyarrow directly, so 10M ops take a minute.

    python -m reports.synth ROOT --runs 100 --ops 1000000 [--nights 7] [--seed 1] [--formats parquet]
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from reports.schema import HISTORY_ARROW_SCHEMA, HISTORY_COLUMNS, SCHEMA_VERSION


@dataclass(frozen=True)
class SynthTest:
    name: str
    workload: str  # "config-register" | "set"
    nemesis: tuple[str, ...]
    fail_rate: float  # share of runs with an invalid verdict
    unknown_rate: float = 0.0


CATALOGUE: tuple[SynthTest, ...] = (
    SynthTest("config-register-partition", "config-register", ("partition",), 0.15),
    SynthTest("config-register-kill", "config-register", ("kill",), 0.0),
    SynthTest("config-register-clock", "config-register", ("clock",), 0.0, unknown_rate=0.2),
    SynthTest("set-kill", "set", ("kill",), 0.1),
    SynthTest("set-lose-unsynced", "set", ("kill", "lose_unsynced"), 0.4),
    SynthTest("set-partition-pause", "set", ("partition", "pause"), 0.0),
    SynthTest("set-disk-stall", "set", ("disk_stall",), 0.0),
    SynthTest("config-register-calm", "config-register", (), 0.0),
)

LATENCY_FACTOR = {"partition": 4.0, "kill": 2.5, "pause": 8.0, "clock": 1.5, "disk_stall": 6.0, "lose_unsynced": 2.0}
DISRUPTIVE = {"partition", "kill", "pause", "lose_unsynced"}
NODES = ["n1", "n2", "n3", "n4", "n5"]
MS = 1_000_000


@dataclass
class RunSpec:
    test: SynthTest
    seed: int
    ops: int
    started_at: datetime
    concurrency: int = 5


def _schedule(rng: np.random.Generator, kinds: Sequence[str], horizon_ns: int) -> list[tuple[str, int, int]]:
    """(kind, start invoke time, stop invoke time) windows; kinds take turns, and with two kinds the
    second sometimes starts while the first is active (overlapping faults)."""
    windows: list[tuple[str, int, int]] = []
    t = int(rng.uniform(1.0, 3.0) * 1e9)
    turn = 0
    while kinds and t < horizon_ns * 0.85:
        kind = kinds[turn % len(kinds)]
        length = int(rng.uniform(1.5, 4.0) * 1e9)
        windows.append((kind, t, t + length))
        if len(kinds) > 1 and rng.random() < 0.3:
            other = kinds[(turn + 1) % len(kinds)]
            offset = int(length * rng.uniform(0.2, 0.6))
            windows.append((other, t + offset, t + length + int(rng.uniform(0.5, 1.5) * 1e9)))
        t = max(w[2] for w in windows) + int(rng.uniform(2.0, 5.0) * 1e9)
        turn += 1
    return windows


def _state(invoke: np.ndarray, windows: list[tuple[str, int, int]], failover: list[int]):
    """Latency factor and whether each invocation falls in a failover period."""
    factor = np.ones(invoke.shape)
    in_failover = np.zeros(invoke.shape, dtype=bool)
    for (kind, start, stop), fo in zip(windows, failover):
        active = (invoke >= start) & (invoke < stop)
        factor = np.where(active, np.maximum(factor, LATENCY_FACTOR[kind]), factor)
        if kind in DISRUPTIVE:
            in_failover |= (invoke >= start) & (invoke < start + fo)
    return factor, in_failover


def _client_ops(rng: np.random.Generator, spec: RunSpec, windows, failover) -> dict[str, np.ndarray]:
    c = spec.concurrency
    k = max(1, spec.ops // c)
    base = rng.lognormal(np.log(2.0), 0.5, size=(c, k)) * MS
    think = rng.exponential(6.0, size=(c, k)) * MS
    first = rng.uniform(0, 5, size=(c, 1)) * MS
    latency = base
    for _ in range(2):  # let latency depend on the fault state at the invocation it produces
        invoke = first + np.cumsum(latency + think, axis=1) - (latency + think)
        factor, in_failover = _state(invoke, windows, failover)
        timeout = rng.uniform(200, 500, size=(c, k)) * MS
        latency = np.where(in_failover, timeout, base * factor)
    invoke = first + np.cumsum(latency + think, axis=1) - (latency + think)
    roll = rng.random((c, k))
    outcome = np.full((c, k), "ok", dtype=object)
    faulted = factor > 1
    fail_p = np.where(in_failover, 0.7, np.where(faulted, 0.02, 0.002))
    info_p = np.where(in_failover, 0.3, np.where(faulted, 0.01, 0.0005))
    outcome[roll < fail_p + info_p] = "info"
    outcome[roll < fail_p] = "fail"
    is_info = outcome == "info"
    retired = np.cumsum(is_info, axis=1) - is_info  # info ops before this one on the worker
    process = np.arange(c)[:, None] + c * retired
    return {
        "invoke": invoke.ravel().astype(np.int64),
        "complete": (invoke + latency).ravel().astype(np.int64),
        "outcome": outcome.ravel(),
        "process": process.ravel(),
    }


def _values(rng: np.random.Generator, workload: str, n: int):
    if workload == "set":
        f = np.where(rng.random(n) < 0.95, "add", "read")
        key = np.full(n, None, dtype=object)
    else:
        f = np.where(rng.random(n) < 0.5, "read", "write")
        key = np.array([f"k{i}" for i in rng.integers(0, 10, n)], dtype=object)
    return f, key


def build_history(spec: RunSpec) -> tuple[pa.Table, dict[str, Any]]:
    """One run's history table and facts the results need (acknowledged writes)."""
    rng = np.random.default_rng(spec.seed)
    horizon = int(spec.ops / spec.concurrency * 9.5 * MS)
    windows = _schedule(rng, spec.test.nemesis, horizon)
    failover = [int(rng.uniform(0.3, 2.5) * 1e9) for _ in windows]
    ops = _client_ops(rng, spec, windows, failover)
    n = len(ops["invoke"])
    f, key = _values(rng, spec.test.workload, n)
    node = np.array(NODES, dtype=object)[rng.integers(0, len(NODES), n)]
    written = np.arange(n)
    invoke_value = np.where(f == "read", None, written.astype(str)).astype(object)
    ok_value = np.where(f == "read", np.where(spec.test.workload == "set", "[1,2,3]", "7"), invoke_value)
    outcome = ops["outcome"]
    error = np.where(outcome == "fail", "timeout", np.where(outcome == "info", "indeterminate", None))
    proc = ops["process"].astype(str).astype(object)
    # Client events: invoke then completion.
    times = [ops["invoke"], ops["complete"]]
    cols: dict[str, list[np.ndarray]] = {
        "process": [proc, proc],
        "type": [np.full(n, "invoke", dtype=object), outcome],
        "f": [f, f],
        "value": [invoke_value, np.where(outcome == "ok", ok_value, invoke_value)],
        "key": [key, key],
        "node": [np.full(n, None, dtype=object), node],
        "error": [np.full(n, None, dtype=object), error],
    }
    # Nemesis events: invoke, then info 5 ms later, for each start and stop.
    for (kind, start, stop), _ in zip(windows, failover):
        targets = json.dumps({"targets": list(rng.choice(NODES, size=2, replace=False))}, separators=(",", ":"))
        for action, at in (("start", start), ("stop", stop)):
            times.append(np.array([at, at + 5 * MS], dtype=np.int64))
            cols["process"].append(np.array(["nemesis", "nemesis"], dtype=object))
            cols["type"].append(np.array(["invoke", "info"], dtype=object))
            cols["f"].append(np.array([f"{action}-{kind}"] * 2, dtype=object))
            cols["value"].append(np.array([targets, targets], dtype=object))
            for col in ("key", "node", "error"):
                cols[col].append(np.array([None, None], dtype=object))
    time = np.concatenate(times)
    order = np.argsort(time, kind="stable")
    arrays = {"index": np.arange(len(time), dtype=np.int64), "time": time[order]}
    for col, parts in cols.items():
        arrays[col] = np.concatenate(parts)[order]
    table = pa.table({c: pa.array(arrays[c], type=HISTORY_ARROW_SCHEMA.field(c).type) for c in HISTORY_COLUMNS})
    acked = written[(f != "read") & (outcome == "ok")]
    return table, {"acked": acked, "windows": len(windows)}


def _results(rng: np.random.Generator, test: SynthTest, acked: np.ndarray) -> dict[str, Any]:
    roll = rng.random()
    verdict: Any = True
    checkers: dict[str, dict[str, Any]] = {}
    if roll < test.fail_rate:
        verdict = False
    elif roll < test.fail_rate + test.unknown_rate:
        verdict = "unknown"
    if test.workload == "set":
        lost = sorted(rng.choice(acked, size=min(len(acked), int(rng.integers(1, 6))), replace=False).tolist())
        if verdict is not False:
            lost = []
        checkers["set-full"] = {"valid": verdict, "lost": lost, "lost-count": len(lost)}
    else:
        types = ["G1c"] if rng.random() < 0.5 else ["G-single", "G1c"]
        checkers["linearizable"] = {"valid": verdict}
        checkers["elle"] = {"valid": verdict, "anomaly-types": types if verdict is False else []}
    checkers["stats"] = {"valid": True}
    return {"valid": verdict, "checkers": checkers}


def _write_jsonl(table: pa.Table, path: Path) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for row in table.to_pylist():
            event = {k: v for k, v in row.items() if v is not None or k in ("value",)}
            if event.get("value") is not None:
                event["value"] = json.loads(event["value"])
            if event["process"] != "nemesis":
                event["process"] = int(event["process"])
            fh.write(json.dumps(event) + "\n")


def write_run(root: Path, spec: RunSpec, formats: Sequence[str]) -> Path:
    table, facts = build_history(spec)
    stamp = spec.started_at.strftime("%Y%m%dT%H%M%SZ")
    run_dir = root / spec.test.name / stamp
    run_dir.mkdir(parents=True, exist_ok=True)
    test = {
        "schema_version": SCHEMA_VERSION,
        "name": spec.test.name,
        "workload": spec.test.workload,
        "nemesis": list(spec.test.nemesis),
        "backend": "sim",
        "seed": spec.seed,
        "nodes": NODES,
        "time_limit_s": 60,
        "concurrency": spec.concurrency,
        "rate": 100.0,
        "started_at": spec.started_at.isoformat().replace("+00:00", "Z"),
    }
    (run_dir / "test.json").write_text(json.dumps(test, indent=1))
    if "parquet" in formats:
        pq.write_table(table, run_dir / "history.parquet")
    if "jsonl" in formats:
        _write_jsonl(table, run_dir / "history.jsonl")
    results = _results(np.random.default_rng(spec.seed + 1), spec.test, facts["acked"])
    (run_dir / "results.json").write_text(json.dumps(results, indent=1))
    return run_dir


def _relink(link: Path, target: Path) -> None:
    if link.is_symlink():
        link.unlink()
    os.symlink(os.path.relpath(target, link.parent), link)


def synthesize(
    root: str | os.PathLike[str],
    runs: int,
    ops: int,
    nights: int = 7,
    seed: int = 1,
    formats: Sequence[str] = ("parquet", "jsonl"),
    tests: Sequence[SynthTest] = CATALOGUE,
) -> list[Path]:
    """Write `runs` runs holding `ops` client ops in total, spread over `nights` nights."""
    base = Path(root)
    base.mkdir(parents=True, exist_ok=True)
    first_night = datetime(2026, 11, 1, 1, 0, tzinfo=UTC)
    per_run = max(1, ops // max(1, runs))
    made: list[Path] = []
    for i in range(runs):
        night = i * nights // max(1, runs)
        started = first_night + timedelta(days=night, minutes=2 * i)
        spec = RunSpec(tests[i % len(tests)], seed * 100_003 + i, per_run, started)
        made.append(write_run(base, spec, formats))
    newest: dict[str, Path] = {}
    for run_dir in made:
        newest[run_dir.parent.name] = max(newest.get(run_dir.parent.name, run_dir), run_dir)
    for test_dir, run_dir in newest.items():
        _relink(base / test_dir / "latest", run_dir)
    if made:
        _relink(base / "latest", max(made, key=lambda p: p.name))
    return made


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reports.synth", description=__doc__.splitlines()[0])
    parser.add_argument("root", help="results root to write")
    parser.add_argument("--runs", type=int, default=24)
    parser.add_argument("--ops", type=int, default=100_000, help="client ops in total")
    parser.add_argument("--nights", type=int, default=7)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--formats", default="parquet,jsonl", help="comma-separated: parquet,jsonl")
    args = parser.parse_args(argv)
    made = synthesize(args.root, args.runs, args.ops, args.nights, args.seed, args.formats.split(","))
    print(f"wrote {len(made)} runs under {args.root}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
