"""The results store (BRIEF §3.4, results/SCHEMA.md): where runs live and how their files are read.

    <root>/<test-name>/<UTC timestamp>/   test.json history.jsonl history.parquet results.json nodes/ ...
    <root>/<test-name>/latest -> <timestamp>
    <root>/latest -> <test-name>/<timestamp>

The root is an argument, else $KCHAOS_RESULTS, else ./results. Everything derived from a run
(history.parquet, results.json) is written to a temporary file and renamed, so a reader never sees half
a file, and the `latest` symlinks are swapped with a rename too.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from checkers.history import History, HistoryError, pair, read_events
from reports.schema import (
    HISTORY_ARROW_SCHEMA,
    HISTORY_COLUMNS,
    HISTORY_JSONL,
    HISTORY_PARQUET,
    RESULTS_FILE,
    RUN_DIR_RE,
    SCHEMA_VERSION,
    TEST_FILE,
)
from vocab.errors import UserError

ENV_ROOT = "KCHAOS_RESULTS"
DEFAULT_ROOT = "results"
LATEST = "latest"
TIMESTAMP_FORMAT = "%Y%m%dT%H%M%SZ"
_TEST_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")


def results_root(root: str | os.PathLike[str] | None = None) -> Path:
    """The results root: `root` if given, else $KCHAOS_RESULTS, else ./results."""
    if root is not None:
        return Path(root)
    return Path(os.environ.get(ENV_ROOT) or DEFAULT_ROOT)


def utc_now() -> datetime:
    return datetime.now(UTC)


def iso_utc(moment: datetime) -> str:
    """ISO 8601 in UTC with a Z, as `started_at` is stored."""
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def check_test_name(name: str) -> str:
    """A test name becomes a folder name: letters, digits and `._+-`, not starting with `.`/`_`."""
    if not isinstance(name, str) or not _TEST_NAME_RE.match(name) or name == LATEST:
        raise UserError(f"test name {name!r}: use letters, digits and . _ + - (not starting with . or _)")
    return name


# ---------------------------------------------------------------------------------------------------
# Creating runs


@dataclass(frozen=True)
class RunDir:
    """One run directory, `<root>/<test>/<timestamp>`."""

    path: Path

    @property
    def test_name(self) -> str:
        return self.path.parent.name

    @property
    def run_id(self) -> str:
        return f"{self.path.parent.name}/{self.path.name}"

    @property
    def test_json(self) -> Path:
        return self.path / TEST_FILE

    @property
    def history_jsonl(self) -> Path:
        return self.path / HISTORY_JSONL

    @property
    def history_parquet(self) -> Path:
        return self.path / HISTORY_PARQUET

    @property
    def results_json(self) -> Path:
        return self.path / RESULTS_FILE

    @property
    def nodes(self) -> Path:
        return self.path / "nodes"

    def node_dir(self, node: str) -> Path:
        """`nodes/<node>/`, created on first use (logs, data-dir listings, committed-log dumps)."""
        target = self.nodes / node
        target.mkdir(parents=True, exist_ok=True)
        return target


def create_run(
    test_name: str,
    root: str | os.PathLike[str] | None = None,
    now: datetime | None = None,
    update_latest: bool = True,
) -> RunDir:
    """Make a fresh `<root>/<test>/<timestamp>/` and point the `latest` links at it.

    Two runs started in the same second (a `--test-count` loop) get the next free second: the folder
    name stays a timestamp, and `started_at` in test.json keeps the true time.
    """
    check_test_name(test_name)
    test_dir = results_root(root) / test_name
    try:
        test_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"results store {test_dir}: cannot create: {exc.strerror or exc}") from None
    moment = (now or utc_now()).astimezone(UTC).replace(microsecond=0)
    for _ in range(3600):
        path = test_dir / moment.strftime(TIMESTAMP_FORMAT)
        try:
            path.mkdir()
        except FileExistsError:
            moment += timedelta(seconds=1)
            continue
        except OSError as exc:
            raise UserError(f"results store {path}: cannot create: {exc.strerror or exc}") from None
        run = RunDir(path)
        if update_latest:
            point_latest(run)
        return run
    raise UserError(f"results store {test_dir}: no free run directory name near {moment:%Y-%m-%d %H:%M:%S}")


def _swap_symlink(link: Path, target: str) -> None:
    """Point `link` at `target` atomically: make a new link beside it, then rename over the old one."""
    tmp = link.with_name(f".{link.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    os.symlink(target, tmp)
    os.replace(tmp, link)


def point_latest(run: RunDir) -> None:
    """`<test>/latest -> <timestamp>` and `<root>/latest -> <test>/<timestamp>` (relative links)."""
    try:
        _swap_symlink(run.path.parent / LATEST, run.path.name)
        _swap_symlink(run.path.parent.parent / LATEST, f"{run.path.parent.name}/{run.path.name}")
    except OSError as exc:
        raise UserError(f"results store {run.path}: cannot update the latest links: {exc.strerror or exc}") from None


def write_text_atomic(path: Path, text: str) -> Path:
    """Write a whole file under a temporary name, then rename it into place: readers see old or new."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise UserError(f"{path}: cannot write: {exc.strerror or exc}") from None
    return path


