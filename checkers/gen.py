"""Generate register histories from a real atomic register, for tests and benchmarks.

Processes issue reads, writes and compare-and-sets against one atomic register per key. Each op takes
effect at one instant inside its interval, so the history is linearizable by construction. Crashed
ops (`info`) may or may not take effect, possibly after their `info` event; their process id is
retired, as in Jepsen. Optionally some reads are then made stale: they return a value that was
certainly overwritten before they began, which makes the history non-linearizable on that key.
"""

from __future__ import annotations

import heapq
import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Generated:
    events: list[dict[str, Any]]
    stale_reads: list[int] = field(default_factory=list)  # `index` of each stale read's invoke
    keys: list[Any] = field(default_factory=list)

    def write_jsonl(self, path: str | Path) -> Path:
        path = Path(path)
        with path.open("w") as out:
            for ev in self.events:
                out.write(json.dumps(ev, separators=(",", ":")) + "\n")
        return path


@dataclass
class _Pending:
    """An op between its invoke and its completion."""

    invoke_index: int
    process: int
    key: Any
    f: str
    value: Any
    crashed: bool = False
    applied: bool = False
    result: Any = None
    outcome: str = "ok"


def register_history(
    n_ops: int,
    *,
    keys: int = 1,
    processes: int = 5,
    crash_rate: float = 0.0,
    fail_rate: float = 0.0,
    stale_reads: int = 0,
    value_range: int | None = None,
    mix: tuple[float, float, float] = (0.5, 0.3, 0.2),
    latency: int = 1000,
    think: int = 500,
    seed: int = 0,
) -> Generated:
    """A history of `n_ops` ops over `keys` registers by `processes` concurrent workers.

    `mix` is the share of read / write / cas. Written values are unique per key unless
    `value_range` is given (values drawn from range(value_range): more ambiguity, harder to check).
    `crash_rate`: share of ops that end `info`; `fail_rate`: share of writes that fail (not applied).
    `stale_reads`: how many ok reads to make stale afterwards (needs unique values).
    """
    rng = random.Random(seed)
    key_names = list(range(keys)) if keys > 1 else [None]
    state: dict[Any, Any] = dict.fromkeys(key_names)
    counters = dict.fromkeys(key_names, 0)
    events: list[dict[str, Any]] = []
    # (time, seq, kind, worker, pending): kinds "invoke", "apply", "complete"
    heap: list[tuple[int, int, str, int, Any]] = []
    seq = 0
    proc_of = list(range(processes))  # worker slot -> current process id
    next_proc = processes
    issued = 0

    def push(t: int, kind: str, worker: int, item: Any) -> None:
        nonlocal seq
        seq += 1
        heapq.heappush(heap, (t, seq, kind, worker, item))

    def emit(t: int, process: int, type_: str, f: str, key: Any, value: Any, **extra: Any) -> int:
        index = len(events)
        ev = {"index": index, "time": t, "process": process, "type": type_, "f": f, "value": value}
        if key is not None:
            ev["key"] = key
        ev.update(extra)
        events.append(ev)
        return index

    def new_value(key: Any) -> Any:
        if value_range is not None:
            return rng.randrange(value_range)
        counters[key] += 1
        return counters[key]

    for w in range(processes):
        push(rng.randrange(think + 1), "invoke", w, None)
    while heap:
        t, _, kind, w, item = heapq.heappop(heap)
        if kind == "invoke":
            if issued >= n_ops:
                continue
            issued += 1
            key = rng.choice(key_names)
            roll = rng.random()
            if roll < mix[0]:
                f, value = "read", None
            elif roll < mix[0] + mix[1]:
                f, value = "write", new_value(key)
            else:
                current = state[key] if rng.random() < 0.5 else rng.choice([None, *range(counters[key] + 1)])
                f, value = "cas", [current, new_value(key)]
            op = _Pending(emit(t, proc_of[w], "invoke", f, key, value), proc_of[w], key, f, value)
            effect = t + 1 + rng.randrange(latency)
            done = effect + 1 + rng.randrange(latency)
            if rng.random() < crash_rate:
                op.crashed = True
                if rng.random() < 0.5:  # a crashed op may still take effect, even after its info
                    push(t + 1 + rng.randrange(3 * latency), "apply", w, op)
            elif f == "write" and rng.random() < fail_rate:
                op.outcome = "fail"
            else:
                push(effect, "apply", w, op)
            push(done, "complete", w, op)
        elif kind == "apply":
            op = item
            op.applied = True
            if op.f == "read":
                op.result = state[op.key]
            elif op.f == "write":
                state[op.key] = op.value
            elif state[op.key] == op.value[0]:
                state[op.key] = op.value[1]
            else:
                op.outcome = "fail"  # the compare failed
        else:  # complete
            op = item
            if op.crashed:
                emit(t, op.process, "info", op.f, op.key, op.value, error="timeout")
                proc_of[w] = next_proc  # Jepsen: a crashed process never comes back
                next_proc += 1
            else:
                value = op.result if op.f == "read" else op.value
                emit(t, op.process, op.outcome, op.f, op.key, value)
            push(t + 1 + rng.randrange(think + 1), "invoke", w, None)
    gen = Generated(events=events, keys=key_names)
    if stale_reads:
        if value_range is not None:
            raise ValueError("stale-read injection needs unique values (value_range=None)")
        gen.stale_reads = _make_stale(events, stale_reads, rng)
    return gen


