"""The part of the Elle-style analysis every workload shares: add process / real-time order, find
strongly connected components, search each for the shortest cycle of every class, judge by model."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from checkers.elle.anomalies import (
    FORBIDS,
    check_model,
    implied_anomalies,
    meaning,
    ruled_out,
    uses_process_edges,
    uses_realtime_edges,
)
from checkers.elle.explain import Evidence, explain_cycle, show
from checkers.elle.graph import (
    PROCESS,
    REALTIME,
    Cycle,
    CycleSpec,
    DepGraph,
    any_cycle,
    cycle_specs,
    find_cycle,
    process_edges,
    realtime_edges,
    strongly_connected_components,
)
from checkers.elle.txn import Txn, hashable
from checkers.verdict import UNKNOWN, Verdict

MAX_EXAMPLES = 8
TIMEOUT = "cycle-search-timeout"
EMPTY = "empty-transaction-graph"
UNDECIDED = frozenset({TIMEOUT, EMPTY})  # Elle's "unknown" anomaly types
SEARCH_BUDGET = 400_000  # search states per cycle class and component; four times that per component


@dataclass
class AnomalyLog:
    """Counts every anomaly; keeps the first few examples of each type."""

    max_examples: int = MAX_EXAMPLES
    counts: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    examples: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))

    def add(self, name: str, example: dict[str, Any]) -> None:
        self.counts[name] += 1
        if len(self.examples[name]) < self.max_examples:
            self.examples[name].append(example)


@dataclass
class Inference:
    """What a workload's analysis hands to the shared part."""

    graph: DepGraph
    anomalies: AnomalyLog
    evidence: Evidence


def occurred(txn: Txn) -> bool:
    """Graph nodes: transactions that happened or may have happened."""
    return txn.op.type != "fail"


def add_process_edges(graph: DepGraph, txns: list[Txn]) -> None:
    chains: dict[Any, list[int]] = defaultdict(list)
    for t in txns:
        if occurred(t):
            chains[t.process].append(t.id)
    for a, b in process_edges(chains.values()):
        graph.add(a, b, PROCESS)


def lost_updates(txns: list[Txn], write_f: str, log: AnomalyLog) -> None:
    """Committed transactions that read the same version of a key (their first access to it) and then
    wrote it: each wrote over state the other had already replaced (Adya's H_lu; Elle finds these
    directly, since the version order that would show the cycle is often not observable)."""
    groups: dict[tuple[Any, Any], list[int]] = defaultdict(list)
    for t in txns:
        if t.op.type != "ok":
            continue
        first_read: dict[Any, Any] = {}
        written: set[Any] = set()
        for f, k, v in t.mops:
            if f == write_f:
                if k not in written and k in first_read:
                    groups[(k, hashable(first_read[k]))].append(t.id)
                written.add(k)
            elif v is not None and k not in first_read and k not in written:
                first_read[k] = v
    for (k, v), ids in groups.items():
        if len(ids) > 1:
            indices = ", ".join(str(txns[i].op.invoke_index) for i in ids)
            log.add(
                "lost-update",
                {
                    "key": k,
                    "value": v,
                    "txns": [txns[i].to_json() for i in ids],
                    "explanation": f"the committed txns at indices {indices} all read {show(k)} = {show(v)} "
                    f"and then wrote {show(k)}: all but one overwrote a state they never saw",
                },
            )


def completed_at(txn: Txn) -> int | None:
    """When a transaction certainly took effect by: an `info` one may take effect at any later time,
    so it precedes nothing in real time (the history already leaves it open; this keeps it so)."""
    return txn.op.complete_time if txn.op.type == "ok" else None


def add_realtime_edges(graph: DepGraph, txns: list[Txn]) -> None:
    intervals = ((t.id, t.op.invoke_time, completed_at(t)) for t in txns if occurred(t))
    for a, b in realtime_edges(intervals):
        graph.add(a, b, REALTIME)


