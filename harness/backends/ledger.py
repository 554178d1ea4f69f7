"""The ledger: every host resource or fault is written here (fsync'd JSONL) *before* it is created.

Teardown, Ctrl-C and `kchaos heal` after a crash all undo the same way: walk the entries that are not
yet marked done, newest first, and call the undo function registered for each entry's kind. An undo
checks that its resource still exists and is still ours, so running it twice is harmless.

Line format (one JSON object per line):
  {"op": "open", "version": 1, "owner_pid": P, "owner_start": T}   first line: who writes this ledger
  {"op": "add", "id": N, "kind": K, ...fields}                       about to create resource N
  {"op": "update", "id": N, ...fields}                               learned more (e.g. a PID)
  {"op": "done", "id": N}                                            resource N is gone
"""

from __future__ import annotations

import importlib
import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.backends.procs import start_time

LEDGER_NAME = "ledger.jsonl"
VERSION = 1

# kind -> undo(fields) returning a description of what it removed, or None if it was already gone.
Undo = Callable[[dict[str, Any]], str | None]
_UNDO: dict[str, Undo] = {}

# Modules that register undo functions; heal imports them so a fresh process knows every kind.
UNDO_MODULES: list[str] = ["harness.backends.resources", "harness.backends.firewall"]
# Packet, clock, pause and disk faults of the netns backend.
UNDO_MODULES += [f"harness.backends.{m}" for m in ("packets", "clocks", "pauses", "disks")]
# lose_unsynced: the lazyfs daemons.
UNDO_MODULES += ["harness.backends.lazyfs.mount"]
# The docker backend: its engine, containers, network and namespace names.
UNDO_MODULES += ["harness.backends.docker_engine", "harness.backends.docker"]
# The ssh backend's processes, rules and faults on remote hosts.
UNDO_MODULES += ["harness.backends.remote_faults"]
# Whole-VM faults (power loss, VM pause, netem in the guests) of hosts booted by `kchaos vagrant up`.
UNDO_MODULES += ["harness.backends.vm_faults"]


def register_undo(kind: str) -> Callable[[Undo], Undo]:
    def decorate(fn: Undo) -> Undo:
        _UNDO[kind] = fn
        return fn

    return decorate


def _load_undo_modules() -> None:
    for name in UNDO_MODULES:
        importlib.import_module(name)


class LedgerError(Exception):
    """The ledger file is missing, unreadable or not a kchaos ledger; the message names the file."""


@dataclass
class Entry:
    id: int
    kind: str
    fields: dict[str, Any]
    done: bool = False

    def describe(self) -> str:
        shown = ", ".join(f"{k}={v}" for k, v in self.fields.items() if k not in ("argv", "env"))
        return f"{self.kind}({shown})"


@dataclass
class HealReport:
    removed: list[str] = field(default_factory=list)  # what an undo actually removed
    already_gone: list[str] = field(default_factory=list)  # outstanding entries with nothing left to undo
    failed: list[str] = field(default_factory=list)  # "what: why" for undos that raised

    @property
    def ok(self) -> bool:
        return not self.failed