def write_json_atomic(path: Path, data: Any) -> Path:
    return write_text_atomic(path, json.dumps(data, indent=2, default=str) + "\n")


def write_test(run: RunDir, test: dict[str, Any], started_at: datetime | None = None) -> Path:
    """Save the resolved test with the fields results/SCHEMA.md requires filled in."""
    record = {"schema_version": SCHEMA_VERSION, "name": run.test_name, **test}
    record.setdefault("started_at", iso_utc(started_at or utc_now()))
    return write_json_atomic(run.test_json, record)


# ---------------------------------------------------------------------------------------------------
# Reading runs


def _read_json_object(path: Path, what: str) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{path}: no {what}") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read {what}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserError(f"{path}: {what} is not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: {what} must be a JSON object")
    return data


def open_run(path: str | os.PathLike[str]) -> RunDir:
    """An existing run directory (the `latest` links are followed), or a one-line UserError."""
    given = Path(path)
    if not given.exists():
        raise UserError(f"run directory {given}: does not exist")
    resolved = given.resolve()
    if not resolved.is_dir():
        raise UserError(f"run directory {given}: not a directory")
    if not os.access(resolved, os.R_OK | os.X_OK):
        raise UserError(f"run directory {given}: not readable")
    return RunDir(resolved)


def read_test(run: RunDir) -> dict[str, Any]:
    test = _read_json_object(run.test_json, TEST_FILE)
    if not isinstance(test.get("name"), str) or not test["name"]:
        raise UserError(f"{run.test_json}: no test name ('name')")
    return test


def read_results(run: RunDir) -> dict[str, Any] | None:
    """results.json, or None when the run has not been checked (still running, or crashed)."""
    if not run.results_json.exists():
        return None
    return _read_json_object(run.results_json, RESULTS_FILE)


@dataclass
class HistoryRead:
    """A history.jsonl as read: its events, and what was dropped from a torn last line."""

    path: Path
    events: list[dict[str, Any]]
    truncated: str | None = None  # "history.jsonl:812: incomplete last line dropped (37 bytes)"

    def paired(self) -> History:
        """The history as the checkers take it (invokes paired with completions)."""
        try:
            return pair(read_events(self.events, name=str(self.path)), source=str(self.path))
        except HistoryError as exc:
            raise UserError(str(exc)) from None


def read_history(path: Path) -> HistoryRead:
    """Parse history.jsonl. A last line that is not complete JSON (the harness was killed mid-write) is
    dropped and reported; a bad line anywhere else is an error naming the file and line."""
    try:
        raw_lines = path.read_bytes().split(b"\n")
    except FileNotFoundError:
        raise UserError(f"{path}: no {HISTORY_JSONL}") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read history: {exc.strerror or exc}") from None
    last = max((i for i, line in enumerate(raw_lines) if line.strip()), default=-1)
    events: list[dict[str, Any]] = []
    truncated = None
    for i, line in enumerate(raw_lines[: last + 1]):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            if i == last:
                truncated = f"{path}:{i + 1}: incomplete last line dropped ({len(line)} bytes)"
                break
            raise UserError(f"{path}:{i + 1}: not valid JSON ({exc})") from None
        if not isinstance(event, dict):
            raise UserError(f"{path}:{i + 1}: expected a JSON object, got {type(event).__name__}")
        events.append(event)
    return HistoryRead(path, events, truncated)


