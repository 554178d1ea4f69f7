"""Which asyncio event loop a node process (and the benchmarks' clients) runs on.

uvloop (libuv underneath, an optional dependency: `pip install uvloop`) runs the same asyncio code with
less CPU per socket operation and per callback (about 6 % of the servers' CPU per write in
bench_write_path.py: docs/internals/controller.md, "Where the write path's CPU goes"). Without uvloop
installed, or with `KCHAOS_EVENT_LOOP=asyncio`, the standard library's loop runs the same code: nothing
depends on which.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

ENV = "KCHAOS_EVENT_LOOP"
CHOICES = ("auto", "uvloop", "asyncio")


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop when installed and not turned off by KCHAOS_EVENT_LOOP=asyncio; None: asyncio's own."""
    choice = os.environ.get(ENV, "auto") or "auto"
    if choice not in CHOICES:
        raise ValueError(f"{ENV}={choice!r}: expected one of {', '.join(CHOICES)}")
    if choice == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        if choice == "uvloop":
            raise ValueError(f"{ENV}=uvloop but uvloop is not installed (pip install uvloop)") from None
        return None
    return uvloop.new_event_loop


def loop_name() -> str:
    """`uvloop` or `asyncio`: what `run` would use (for benchmark output)."""
    return "asyncio" if loop_factory() is None else "uvloop"


def run(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)` on the loop `loop_factory` picks."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(main)
