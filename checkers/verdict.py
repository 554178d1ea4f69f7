"""Checker verdicts: `true | false | "unknown"` plus JSON details, and how verdicts compose.

Every checker returns a `Verdict` so the CLI, the results store and the reports treat them alike.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

UNKNOWN = "unknown"

Validity = bool | str


@dataclass
class Verdict:
    """One checker's answer about one history."""

    checker: str
    valid: Validity  # True, False or "unknown"
    details: dict[str, Any] = field(default_factory=dict)  # JSON-serialisable

    def __post_init__(self) -> None:
        if self.valid not in (True, False, UNKNOWN):
            raise ValueError(f"verdict must be true, false or 'unknown', not {self.valid!r}")

    def to_json(self) -> dict[str, Any]:
        return {"checker": self.checker, "valid": self.valid, **self.details}


class Anomalies:
    """What a checker found: a count per anomaly type and the first `max_examples` examples of each,
    in the `anomaly_types` / `anomaly_counts` / `anomalies` shape of verdict details."""

    def __init__(self, max_examples: int = 8) -> None:
        self.max_examples = max_examples
        self.counts: dict[str, int] = {}
        self.examples: dict[str, list[dict[str, Any]]] = {}

    def add(self, name: str, example: dict[str, Any]) -> None:
        self.counts[name] = self.counts.get(name, 0) + 1
        examples = self.examples.setdefault(name, [])
        if len(examples) < self.max_examples:
            examples.append(example)

    def __bool__(self) -> bool:
        return bool(self.counts)

    def details(self) -> dict[str, Any]:
        return {
            "anomaly_types": sorted(self.counts),
            "anomaly_counts": dict(sorted(self.counts.items())),
            "anomalies": self.examples,
        }


def merge_validity(values: Iterable[Validity]) -> Validity:
    """False if any is false, else "unknown" if any is unknown, else true (true for none)."""
    result: Validity = True
    for value in values:
        if value is False:
            return False
        if value == UNKNOWN:
            result = UNKNOWN
    return result


def compose(verdicts: Iterable[Verdict], checker: str = "compose") -> Verdict:
    """Combine several checkers' verdicts into one; details keep each checker's own verdict."""
    verdicts = list(verdicts)
    return Verdict(
        checker=checker,
        valid=merge_validity(v.valid for v in verdicts),
        details={"checkers": {v.checker: v.to_json() for v in verdicts}},
    )


def exit_code(valid: Validity) -> int:
    """Jepsen's exit codes: 0 valid, 1 invalid, 2 unknown."""
    if valid is True:
        return 0
    if valid is False:
        return 1
    return 2
