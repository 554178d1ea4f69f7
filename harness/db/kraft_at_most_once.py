"""`at-most-once`: every write is applied at most once (KIP-590 forwarding), judged on the committed log.

A broker forwards an admin write to the active controller in an Envelope. When the Envelope gets no
answer (the controller died, the connection broke) the write may have been applied: KIP-590 says the
broker must not send it again, and tells the client REQUEST_TIMED_OUT. A broker that resends it
anyway applies the write twice whenever the first copy had committed. The client cannot tell (it sees
one answer, or a timeout), and a register or list checker sees it only in the rare history where
another write lands between the two copies and a read sees the register go back; the committed log
always shows it.

The config workloads write values nobody else writes: a register's unique integer (`write`, a SET),
a list's unique element (`txn` appends `["append", key, "n:0"]`). So in the committed log (the node
dumps plus the log tap, `harness/db/kraft_checks.py`):
- a SET value written by one op is in at most one ConfigRecord of its key;
- a ConfigRecord on a key written only by unique appends changes the key's list (the same list again
  means a write applied a second time: its elements were already there).
Either is an `applied-twice` anomaly. A value written by two ops (none in these workloads) is not
judged. Records that a snapshot replaced before the tap saw them cannot be judged either.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from checkers.verdict import Anomalies, Verdict
from harness.db.kraft_checks import TOPIC, committed_records, stretches, topic_configs

CHECKER = "at-most-once"
MAX_EXAMPLES = 8

ValuesByKey = dict[str, dict[str, int]]  # "topic/config" -> value (or element) -> the op that writes it


def unique_writes(ops: Iterable[Any]) -> tuple[ValuesByKey, ValuesByKey]:
    """(SET values, APPEND elements) of the history's config writes that exactly one op writes, whatever
    its outcome (a failed op certainly did not apply, but its value is still nobody else's)."""
    sets: dict[str, dict[str, set[int]]] = {}
    appends: dict[str, dict[str, set[int]]] = {}
    for op in ops:
        if op.f == "write" and isinstance(op.key, str) and "/" in op.key and op.invoke_value is not None:
            sets.setdefault(op.key, {}).setdefault(str(op.invoke_value), set()).add(op.id)
        elif op.f == "txn" and isinstance(op.invoke_value, list):
            for mop in op.invoke_value:
                if isinstance(mop, list | tuple) and len(mop) == 3 and mop[0] == "append" and isinstance(mop[1], str):
                    appends.setdefault(mop[1], {}).setdefault(str(mop[2]), set()).add(op.id)

    def unique(table: dict[str, dict[str, set[int]]]) -> ValuesByKey:
        return {k: {v: min(ids) for v, ids in values.items() if len(ids) == 1} for k, values in table.items()}

    return unique(sets), unique(appends)


def check_at_most_once(history: Any, run_dir: str | Path) -> Verdict:
    """See the module docstring."""
    from node.controller.config_catalog import split_list
    from node.metadata.records import ConfigRecord, MetadataRecordError, decode_record

    sets, appends = unique_writes(history.ops)
    records, snapshots = committed_records(run_dir)
    found = Anomalies(MAX_EXAMPLES)
    set_records: dict[tuple[str, str], list[int]] = {}
    checked = 0
    for image, stretch in stretches(records, snapshots):
        current = topic_configs(image)
        for r in stretch:
            if r.control:
                continue
            try:
                record = decode_record(r.record)
            except MetadataRecordError:
                continue
            if not isinstance(record, ConfigRecord) or record.resource_type != TOPIC or record.value is None:
                continue
            key = f"{record.resource_name}/{record.name}"
            before, current[key] = current.get(key), record.value
            if record.value in sets.get(key, {}):
                checked += 1
                set_records.setdefault((key, record.value), []).append(r.offset)
            elif key in appends:
                checked += 1
                elements = split_list(record.value)
                if before == record.value and elements and all(e in appends[key] for e in elements):
                    found.add("applied-twice", {"key": key, "offset": r.offset, "how": "a record that changes nothing"})
    for (key, value), offsets in sorted(set_records.items()):
        if len(offsets) > 1:
            example = {"key": key, "value": value, "op": sets[key][value], "offsets": offsets}
            found.add("applied-twice", {**example, "how": "one value in two records"})
    details: dict[str, Any] = {
        "unique_values": sum(len(v) for v in sets.values()) + sum(len(v) for v in appends.values()),
        "records_checked": checked,
        **found.details(),
    }
    return Verdict(CHECKER, not found, details)


def check_from_args(history: Any, args: Any) -> Verdict:
    return check_at_most_once(history, getattr(args, "dumps", None) or Path(args.history).parent)


def summarize(verdict: Verdict) -> list[str]:
    d = verdict.details
    lines = [
        f"{verdict.checker}: {verdict.valid} ({d['records_checked']} committed config records of "
        f"{d['unique_values']} unique written values checked; {d['anomaly_counts'].get('applied-twice', 0)} "
        "applied twice)"
    ]
    for e in d["anomalies"].get("applied-twice", [])[:3]:
        where = f"offsets {e['offsets']}" if "offsets" in e else f"offset {e['offset']}"
        value = f" = {e['value']} (op {e['op']})" if "value" in e else ""
        lines.append(f"  applied-twice: {e['key']}{value} at {where}: {e['how']}")
    return lines
