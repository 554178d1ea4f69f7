"""Transactions as the Elle-style checkers see them: history ops whose value is a list of micro-ops.

A micro-op is `[f, key, value]`. Invocations carry `null` for read values; an `ok` completion fills
them in. Only `ok` transactions' reads are trusted; `info` and `fail` transactions contribute their
writes (an `info` write may have happened, a `fail` write certainly did not).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from checkers.history import History, HistoryError, Op

MicroOp = tuple[str, Any, Any]

TXN_F = "txn"


def hashable(value: Any) -> Any:
    """Keys and values index dicts: JSON arrays become tuples (recursively)."""
    if isinstance(value, list):
        return tuple(hashable(v) for v in value)
    return value


@dataclass(slots=True)
class Txn:
    """One transaction; `id` is its dense position among the history's transactions (invoke order)."""

    id: int
    op: Op
    mops: list[MicroOp]

    @property
    def status(self) -> str:
        return self.op.type

    @property
    def process(self) -> int | str:
        return self.op.process

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.op.invoke_index,
            "process": self.op.process,
            "type": self.op.type,
            "value": [[f, _plain(k), _plain(v)] for f, k, v in self.mops],
        }


def _plain(value: Any) -> Any:
    """Back to JSON shapes for reports (tuples were only for hashing)."""
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


def where(history: History, op: Op) -> str:
    """How error messages name an op: source and history index."""
    return f"{history.source}: op at index {op.invoke_index} (process {op.process!r})"


def extract_txns(history: History, allowed_fs: Iterable[str], txn_f: str = TXN_F) -> list[Txn]:
    """The history's transactions, with micro-ops validated; other ops are ignored.

    `ok` transactions use the completion's micro-ops (reads filled in), falling back to the invoke's
    when the completion carries no list; `info` and `fail` use the invoke's.
    """
    allowed = frozenset(allowed_fs)
    txns: list[Txn] = []
    for op in history.ops:
        if op.f != txn_f:
            continue
        raw = op.value if op.type == "ok" and isinstance(op.value, list) else op.invoke_value
        if not isinstance(raw, list):
            raise HistoryError(f"{where(history, op)}: a {txn_f!r} value must be a list of micro-ops")
        mops: list[MicroOp] = []
        for mop in raw:
            if not isinstance(mop, list | tuple) or len(mop) != 3 or mop[0] not in allowed:
                raise HistoryError(
                    f"{where(history, op)}: micro-op {mop!r} is not [f, key, value] with f in {sorted(allowed)}"
                )
            f, key, value = mop
            mops.append((f, hashable(key), value))
        txns.append(Txn(id=len(txns), op=op, mops=mops))
    return txns