def search_component(
    graph: DepGraph,
    component: list[int],
    specs: list[CycleSpec],
    forbidden: frozenset[str],
    budget: int,
) -> tuple[list[Cycle], dict[str, Any] | None]:
    """Every cycle class in severity order, skipping those a class already found implies; returns
    the cycles found and, if a forbidden class's search gave up, what was and was not searched."""
    members = set(component)
    found: list[Cycle] = []
    names: set[str] = set()
    searched: list[dict[str, Any]] = []
    gave_up: list[str] = []
    spent = 0
    for spec in specs:
        if spec.name in implied_anomalies(names):
            continue
        if spent > 4 * budget:
            searched.append({"class": spec.name, "result": "not searched (component budget spent)"})
            gave_up.append(spec.name)
            continue
        outcome = find_cycle(graph.out, members, spec, budget)
        spent += outcome.expanded
        if outcome.cycle is not None:
            found.append(outcome.cycle)
            names.add(spec.name)
            result = f"found a cycle of {len(outcome.cycle.nodes)}"
        elif outcome.exhausted:
            result = f"none ({outcome.candidates} start edges)"
        else:
            result = f"gave up after {outcome.tried} of {outcome.candidates} start edges"
            gave_up.append(spec.name)
        searched.append({"class": spec.name, "result": result, "states": outcome.expanded})
    undecided = [n for n in gave_up if n in forbidden and n not in implied_anomalies(names)]
    if not undecided:
        return found, None
    fallback = any_cycle(graph.out, members)
    if fallback.name not in names:
        found.append(fallback)
    report = {
        "explanation": f"a component of {len(component)} transactions: the search gave up on "
        f"{', '.join(undecided)} (budget {budget:,} states per class); it has a {fallback.name}",
        "component_size": len(component),
        "sample": component[:10],
        "gave_up_on": undecided,
        "does_not_contain": [s["class"] for s in searched if s["result"].startswith("none")],
        "searched": searched,
        "fallback_cycle": fallback.name,
    }
    return found, report


def analyse(checker: str, txns: list[Txn], inference: Inference, model: str, budget: int = SEARCH_BUDGET) -> Verdict:
    """Finish the analysis: order edges the model needs, cycles, verdict."""
    model = check_model(model)
    graph, log = inference.graph, inference.anomalies
    forbidden = FORBIDS[model]
    process, realtime = uses_process_edges(model), uses_realtime_edges(model)
    if process or realtime:
        add_process_edges(graph, txns)
    if realtime:
        add_realtime_edges(graph, txns)
    specs = cycle_specs(process or realtime, realtime)
    if graph.edge_count() == 0 and txns:
        why = "no transaction depends on another (no ww, wr, rw or order edge): the history shows nothing"
        log.add(EMPTY, {"explanation": why})
    components = strongly_connected_components(graph.out)
    for component in components:
        cycles, timeout = search_component(graph, component, specs, forbidden, budget)
        for cycle in cycles:
            log.add(cycle.name, explain_cycle(cycle, txns, inference.evidence))
        if timeout is not None:
            log.add(TIMEOUT, timeout)
    found = set(log.counts)
    violations = sorted(found & forbidden)
    not_models, also_not = ruled_out(found - UNDECIDED)
    statuses = {"ok": 0, "info": 0, "fail": 0}
    for t in txns:
        statuses[t.op.type] += 1
    if violations:
        valid: bool | str = False
    elif found & UNDECIDED or statuses["ok"] == 0:
        valid = UNKNOWN
    else:
        valid = True
    details: dict[str, Any] = {
        "consistency_model": model,
        "txn_count": len(txns),
        "txns_by_type": statuses,
        "anomaly_types": sorted(found),
        "anomaly_counts": dict(sorted(log.counts.items())),
        "violations": violations,
        "not": not_models,
        "also_not": also_not,
        "meanings": {name: meaning(name) for name in sorted(found)},
        "anomalies": {name: log.examples[name] for name in sorted(found)},
        "graph": {"nodes": len(graph), "edges": graph.edge_count(), "cyclic_components": len(components)},
    }
    if statuses["ok"] == 0:
        details["reason"] = "no ok transactions to check"
    return Verdict(checker=checker, valid=valid, details=details)