class Ledger:
    """An append-only, fsync'd record of what this run created; see the module docstring."""

    def __init__(self, path: Path, header: dict[str, Any], entries: dict[int, Entry]) -> None:
        self.path = path
        self.header = header
        self._entries = entries
        self._lock = threading.RLock()
        self._next_id = max(entries, default=0) + 1

    # -- opening -------------------------------------------------------------------------------------

    @classmethod
    def create(cls, path: Path) -> Ledger:
        """Start a new ledger owned by this process; refuses a file that still lists live resources."""
        path = Path(path)
        if path.exists():
            old = cls.load(path)
            if old.outstanding():
                raise LedgerError(f"{path}: an earlier run left resources behind; run `kchaos heal {path}` first")
        path.parent.mkdir(parents=True, exist_ok=True)
        pid = os.getpid()
        header = {"op": "open", "version": VERSION, "owner_pid": pid, "owner_start": start_time(pid)}
        ledger = cls(path, header, {})
        with open(path, "w", encoding="utf-8") as f:
            _write_line(f, header)
        _fsync_dir(path.parent)
        return ledger

    @classmethod
    def load(cls, path: Path) -> Ledger:
        """Read a ledger written by this or another (possibly killed) process.

        A torn last line (the writer died mid-write) is ignored: its resource was not yet created.
        """
        path = Path(path)
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            raise LedgerError(f"{path}: no such ledger") from None
        except OSError as exc:
            raise LedgerError(f"{path}: cannot read: {exc.strerror}") from None
        records: list[dict[str, Any]] = []
        for lineno, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                if lineno == len(lines):
                    continue
                raise LedgerError(f"{path}:{lineno}: not valid JSON") from None
            if not isinstance(rec, dict) or "op" not in rec:
                raise LedgerError(f"{path}:{lineno}: not a ledger record")
            records.append(rec)
        if not records or records[0].get("op") != "open":
            raise LedgerError(f"{path}: not a kchaos ledger (no 'open' header)")
        entries: dict[int, Entry] = {}
        for rec in records[1:]:
            op, rid = rec.get("op"), rec.get("id")
            if op == "add":
                fields = {k: v for k, v in rec.items() if k not in ("op", "id", "kind")}
                entries[rid] = Entry(id=rid, kind=rec["kind"], fields=fields)
            elif op == "update" and rid in entries:
                entries[rid].fields.update({k: v for k, v in rec.items() if k not in ("op", "id")})
            elif op == "done" and rid in entries:
                entries[rid].done = True
        return cls(path, records[0], entries)

    # -- writing -------------------------------------------------------------------------------------

    def record(self, kind: str, **fields: Any) -> int:
        """Write 'about to create' and fsync it; call this *before* creating the resource."""
        with self._lock:
            rid = self._next_id
            self._next_id += 1
            self._append({"op": "add", "id": rid, "kind": kind, **fields})
            self._entries[rid] = Entry(id=rid, kind=kind, fields=dict(fields))
            return rid

    def update(self, rid: int, **fields: Any) -> None:
        with self._lock:
            self._append({"op": "update", "id": rid, **fields})
            self._entries[rid].fields.update(fields)

    def mark_done(self, rid: int) -> None:
        with self._lock:
            if not self._entries[rid].done:
                self._append({"op": "done", "id": rid})
                self._entries[rid].done = True

    def _append(self, rec: dict[str, Any]) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            _write_line(f, rec)

    # -- reading and undoing -------------------------------------------------------------------------

    def entry(self, rid: int) -> Entry:
        return self._entries[rid]

    def all_entries(self) -> list[Entry]:
        """Every entry, done or not, oldest first (what was made, e.g. a command line to run again)."""
        with self._lock:
            return sorted(self._entries.values(), key=lambda e: e.id)

    def outstanding(self) -> list[Entry]:
        """Entries not yet marked done, newest first (the order to undo them in)."""
        with self._lock:
            return [e for e in sorted(self._entries.values(), key=lambda e: -e.id) if not e.done]

    def owner_alive(self) -> bool:
        """True if the process that opened this ledger is still running (and is not us)."""
        pid, start = self.header.get("owner_pid"), self.header.get("owner_start")
        if not isinstance(pid, int) or pid == os.getpid() or start is None:
            return False
        return start_time(pid) == start

    def undo(self, rid: int, report: HealReport | None = None) -> HealReport:
        """Undo one entry (if still outstanding) and mark it done once that succeeded."""
        report = report if report is not None else HealReport()
        entry = self._entries[rid]
        if entry.done:
            return report
        undo = _UNDO.get(entry.kind)
        if undo is None:
            _load_undo_modules()
            undo = _UNDO.get(entry.kind)
        if undo is None:
            report.failed.append(f"{entry.describe()}: no undo known for kind '{entry.kind}'")
            return report
        try:
            what = undo(entry.fields)
        except Exception as exc:  # one failed undo must not stop the others
            report.failed.append(f"{entry.describe()}: {exc}")
            return report
        (report.removed if what else report.already_gone).append(what or entry.describe())
        self.mark_done(rid)
        return report

    def undo_all(self) -> HealReport:
        report = HealReport()
        for entry in self.outstanding():
            self.undo(entry.id, report)
        return report


def heal(path: Path) -> HealReport:
    """Undo everything a (possibly killed) run's ledger still lists. Idempotent."""
    _load_undo_modules()
    return Ledger.load(path).undo_all()


def _write_line(f: Any, rec: dict[str, Any]) -> None:
    f.write(json.dumps(rec, separators=(",", ":")) + "\n")
    f.flush()
    os.fsync(f.fileno())


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
