"""Prefix reads: registers read from replicas that apply one committed log, each at its own pace.

Some systems answer reads from a replica's copy of a replicated log, with no read barrier: Apache
Kafka's brokers answer DescribeConfigs from their metadata image, which follows the committed metadata
log. Such reads may be stale, so a linearizability check would report what the system never
promised. What it does promise, checked here per key (a register with unique written values):

- **one order**: every node shows values in one common order of the writes (the log's), and that
  order agrees with real time: a write acknowledged before another write began comes first, and a
  value read before a write began comes before that write (a node shows only committed records).
  Together with **monotonic reads per node** (a read that began after another read at the same node
  completed shows the same value or a later one), a violation is a cycle in these orders, reported
  as `order-cycle` with the values on it;
- **went-back**: a node showed a key's initial (unset) value after it had shown a written one;
- **unexpected** / **failed-read**: a read showed a value nobody wrote, or only a write that failed.

Convergence (the final reads show every acknowledged write) is `committed-loss`'s to judge.

Measured, not judged: the **stale-read window**. A read is stale when some write acknowledged before
the read began certainly follows (in real time) the write whose value it showed; its staleness is the
time from the first such acknowledgement to the read's start. The verdict gives counts, the fraction
and the distribution (ms), in all and per node.

History ops: `f` "write" (invoke value: the integer written) and `f` in `read_fs` (default "read"; value:
the integer read, or null for the initial value); `node` names the server that answered.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from typing import Any

from checkers.history import History, Op
from checkers.verdict import UNKNOWN, Anomalies, Verdict

CHECKER = "prefix-reads"
WRITE_F = "write"


def _ms(ns: float) -> float:
    return round(ns / 1e6, 3)


def _quantile(sorted_values: list[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def window(stale_ns: list[int]) -> dict[str, Any]:
    ordered = sorted(stale_ns)
    if not ordered:
        return {"count": 0}
    return {
        "count": len(ordered),
        "p50_ms": _ms(_quantile(ordered, 0.5)),
        "p99_ms": _ms(_quantile(ordered, 0.99)),
        "max_ms": _ms(ordered[-1]),
    }


class _Order:
    """The precedence graph of one key's values. Real-time edges go through a chain of time points
    (one per write, in invoke order), so their number stays linear: X -> point(t) reaches every write
    invoked after t."""

    def __init__(self, writes: list[Op]) -> None:
        self.edges: dict[Any, set[Any]] = defaultdict(set)
        self.writes = sorted(writes, key=lambda w: w.invoke_time)
        self.invokes = [w.invoke_time for w in self.writes]
        for i, w in enumerate(self.writes):
            self.edges[("t", i)].add(("v", w.invoke_value))
            if i + 1 < len(self.writes):
                self.edges[("t", i)].add(("t", i + 1))

    def before(self, a: Any, b: Any) -> None:
        self.edges[("v", a)].add(("v", b))

    def before_writes_after(self, a: Any, time: int) -> None:
        """`a` precedes every write invoked after `time`."""
        i = bisect.bisect_right(self.invokes, time)
        if i < len(self.writes):
            self.edges[("v", a)].add(("t", i))

    def cycle(self) -> list[Any] | None:
        """The values on one cycle, or None (iterative depth-first search)."""
        color: dict[Any, int] = {}
        for start in list(self.edges):
            if color.get(start):
                continue
            stack = [(start, iter(self.edges.get(start, ())))]
            path = [start]
            color[start] = 1
            while stack:
                node, children = stack[-1]
                child = next(children, None)
                if child is None:
                    stack.pop()
                    path.pop()
                    color[node] = 2
                elif color.get(child) == 1:
                    loop = path[path.index(child) :]
                    return [v for kind, v in loop if kind == "v"]
                elif not color.get(child):
                    color[child] = 1
                    path.append(child)
                    stack.append((child, iter(self.edges.get(child, ()))))
        return None


def check_prefix_reads(history: History, read_fs: tuple[str, ...] = ("read",)) -> Verdict:
    """See the module docstring."""
    anomalies = Anomalies()
    by_key: dict[Any, tuple[list[Op], list[Op]]] = defaultdict(lambda: ([], []))
    for op in history.ops:
        if op.f == WRITE_F:
            by_key[op.key][0].append(op)
        elif op.f in read_fs and op.type == "ok":
            by_key[op.key][1].append(op)
    stale: list[int] = []
    stale_by_node: dict[str, list[int]] = defaultdict(list)
    reads_by_node: dict[str, int] = defaultdict(int)
    for key, (writes, reads) in by_key.items():
        writer = {w.invoke_value: w for w in writes}
        taken = [w for w in writes if w.type != "fail"]
        order = _Order(taken)
        for w in taken:
            if w.type == "ok":
                order.before_writes_after(w.invoke_value, w.complete_time or w.invoke_time)
        # the earliest acknowledgement among writes invoked after a time: suffix minimum by invoke
        acked = sorted((w for w in writes if w.type == "ok"), key=lambda w: w.invoke_time)
        acked_invokes = [w.invoke_time for w in acked]
        suffix_min = [0] * len(acked)
        best = None
        for i in range(len(acked) - 1, -1, -1):
            c = acked[i].complete_time
            best = c if best is None or (c is not None and c < best) else best
            suffix_min[i] = best
        last_at: dict[str, Op] = {}
        for r in sorted(reads, key=lambda r: r.invoke_time):
            node = r.node or "?"
            reads_by_node[node] += 1
            v = r.value
            w = writer.get(v) if v is not None else None
            if v is not None and w is None:
                anomalies.add("unexpected", {"key": key, "read": r.id, "value": v, "node": node})
                continue
            if w is not None and w.type == "fail":
                anomalies.add("failed-read", {"key": key, "read": r.id, "value": v, "write": w.id, "node": node})
                continue
            if v is not None:
                order.before_writes_after(v, r.complete_time or r.invoke_time)
            prev = last_at.get(node)
            if prev is not None and (prev.complete_time or 0) < r.invoke_time:
                if v is None and prev.value is not None:
                    anomalies.add("went-back", {"key": key, "node": node, "read": r.id, "earlier": prev.id})
                elif v is not None and prev.value is not None and v != prev.value:
                    order.before(prev.value, v)
            if prev is None or (prev.complete_time or 0) < r.invoke_time:
                last_at[node] = r
            # staleness: the first acknowledgement of a write certainly after the one read
            after = w.complete_time if w is not None else None
            if v is not None and after is None:
                continue  # an info write's value: when it took effect is unknown
            i = 0 if v is None else bisect.bisect_right(acked_invokes, after)
            if i < len(acked) and suffix_min[i] is not None and suffix_min[i] < r.invoke_time:
                stale.append(r.invoke_time - suffix_min[i])
                stale_by_node[node].append(r.invoke_time - suffix_min[i])
        loop = order.cycle()
        if loop is not None:
            anomalies.add("order-cycle", {"key": key, "values": loop[:12]})
    return stale_verdict(CHECKER, anomalies, stale, stale_by_node, reads_by_node, keys=len(by_key))


def stale_verdict(
    checker: str,
    anomalies: Anomalies,
    stale: list[int],
    stale_by_node: dict[str, list[int]],
    reads_by_node: dict[str, int],
    **more: Any,
) -> Verdict:
    """The verdict of a replica-reads checker: invalid with anomalies, unknown with no reads, and the
    stale-read window (ns per stale read, in all and per node) measured either way."""
    total_reads = sum(reads_by_node.values())
    details: dict[str, Any] = {
        "reads": total_reads,
        **more,
        "stale_reads": len(stale),
        "stale_fraction": round(len(stale) / total_reads, 4) if total_reads else 0.0,
        "stale_window": window(stale),
        "by_node": {
            n: {"reads": reads_by_node[n], "stale_window": window(stale_by_node[n])} for n in sorted(reads_by_node)
        },
        **anomalies.details(),
    }
    if anomalies:
        return Verdict(checker, False, details)
    if not total_reads:
        return Verdict(checker, UNKNOWN, {**details, "reason": "no ok reads to judge"})
    return Verdict(checker, True, details)


def add_check_arguments(parser: Any) -> None:
    group = parser.add_argument_group("prefix-reads")
    group.add_argument("--prefix-read-f", action="append", help="f of the replica reads (repeatable; default read)")


def check_from_args(history: History, args: Any) -> Verdict:
    return check_prefix_reads(history, tuple(getattr(args, "prefix_read_f", None) or ("read",)))


def summarize(verdict: Verdict, noun: str = "reads") -> list[str]:
    d = verdict.details
    if "reads" not in d:
        return [f"{verdict.checker}: {verdict.valid}"]
    w = d["stale_window"]
    span = f", stale by p50 {w['p50_ms']} / p99 {w['p99_ms']} / max {w['max_ms']} ms" if w["count"] else ""
    lines = [f"{verdict.checker}: {verdict.valid} ({d['reads']} {noun}, {d['stale_reads']} stale{span})"]
    lines += [f"  {name}: {count}" for name, count in d["anomaly_counts"].items()]
    return lines
