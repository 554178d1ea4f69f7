"""The on-disk contract the reports pipeline reads (results/SCHEMA.md, schema_version 1).

Kept in one place so the harness (which writes runs) and the pipeline (which reads them) can share the
exact column names and types; the harness may import `HISTORY_ARROW_SCHEMA` to write history.parquet.
"""

from __future__ import annotations

import re

import pyarrow as pa

SCHEMA_VERSION = 1

TEST_FILE = "test.json"
RESULTS_FILE = "results.json"
HISTORY_PARQUET = "history.parquet"
HISTORY_JSONL = "history.jsonl"

NEMESIS_PROCESS = "nemesis"
INVOKE = "invoke"
COMPLETIONS = ("ok", "fail", "info")
CALM = "calm"

# A run directory's name: a UTC timestamp like 20261123T101500Z.
RUN_DIR_RE = re.compile(r"^\d{8}T\d{6}Z$")

HISTORY_COLUMNS = ("index", "time", "process", "type", "f", "value", "key", "node", "error")

HISTORY_ARROW_SCHEMA = pa.schema(
    [
        ("index", pa.int64()),
        ("time", pa.int64()),
        ("process", pa.string()),
        ("type", pa.string()),
        ("f", pa.string()),
        ("value", pa.string()),  # JSON text
        ("key", pa.string()),
        ("node", pa.string()),
        ("error", pa.string()),  # JSON text or plain string
    ]
)


def parquet_schema_problem(schema: pa.Schema) -> str | None:
    """Why a history.parquet schema is not ours (None when it is)."""
    for field in HISTORY_ARROW_SCHEMA:
        if field.name not in schema.names:
            return f"column {field.name!r} missing"
        actual = schema.field(field.name).type
        if pa.types.is_integer(field.type):
            if actual != pa.int64():
                return f"column {field.name!r} is {actual}, expected int64"
        elif not (pa.types.is_string(actual) or pa.types.is_large_string(actual) or pa.types.is_null(actual)):
            return f"column {field.name!r} is {actual}, expected string"
    return None


def verdict_text(value: object) -> str:
    """Normalise a checker verdict (true | false | "unknown") to the strings stored in tables."""
    if value is True:
        return "true"
    if value is False:
        return "false"
    return "unknown"


def fault_kind(f: str) -> tuple[str, str] | None:
    """Split a nemesis f like `start-partition` into ("start", "partition")."""
    for action in ("start", "stop"):
        prefix = action + "-"
        if f.startswith(prefix) and len(f) > len(prefix):
            return action, f[len(prefix) :]
    return None


def nemesis_label(kinds: object) -> str:
    """The nemesis of a run as one label: sorted kinds joined by '+', or 'none'."""
    if not isinstance(kinds, list | tuple) or not kinds:
        return "none"
    return "+".join(sorted({str(k) for k in kinds}))