_dumps = functools.partial(json.dumps, separators=(",", ":"), default=str)


def _plain(values: Iterable[Any]) -> list[str | None]:
    """Strings as they are, anything else as JSON text (process ids, non-string keys, error maps)."""
    return [v if v is None or v.__class__ is str else _dumps(v) for v in values]


def history_table(events: list[dict[str, Any]]) -> pa.Table:
    """Events as an Arrow table with HISTORY_ARROW_SCHEMA (value JSON text; key/error plain if strings)."""
    cols = {
        "index": [ev.get("index", i) for i, ev in enumerate(events)],
        "time": [ev.get("time") for ev in events],
        "process": [None if (p := ev.get("process")) is None else str(p) for ev in events],
        "value": [None if (v := ev.get("value")) is None else _dumps(v) for ev in events],
    }
    for name in ("type", "f", "key", "node", "error"):
        cols[name] = _plain(ev.get(name) for ev in events)
    try:
        return pa.table({c: cols[c] for c in HISTORY_COLUMNS}, schema=HISTORY_ARROW_SCHEMA)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise UserError(f"history does not fit {HISTORY_PARQUET}'s schema: {exc}") from None


def write_history_parquet(table: pa.Table, target: Path) -> Path:
    """history.parquet beside the JSONL, for Spark (written whole, then renamed into place)."""
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise UserError(f"{target}: cannot write: {exc.strerror or exc}") from None
    return target


# ---------------------------------------------------------------------------------------------------
# Listing runs


@dataclass
class RunSummary:
    """One line of `kchaos results list`."""

    test: str
    path: Path
    started_at: datetime | None
    valid: bool | str | None  # None: no results.json (running, or crashed before the check)
    ops: int | None
    problem: str | None = None  # why test.json / results.json could not be read

    @property
    def verdict(self) -> str:
        if self.problem:
            return "unreadable"
        if self.valid is None:
            return "incomplete"
        return {True: "valid", False: "invalid"}.get(self.valid, "unknown")  # type: ignore[call-overload]


def _started(test: dict[str, Any], run_path: Path) -> datetime | None:
    text = test.get("started_at")
    if isinstance(text, str):
        try:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
            return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
        except ValueError:
            pass
    if RUN_DIR_RE.match(run_path.name):
        return datetime.strptime(run_path.name, TIMESTAMP_FORMAT).replace(tzinfo=UTC)
    return None


def summarize_run(path: Path) -> RunSummary:
    run = RunDir(path)
    test: dict[str, Any] = {}
    problem = None
    valid: bool | str | None = None
    ops = None
    try:
        test = read_test(run)
        results = read_results(run)
        if results is not None:
            valid = results.get("valid", "unknown")
            stats = results.get("stats")
            if isinstance(stats, dict) and isinstance(stats.get("ops"), int):
                ops = stats["ops"]
    except UserError as exc:
        problem = str(exc)
    return RunSummary(run.test_name, path, _started(test, path), valid, ops, problem)


def _is_run_dir(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink() and (RUN_DIR_RE.match(path.name) or (path / TEST_FILE).exists())


def list_runs(
    root: str | os.PathLike[str] | None = None, test: str | None = None, limit: int | None = None
) -> list[RunSummary]:
    """Runs under the root, newest first; `latest` links, dot/underscore entries and plain files are
    skipped (results/SCHEMA.md)."""
    base = results_root(root)
    if not base.is_dir():
        raise UserError(f"results root {base}: not a directory")
    runs: list[RunSummary] = []
    for test_dir in sorted(base.iterdir()):
        if test_dir.is_symlink() or test_dir.name.startswith((".", "_")) or not test_dir.is_dir():
            continue
        if test is not None and test_dir.name != test:
            continue
        runs += [summarize_run(p) for p in sorted(test_dir.iterdir()) if not p.name.startswith(".") and _is_run_dir(p)]
    oldest = datetime.min.replace(tzinfo=UTC)
    runs.sort(key=lambda r: (r.started_at or oldest, r.path.name, r.test), reverse=True)
    return runs[:limit] if limit is not None else runs
