"""The cyclic garbage collector around a check: off while it runs, back on without a full scan."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def no_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector. The search allocates many small acyclic objects while
    millions of ops are alive, and each full collection would walk all of them: with it on, time
    grows quadratically with history size. Nothing here makes cycles, so nothing leaks."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            enable_gc()


def enable_gc() -> None:
    """Turn the collector back on without it scanning, at its next allocation, every object made
    while it was off (a million ops: a third of a second): they join the oldest generation."""
    gc.freeze()
    gc.enable()
    gc.unfreeze()
