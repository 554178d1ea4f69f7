"""Stale list reads: list-append reads answered by replicas that follow one committed log, each at its
own pace (Apache Kafka's brokers answer DescribeConfigs from their metadata image, with no read barrier).

Elle (`elle-list-append` with `serializable`) judges that the appends and reads fit one order; what it
cannot see without real-time edges, and what such replicas still promise, is judged here per key:

- **went-back**: a node's answers never shrink: a read that began after another read of the same key
  at the same node had completed shows an extension of that earlier list (append-only keys). A
  violation names the key, the node and both reads.

Measured, not judged: the **stale-read window**. A read is stale when it lacks an element whose append
was acknowledged before the read began; its staleness is the time from the earliest such
acknowledgement to the read's start. The verdict gives counts, the fraction and the distribution (ms),
in all and per node (as `prefix-reads` gives it).

History ops: Elle's `txn` ops (`["append", k, v]` / `["r", k, [..]]`); reads are the `ok` transactions
of read micro-ops only, and `node` names the server that answered.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from typing import Any

from checkers.elle.txn import extract_txns
from checkers.history import History, Op
from checkers.prefix_reads import stale_verdict
from checkers.prefix_reads import summarize as prefix_summarize
from checkers.verdict import Anomalies, Verdict

CHECKER = "stale-list-reads"
TXN_F = "txn"


def check_stale_list_reads(history: History, txn_f: str = TXN_F) -> Verdict:
    """See the module docstring."""
    acked: dict[Any, list[tuple[int, Any]]] = defaultdict(list)  # key -> (ack time, element)
    reads: list[tuple[Op, Any, list[Any]]] = []
    for txn in extract_txns(history, ("append", "r"), txn_f):
        op = txn.op
        if all(f == "r" for f, _, _ in txn.mops):
            if op.type == "ok":
                reads.extend((op, key, list(value or [])) for _, key, value in txn.mops)
        elif op.type == "ok" and op.complete_time is not None:
            for f, key, value in txn.mops:
                if f == "append":
                    acked[key].append((op.complete_time, value))
    for entries in acked.values():
        entries.sort(key=lambda e: e[0])
    anomalies = Anomalies()
    stale: list[int] = []
    stale_by_node: dict[str, list[int]] = defaultdict(list)
    reads_by_node: dict[str, int] = defaultdict(int)
    last: dict[tuple[Any, str], tuple[Op, list[Any]]] = {}
    for op, key, shown in sorted(reads, key=lambda r: r[0].invoke_time):
        node = op.node or "?"
        reads_by_node[node] += 1
        prev = last.get((key, node))
        after = prev is not None and (prev[0].complete_time or 0) < op.invoke_time
        if after and shown[: len(prev[1])] != prev[1]:
            example = {
                "key": key,
                "node": node,
                "read": op.id,
                "earlier": prev[0].id,
                "shown": shown,
                "before": prev[1],
            }
            anomalies.add("went-back", example)
        if prev is None or after:
            last[(key, node)] = (op, shown)
        entries = acked.get(key, [])
        seen = set(shown)
        before = entries[: bisect.bisect_left(entries, op.invoke_time, key=lambda e: e[0])]
        missing = [t for t, element in before if element not in seen]
        if missing:
            stale.append(op.invoke_time - missing[0])
            stale_by_node[node].append(op.invoke_time - missing[0])
    return stale_verdict(CHECKER, anomalies, stale, stale_by_node, reads_by_node)


def check_from_args(history: History, args: Any) -> Verdict:
    return check_stale_list_reads(history)


def summarize(verdict: Verdict) -> list[str]:
    return prefix_summarize(verdict, "key reads")
