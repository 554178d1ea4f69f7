"""Plain-text explanations of cycles, in the manner of Elle: name the transactions, then justify each
edge from the history's own observations, ending in the contradiction."""

from __future__ import annotations

import json
from typing import Any, Protocol

from checkers.elle.graph import EDGE_NAMES, PROCESS, REALTIME, Cycle
from checkers.elle.txn import Txn

MAX_STEPS = 32


class Evidence(Protocol):
    """What a workload's inference knows about why a ww / wr / rw edge exists."""

    def explain(self, a: Txn, b: Txn, kind: int, name_a: str, name_b: str) -> str | None: ...


def show(value: Any) -> str:
    """Values as a reader expects them: nil, [1 2 3], strings bare."""
    if value is None:
        return "nil"
    if isinstance(value, list | tuple):
        return "[" + " ".join(show(v) for v in value) + "]"
    return str(value)


def _ordering_reason(a: Txn, b: Txn, kind: int, name_a: str, name_b: str) -> str:
    if kind == PROCESS:
        return f"{name_a} and {name_b} ran on process {a.process}, {name_a} first"
    assert kind == REALTIME
    return f"{name_a} completed (index {a.op.complete_index}) before {name_b} was invoked (index {b.op.invoke_index})"


def explain_cycle(cycle: Cycle, txns: list[Txn], evidence: Evidence, max_steps: int = MAX_STEPS) -> dict[str, Any]:
    """The JSON example of one cycle: its transactions, each step with its reason, and the text.

    A cycle longer than `max_steps` keeps its first steps and its closing one; the rest are counted.
    """
    count = len(cycle.nodes)
    shown = list(range(count)) if count <= max_steps else [*range(max_steps - 1), count - 1]
    names = {cycle.nodes[i]: f"T{i + 1}" for i in range(count)}
    steps: list[dict[str, Any]] = []
    for i in shown:
        a_id, kind = cycle.nodes[i], cycle.kinds[i]
        b_id = cycle.nodes[(i + 1) % count]
        a, b = txns[a_id], txns[b_id]
        if kind in (PROCESS, REALTIME):
            why = _ordering_reason(a, b, kind, names[a_id], names[b_id])
        else:
            why = evidence.explain(a, b, kind, names[a_id], names[b_id]) or "(no evidence recorded)"
        steps.append({"from": names[a_id], "to": names[b_id], "rel": EDGE_NAMES[kind], "why": why})
    involved = list(dict.fromkeys(t for i in shown for t in (cycle.nodes[i], cycle.nodes[(i + 1) % count])))
    lines = ["Let:"]
    for t in involved:
        body = txns[t].to_json()
        lines.append(
            f"  {names[t]} = index {body['index']}, process {body['process']}, {body['type']}: "
            f"{json.dumps(body['value'])}"
        )
    lines += ["", "Then:"]
    for i, step in enumerate(steps):
        if i == len(steps) - 1 and len(steps) < count:
            lines.append(f"  - ... {count - len(steps)} more steps ...")
        lead = "However, " if i == len(steps) - 1 else ""
        tail = ": a contradiction!" if i == len(steps) - 1 else "."
        lines.append(f"  - {lead}{step['from']} < {step['to']}, because {step['why']} ({step['rel']}){tail}")
    return {
        "type": cycle.name,
        "length": count,
        "cycle": [{"name": names[t], **txns[t].to_json()} for t in involved],
        "steps": steps,
        "explanation": "\n".join(lines),
    }
