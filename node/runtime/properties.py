"""Read a Java `.properties` file, keeping each key's line number for error messages.

Kafka's `server.properties` is such a file, so an operator's file must read here as it does in Kafka:
`key=value`, `key: value` and `key value` separators, `#`/`!` comments, backslash line continuation
and the usual escapes. Only the subset of `java.util.Properties` that config files use is handled.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from node.raft.config import ConfigError

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


@dataclass(frozen=True, slots=True)
class Property:
    key: str
    value: str
    line: int  # 1-based line where the entry starts


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """Join continuation lines (an odd number of trailing backslashes); drop comments and blanks."""
    out: list[tuple[int, str]] = []
    pending: str | None = None
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.lstrip(" \t\f")  # Java drops leading blanks, continuation lines included
        if pending is None:
            if not line or line[0] in "#!":
                continue
            start = number
            pending = ""
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending += line[:-1]
            continue
        out.append((start, pending + line))
        pending = None
    if pending is not None:
        out.append((start, pending))
    return out


def _unescape(text: str, where: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "\\" or i + 1 == len(text):
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u":
            digits = text[i + 2 : i + 6]
            try:
                out.append(chr(int(digits, 16)))
            except ValueError:
                raise ConfigError(f"{where}: malformed \\uXXXX escape") from None
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)


def _split(line: str) -> tuple[str, str]:
    """Split at the first unescaped '=', ':' or whitespace, as java.util.Properties does."""
    i = 0
    while i < len(line):
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=: \t\f":
            break
        i += 1
    key, rest = line[:i], line[i:]
    rest = rest.lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return key, rest


def parse_properties(text: str, source: str = "<properties>") -> list[Property]:
    """Every entry in file order (a repeated key appears twice; the caller decides what that means)."""
    entries = []
    for number, line in _logical_lines(text):
        where = f"{source}:{number}"
        raw_key, raw_value = _split(line)
        entries.append(Property(_unescape(raw_key, where), _unescape(raw_value, where).strip(), number))
    return entries


def read_properties(path: str | Path) -> list[Property]:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{p}: config file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{p}: cannot read config file: {exc}") from None
    return parse_properties(text, str(p))
