"""watch-order: watches deliver every committed revision, in order, and agree on what each revision holds.

For a history where one workload owns a key-value store's keyspace and writes with single-key puts
(workloads/etcd_watch.py), so each put advances the store's revision by exactly one:
- `write` ops: invoke value n (unique), ok value `{"value": n, "revision": r}`, key k;
- `watch` ops: ok value `{"start": s, "events": [[revision, key, value], ...]}` (a final watch also
  has `"until": u`, the newest revision when it began).
Anomalies (any one makes the history invalid):
- `out-of-order`: a watch whose revisions do not increase by exactly one from event to event (a
  revision skipped, repeated or delivered late);
- `late-start`: a watch whose first event is after its start revision (revisions from its start were
  skipped; revision 1 is the empty store's and has no event);
- `disagreement`: two watches, or a watch and an acknowledged write, that say different things of
  one revision (key or value);
- `missed-write`: an acknowledged write at a revision some watch covers (between its first and last
  event) but does not show, or a final watch that ends before an acknowledged write's revision;
- `phantom`: an event whose value no write of that key ever tried, or that a `fail`ed write wrote.
Valid when no anomaly; unknown when no watch completed `ok` (nothing was observed).
"""

from __future__ import annotations

import itertools
from typing import Any

from checkers.history import History, Op
from checkers.verdict import UNKNOWN, Verdict

CHECKER = "watch-order"
MAX_LISTED = 10
KINDS = ("out-of-order", "late-start", "disagreement", "missed-write", "phantom")


def _events(op: Op) -> list[tuple[int, str, Any]]:
    return [(int(r), str(k), v) for r, k, v in (op.value or {}).get("events", [])]


def check_watch_order(history: History) -> Verdict:
    writes = [op for op in history.ops if op.f == "write"]
    watches = [op for op in history.ops if op.f == "watch" and op.type == "ok" and isinstance(op.value, dict)]
    found: dict[str, list[dict[str, Any]]] = {kind: [] for kind in KINDS}
    seen: dict[int, tuple[str, Any, int]] = {}  # revision -> (key, value, watch op id) first shown
    tried = {(str(w.key), w.invoke_value) for w in writes if w.type != "fail"}
    failed = {(str(w.key), w.invoke_value) for w in writes if w.type == "fail"}
    for watch in watches:
        events = _events(watch)
        start = int(watch.value.get("start", 1))
        if events and events[0][0] > max(start, 2):
            found["late-start"].append({"watch": watch.id, "start": start, "first": events[0][0]})
        for before, after in itertools.pairwise(events):
            if after[0] != before[0] + 1:
                found["out-of-order"].append({"watch": watch.id, "revision": before[0], "next": after[0]})
        for revision, key, value in events:
            first = seen.setdefault(revision, (key, value, watch.id))
            if first[:2] != (key, value):
                found["disagreement"].append(
                    {
                        "revision": revision,
                        "watch": watch.id,
                        "shows": [key, value],
                        "watch_before": first[2],
                        "before": first[:2],
                    }
                )
            if (key, value) in failed or (key, value) not in tried:
                found["phantom"].append({"watch": watch.id, "revision": revision, "key": key, "value": value})
    acknowledged = [w for w in writes if w.type == "ok" and isinstance(w.value, dict)]
    for write in acknowledged:
        revision, key, value = int(write.value["revision"]), str(write.key), write.invoke_value
        shown = seen.get(revision)
        if shown is not None and shown[:2] != (key, value):
            found["disagreement"].append(
                {"revision": revision, "write": write.id, "wrote": [key, value], "watch": shown[2], "shows": shown[:2]}
            )
        for watch in watches:
            revisions = [e[0] for e in _events(watch)]
            until = watch.value.get("until")
            covered = bool(revisions) and revisions[0] <= revision <= revisions[-1]
            short = until is not None and revision <= int(until) and (not revisions or revisions[-1] < revision)
            if (covered and revision not in set(revisions)) or short:
                found["missed-write"].append({"write": write.id, "revision": revision, "watch": watch.id})
    counts = {kind: len(items) for kind, items in found.items()}
    valid: bool | str = not any(counts.values()) if watches else UNKNOWN
    details = {
        "watch_count": len(watches),
        "acknowledged_count": len(acknowledged),
        "revisions_seen": len(seen),
        "anomaly_counts": counts,
        "anomalies": {kind: items[:MAX_LISTED] for kind, items in found.items() if items},
    }
    return Verdict(checker=CHECKER, valid=valid, details=details)


def check_from_args(history: History, args: Any) -> Verdict:
    return check_watch_order(history)


def summarize(verdict: Verdict) -> list[str]:
    d = verdict.details
    lines = [
        f"{verdict.checker}: {verdict.valid} ({d['watch_count']} watches, {d['revisions_seen']} revisions seen, "
        f"{d['acknowledged_count']} acknowledged writes)"
    ]
    lines += [f"  {kind}: {count}" for kind, count in d["anomaly_counts"].items() if count]
    return lines