def _make_stale(events: list[dict[str, Any]], count: int, rng: random.Random) -> list[int]:
    """Make `count` ok reads return a value overwritten before they were invoked.

    Value v is stale for read r if its writer w1 completed before some successful write w2 was
    invoked and w2 completed before r was invoked: with unique values nothing can write v again.
    """
    invokes: dict[Any, dict[str, Any]] = {}
    writes: dict[Any, list[tuple[int, int, Any, Any]]] = {}  # key -> (inv time, ret time, value, new)
    reads: list[tuple[dict[str, Any], dict[str, Any]]] = []
    for ev in events:
        if ev["type"] == "invoke":
            invokes[ev["process"]] = ev
            continue
        inv = invokes.pop(ev["process"])
        if ev["type"] != "ok":
            continue
        key = ev.get("key")
        if ev["f"] == "read":
            reads.append((inv, ev))
        else:
            new = ev["value"] if ev["f"] == "write" else ev["value"][1]
            writes.setdefault(key, []).append((inv["time"], ev["time"], new, inv["index"]))
    rng.shuffle(reads)
    chosen: list[int] = []
    for inv, ok in reads:
        if len(chosen) == count:
            break
        ws = writes.get(ok.get("key"), [])
        overwriters = [w for w in ws if w[1] < inv["time"]]
        if not overwriters:
            continue
        w2 = max(overwriters, key=lambda w: w[1])
        stale = [None] + [w[2] for w in ws if w[1] < w2[0]]
        stale = [v for v in stale if v != ok["value"]]
        if not stale:
            continue
        ok["value"] = rng.choice(stale)
        chosen.append(inv["index"])
    return chosen


