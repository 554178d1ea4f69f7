"""Availability: liveness as a verdict. After the final heal a write must commit within a window.

A run heals every fault at the end, then keeps the clients running for a while (the recovery window)
before the final reads. A cluster that is still down then has lost liveness, and the run fails even
though no safety checker could object (a history where nothing succeeds breaks no invariant).

Definitions (times are the history's, ns):
- the final heal: the completion of the last nemesis event (the heal of every fault), or later, when
  a fault still acts after its stop (`FaultWindow.aftereffect_ns`: a clock set back from ahead stands
  still until the true time catches up, and the node's timers with it); a history with no nemesis
  events has none, and the window is counted from the first client invocation.
- a write: an op whose `f` is in `write_fs` (default write, add, txn) that changes something: for a
  `txn`, only one with a micro-op other than a read (`["r", ...]`).
- recovered: some write invoked at or after the final heal completed `ok`; time-to-recover is from the
  heal to the earliest such completion.
- unavailable windows: stretches longer than `gap_ms` with no `ok` op completing (between the first
  client invocation and the last client event), for all ops and for writes alone; reported, never a
  violation by themselves (faults are meant to cause them).

Valid: recovered within `recovery_window_s` of the heal. Invalid: writes were attempted after the heal
and none committed within the window (time-to-recover is reported when one committed later).
Unknown: no write was attempted after the heal, so nothing says whether the cluster came back.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from checkers.history import History, Op, fault_windows
from checkers.verdict import UNKNOWN, Verdict

CHECKER = "availability"
DEFAULT_WRITE_FS = ("write", "add", "txn")
DEFAULT_WINDOW_S = 10.0
DEFAULT_GAP_MS = 1000.0
MAX_LISTED = 20
NS_PER_S = 1_000_000_000


def is_write(op: Op, write_fs: frozenset[str]) -> bool:
    """Does `op` try to change something? (A read-only `txn` does not.)"""
    return changes_something(op.f, op.invoke_value if isinstance(op.invoke_value, list) else op.value, write_fs)


def changes_something(f: str, value: Any, write_fs: frozenset[str]) -> bool:
    """`is_write` for an op's `f` and value: what the runner's recovery window counts as it goes."""
    if f not in write_fs:
        return False
    if f != "txn":
        return True
    return isinstance(value, list) and any(isinstance(m, list | tuple) and m and m[0] != "r" for m in value)


@dataclass(frozen=True)
class Gap:
    start: int
    end: int

    @property
    def ms(self) -> float:
        return (self.end - self.start) / 1e6

    def to_json(self, origin: int = 0) -> dict[str, float]:
        return {"start_s": (self.start - origin) / NS_PER_S, "end_s": (self.end - origin) / NS_PER_S, "ms": self.ms}


def gaps(ok_times: Iterable[int], start: int, end: int, gap_ms: float) -> list[Gap]:
    """Stretches of [start, end] longer than gap_ms without any of `ok_times`."""
    out = []
    previous = start
    for t in sorted(t for t in ok_times if start <= t <= end):
        if (t - previous) / 1e6 > gap_ms:
            out.append(Gap(previous, t))
        previous = t
    if (end - previous) / 1e6 > gap_ms:
        out.append(Gap(previous, end))
    return out


def _gap_summary(found: Sequence[Gap]) -> dict[str, Any]:
    return {
        "count": len(found),
        "total_ms": sum(g.ms for g in found),
        "longest_ms": max((g.ms for g in found), default=0.0),
        "windows": [g.to_json() for g in sorted(found, key=lambda g: -g.ms)[:MAX_LISTED]],
    }


def check_availability(
    history: History,
    recovery_window_s: float = DEFAULT_WINDOW_S,
    write_fs: Iterable[str] = DEFAULT_WRITE_FS,
    gap_ms: float = DEFAULT_GAP_MS,
) -> Verdict:
    """See the module docstring."""
    fs = frozenset(write_fs)
    ops = history.ops
    if not ops:
        return Verdict(CHECKER, UNKNOWN, {"reason": "no client ops"})
    heal = max((e.time for e in history.nemesis), default=None)
    if heal is not None:
        heal = max([heal, *(w.end + w.aftereffect_ns for w in fault_windows(history) if w.end is not None)])
    first = min(op.invoke_time for op in ops)
    origin = heal if heal is not None else first
    last = max(op.complete_time if op.complete_time is not None else op.invoke_time for op in ops)
    window_ns = int(recovery_window_s * NS_PER_S)

    after = [op for op in ops if is_write(op, fs) and op.invoke_time >= origin]
    committed = sorted(op.complete_time for op in after if op.type == "ok" and op.complete_time is not None)
    recovered_at = committed[0] if committed else None
    ttr_s = None if recovered_at is None else (recovered_at - origin) / NS_PER_S
    if not after:
        valid: bool | str = UNKNOWN
        reason = "no write was attempted after the final heal"
    elif recovered_at is not None and recovered_at - origin <= window_ns:
        valid, reason = True, None
    else:
        valid = False
        later = f"; the first one committed {ttr_s:.3f} s after the heal" if ttr_s is not None else ""
        reason = (
            f"no write committed within {recovery_window_s:g} s of the final heal "
            f"({len(after)} attempted after it{later})"
        )
    ok_all = [op.complete_time for op in ops if op.type == "ok" and op.complete_time is not None]
    ok_writes = [
        op.complete_time for op in ops if op.type == "ok" and op.complete_time is not None and is_write(op, fs)
    ]
    details: dict[str, Any] = {
        "final_heal_s": None if heal is None else heal / NS_PER_S,
        "recovery_window_s": recovery_window_s,
        "time_to_recover_s": ttr_s,
        "writes_after_heal": len(after),
        "writes_ok_after_heal": len(committed),
        "unavailable": _gap_summary(gaps(ok_all, first, last, gap_ms)),
        "write_unavailable": _gap_summary(gaps(ok_writes, first, last, gap_ms)),
        "gap_ms": gap_ms,
    }
    if reason:
        details["reason"] = reason
    if valid is False:
        details["anomalies"] = {"no-recovery": [{"reason": reason, "time_to_recover_s": ttr_s}]}
    return Verdict(CHECKER, valid, details)


def add_check_arguments(parser: Any) -> None:
    group = parser.add_argument_group("availability")
    group.add_argument(
        "--recovery-window",
        type=float,
        default=DEFAULT_WINDOW_S,
        metavar="SECONDS",
        help=f"a write must commit this long after the final heal (default {DEFAULT_WINDOW_S:g})",
    )
    group.add_argument(
        "--write-f", action="append", help="f of the ops that write (repeatable; default write, add, txn)"
    )
    group.add_argument(
        "--gap-ms", type=float, default=DEFAULT_GAP_MS, help="report stretches longer than this without an ok op"
    )


def check_from_args(history: History, args: Any) -> Verdict:
    return check_availability(
        history,
        recovery_window_s=getattr(args, "recovery_window", DEFAULT_WINDOW_S),
        write_fs=getattr(args, "write_f", None) or DEFAULT_WRITE_FS,
        gap_ms=getattr(args, "gap_ms", DEFAULT_GAP_MS),
    )


def summarize(verdict: Verdict) -> list[str]:
    d = verdict.details
    if "writes_after_heal" not in d:
        return [f"{verdict.checker}: {verdict.valid} ({d.get('reason', '')})"]
    ttr = d["time_to_recover_s"]
    lines = [
        f"{verdict.checker}: {verdict.valid} (time to recover "
        f"{'never' if ttr is None else f'{ttr:.3f} s'}, window {d['recovery_window_s']:g} s, "
        f"{d['writes_ok_after_heal']}/{d['writes_after_heal']} writes ok after the heal)"
    ]
    if d.get("reason"):
        lines.append(f"  {d['reason']}")
    u = d["unavailable"]
    lines.append(
        f"  unavailable > {d['gap_ms']:g} ms: {u['count']} windows, longest {u['longest_ms']:.0f} ms, "
        f"total {u['total_ms']:.0f} ms (writes: {d['write_unavailable']['count']} windows, "
        f"longest {d['write_unavailable']['longest_ms']:.0f} ms)"
    )
    return lines
