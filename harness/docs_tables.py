"""Tables in the docs that a program writes, never a hand: a benchmark (or `kchaos bugs`) given
`--write-docs` rewrites its table between two markers in docs/figures.md,

    <!-- figures:NAME begin: COMMAND -->
    _Written by `COMMAND` on DATE at commit C; MACHINE._
    | the table |
    <!-- figures:NAME end -->

with the date, commit and machine it was measured on. COMMAND says who owns the table;
tests/docs/test_figures.py checks that every table of the page sits between markers and that the
owner's source writes that NAME.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIGURES = REPO / "docs" / "figures.md"
MARKER = re.compile(r"^<!-- figures:(?P<name>[\w-]+) (?P<edge>begin|end)(?:: (?P<owner>.+?))? -->$")


@dataclass(frozen=True)
class Block:
    """One written table: its name, its owner's command, and its lines (0-based, markers excluded)."""

    name: str
    owner: str
    first: int
    end: int  # the end marker's line


def blocks(text: str) -> list[Block]:
    """The marked blocks of a page, in order; a marker out of place raises ValueError naming its line."""
    found: list[Block] = []
    open_: tuple[str, str, int] | None = None
    for i, line in enumerate(text.splitlines()):
        m = MARKER.match(line.strip())
        if m is None:
            continue
        if m["edge"] == "begin":
            if open_ is not None:
                raise ValueError(f"line {i + 1}: figures:{m['name']} begins inside figures:{open_[0]}")
            if not m["owner"]:
                raise ValueError(f"line {i + 1}: figures:{m['name']} begin names no owner (begin: COMMAND)")
            open_ = (m["name"], m["owner"], i + 1)
        else:
            if open_ is None or open_[0] != m["name"]:
                raise ValueError(f"line {i + 1}: figures:{m['name']} ends without its begin")
            found.append(Block(open_[0], open_[1], open_[2], i))
            open_ = None
    if open_ is not None:
        raise ValueError(f"figures:{open_[0]} begins but never ends")
    return found


def _git(*argv: str) -> str:
    try:
        done = subprocess.run(["git", *argv], cwd=REPO, capture_output=True, text=True, timeout=30)
    except OSError:
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def provenance(owner: str, page: Path | None = None) -> str:
    """The line above a written table: who wrote it, when, at which commit, on what machine."""
    date = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    commit = _git("rev-parse", "--short", "HEAD") or "unknown"
    # The page being written does not count: several benchmarks in a row each rewrite a table of it.
    written = Path(page or FIGURES).resolve()
    changed = [line[2:].strip() for line in _git("status", "--porcelain", "--untracked-files=no").splitlines()]
    if any((REPO / path).resolve() != written for path in changed):
        commit += " with uncommitted changes"
    machine = (
        f"{os.cpu_count()} cores ({platform.machine()}, {platform.system()}), load average {os.getloadavg()[0]:.1f}"
    )
    return f"_Written by `{owner}` on {date} at commit {commit}; {machine}._"


def write_table(name: str, body: str, path: Path | None = None) -> None:
    """Replace block `name` of `path` with the provenance line and `body` (a Markdown table, maybe
    with lines after it); the rest of the page is left as it was. A page without the block is a
    one-line exit (SystemExit): the callers are command lines."""
    path = path or FIGURES
    text = path.read_text()
    try:
        block = next((b for b in blocks(text) if b.name == name), None)
    except ValueError as exc:
        raise SystemExit(f"{path}: {exc}") from None
    if block is None:
        raise SystemExit(f"{path}: no '<!-- figures:{name} begin: COMMAND -->' marker to write the table at")
    lines = text.splitlines()
    new = [provenance(block.owner, path), "", *body.rstrip("\n").splitlines()]
    path.write_text("\n".join([*lines[: block.first], *new, *lines[block.end :]]) + "\n")


def table(header: list[str], rows: list[list[str]]) -> str:
    """A Markdown table."""
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(out) + "\n"


SPEED_HEADER = ["what", "before", "now", "target", "met"]  # the speed tables' columns (issue 16)


def add_option(parser: argparse.ArgumentParser, tables: str) -> None:
    """The `--write-docs` flag every table owner takes."""
    parser.add_argument(
        "--write-docs",
        action="store_true",
        help=f"also rewrite {tables} in docs/figures.md (between its markers) with these figures",
    )


def span(values: list[float], fmt: str = "{:,.0f}") -> str:
    """`low-high` of measured values (one value: itself)."""
    low, high = fmt.format(min(values)), fmt.format(max(values))
    return low if low == high else f"{low}\u2013{high}"