def cas_register_history(
    n_ops: int,
    *,
    processes: int = 30,
    values: int = 10,
    mix: tuple[float, float, float] = (0.25, 0.5, 0.25),
    crash_rate: float = 0.01,
    gap_ms: tuple[int, int] = (1, 50),
    duration_ms: tuple[int, int] = (5, 400),
    stale_read: bool = False,
    seed: int = 0,
) -> Generated:
    """Jepsen's cas-register shape on one key (issue 29): small repeated values, ops back to back
    per process, crashed writes and cas (half of them applied, at some instant after their invoke).

    Built in three passes: each worker's timeline (invoke, completion, the instant it takes effect),
    then the register applied in effect order, then the events in time order. With `stale_read`, one
    value is kept out of the writes for a stretch in the middle (and out of crashed ops, which may
    land any time), and one ok read in that stretch returns it although a write of another value
    completed before the read began: provably not linearizable. Without it, the same draw,
    linearizable. Times are in nanoseconds, as our histories carry them.
    """
    rng = random.Random(seed)
    ms = 1_000_000
    quiet_value = rng.randrange(values)
    per_worker = -(-n_ops // processes) + 1
    timeline: list[tuple[int, int, int]] = []  # (invoke, done, worker)
    for w in range(processes):
        t = rng.randint(*gap_ms) * ms
        for _ in range(per_worker):
            done = t + rng.randint(*duration_ms) * ms
            timeline.append((t, done, w))
            t = done + rng.randint(*gap_ms) * ms
    timeline.sort()
    timeline = timeline[:n_ops]
    middle = timeline[len(timeline) // 2][0]
    quiet = [middle, middle + 3 * duration_ms[1] * ms]
    ops: list[_Pending] = []
    times: list[tuple[int, int, int | None]] = []  # (invoke, done, effect or None)
    for inv, done, w in timeline:
        roll = rng.random()
        crashed = roll >= mix[0] and rng.random() < crash_rate
        if roll < mix[0]:
            f, value = "read", None
        else:
            while True:  # a crashed op may land any time: none writes the quiet value
                v = rng.randrange(values)
                if v != quiet_value or values == 1 or not (crashed or quiet[0] <= inv <= quiet[1]):
                    break
            f, value = ("write", v) if roll < mix[0] + mix[1] else ("cas", [rng.randrange(values), v])
        op = _Pending(-1, w, None, f, value, crashed=crashed)
        effect: int | None = rng.randint(inv + 1, done - 1)
        if crashed:
            effect = rng.randint(inv + 1, done + 2 * duration_ms[1] * ms) if rng.random() < 0.5 else None
        ops.append(op)
        times.append((inv, done, effect))
    state: Any = None
    for k in sorted((k for k in range(len(ops)) if times[k][2] is not None), key=lambda k: times[k][2]):
        op = ops[k]
        if op.f == "read":
            op.result = state
        elif op.f == "write":
            state = op.value
        elif state == op.value[0]:
            state = op.value[1]
        else:
            op.outcome = "fail"
    raw: list[tuple[int, int, int, str]] = []  # (time, order, op, type): completions before invokes
    for k, (inv, done, _) in enumerate(times):
        raw.append((inv, 1, k, "invoke"))
        raw.append((done, 0, k, "info" if ops[k].crashed else ops[k].outcome))
    raw.sort()
    proc_of = list(range(processes))
    next_proc = processes
    events: list[dict[str, Any]] = []
    for t, _, k, kind in raw:
        op = ops[k]
        if kind == "invoke":
            op.process = proc_of[op.process]  # the worker's current process
        ev = {"index": len(events), "time": t, "process": op.process, "type": kind, "f": op.f}
        ev["value"] = op.result if kind == "ok" and op.f == "read" else op.value
        if kind == "info":
            ev["error"] = "timeout"
            worker = next(w for w in range(processes) if proc_of[w] == op.process)
            proc_of[worker] = next_proc  # Jepsen: a crashed process never comes back
            next_proc += 1
        events.append(ev)
    gen = Generated(events=events, keys=[None])
    if stale_read:
        gen.stale_reads = [_make_quiet_read_stale(events, quiet_value, quiet)]
    return gen


def _make_quiet_read_stale(events: list[dict[str, Any]], v: int, quiet: list[int]) -> int:
    """Make one ok read inside the quiet stretch return `v`: a write of another value completed
    after every op that could write v had completed (or failed) and before the read began, and no
    op that may write v (crashed ones included) was invoked before the read ended."""
    start, end = quiet
    invokes: dict[Any, dict[str, Any]] = {}
    ops = []
    for ev in events:
        if ev["type"] == "invoke":
            invokes[ev["process"]] = ev
        else:
            ops.append((invokes.pop(ev["process"]), ev))

    def writes_v(inv: dict[str, Any], done: dict[str, Any]) -> bool:
        if done["type"] == "fail" or inv["f"] == "read":
            return False
        return (inv["value"] if inv["f"] == "write" else inv["value"][1]) == v

    writers = [
        (inv["time"], done["time"] if done["type"] != "info" else None) for inv, done in ops if writes_v(inv, done)
    ]
    for inv, done in ops:
        if inv["f"] != "read" or done["type"] != "ok" or not start < inv["time"] < end or done["value"] == v:
            continue
        before = [w for w in writers if w[0] < done["time"]]
        if any(r is None for _, r in before):
            continue  # a crashed writer of v may land any time
        last_v = max((r for _, r in before), default=-1)
        overwritten = any(
            d["type"] == "ok" and i["f"] in ("write", "cas") and i["time"] > last_v and d["time"] < inv["time"]
            for i, d in ops
        )
        if overwritten:
            done["value"] = v
            return inv["index"]
    raise ValueError("no read in the quiet stretch can be made provably stale (try another seed)")
