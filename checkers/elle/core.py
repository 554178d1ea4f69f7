"""The part of the Elle-style analysis every workload shares: add process / real-time order, find
strongly connected components, search each for the shortest cycle of every class, judge by model."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from checkers.elle.anomalies import (
    FORBIDS,
    check_model,
    cycle_specs,
    ruled_out,
    uses_process_edges,
    uses_realtime_edges,
)
from checkers.elle.explain import Evidence, explain_cycle
from checkers.elle.graph import (
    PROCESS,
    REALTIME,
    DepGraph,
    process_edges,
    realtime_edges,
    shortest_cycle,
    strongly_connected_components,
)
from checkers.elle.txn import Txn
from checkers.verdict import UNKNOWN, Verdict

MAX_EXAMPLES = 8
TIMEOUT = "cycle-search-timeout"


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


def add_realtime_edges(graph: DepGraph, txns: list[Txn]) -> None:
    intervals = ((t.id, t.op.invoke_time, t.op.complete_time) for t in txns if occurred(t))
    for a, b in realtime_edges(intervals):
        graph.add(a, b, REALTIME)


def analyse(checker: str, txns: list[Txn], inference: Inference, model: str) -> Verdict:
    """Finish the analysis: order edges the model needs, cycles, verdict."""
    check_model(model)
    graph, log = inference.graph, inference.anomalies
    tiers = cycle_specs(model)
    if uses_process_edges(model):
        add_process_edges(graph, txns)
    if uses_realtime_edges(model):
        add_realtime_edges(graph, txns)
    components = strongly_connected_components(graph.out)
    for component in components:
        members = set(component)
        found_any, complete = False, True
        for tier in tiers:
            for spec in tier:
                outcome = shortest_cycle(graph.out, members, spec)
                if outcome.cycle is not None:
                    found_any = True
                    log.add(spec.name, explain_cycle(outcome.cycle, txns, inference.evidence))
                complete = complete and outcome.exhausted
            if found_any:
                break
        if not found_any and not complete:
            log.add(TIMEOUT, {"component_size": len(component), "sample": component[:10]})
    found = set(log.counts)
    violations = sorted(found & FORBIDS[model])
    not_models, also_not = ruled_out(found)
    statuses = {"ok": 0, "info": 0, "fail": 0}
    for t in txns:
        statuses[t.op.type] += 1
    if violations:
        valid: bool | str = False
    elif TIMEOUT in found or statuses["ok"] == 0:
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
        "anomalies": {name: log.examples[name] for name in sorted(found)},
        "graph": {"nodes": len(graph), "edges": graph.edge_count(), "cyclic_components": len(components)},
    }
    if statuses["ok"] == 0:
        details["reason"] = "no ok transactions to check"
    return Verdict(checker=checker, valid=valid, details=details)
