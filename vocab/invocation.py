"""What the runner hands an op to and what it gets back: `Handler.invoke(op, done)` -> `Completion`.

Clients and the nemesis are both handlers. `invoke` starts the op and returns at once; `done` is
called exactly once, later or from inside `invoke`, with how the op ended (Jepsen's types):
`ok` it happened, `fail` it certainly did not, `info` unknown (it may take effect at any later time).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from vocab.generators import Op


@dataclass(frozen=True, slots=True)
class Completion:
    type: str  # ok | fail | info
    value: Any = None
    node: str | None = None  # the node that served the op
    error: Any = None


DoneFn = Callable[[Completion], None]


class Handler(Protocol):
    def invoke(self, op: Op, done: DoneFn) -> None:
        """Start `op`; call `done(completion)` once when it ends."""


def error_text(exc: BaseException) -> str:
    """A one-line history `error` for an exception."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
