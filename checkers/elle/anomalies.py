"""Anomaly names, the cycle classes searched for, and which consistency models forbid what.

The hierarchy follows Adya's and Elle's item-level reading: read-committed forbids G0, G1a, G1b and
G1c; snapshot-isolation also G-single; serializable also G2-item; strong-session-serializable adds
cycles that need process-order edges; strict-serializable adds cycles that need real-time edges.
Malformed observations (internal inconsistency, duplicate elements, garbage reads, incompatible orders)
are impossible under every model.
"""

from __future__ import annotations

from checkers.elle.graph import PROCESS, REALTIME, RW, WR, WW, CycleSpec

CYCLE_BASES = ("G0", "G1c", "G-single", "G2-item")
_BASE_SPECS = {
    "G0": (WW, WW, 0),
    "G1c": (WW | WR, WR, 0),
    "G-single": (WW | WR | RW, RW, 1),
    "G2-item": (WW | WR | RW, RW, 2),
}

STRUCTURAL = frozenset({"internal", "duplicate-elements", "garbage-read", "incompatible-order"})
READ_COMMITTED = frozenset({"G0", "G1a", "G1b", "G1c"})
SERIALIZABLE = READ_COMMITTED | {"G-single", "G2-item"}
PROCESS_CYCLES = frozenset(f"{base}-process" for base in CYCLE_BASES)
REALTIME_CYCLES = frozenset(f"{base}-realtime" for base in CYCLE_BASES)

# model -> the anomalies it forbids (structural ones are forbidden everywhere, added below)
_FORBIDS: dict[str, frozenset[str]] = {
    "read-uncommitted": frozenset({"G0"}),
    "read-committed": READ_COMMITTED,
    "snapshot-isolation": READ_COMMITTED | {"G-single"},
    "serializable": SERIALIZABLE,
    "strong-session-serializable": SERIALIZABLE | PROCESS_CYCLES,
    "strict-serializable": SERIALIZABLE | PROCESS_CYCLES | REALTIME_CYCLES,
}
FORBIDS: dict[str, frozenset[str]] = {m: a | STRUCTURAL for m, a in _FORBIDS.items()}
MODELS = tuple(FORBIDS)
DEFAULT_MODEL = "strict-serializable"


def check_model(model: str) -> str:
    if model not in FORBIDS:
        raise ValueError(f"unknown consistency model {model!r}; choose one of {', '.join(MODELS)}")
    return model


def uses_process_edges(model: str) -> bool:
    return bool(FORBIDS[model] & PROCESS_CYCLES)


def uses_realtime_edges(model: str) -> bool:
    return bool(FORBIDS[model] & REALTIME_CYCLES)


def cycle_specs(model: str) -> list[list[CycleSpec]]:
    """Cycle classes in tiers: the base classes always (reported even where allowed), then those
    needing process order, then real time, as far as the model needs them. A component's cycles are
    reported from the first tier that finds any: the weakest explanation of the component."""
    tiers = [[CycleSpec(name, allowed, (start,), rw) for name, (allowed, start, rw) in _BASE_SPECS.items()]]
    if uses_process_edges(model):
        tiers.append(
            [
                CycleSpec(f"{name}-process", allowed | PROCESS, (start, PROCESS), rw)
                for name, (allowed, start, rw) in _BASE_SPECS.items()
            ]
        )
    if uses_realtime_edges(model):
        tiers.append(
            [
                CycleSpec(f"{name}-realtime", allowed | PROCESS | REALTIME, (start, REALTIME), rw)
                for name, (allowed, start, rw) in _BASE_SPECS.items()
            ]
        )
    return tiers


def ruled_out(found: set[str]) -> tuple[list[str], list[str]]:
    """Elle's `not` (the weakest models the anomalies rule out) and `also-not` (the stronger ones)."""
    violated = [m for m in MODELS if FORBIDS[m] & found]
    weakest = [m for m in violated if not any(FORBIDS[o] < FORBIDS[m] for o in violated)]
    return weakest, [m for m in violated if m not in weakest]
