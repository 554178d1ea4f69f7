"""Find the runs under a results root, apply the filters and vet each run before Spark sees it.

A run that cannot be used is skipped with a reason naming it; discovery never raises for one bad run,
so a single damaged directory cannot fail a nightly report.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from reports.metrics import HistoryError, read_jsonl_history
from reports.schema import (
    HISTORY_JSONL,
    HISTORY_PARQUET,
    RESULTS_FILE,
    RUN_DIR_RE,
    SCHEMA_VERSION,
    TEST_FILE,
    parquet_schema_problem,
)
from vocab.errors import UserError


@dataclass
class RunSource:
    """A vetted run: where its files are and what its metadata says."""

    run_id: str  # "<test dir>/<run dir>"
    path: str
    test: dict[str, Any]
    results: dict[str, Any]
    history_path: str
    history_format: str  # "parquet" | "jsonl"
    started_at: datetime
    warnings: list[str] = field(default_factory=list)
    fingerprint: str | None = None  # set when discovered for an incremental store

    @property
    def name(self) -> str:
        return str(self.test["name"])

    @property
    def date(self) -> str:
        return self.started_at.strftime("%Y-%m-%d")


@dataclass
class Skipped:
    path: str
    reason: str


@dataclass
class Discovery:
    runs: list[RunSource]
    skipped: list[Skipped]
    warnings: list[str]
    filtered_out: int
    unchanged: list[str] = field(default_factory=list)  # run ids the store already holds as they are


@dataclass
class Filters:
    since: datetime | None = None
    tests: list[str] = field(default_factory=list)
    runs_glob: str | None = None


_RELATIVE = re.compile(r"^(\d+)([dh])$")


def parse_since(text: str, now: datetime | None = None) -> datetime:
    """--since accepts an ISO date or date-time (UTC when no zone is given), or `7d` / `12h` ago."""
    now = now or datetime.now(UTC)
    rel = _RELATIVE.match(text.strip())
    if rel:
        amount = int(rel.group(1))
        return now - (timedelta(days=amount) if rel.group(2) == "d" else timedelta(hours=amount))
    try:
        return _as_utc(datetime.fromisoformat(text.strip().replace("Z", "+00:00")))
    except ValueError:
        raise UserError(
            f"--since {text!r}: expected an ISO date/date-time (2026-11-23, 2026-11-23T10:00Z) or 7d/12h"
        ) from None


def _as_utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _read_json(path: Path) -> tuple[Any, str | None]:
    try:
        with path.open(encoding="utf-8") as fh:
            return json.load(fh), None
    except FileNotFoundError:
        return None, f"no {path.name}"
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return None, f"{path.name} is unreadable ({exc})"


def _started_at(test: dict[str, Any], run_dir: Path) -> datetime | None:
    text = test.get("started_at")
    if isinstance(text, str):
        try:
            return _as_utc(datetime.fromisoformat(text.replace("Z", "+00:00")))
        except ValueError:
            pass
    if RUN_DIR_RE.match(run_dir.name):
        return datetime.strptime(run_dir.name, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    return None


def _history(run_dir: Path, warnings: list[str]) -> tuple[str, str] | str:
    """(path, format) of the history to read, or the reason there is none usable."""
    parquet = run_dir / HISTORY_PARQUET
    jsonl = run_dir / HISTORY_JSONL
    if parquet.exists():
        try:
            problem = parquet_schema_problem(pq.read_schema(parquet))
        except Exception as exc:  # damaged footers raise several pyarrow error types
            problem = f"unreadable ({exc})"
        if problem is None:
            return str(parquet), "parquet"
        if not jsonl.exists():
            return f"{HISTORY_PARQUET} {problem} and no {HISTORY_JSONL}"
        warnings.append(f"{run_dir}: {HISTORY_PARQUET} {problem}; using {HISTORY_JSONL}")
    if not jsonl.exists():
        return f"no {HISTORY_PARQUET} or {HISTORY_JSONL}"
    try:
        read_jsonl_history(str(jsonl))
    except (HistoryError, OSError, UnicodeDecodeError, ValueError) as exc:
        return f"history truncated or corrupt: {exc}"
    return str(jsonl), "jsonl"


def vet_run(run_dir: Path, run_id: str) -> RunSource | str:
    """A RunSource, or the reason this directory cannot be used."""
    test, problem = _read_json(run_dir / TEST_FILE)
    if problem:
        return problem
    if not isinstance(test, dict):
        return f"{TEST_FILE} is not an object"
    version = test.get("schema_version")
    if version != SCHEMA_VERSION:
        return f"{TEST_FILE} schema_version {version!r} is not supported (expected {SCHEMA_VERSION})"
    if not isinstance(test.get("name"), str) or not test["name"]:
        return f"{TEST_FILE} has no name"
    started = _started_at(test, run_dir)
    if started is None:
        return f"{TEST_FILE} has no usable started_at"
    results, problem = _read_json(run_dir / RESULTS_FILE)
    if problem:
        return f"{problem} (run incomplete or still in progress)"
    if not isinstance(results, dict) or not isinstance(results.get("checkers", {}), dict):
        return f"{RESULTS_FILE} is not a results object"
    warnings: list[str] = []
    history = _history(run_dir, warnings)
    if isinstance(history, str):
        return history
    return RunSource(run_id, str(run_dir), test, results, history[0], history[1], started, warnings)


def fingerprint(run_dir: Path) -> str:
    """What a run is, cheaply: its small JSON files' bytes and its histories' sizes and mtimes (a
    changed run is ingested into a store again)."""
    digest = hashlib.sha256()
    for name in (TEST_FILE, RESULTS_FILE):
        try:
            digest.update((run_dir / name).read_bytes())
        except OSError:
            digest.update(b"-")
        digest.update(b"\0")
    for name in (HISTORY_PARQUET, HISTORY_JSONL):
        try:
            st = os.stat(run_dir / name)
            digest.update(f"{st.st_size}:{st.st_mtime_ns}\0".encode())
        except OSError:
            digest.update(b"-\0")
    return digest.hexdigest()


def _is_run_dir(path: Path) -> bool:
    return RUN_DIR_RE.match(path.name) is not None or (path / TEST_FILE).exists()


def discover(
    root: str | os.PathLike[str],
    filters: Filters,
    exclude: str | None = None,
    known: Mapping[str, str] | None = None,
) -> Discovery:
    """Every run under `root` (`<test>/<timestamp>/`), vetted and filtered. Symlinks (`latest`), plain
    files and dot/underscore entries are ignored; a folder that is not a run is reported as skipped.
    With `known` (run id -> fingerprint, what a store holds), a run whose fingerprint is unchanged is
    neither vetted nor filtered here but listed in `unchanged`."""
    base = Path(root)
    if not base.is_dir():
        raise UserError(f"results root {root}: not a directory")
    excluded = Path(exclude).resolve() if exclude else None
    runs: list[RunSource] = []
    skipped: list[Skipped] = []
    warnings: list[str] = []
    filtered_out = 0
    unchanged: list[str] = []
    for test_dir in sorted(base.iterdir()):
        if test_dir.is_symlink() or test_dir.name.startswith((".", "_")):
            continue
        if excluded is not None and test_dir.resolve() == excluded:
            continue
        if not test_dir.is_dir():
            continue  # README.md, SCHEMA.md and other plain files beside the tests
        children = [c for c in sorted(test_dir.iterdir()) if not c.is_symlink() and not c.name.startswith(".")]
        run_dirs = [c for c in children if c.is_dir() and _is_run_dir(c)]
        if not run_dirs:
            skipped.append(Skipped(str(test_dir), "not a test folder (no run directories)"))
            continue
        for child in children:
            if child.is_dir() and child not in run_dirs:
                skipped.append(Skipped(str(child), "not a run directory"))
        for run_dir in run_dirs:
            run_id = f"{test_dir.name}/{run_dir.name}"
            fp = None
            if known is not None:
                fp = fingerprint(run_dir)
                if known.get(run_id) == fp:
                    unchanged.append(run_id)
                    continue
            if filters.runs_glob and not fnmatch.fnmatchcase(run_id, filters.runs_glob):
                filtered_out += 1
                continue
            vetted = vet_run(run_dir, run_id)
            if isinstance(vetted, str):
                skipped.append(Skipped(str(run_dir), vetted))
                continue
            if filters.tests and not any(fnmatch.fnmatchcase(vetted.name, t) for t in filters.tests):
                filtered_out += 1
                continue
            if filters.since and vetted.started_at < filters.since:
                filtered_out += 1
                continue
            vetted.fingerprint = fp
            warnings.extend(vetted.warnings)
            runs.append(vetted)
    return Discovery(runs, skipped, warnings, filtered_out, unchanged)
