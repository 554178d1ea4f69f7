"""Committed loss for every workload: every acknowledged write is still there in the reads after it.

One checker, three data models (`--loss-model`), each judged only by reads that promise to see every
write acknowledged before they began (linearizable reads: `f` "read" / "txn"; image reads at a broker
are not used, they may lag):

- `set` (add / read of a set): `set-full`'s definitions as they are (checkers/set_full.py).
- `list-append` (Elle's `txn` ops of `["append", k, v]` / `["r", k, [..]]`): `set-full` per key, the
  appended elements being the set's elements and each ok read of the key a read of the set. An element
  is **lost** when it was acknowledged (or once read) before the last read of its key began and that
  read lacks it; **stale** when a later read lacked it and a read after that had it again.
- `register` (write / read of a per-key register, unique values): the final read of a key (the `ok`
  read invoked last) returned the value of write W (or nil: no write). Every write acknowledged before
  that read began, and invoked after W had completed, was **lost**: a register read after it cannot
  show a value that was overwritten by it (values are unique). A final value nobody wrote is
  **unexpected**; one only a failed write wrote, **failed-present**.

Valid: nothing lost, unexpected or failed-present. Unknown: no read to judge by (or, for the set
models, every acknowledged element is never-read).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from checkers.elle.txn import extract_txns
from checkers.history import History, Op
from checkers.set_full import MAX_LISTED, check_set_full
from checkers.verdict import UNKNOWN, Verdict

CHECKER = "committed-loss"
MODELS = ("list-append", "register", "set")
TXN_F = "txn"
_SET_COUNTS = ("lost", "stale", "never_read", "unexpected", "failed_present", "recovered")


def _key_text(key: Any) -> Any:
    return list(key) if isinstance(key, tuple) else key


# --- list-append: set-full per key -------------------------------------------------------------------


def _split_txns(history: History, txn_f: str) -> dict[Any, list[Op]]:
    """Per key, set-full ops: an `add` per appended element (the transaction's outcome and times) and a
    `read` per ok read micro-op (anonymous node: any server answering a linearizable read)."""
    per_key: dict[Any, list[Op]] = defaultdict(list)
    for txn in extract_txns(history, ("append", "r"), txn_f):
        op = txn.op
        for f, key, value in txn.mops:
            if f == "append":
                per_key[key].append(_as(op, "add", value, value))
            elif op.type == "ok" and value is not None:
                per_key[key].append(_as(op, "read", None, value))
    return per_key


def _as(op: Op, f: str, invoke_value: Any, value: Any) -> Op:
    return Op(
        op.id, op.process, f, None, invoke_value, value, op.type, op.invoke_time, op.complete_time,
        op.invoke_index, op.complete_index, None, op.error,
    )  # fmt: skip


def check_list_append_loss(history: History, txn_f: str = TXN_F) -> Verdict:
    totals = {name: 0 for name in _SET_COUNTS}
    listed: dict[str, list[Any]] = {name: [] for name in _SET_COUNTS}
    reads = acknowledged = 0
    per_key: dict[str, Any] = {}
    for key, ops in sorted(_split_txns(history, txn_f).items(), key=lambda kv: repr(kv[0])):
        verdict = check_set_full(History(ops=sorted(ops, key=lambda o: o.invoke_index), nemesis=[]))
        d = verdict.details
        reads += d["read_count"]
        acknowledged += d["acknowledged_count"]
        for name in _SET_COUNTS:
            totals[name] += d[name]["count"]
            for element in d[name]["elements"]:
                if len(listed[name]) < MAX_LISTED:
                    listed[name].append([_key_text(key), element])
        per_key[str(_key_text(key))] = {
            "valid": verdict.valid,
            "acknowledged": d["acknowledged_count"],
            "reads": d["read_count"],
            "lost": d["lost"]["count"],
        }
    bad = totals["lost"] or totals["unexpected"] or totals["failed_present"]
    if bad:
        valid: bool | str = False
    elif not reads or (acknowledged and totals["never_read"] == acknowledged):
        valid = UNKNOWN
    else:
        valid = True
    details: dict[str, Any] = {
        "loss_model": "list-append",
        "acknowledged_count": acknowledged,
        "read_count": reads,
        **{name: {"count": totals[name], "elements": listed[name]} for name in _SET_COUNTS},
        "lost-count": totals["lost"],
        "keys": per_key,
    }
    # lost elements are counted by `lost-count` (results/SCHEMA.md); the rest are itemised here
    anomalies = {name: listed[name] for name in ("unexpected", "failed_present") if totals[name] and listed[name]}
    if anomalies:
        details["anomalies"] = anomalies
    return Verdict(CHECKER, valid, details)


# --- register ---------------------------------------------------------------------------------------


def check_register_loss(history: History, write_f: str = "write", read_f: str = "read") -> Verdict:
    writes: dict[Any, list[Op]] = defaultdict(list)
    finals: dict[Any, Op] = {}
    for op in history.ops:
        if op.f == write_f:
            writes[op.key].append(op)
        elif op.f == read_f and op.type == "ok":
            best = finals.get(op.key)
            if best is None or (op.invoke_time, op.invoke_index) > (best.invoke_time, best.invoke_index):
                finals[op.key] = op
    lost: list[dict[str, Any]] = []
    unexpected: list[dict[str, Any]] = []
    failed_present: list[dict[str, Any]] = []
    never_read = 0
    acknowledged = sum(1 for ops in writes.values() for w in ops if w.type == "ok")
    for key, ops in writes.items():
        final = finals.get(key)
        if final is None:
            never_read += sum(1 for w in ops if w.type == "ok")
            continue
        never_read += sum(
            1 for w in ops if w.type == "ok" and w.complete_time is not None and w.complete_time >= final.invoke_time
        )
    for key, final in finals.items():
        value = final.value
        by_value = {w.invoke_value: w for w in writes.get(key, ()) if w.invoke_value is not None}
        writer = by_value.get(value) if value is not None else None
        where = {"key": _key_text(key), "final_read_index": final.invoke_index, "final_value": value}
        if value is not None and writer is None:
            unexpected.append(where)
            continue
        if writer is not None and writer.type == "fail":
            failed_present.append(where)
            continue
        # nil: no write precedes anything; else the final value's writer must not precede an acknowledged write
        settled = -1 if writer is None else writer.complete_time
        if settled is None:
            continue  # its writer's effect may land at any time: nothing can be said to follow it
        for w in writes.get(key, ()):
            if (
                w.type == "ok"
                and w is not writer
                and w.complete_time is not None
                and w.complete_time < final.invoke_time
                and w.invoke_time > settled
            ):
                lost.append({**where, "value": w.invoke_value, "write_index": w.invoke_index})
    if lost or unexpected or failed_present:
        valid: bool | str = False
    elif not finals:
        valid = UNKNOWN
    else:
        valid = True
    details: dict[str, Any] = {
        "loss_model": "register",
        "acknowledged_count": acknowledged,
        "keys_read": len(finals),
        "lost": {"count": len(lost), "elements": lost[:MAX_LISTED]},
        "lost-count": len(lost),
        "unexpected": {"count": len(unexpected), "elements": unexpected[:MAX_LISTED]},
        "failed_present": {"count": len(failed_present), "elements": failed_present[:MAX_LISTED]},
        "never_read": {"count": never_read},
    }
    itemised = (("unexpected", unexpected), ("failed_present", failed_present))
    anomalies = {name: items[:MAX_LISTED] for name, items in itemised if items}
    if anomalies:
        details["anomalies"] = anomalies
    return Verdict(CHECKER, valid, details)


# --- entry points -----------------------------------------------------------------------------------


def check_committed_loss(history: History, model: str = "list-append", **kwargs: Any) -> Verdict:
    if model == "list-append":
        return check_list_append_loss(history, **kwargs)
    if model == "register":
        return check_register_loss(history, **kwargs)
    if model == "set":
        verdict = check_set_full(history, **kwargs)
        details = {"loss_model": "set", **verdict.details, "lost-count": verdict.details["lost"]["count"]}
        return Verdict(CHECKER, verdict.valid, details)
    raise ValueError(f"unknown loss model {model!r} (known: {', '.join(MODELS)})")


def add_check_arguments(parser: Any) -> None:
    group = parser.add_argument_group("committed-loss")
    group.add_argument(
        "--loss-model", choices=MODELS, default="list-append", help="the data model (default list-append)"
    )


def check_from_args(history: History, args: Any) -> Verdict:
    return check_committed_loss(history, getattr(args, "loss_model", "list-append") or "list-append")


def summarize(verdict: Verdict) -> list[str]:
    d = verdict.details
    counts = ", ".join(
        f"{name.replace('_', '-')} {d[name]['count']}"
        for name in ("lost", "stale", "never_read", "unexpected", "failed_present")
        if name in d
    )
    lines = [
        f"{verdict.checker} ({d.get('loss_model')}): {verdict.valid} "
        f"({d.get('acknowledged_count')} acknowledged; {counts})"
    ]
    lost = d.get("lost", {})
    if lost.get("count"):
        lines.append(f"  lost e.g. {lost['elements'][:6]}")
    return lines
