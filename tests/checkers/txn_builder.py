"""Hand-built transactional histories for the Elle-style checker tests."""

from __future__ import annotations

from typing import Any

from checkers.history import History, pair, read_events

Mop = list[Any]


def append(k: Any, v: Any) -> Mop:
    return ["append", k, v]


def w(k: Any, v: Any) -> Mop:
    return ["w", k, v]


def r(k: Any, v: Any = None) -> Mop:
    return ["r", k, v]


def _invocation(mops: list[Mop]) -> list[Mop]:
    return [[f, k, None if f == "r" else v] for f, k, v in mops]


class Builder:
    """Events in the order they are added; time advances by one per event."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self._pending: dict[Any, list[Mop]] = {}

    def _emit(self, process: Any, kind: str, value: Any) -> None:
        self.events.append({"time": len(self.events), "process": process, "type": kind, "f": "txn", "value": value})

    def invoke(self, process: Any, mops: list[Mop]) -> None:
        """Start a transaction; `mops` carry the read values its completion will report."""
        self._pending[process] = mops
        self._emit(process, "invoke", _invocation(mops))

    def complete(self, process: Any, kind: str = "ok") -> None:
        mops = self._pending.pop(process)
        self._emit(process, kind, mops if kind == "ok" else _invocation(mops))

    def txn(self, process: Any, mops: list[Mop], kind: str = "ok") -> Builder:
        """A transaction that runs alone: invoked and completed back to back."""
        self.invoke(process, mops)
        self.complete(process, kind)
        return self

    def concurrent(self, *txns: tuple[Any, list[Mop]]) -> Builder:
        """Transactions that all overlap: every invoke before any completion."""
        for process, mops in txns:
            self.invoke(process, mops)
        for process, _ in txns:
            self.complete(process)
        return self

    def history(self) -> History:
        return pair(read_events(self.events))
