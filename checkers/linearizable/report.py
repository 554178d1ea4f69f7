"""What a key's search found, told to a reader (Porcupine's "visualization" part): the per-key result
with the longest partial linearization and the ops stuck after it, and the console summary.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from checkers.linearizable.prepared import Prepared, Tools, candidates
from checkers.linearizable.search import Outcome, Path
from checkers.models import ILLEGAL, Model
from checkers.verdict import UNKNOWN, Verdict
from checkers.zones import ZoneVerdict


@dataclass
class KeyResult:
    """The verdict on one key's sub-history."""

    key: Any
    valid: bool | str
    ops: int  # ops that constrain the search (after the model dropped failed / indeterminate reads)
    info_ops: int  # of which indeterminate
    states: int = 0  # memoised configurations
    elapsed: float = 0.0
    reason: str | None = None  # why unknown: "timeout", "state budget", "not checked"
    linearization: list[int] = field(default_factory=list)  # op ids: the longest partial one (invalid)
    states_after: list[str] = field(default_factory=list)  # model state after each op of it
    final_state: str | None = None  # state after the longest partial linearization
    stuck: list[dict[str, Any]] = field(default_factory=list)  # ops that could not be linearized next
    method: str = "search"  # "zones": decided by the zone analysis (checkers.zones), else the search
    undecided: dict[str, Any] = field(default_factory=dict)  # unknown: the window it could not linearize

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "key": self.key,
            "valid": self.valid,
            "ops": self.ops,
            "info_ops": self.info_ops,
            "states": self.states,
            "elapsed": round(self.elapsed, 4),
            "method": self.method,
        }
        if self.reason:
            out["reason"] = self.reason
        if self.undecided:
            out["undecided"] = self.undecided
        if self.valid is not True and self.reason != "not checked":
            out["linearization"] = self.linearization
            out["states_after"] = self.states_after
            out["final_state"] = self.final_state
            out["stuck"] = self.stuck
        return out


def unlink(path: Path) -> list[int]:
    out = []
    while path is not None:
        out.append(path[0])
        path = path[1]
    out.reverse()
    return out


def depth(path: Path) -> int:
    depth = 0
    while path is not None:
        depth += 1
        path = path[1]
    return depth


def zone_counterexample(model: Model, p: Prepared, zv: ZoneVerdict, t: Tools, out: Outcome, result: KeyResult) -> None:
    """A zone violation shown as the viewer expects: the longest partial linearization the (quick)
    search found, and the ops the analysis proved doomed first in the stuck list, with why."""
    result.states = out.states
    explain(model, p, t, out, result)
    n = len(p.ops)
    because = [(p.ops[k] if k < n else p.info[k - n]).id for k in zv.because]
    proven = []
    for k in zv.doomed:
        op = p.ops[k]
        proven.append(
            {
                "id": op.id,
                "op": model.describe_op(op),
                "process": op.process,
                "needs": model.requirement(op),
                "state": result.final_state,
                "legal": False,
                "deadline": False,
                "doomed": True,
                "why": zv.why,
                "because": because,
            }
        )
    ids = {s["id"] for s in proven}
    result.stuck = proven + [s for s in result.stuck if s["id"] not in ids]


def explain(model: Model, p: Prepared, t: Tools, out: Outcome, result: KeyResult) -> None:
    """Fill in the longest partial linearization and the ops stuck after it."""
    fns, ifns, doomed = t.fns, t.ifns, t.doomed
    n = len(p.ops)
    order = unlink(out.path)
    state = t.init
    for c in order:
        state = (fns[c] if c < n else ifns[c - n])(state)
        op = p.ops[c] if c < n else p.info[c - n]
        result.linearization.append(op.id)
        result.states_after.append(model.describe_state(state))
    result.final_state = model.describe_state(state)
    lo, dmask, _imask, _ = out.node
    cands, _ = candidates(p, lo, dmask)
    hopeless = doomed(state, lo, dmask, cands) if doomed is not None and lo < n else -1
    shown = cands if hopeless < 0 or hopeless in cands else [hopeless, *cands]
    for c in shown:
        op = p.ops[c]
        result.stuck.append(
            {
                "id": op.id,
                "op": model.describe_op(op),
                "process": op.process,
                "needs": model.requirement(op),
                "state": result.final_state,
                # legal now, but every continuation after it failed
                "legal": fns[c](state) is not ILLEGAL and c != hopeless,
                # the op that must be linearized before anything invoked later
                "deadline": bool(cands) and c == cands[0],
                # can never become legal from here (a read whose value nobody can write any more)
                "doomed": c == hopeless,
            }
        )
    # Ops that cannot be linearized come first: doomed ones, then illegal ones, the deadline first.
    result.stuck.sort(key=lambda s: (not s["doomed"], s["legal"], not s["deadline"]))


def summarize(verdict: Verdict) -> list[str]:
    """A few console lines: the verdict, key counts and, per bad key, where the search got stuck."""
    d = verdict.details
    results = d.get("results", [])
    counts = {True: 0, False: 0, UNKNOWN: 0}
    for r in results:
        if r.get("reason") != "not checked":
            counts[r["valid"]] += 1
    lines = [
        f"linearizable ({d.get('model')}): {_word(verdict.valid)} — {d.get('ops')} ops, {d.get('keys')} keys: "
        f"{counts[True]} valid, {counts[False]} invalid, {counts[UNKNOWN]} unknown ({d.get('elapsed')} s)"
    ]
    for r in results:
        if r["valid"] is True or r.get("reason") == "not checked":
            continue
        why = f" ({r['reason']})" if r.get("reason") else ""
        label = "(single key)" if r["key"] is None else repr(r["key"])
        lines.append(
            f"  key {label}: {_word(r['valid'])}{why}; longest partial linearization "
            f"{len(r['linearization'])} of {r['ops']} ops, state after it {r['final_state']}"
        )
        if r["valid"] == UNKNOWN and r.get("reason") in BUDGET_HINTS:
            lines.append(
                f"    searched {r.get('states', 0):,} configurations in {r.get('elapsed', 0):.1f} s; "
                f"{BUDGET_HINTS[r['reason']]}"
            )
            u = r.get("undecided")
            if u:
                lines.append(
                    f"    could not linearize the window of {u['window_ops']} ops from op {u['from_op']} to op "
                    f"{u['to_op']}; at this rate the key needs about {u['estimated_states']:,} configurations"
                )
        for s in r["stuck"][:3]:
            if s["legal"]:
                continue
            need = f" needs {s['needs']}" if s["needs"] else " cannot follow"
            lines.append(f"    op {s['id']} (process {s['process']}) {s['op']}:{need}")
            if s.get("why"):
                ops = ", ".join(str(i) for i in s.get("because", []))
                lines.append(f"      never possible: {s['why']}" + (f" (ops {ops})" if ops else ""))
    skipped = sum(1 for r in results if r.get("reason") == "not checked")
    if skipped:
        lines.append(f"  {skipped} keys not checked after the first invalid key (use --all-keys)")
    return lines


BUDGET_HINTS = {
    "timeout": "give it longer with --timeout SECONDS (0: no limit)",
    "state budget": "allow more with --max-states N (about 100 bytes each, 250 without the compiled search)",
}


def _word(valid: bool | str) -> str:
    return {True: "valid", False: "INVALID"}.get(valid, "unknown")  # type: ignore[call-overload]
